"""Typed failures of the carbon layer.

Every failure is a :class:`CarbonError`, so a caller can catch one family.
The controller only needs :class:`CarbonUnavailable`: it means "no carbon
number can be trusted right now, run carbon-agnostic". The other classes name
the specific problem so that logs and ``carbon check`` can say *why*.

Messages never contain credentials: sources build them from status codes,
URLs without secrets, and the problem found in the data.
"""

from __future__ import annotations


class CarbonError(Exception):
    """Base class of every error raised by ``slurm_green.carbon``."""


class CarbonUnavailable(CarbonError):
    """No trustworthy carbon intensity is available (all sources failed or data is stale).

    The controller reacts by starting jobs carbon-agnostically and saying so in
    its log and metrics. ``reasons`` maps a source name to why it failed.
    """

    def __init__(self, message: str, reasons: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.reasons: dict[str, str] = dict(reasons or {})


class SourceSpecError(CarbonError, ValueError):
    """A source spec string (``electricitymaps:DE``, ``csv:PATH?tz=...``) is malformed."""


class SourceError(CarbonError):
    """A source could not answer (network, HTTP status, missing file...)."""


class AuthError(SourceError):
    """The provider refused the credentials (HTTP 401/403) or none were configured."""


class RateLimitedError(SourceError):
    """The provider kept answering 429 Too Many Requests."""


class MalformedResponseError(SourceError):
    """The provider answered, but not in its documented format."""


class DataValidationError(CarbonError, ValueError):
    """A series failed validation and could not be repaired safely."""


class TimezoneError(DataValidationError):
    """Timestamps have no timezone, an impossible DST time, or are off the expected grid."""


class DuplicateTimestampError(DataValidationError):
    """The same timestamp appears with conflicting values (often a DST or timezone mistake)."""


class GapError(DataValidationError):
    """A gap is longer than the limit that may be interpolated."""


class ValueRangeError(DataValidationError):
    """Values are negative or physically absurd for gCO2eq/kWh."""


class UnitError(DataValidationError):
    """The magnitudes show the data is not in gCO2eq/kWh (for example kg/kWh or lbs/MWh)."""


class StaleDataError(DataValidationError):
    """The newest data point is older than the freshness limit."""

"""Grid carbon intensity: sources, validation, forecasts, fallbacks and a non-blocking feed.

Every number is gCO2eq/kWh on a regular tz-aware UTC index. Sources (files,
Electricity Maps, WattTime, UK ESO, ``synthetic``) share
:class:`CarbonSource`; :func:`parse_sources` builds one or a fallback chain
from spec strings; :class:`CarbonFeed` refreshes in a background thread and
serves :class:`CarbonSnapshot` objects whose :class:`CarbonSignal` the policy
queries in microseconds.

What the controller calls (see ``docs/carbon.md``)::

    from slurm_green.carbon import CarbonFeed, CarbonSecrets, CarbonUnavailable, parse_sources

    feed = CarbonFeed(parse_sources(config.carbon_sources, CarbonSecrets.load()),
                      cache_path=state_dir / "carbon.json")
    feed.start()                          # once; refreshes every 10 min in a daemon thread
    try:
        snap = feed.snapshot()            # each tick: < 1 ms, never touches the network
    except CarbonUnavailable as exc:      # nothing fresh: run carbon-agnostic (jobs start),
        log.warning("carbon-agnostic: %s", exc)   # and count it in metrics (exc.reasons per source)
    else:
        snap.signal.value_at(now); snap.signal.best_start(now, deadline, runtime)
        snap.source, snap.synthetic, snap.age()   # provenance for logs and metrics
    feed.stop()                           # on shutdown
"""

from slurm_green.carbon.answer import Answer
from slurm_green.carbon.chain import FallbackChain
from slurm_green.carbon.electricitymaps import ElectricityMapsSource
from slurm_green.carbon.errors import (
    AuthError,
    CarbonError,
    CarbonUnavailable,
    DataValidationError,
    DuplicateTimestampError,
    GapError,
    MalformedResponseError,
    RateLimitedError,
    SourceError,
    SourceSpecError,
    StaleDataError,
    TimezoneError,
    UnitError,
    ValueRangeError,
)
from slurm_green.carbon.feed import CarbonFeed, CarbonSnapshot
from slurm_green.carbon.files import FileSource, read_carbon_csv
from slurm_green.carbon.forecast import SeasonalForecaster
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.carbon.source import CarbonSource, Reading
from slurm_green.carbon.spec import parse_source_spec, parse_sources
from slurm_green.carbon.synthetic import SyntheticSource
from slurm_green.carbon.ukgrid import UkGridSource
from slurm_green.carbon.validate import validate_series
from slurm_green.carbon.watttime import WattTimeSource

__all__ = [
    "Answer",
    "AuthError",
    "CarbonError",
    "CarbonFeed",
    "CarbonSecrets",
    "CarbonSignal",
    "CarbonSnapshot",
    "CarbonSource",
    "CarbonUnavailable",
    "DataValidationError",
    "DuplicateTimestampError",
    "ElectricityMapsSource",
    "FallbackChain",
    "FileSource",
    "GapError",
    "MalformedResponseError",
    "RateLimitedError",
    "Reading",
    "SeasonalForecaster",
    "SourceError",
    "SourceSpecError",
    "StaleDataError",
    "SyntheticSource",
    "TimezoneError",
    "UkGridSource",
    "UnitError",
    "ValueRangeError",
    "WattTimeSource",
    "parse_source_spec",
    "parse_sources",
    "read_carbon_csv",
    "validate_series",
]

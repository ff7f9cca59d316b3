"""Source specs: the strings that name carbon sources on the command line, in config and to the simulator.

Grammar: ``KIND[:ARG][?key=value&...]``; a chain is several specs separated by
commas or given as a list, highest priority first.

===========================================  ==========================================
``synthetic``                                built-in synthetic profile (labelled so)
``csv:PATH``                                 Electricity Maps export or ``timestamp,value``
``csv:PATH?tz=Europe/Berlin&unit=kg/kWh``    naive stamps' timezone; unit of generic files
``csv:PATH?replay=1``                        map the recorded year onto now (hour-of-week kept)
``csv:PATH?forecast=model&column=lca``       model forecast instead of recorded future; LCA column
``csv:PATH?max_gap=6h``                      interpolate gaps up to 6 h (default 3 h; longer: the file fails)
``electricitymaps:ZONE[?factor=lifecycle]``  Electricity Maps v3 (needs ELECTRICITYMAPS_TOKEN)
``watttime:REGION``                          WattTime v3 co2_moer (needs WATTTIME_USERNAME/PASSWORD)
``ukgrid`` / ``ukgrid:REGION_ID``            GB national / regional (1-17) ESO API, no key
===========================================  ==========================================

Live specs also accept ``base_url=`` (a proxy or a test server). Unknown keys
are errors, so a typo cannot silently change behaviour.

Building a source does no I/O and needs no credential: files are read and
credentials looked up at the first request. So a spec that parses is a valid
configuration, whatever the state of the file or the token, and a source that
cannot answer fails *as a source* (the chain moves on) instead of keeping the
controller from starting. Only the spec's own mistakes (unknown kind or option,
a value no source could take) raise :class:`SourceSpecError` here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypedDict
from urllib.parse import parse_qsl

import httpx
import pandas as pd

from slurm_green.carbon.chain import FallbackChain
from slurm_green.carbon.electricitymaps import EMISSION_FACTORS, ElectricityMapsSource
from slurm_green.carbon.errors import CarbonError, SourceSpecError
from slurm_green.carbon.files import FileSource
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.synthetic import SyntheticSource
from slurm_green.carbon.ukgrid import UkGridSource
from slurm_green.carbon.watttime import WattTimeSource

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class SpecParts(NamedTuple):
    """A spec taken apart: ``csv:/x.csv?replay=1`` is ``("csv", "/x.csv", {"replay": "1"})``."""

    kind: str
    arg: str
    options: dict[str, str]


def split_spec(spec: str) -> SpecParts:
    """Take ``spec`` apart (kind lower-cased); raises :class:`SourceSpecError` if the options are malformed."""
    head, _, query = spec.strip().partition("?")
    kind, _, arg = head.partition(":")
    try:
        # A "+" is a plus, not the space of form encoding: tz=Etc/GMT+5 names a zone (and a space is %20).
        options = dict(parse_qsl(query.replace("+", "%2B"), keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise SourceSpecError(f"{spec!r}: malformed options {query!r} (use key=value&key=value)") from None
    return SpecParts(kind.lower(), arg, options)


def split_specs(specs: str | Sequence[str]) -> list[str]:
    """The specs of a chain given as one comma-separated string, a list, or a list of such strings."""
    items = [specs] if isinstance(specs, str) else list(specs)
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def parse_source_spec(spec: str, secrets: CarbonSecrets | None = None) -> CarbonSource:
    """Build one source from ``spec`` (no I/O); raises :class:`SourceSpecError` with the reason."""
    spec = spec.strip()
    kind, arg, options = split_spec(spec)
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise SourceSpecError(f"{spec!r}: unknown source kind {kind!r}; expected one of {sorted(_BUILDERS)}")
    try:
        return builder(arg, options, secrets or CarbonSecrets(), spec)
    except SourceSpecError as exc:
        message = str(exc)
        raise SourceSpecError(message if message.startswith(repr(spec)) else f"{spec!r}: {message}") from None
    except CarbonError as exc:
        raise SourceSpecError(f"{spec!r}: {exc}") from None


def parse_sources(specs: str | Sequence[str], secrets: CarbonSecrets | None = None) -> CarbonSource:
    """One source, or a :class:`FallbackChain` when several specs are given (commas or a list)."""
    parts = split_specs(specs)
    if not parts:
        raise SourceSpecError("no carbon source given")
    sources = [parse_source_spec(part, secrets) for part in parts]
    return sources[0] if len(sources) == 1 else FallbackChain(sources)


def _flag(value: str, key: str, spec: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise SourceSpecError(f"{spec!r}: {key}={value!r} is not a boolean (use 1 or 0)")


def _only(options: Mapping[str, str], allowed: set[str], spec: str) -> None:
    unknown = set(options) - allowed
    if unknown:
        raise SourceSpecError(f"{spec!r}: unknown option(s) {sorted(unknown)}; allowed: {sorted(allowed)}")


class _LiveOptions(TypedDict, total=False):
    """What a live source's spec may set beyond its argument (each source keeps its own default)."""

    base_url: str


def _live_kwargs(options: Mapping[str, str], spec: str) -> _LiveOptions:
    """The options a live source takes; a ``base_url`` that is not an http(s) URL with a host
    is refused here, with the spec, rather than as httpx's error at the first refresh."""
    if "base_url" not in options:
        return {}
    url = options["base_url"]
    try:
        parsed = httpx.URL(url)
        usable = parsed.scheme in ("http", "https") and bool(parsed.host)
    except (httpx.InvalidURL, ValueError):  # a host IDNA refuses raises idna's own (a ValueError) when read
        usable = False
    if not usable:
        raise SourceSpecError(f"{spec!r}: base_url={url!r} is not an http(s) URL with a host "
                              f"(e.g. http://127.0.0.1:8080)")
    return {"base_url": url}


def _synthetic(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    if arg or options:
        raise SourceSpecError(f"{spec!r}: synthetic takes no argument or options")
    return SyntheticSource()


def _duration(value: str, key: str, spec: str) -> pd.Timedelta:
    try:  # a bare number has no unit: pandas reads "3" as 3 nanoseconds, where 3 hours was meant
        duration = pd.NaT if value.strip().lstrip("+-").replace(".", "", 1).isdigit() else pd.Timedelta(value)
    except ValueError:
        duration = pd.NaT
    if pd.isna(duration) or duration <= pd.Timedelta(0):
        raise SourceSpecError(f"{spec!r}: {key}={value!r} is not a positive duration (e.g. 3h, 90min)")
    return duration


def _csv(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    if not arg:
        raise SourceSpecError(f"{spec!r}: csv needs a path (csv:PATH)")
    _only(options, {"tz", "replay", "forecast", "column", "unit", "max_gap"}, spec)
    return FileSource(
        arg,
        tz=options.get("tz"),
        replay=_flag(options.get("replay", "0"), "replay", spec),
        forecast=options.get("forecast", "oracle"),
        column=options.get("column", "direct"),
        unit=options.get("unit", "g/kWh"),
        name=spec,
        **({"max_gap": _duration(options["max_gap"], "max_gap", spec)} if "max_gap" in options else {}),
    )


def _electricitymaps(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    if not arg:
        raise SourceSpecError(f"{spec!r}: electricitymaps needs a zone (electricitymaps:DE)")
    _only(options, {"factor", "base_url"}, spec)
    factor = options.get("factor", "direct")
    if factor not in EMISSION_FACTORS:
        raise SourceSpecError(f"{spec!r}: factor={factor!r}; allowed: {list(EMISSION_FACTORS)}")
    token = secrets.deferred("electricitymaps_token", "electricitymaps")
    return ElectricityMapsSource(arg, token, emission_factor=factor, **_live_kwargs(options, spec))


def _watttime(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    if not arg:
        raise SourceSpecError(f"{spec!r}: watttime needs a region (watttime:CAISO_NORTH)")
    _only(options, {"base_url"}, spec)
    user = secrets.deferred("watttime_username", "watttime")
    password = secrets.deferred("watttime_password", "watttime")
    return WattTimeSource(arg, user, password, **_live_kwargs(options, spec))


def _ukgrid(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    _only(options, {"base_url"}, spec)
    if arg and not arg.isdigit():
        raise SourceSpecError(f"{spec!r}: ukgrid region must be a number 1..17")
    return UkGridSource(int(arg) if arg else None, **_live_kwargs(options, spec))


_BUILDERS: dict[str, Callable[[str, Mapping[str, str], CarbonSecrets, str], CarbonSource]] = {
    "synthetic": _synthetic,
    "csv": _csv,
    "electricitymaps": _electricitymaps,
    "watttime": _watttime,
    "ukgrid": _ukgrid,
}

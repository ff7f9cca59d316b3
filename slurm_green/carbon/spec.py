"""Source specs: the strings that name carbon sources on the command line and in config.

Grammar: ``KIND[:ARG][?key=value&...]``; a chain is several specs separated by
commas or given as a list, highest priority first.

===========================================  ==========================================
``synthetic``                                built-in synthetic profile (labelled so)
``csv:PATH``                                 Electricity Maps export or ``timestamp,value``
``csv:PATH?tz=Europe/Berlin&unit=kg/kWh``    naive stamps' timezone; unit of generic files
``csv:PATH?replay=1``                        map the recorded year onto now (hour-of-week kept)
``csv:PATH?forecast=model&column=lca``       model forecast instead of recorded future; LCA column
``electricitymaps:ZONE[?factor=lifecycle]``  Electricity Maps v3 (needs ELECTRICITYMAPS_TOKEN)
``watttime:REGION``                          WattTime v3 co2_moer (needs WATTTIME_USERNAME/PASSWORD)
``ukgrid`` / ``ukgrid:REGION_ID``            GB national / regional (1-17) ESO API, no key
===========================================  ==========================================

Live specs also accept ``base_url=`` (a proxy or a test server). Unknown keys
are errors, so a typo cannot silently change behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from urllib.parse import parse_qsl

from slurm_green.carbon.chain import FallbackChain
from slurm_green.carbon.electricitymaps import ElectricityMapsSource
from slurm_green.carbon.errors import CarbonError, SourceSpecError
from slurm_green.carbon.files import FileSource
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.synthetic import SyntheticSource
from slurm_green.carbon.ukgrid import UkGridSource
from slurm_green.carbon.watttime import WattTimeSource

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_source_spec(spec: str, secrets: CarbonSecrets | None = None) -> CarbonSource:
    """Build one source from ``spec``; raises :class:`SourceSpecError` with the reason."""
    spec = spec.strip()
    head, _, query = spec.partition("?")
    kind, _, arg = head.partition(":")
    try:
        options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise SourceSpecError(f"{spec!r}: malformed options {query!r} (use key=value&key=value)") from None
    builder = _BUILDERS.get(kind.lower())
    if builder is None:
        raise SourceSpecError(f"{spec!r}: unknown source kind {kind!r}; expected one of {sorted(_BUILDERS)}")
    try:
        return builder(arg, options, secrets or CarbonSecrets(), spec)
    except SourceSpecError:
        raise
    except CarbonError as exc:
        raise SourceSpecError(f"{spec!r}: {exc}") from None


def parse_sources(specs: str | Sequence[str], secrets: CarbonSecrets | None = None) -> CarbonSource:
    """One source, or a :class:`FallbackChain` when several specs are given (commas or a list)."""
    items = [specs] if isinstance(specs, str) else list(specs)
    parts = [part.strip() for item in items for part in item.split(",") if part.strip()]
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


def _live_kwargs(options: Mapping[str, str]) -> dict[str, str]:
    return {"base_url": options["base_url"]} if "base_url" in options else {}


def _synthetic(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    if arg or options:
        raise SourceSpecError(f"{spec!r}: synthetic takes no argument or options")
    return SyntheticSource()


def _csv(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    if not arg:
        raise SourceSpecError(f"{spec!r}: csv needs a path (csv:PATH)")
    _only(options, {"tz", "replay", "forecast", "column", "unit"}, spec)
    return FileSource(
        arg,
        tz=options.get("tz"),
        replay=_flag(options.get("replay", "0"), "replay", spec),
        forecast=options.get("forecast", "oracle"),
        column=options.get("column", "direct"),
        unit=options.get("unit", "g/kWh"),
        name=spec,
    )


def _electricitymaps(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    if not arg:
        raise SourceSpecError(f"{spec!r}: electricitymaps needs a zone (electricitymaps:DE)")
    _only(options, {"factor", "base_url"}, spec)
    token = secrets.require("electricitymaps_token", "electricitymaps")
    return ElectricityMapsSource(arg, token, emission_factor=options.get("factor", "direct"), **_live_kwargs(options))


def _watttime(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    if not arg:
        raise SourceSpecError(f"{spec!r}: watttime needs a region (watttime:CAISO_NORTH)")
    _only(options, {"base_url"}, spec)
    user = secrets.require("watttime_username", "watttime")
    password = secrets.require("watttime_password", "watttime")
    return WattTimeSource(arg, user, password, **_live_kwargs(options))


def _ukgrid(arg: str, options: Mapping[str, str], secrets: CarbonSecrets, spec: str) -> CarbonSource:
    _only(options, {"base_url"}, spec)
    if arg and not arg.isdigit():
        raise SourceSpecError(f"{spec!r}: ukgrid region must be a number 1..17")
    return UkGridSource(int(arg) if arg else None, **_live_kwargs(options))


_BUILDERS: dict[str, Callable[[str, Mapping[str, str], CarbonSecrets, str], CarbonSource]] = {
    "synthetic": _synthetic,
    "csv": _csv,
    "electricitymaps": _electricitymaps,
    "watttime": _watttime,
    "ukgrid": _ukgrid,
}

"""``slurm-green when``: the best time to start a job, for ``sbatch --begin`` (as CATS does).

For users who schedule by hand, or whose jobs the site does not manage: the start in
``[now, deadline]`` whose mean forecast intensity over the job's duration is lowest
(``CarbonSignal.best_start``, the same rule the window policy uses), printed as the
``--begin`` value sbatch reads, with the intensity now and then.

It reads the carbon data the controller uses and writes nothing: the controller's
cached forecast when it is fresh and long enough, else one fetch from the configured
sources (or ``--source``), kept in memory. Run as any user or as root, it leaves no file.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from pathlib import Path

import click
import pandas as pd

from slurm_green.carbon.errors import CarbonUnavailable
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.carbon.spec import parse_sources
from slurm_green.carbon.timebase import EPOCH
from slurm_green.cli.errors import CliError
from slurm_green.cli.timefmt import iso, local_time_option, parse_time, relative, stamp
from slurm_green.controller.config import DEFAULT_PATH, Config, load_config
from slurm_green.core.clock import SystemClock
from slurm_green.core.green_options import GreenOptionError, parse_duration

#: Starts closer to now than this are "now": sbatch would not wait for them anyway.
NOW_SLACK_S = 60.0


@dataclass(frozen=True)
class Forecast:
    signal: CarbonSignal
    source: str  #: who answered, and whether it was the controller's cache
    synthetic: bool


def read_forecast(config: Config, specs: tuple[str, ...], now: float, hours: float) -> Forecast:
    """The forecast for ``[now, now + hours]``, read-only (see the module docstring).

    ``specs`` (``--source``) replace the configured sources; without either, there is
    nothing to ask and the line says so (never a made-up default)."""
    if specs:
        source = parse_sources(specs, CarbonSecrets.load())
    else:
        if not config.carbon.sources:
            raise CliError("no carbon source: the configuration sets no [carbon] sources (the controller is "
                           "carbon-agnostic); give --source SPEC or --config FILE")
        from slurm_green.controller.assemble import build_feed

        feed = build_feed(config, SystemClock())  # loads the cache; only refresh() would write it
        try:
            cached = feed.snapshot(now)
        except CarbonUnavailable:
            cached = None
        if cached is not None and cached.signal.end >= now + hours * 3600:
            return Forecast(cached.signal, f"{cached.source} (controller's cache, {cached.age(now) / 60:.0f} min old)",
                            cached.synthetic)
        source = feed.source
    answer = source.answer(pd.Timedelta(hours=hours), now=EPOCH + pd.Timedelta(seconds=now))
    return Forecast(CarbonSignal.from_series(answer.series), answer.source, answer.synthetic)


def mean_intensity(signal: CarbonSignal, start: float, duration_s: float) -> float:
    """Mean gCO2eq/kWh over ``[start, start + duration_s]`` (the value at ``start`` for no duration)."""
    return float(signal.mean_over(start, start + duration_s)) if duration_s > 0 else float(signal.value_at(start))


def saving(now_g: float, then_g: float) -> float:
    """The fraction of carbon a start at ``then_g`` saves against ``now_g``."""
    return (now_g - then_g) / now_g if now_g > 0 else 0.0


def begin_value(t: float, now: float) -> str:
    """What ``sbatch --begin`` takes: ``now``, or the time in this machine's zone, which sbatch reads."""
    if t - now < NOW_SLACK_S:
        return "now"
    return dt.datetime.fromtimestamp(round(t)).strftime("%Y-%m-%dT%H:%M:%S")


#: The furthest ``when`` looks (a job's duration, a deadline): no forecast reaches a year, and
#: times far beyond it do not fit the calendar (``--duration 99999999999d`` overflowed).
MAX_AHEAD_S = 366 * 86400.0


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except GreenOptionError as exc:
        raise click.BadParameter(str(exc), param_hint="--duration") from None
    if seconds <= 0:
        raise click.BadParameter("must be more than 0 (30m, 3h, 1d)", param_hint="--duration")
    if seconds > MAX_AHEAD_S:
        raise click.BadParameter("at most 366d", param_hint="--duration")
    return seconds


@click.command("when")
@click.option("--duration", required=True, help="How long the job runs: 30m, 3h, 1d.")
@click.option("--deadline", default="24h", show_default=True,
              help="Latest start: a duration from now (12h) or an ISO time (2026-11-24T08:00).")
@click.option("--source", "specs", multiple=True, help="Carbon source spec(s) instead of the configured ones.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_PATH,
              show_default=True, help="Controller configuration whose [carbon] sources are read.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@local_time_option
def when(duration: str, deadline: str, specs: tuple[str, ...], config_path: Path, as_json: bool,
         local_time: bool) -> None:
    """The lowest-carbon start before a deadline, as an `sbatch --begin` value."""
    now = time.time()
    duration_s = _duration(duration)
    latest = parse_time(deadline, now, local=local_time, sign=+1, option="--deadline")
    if latest < now:
        raise click.BadParameter(f"{stamp(latest, local_time)} has passed", param_hint="--deadline")
    if latest - now > MAX_AHEAD_S:
        raise click.BadParameter("at most 366 days ahead", param_hint="--deadline")
    config = load_config(config_path) if not specs else Config()
    forecast = read_forecast(config, specs, now, (latest - now + duration_s) / 3600)
    notes = []
    if forecast.signal.end < latest + duration_s:  # later times would read the last value again and again
        latest = max(now, forecast.signal.end - duration_s)
        notes.append(f"the forecast ends {stamp(forecast.signal.end, local_time)}: starts after "
                     f"{stamp(latest, local_time)} were not considered")
    best = forecast.signal.best_start(now, latest, duration_s)
    now_g, then_g = mean_intensity(forecast.signal, now, duration_s), mean_intensity(forecast.signal, best, duration_s)
    begin = begin_value(best, now)
    if as_json:
        click.echo(json.dumps({
            "begin": begin, "start": iso(best, local_time), "start_epoch": round(best),
            "deadline": iso(latest, local_time), "duration_s": duration_s,
            "now_g_per_kwh": round(now_g, 1), "then_g_per_kwh": round(then_g, 1),
            "saving_fraction": round(saving(now_g, then_g), 4),
            "source": forecast.source, "synthetic": forecast.synthetic, "notes": notes,
        }, indent=2))
        return
    label = f"{forecast.source}{' (SYNTHETIC data)' if forecast.synthetic else ''}"
    click.echo(f"best start: {stamp(best, local_time)} ({relative(best, now)}), latest allowed "
               f"{stamp(latest, local_time)}")
    click.echo(f"carbon: {then_g:.0f} gCO2eq/kWh then vs {now_g:.0f} now ({saving(now_g, then_g):.0%} less), "
               f"mean over {duration_s / 3600:.1f} h; forecast: {label}")
    for note in notes:
        click.echo(f"note: {note}")
    click.echo(f"sbatch --begin={begin} ...")

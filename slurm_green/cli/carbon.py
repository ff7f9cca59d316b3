"""``slurm-green carbon``: look at carbon forecasts and check which sources answer."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from slurm_green.carbon.answer import Answer
from slurm_green.carbon.chain import log as chain_log
from slurm_green.carbon.errors import CarbonError
from slurm_green.carbon.failures import describe
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.spec import parse_source_spec, parse_sources, split_specs
from slurm_green.carbon.timebase import utc_now
from slurm_green.carbon.windows import low_carbon_windows
from slurm_green.cli.plot_extra import needs_plots
from slurm_green.cli.timefmt import MAX_SPAN_S
from slurm_green.controller.config import DEFAULT_PATH, load_config
from slurm_green.core.text import terminal_safe

SOURCE_HELP = "Source spec (repeat or comma-separate for a fallback chain), e.g. ukgrid, csv:PATH?replay=1, synthetic."


def _now(at: str | None) -> pd.Timestamp:
    """``--at`` as UTC (naive values are read as UTC), or now.

    pandas reads ``""`` (an empty shell variable), ``NaT`` and ``nan`` as NaT rather than
    refusing them; NaT then failed deep in the sources as an internal error (exit 70), so
    it is refused here as the usage error it is (exit 2)."""
    if at is None:
        return utc_now()
    try:
        stamp = pd.Timestamp(at)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--at") from None
    if pd.isna(stamp):
        raise click.BadParameter(f"{at!r} is not a time: expected an ISO time such as 2026-11-23T14:00 (UTC unless "
                                 "it names a zone)", param_hint="--at")
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    if not abs(stamp.timestamp() - utc_now().timestamp()) <= MAX_SPAN_S:  # 3000-01-01 overflowed pandas' ns range
        raise click.BadParameter(f"{at!r} is more than 100 years from now", param_hint="--at")
    return stamp


@click.group()
def carbon() -> None:
    """Grid carbon intensity: forecasts and source health."""


@carbon.command()
@click.option("--source", "specs", multiple=True, default=("synthetic",), show_default=True, help=SOURCE_HELP)
@click.option("--hours", default=48, show_default=True, type=click.IntRange(1, 24 * 14), help="Hours ahead.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), callback=needs_plots,
              help="Write a PNG of the forecast.")
@click.option("--at", help="Evaluate at this UTC time instead of now (for recorded files).")
def show(specs: tuple[str, ...], hours: int, as_json: bool, plot: Path | None, at: str | None) -> None:
    """Show the carbon-intensity forecast of the next hours and its low-carbon windows."""
    now = _now(at)
    secrets = CarbonSecrets.load()
    answer = _answer(specs, secrets, pd.Timedelta(hours=hours), now)
    # Names too: a spec names its source, and a credential pasted into one would be shown with it.
    source = secrets.masked(answer.source)
    failures = {secrets.masked(name): secrets.masked(reason) for name, reason in answer.failures.items()}
    series = ahead(answer.series, now, pd.Timedelta(hours=hours))
    windows = low_carbon_windows(series)
    label = f"{source}{' (SYNTHETIC data)' if answer.synthetic else ''}"
    if plot:
        _plot(series, windows, label, plot)
    if as_json:
        click.echo(json.dumps(_as_json(series, windows, source, answer.synthetic, failures), indent=2))
        return
    console = Console()
    for name, reason in failures.items():
        # a source's error text (a provider's HTTP answer too) is literal, never markup
        console.print(f"[yellow]skipped {escape(terminal_safe(f'{name}: {reason}'))}[/]")
    table = Table(title=Text(terminal_safe(f"Carbon intensity from {label}, gCO2eq/kWh")))
    table.add_column("time (UTC)")
    table.add_column("gCO2eq/kWh", justify="right")
    table.add_column("")
    top = max(float(series.max()), 1.0)
    for when, value in series.items():
        low = any(start <= when < end for start, end in windows)
        bar = "█" * int(round(20 * value / top))
        table.add_row(when.strftime("%a %Y-%m-%d %H:%M"), f"{value:.0f}", f"[green]{bar} low[/]" if low else bar)
    console.print(table)
    if plot:
        console.print(Text(terminal_safe(f"plot written to {plot}")))


def _answer(specs: tuple[str, ...], secrets: CarbonSecrets, horizon: pd.Timedelta, now: pd.Timestamp) -> Answer:
    """The chain's answer; a :class:`CarbonError` (every source failed) as one ``Error:`` line.

    The chain logs each member's failure, with the traceback of an unexpected one, for the
    controller's log. This command configures no logging, so Python's last-resort handler
    printed those records raw on stderr, traceback and all, beside the ``skipped`` line that
    already says the same. Unless ``--debug`` asks for tracebacks, the records are dropped here.
    """
    quiet = logging.NullHandler()
    if not click.get_current_context().find_root().params.get("debug"):
        chain_log.addHandler(quiet)
    try:
        return parse_sources(specs, secrets).answer(horizon, now=now)
    except CarbonError as exc:
        raise click.ClickException(secrets.masked(str(exc))) from None
    finally:
        chain_log.removeHandler(quiet)


def ahead(series: pd.Series, now: pd.Timestamp, span: pd.Timedelta) -> pd.Series:
    """The points of ``span`` from the interval holding ``now``: ``--hours 4`` of hourly data is 4 rows, not 5."""
    first = max(int(series.index.searchsorted(now, side="right")) - 1, 0)
    start = series.index[first] if len(series) else now
    return series.iloc[first:][lambda s: s.index < start + span]


def configured_sources(path: Path) -> list[str]:
    """The source specs the config names; "nothing configured" when there is no file or no sources in it."""
    if not path.exists():
        raise click.ClickException(f"nothing configured: {path} does not exist; give --config FILE or --source SPEC")
    sources = load_config(path).carbon.sources
    if not sources:
        raise click.ClickException(f"nothing configured: {path} sets no [carbon] sources (the controller runs "
                                   "carbon-agnostic); add them there or give --source SPEC")
    return list(sources)


@carbon.command()
@click.option("--source", "specs", multiple=True, help=f"{SOURCE_HELP} Default: the sources --config names.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_PATH,
              show_default=True, help="Controller configuration whose [carbon] sources are checked.")
@click.option("--at", help="Check at this UTC time instead of now.")
def check(specs: tuple[str, ...], config_path: Path, at: str | None) -> None:
    """Check which sources answer and how fresh their data is (exit 1 if none does).

    A source failing with anything but a :class:`CarbonError` (a bug, an OS error the source
    did not turn into one) is a FAIL row like any other, so it hides none of the other rows;
    after the table, the first such exception goes to the top-level mapping (cli/errors.py):
    an OS error is exit 1 naming its path, anything else an internal error, exit 70.
    """
    # Specs, source names and error texts (a provider's HTTP answer, a file's path) go in as literal,
    # terminal_safe Text: as rich markup, a "[/...]" in one would fail the command, a "[word]" would vanish.
    specs = specs or tuple(configured_sources(config_path))
    now = _now(at)
    secrets = CarbonSecrets.load()
    table = Table(title="Carbon sources")
    for column in ("source", "status", "latest (UTC)", "age", "forecast to", "detail"):
        table.add_column(column)
    healthy = 0
    unexpected: Exception | None = None
    for spec in split_specs(specs):
        try:
            source = parse_source_spec(spec, secrets)
            series = source.forecast(pd.Timedelta(hours=24), now=now)
            reading = source.latest(now)
        except Exception as exc:
            if not isinstance(exc, CarbonError):
                unexpected = unexpected or exc
            table.add_row(Text(terminal_safe(secrets.masked(spec))), "[red]FAIL[/]", "", "", "",
                          Text(terminal_safe(secrets.masked(describe(exc)))))
            continue
        healthy += 1
        age = now - reading.time
        table.add_row(
            Text(terminal_safe(secrets.masked(source.name))),
            "[green]OK[/]",
            f"{reading.time:%Y-%m-%d %H:%M}",
            f"{age.total_seconds() / 60:.0f} min",
            f"{series.index[-1]:%Y-%m-%d %H:%M}",
            "SYNTHETIC data" if source.synthetic else f"{reading.value:.0f} gCO2eq/kWh now",
        )
    Console().print(table)
    if unexpected is not None:
        raise unexpected
    if not healthy:
        raise SystemExit(1)


def _as_json(series: pd.Series, windows: list, source: str, synthetic: bool, failures: dict) -> dict:
    return {
        "source": source,
        "synthetic": synthetic,
        "unit": "gCO2eq/kWh",
        "failures": failures,
        "points": [{"time": t.isoformat(), "value": round(float(v), 3)} for t, v in series.items()],
        "low_carbon_windows": [{"start": s.isoformat(), "end": e.isoformat()} for s, e in windows],
    }


def _plot(series: pd.Series, windows: list, label: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4), dpi=100)
    step = series.index[-1] - series.index[-2] if len(series) > 1 else pd.Timedelta(hours=1)
    extended = pd.concat([series, pd.Series([series.iloc[-1]], index=[series.index[-1] + step])])
    ax.step(extended.index, extended.to_numpy(), where="post", color="black", linewidth=1.5)
    for i, (start, end) in enumerate(windows):
        ax.axvspan(start, end, color="tab:green", alpha=0.25, label="low-carbon window" if i == 0 else None)
    ax.set_title(f"Carbon intensity forecast: {label}")
    ax.set_ylabel("gCO2eq/kWh")
    ax.set_xlabel("time (UTC)")
    ax.set_ylim(bottom=0)
    if windows:
        ax.legend(loc="upper right")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

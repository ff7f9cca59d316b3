"""``slurm-green simulate | bench | whatif``: the controller on traces, in simulated time."""

from __future__ import annotations

import json
import os
import warnings
import zoneinfo
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from slurm_green.cli.plot_extra import needs_plots
from slurm_green.core.models import ModelRegistry
from slurm_green.sim.bench import LABELS
from slurm_green.sim.cluster import ClusterSpec, default_cluster
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.traces import TraceError, TraceWarning
from slurm_green.sim.workload import Workload

if TYPE_CHECKING:  # imported where used: a command that needs none of them does not pay for them
    from slurm_green.carbon.signal import CarbonSignal
    from slurm_green.sim.bench import BenchResult

console = Console(stderr=True)
#: Carbon is replayed this far past the last submission (long jobs and deferrals end inside it).
CARBON_TAIL_S = 180 * 86400.0
#: Said with every result: the simulated policies read the recorded future as their forecast.
FORECAST_NOTE = ("forecast: perfect (policies saw the recorded carbon as their forecast; a live forecast errs, "
                 "so real savings are smaller)")


@contextmanager
def reported_warnings() -> Iterator[None]:
    """Each TraceWarning raised inside (rows dropped, lines skipped) becomes one ``warning:`` line on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TraceWarning)
        yield
    for seen in caught:
        if issubclass(seen.category, TraceWarning):
            click.echo(f"warning: {seen.message}", err=True)
        else:
            warnings.warn_explicit(seen.message, seen.category, seen.filename, seen.lineno)


def _output_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--json``/``--plot``: refuse before the run a file that could not be written after it."""
    if value is None or value == "-":
        return value
    folder = Path(value).parent
    if not folder.is_dir():
        raise click.BadParameter(f"{value}: no directory {folder}")
    if not os.access(folder, os.W_OK):
        raise click.BadParameter(f"{value}: directory {folder} is not writable")
    return value


def _plot_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--plot``: matplotlib installed, and a file that can be written."""
    return _output_file(ctx, param, needs_plots(ctx, param, value))


def _time_zone(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"{value!r} is not a time zone (an IANA name such as Europe/Berlin, or UTC)") from None
    return value


def _write_json(path: str, data: dict[str, object]) -> None:
    """``-`` is stdout (the tables then go to stderr, see :func:`_tables`)."""
    text = json.dumps(data, indent=2, default=float)
    if path == "-":
        click.echo(text)
    else:
        Path(path).write_text(text)


def _tables(json_out: str | None) -> Console:
    """Where tables go: stdout, unless the JSON goes there."""
    return Console(width=140, stderr=json_out == "-")


def _models() -> ModelRegistry:
    from slurm_green.models.registry import default_registry

    return default_registry()


def _truth(gpu: str | None) -> ModelRegistry | None:
    """How jobs really run when that differs from what the controller believes (``--true-gpu``)."""
    if gpu is None:
        return None
    from slurm_green.models.registry import default_registry

    try:
        return default_registry(gpu.lower())
    except (KeyError, FileNotFoundError, ValueError) as exc:
        raise click.BadParameter(f"no fitted models for {gpu!r}: {exc}", param_hint="--true-gpu") from None


def _signal(spec: str, workload: Workload) -> CarbonSignal:
    from slurm_green.sim.carbon import replayed_signal

    try:
        return replayed_signal(spec, float(workload.submit[0]) - 3600.0, float(workload.submit[-1]) + CARBON_TAIL_S)
    except (ValueError, OSError) as exc:
        raise click.BadParameter(str(exc), param_hint="--carbon") from None


def _cluster(workload: Workload, nodes: int | None, gpus_per_node: int | None,
             suspend_after_min: float | None = None) -> ClusterSpec:
    """The trace's default cluster, resized by the options, with power saving if asked; jobs larger
    than it are said, then run on all of it."""
    spec = default_cluster(workload.name)
    spec = replace(spec, nodes=nodes or spec.nodes, gpus_per_node=gpus_per_node or spec.gpus_per_node,
                   suspend_after_s=None if suspend_after_min is None else suspend_after_min * 60.0)
    larger = workload.gpus > spec.gpus
    if larger.any():
        click.echo(f"warning: {int(larger.sum())} job(s) ask for more than the cluster's {spec.gpus} GPUs (up to "
                   f"{int(workload.gpus.max())}); they run on all {spec.gpus}", err=True)
    return spec


def _options(flex_h: float, gpu_range: float, min_tick: float, max_tick: float, share: float = 0.0,
             time_limit_factor: float | None = None) -> TraceOptions:
    """The trace options of the command line; ``time_limit_factor`` None keeps the default."""
    if max_tick < min_tick:
        raise click.BadParameter(f"{max_tick:g} is below --min-tick {min_tick:g}", param_hint="--max-tick")
    options = TraceOptions(flex_s=flex_h * 3600.0, gpu_range=gpu_range, accept_share=share)
    return options if time_limit_factor is None else replace(options, time_limit_factor=time_limit_factor)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f}"


def _common(func: Callable[..., None]) -> Callable[..., None]:
    """The options ``simulate`` and ``bench`` share."""
    for option in reversed([
        click.option("--nodes", type=click.IntRange(min=1), default=None,
                     help="Cluster nodes (default: per trace, see docs)."),
        click.option("--gpus-per-node", type=click.IntRange(min=1), default=None),
        click.option("--suspend-after", "suspend_after_min", type=click.FloatRange(min=0), default=None,
                     help="Slurm's power saving: a node idle this many minutes is suspended (SuspendTime) and "
                          "a job landing on it waits 5 min for it to resume (default: never)."),
        click.option("--flex", "flex_h", type=click.FloatRange(min=0), default=24.0, show_default=True,
                     help="Hours of start-time flexibility every trace job grants."),
        click.option("--gpu-range", type=click.FloatRange(min=1), default=2.0, show_default=True,
                     help="Jobs accept requested/R .. requested*R GPUs (1: exactly as requested)."),
        click.option("--share", type=click.FloatRange(0, 1), default=0.0, show_default=True,
                     help="Share of jobs whose users allow a shared GPU (share=yes; drawn at random, seed 0)."),
        click.option("--min-tick", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
                     help="Controller ticks at events, at most this often (sim seconds)."),
        click.option("--max-tick", type=click.FloatRange(min=0, min_open=True), default=900.0, show_default=True,
                     help="...and at least this often while jobs are pending."),
        click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N jobs of the trace."),
        click.option("--json", "json_out", type=click.Path(dir_okay=False, allow_dash=True), default=None,
                     callback=_output_file, help="Write the results as JSON to this file ('-': stdout)."),
        click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None, callback=_plot_file,
                     help="Write a PNG figure to this file."),
    ]):
        func = option(func)
    return func


def _load(trace: str | None, limit: int | None) -> Workload:
    from slurm_green.sim.traces import default_trace, load_trace

    path = Path(trace) if trace else default_trace()
    if not path.exists():
        raise click.BadParameter(f"{path} does not exist (set SLURM_GREEN_DATA?)", param_hint="--trace")
    try:
        with reported_warnings():
            workload = load_trace(path)
    except TraceError as exc:
        raise click.BadParameter(str(exc), param_hint="--trace") from None
    return workload.head(limit) if limit else workload


def _summary_table(title: str, rows: dict[str, dict[str, float]], reference: str | None,
                   lower_bound_kg: float | None = None) -> Table:
    table = Table(title=title)
    for col in ("policy", "avg JCT h", "p50 h", "p99 h", "energy kWh", "carbon kg", "+ idle kWh", "util", "shared",
                "frag"):
        table.add_column(col, justify="right")
    if reference:
        for col in ("JCT x", "energy x", "carbon x"):
            table.add_column(col, justify="right")
    if lower_bound_kg:
        table.add_column("carbon / LB", justify="right")
    ref = rows.get(reference) if reference else None
    for name, s in rows.items():
        cells = [name, _hours(s["avg_jct_s"]), _hours(s["p50_jct_s"]), _hours(s["p99_jct_s"]),
                 f"{s['energy_kwh']:.1f}", f"{s['carbon_kg']:.2f}", f"{s['idle_energy_kwh']:.1f}",
                 f"{s['gpu_utilisation']:.2f}", f"{s['shared_share']:.2f}", f"{s['fragmentation']:.2f}"]
        if ref:
            cells += [f"{s['avg_jct_s'] / ref['avg_jct_s']:.3f}", f"{s['energy_kwh'] / ref['energy_kwh']:.3f}",
                      f"{s['carbon_kg'] / ref['carbon_kg']:.3f}"]
        if lower_bound_kg:
            cells.append(f"{s['carbon_kg'] / lower_bound_kg:.2f}")
        table.add_row(*cells)
    return table


@click.command()
@click.option("--trace", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Philly CSV, Gavel .trace, Pollux workload-N.csv or Alibaba pod list (default: Pollux workload-1).")
@click.option("--carbon", "carbon_spec", default="DE-LU", show_default=True,
              help="Region of the shared data (DE-LU, GB, US-CAL-CISO...), csv:PATH, or synthetic.")
@click.option("--policy", "policy_name", type=click.Choice(tuple(LABELS)), default="greenflow", show_default=True,
              help="icefrog: greenflow that also grows and shrinks running elastic jobs (see --elastic).")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True), default=None,
              help="GreenFlow/PowerFlow budget fraction of carbon-agnostic (1: the same carbon).")
@click.option("--true-gpu", default=None,
              help="Jobs really run as the models fitted for this GPU (e.g. p100); the controller keeps v100's.")
@click.option("--learn", is_flag=True, help="Finished jobs' true throughput and power refine the controller's models.")
@click.option("--elastic", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Share of jobs that opt in to elastic=requeue; above 0 the controller grows running ones into "
                   "idle GPUs by checkpoint and requeue ([elastic] requeue).")
@click.option("--shrink", is_flag=True, help="With --elastic: also shrink one for the blocked head of the queue "
                                             "([elastic] shrink).")
@click.option("--shrink-when-dear", is_flag=True, help="With --elastic: also shrink one whose carbon the budget's "
                                                       "price makes dear ([elastic] shrink_when_dear).")
@click.option("--freeze", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Share of jobs whose training freezes layers as it goes (the helper's Freezing).")
@_common
def simulate(trace: str | None, carbon_spec: str, policy_name: str, budget: float | None, true_gpu: str | None,
             learn: bool, elastic: float, shrink: bool, shrink_when_dear: bool, freeze: float, nodes: int | None, gpus_per_node: int | None,
             suspend_after_min: float | None, flex_h: float,
             gpu_range: float, share: float,
             min_tick: float, max_tick: float, limit: int | None, json_out: str | None, plot_out: str | None) -> None:
    """Replay a trace through the controller with one policy and report JCT, energy and carbon."""
    from slurm_green.controller.resize import ResizeSettings
    from slurm_green.policy.running import resizes_running, resizing
    from slurm_green.sim.bench import make_policy
    from slurm_green.sim.runner import simulate as run

    for flag, given in (("--shrink", shrink), ("--shrink-when-dear", shrink_when_dear)):
        if given and not elastic:
            raise click.BadParameter("needs --elastic above 0 (only elastic jobs are resized)", param_hint=flag)
    if policy_name == "greenflow+share" and not share:
        raise click.BadParameter("greenflow+share needs --share above 0 (only jobs that allow it share a GPU)",
                                 param_hint="--policy")
    policy = make_policy(policy_name, budget)
    if elastic and not resizes_running(policy):  # as the controller's assembly wraps it (build_policy)
        policy = resizing(policy, shrink=shrink, when_dear=shrink_when_dear)
    resize = ResizeSettings() if resizes_running(policy) else None
    options = replace(_options(flex_h, gpu_range, min_tick, max_tick, share), accept_requeue=elastic,
                      accept_freeze=freeze)
    workload = _load(trace, limit)
    spec = _cluster(workload, nodes, gpus_per_node, suspend_after_min)
    signal = _signal(carbon_spec, workload)
    models = _models()
    truth = _truth(true_gpu)
    with _progress() as progress:
        task = progress.add_task(f"{policy.name} on {workload.name}", total=len(workload))
        result = run(workload, spec, policy, signal, models, carbon_spec, options, min_tick, max_tick, on_progress=lambda done: progress.update(task, completed=done),
                     truth=truth, learn=learn, resize=resize)
    tables = _tables(json_out)
    tables.print(_summary_table(f"{workload.name}, {spec.nodes}x{spec.gpus_per_node} GPUs, carbon {carbon_spec}",
                                {policy.name: result.summary}, None))
    restarts = f", {result.summary['restarts']} restarts of running jobs" if resize else ""
    console.print(f"{result.ticks} controller ticks{restarts}, {result.wall_s:.1f} s wall; {FORECAST_NOTE}")
    if spec.suspend_after_s is not None:
        console.print(f"power saving: nodes suspended after {spec.suspend_after_s / 60:g} min idle saved "
                      f"{result.summary['suspended_kwh']:,.1f} kWh of idle power (taken out of the table's); "
                      f"{result.summary['resumes']} job(s) waited {spec.resume_s / 60:g} min for a node to resume")
    if json_out:
        _write_json(json_out, {"policy": policy.name, "trace": workload.name, "carbon": carbon_spec,
                               "forecast": "perfect", "cluster": spec.__dict__, "ticks": result.ticks,
                               "wall_s": result.wall_s, **result.summary})
    if plot_out:
        from slurm_green.cli.plots import run_figure, save

        save(run_figure(result, signal, f"{policy.name} on {workload.name} ({carbon_spec})"), plot_out)


def _run_bench(workload: Workload, spec: ClusterSpec, carbon_spec: str, options: TraceOptions, sweep: bool,
               min_tick: float, max_tick: float, policies: tuple[str, ...] | None = None) -> BenchResult:
    from slurm_green.sim.bench import POLICY_NAMES, run_bench

    signal = _signal(carbon_spec, workload)
    models = _models()
    with _progress() as progress:
        task = progress.add_task("policies", total=None)
        result = run_bench(workload, spec, signal, models, carbon_spec, options, policies or POLICY_NAMES,
                           sweep=sweep, on_run=lambda what: progress.update(task, description=what, advance=1),
                           min_tick_s=min_tick, max_tick_s=max_tick)
    return result


def _speedup_lines(result: BenchResult) -> list[str]:
    """GreenFlow (PowerFlow) against each baseline at equal carbon (energy), then against the strongest
    swept baseline point measured-only and on GreenFlow's interpolated frontier (an estimate,
    ``sim.bench.interpolated_at``); "not reached", never NaN."""
    from slurm_green.sim.bench import speedup_text

    lines = []
    for policy, x, ratios in (("GreenFlow", "carbon", result.equal_carbon), ("PowerFlow", "energy", result.equal_energy)):
        for base, ratio in ratios.items():
            lines.append(f"{policy} at {base}'s {x}: {base} JCT / {policy} JCT = {speedup_text(ratio)}"
                         + (f"  ({policy}'s sweep never gets that low)" if not np.isfinite(ratio) else ""))
    for policy, x, attr in (("GreenFlow", "carbon", "carbon_kg"), ("PowerFlow", "energy", "energy_kwh")):
        if policy.lower() not in result.frontier:
            continue
        for how in ("measured-only", "interpolated"):
            versus = result.versus_best(policy.lower(), attr, how == "interpolated")
            lines.append(f"{policy} vs the strongest baseline point at its {x}, {how}: "
                         f"{speedup_text(versus.speedup)}" + (f" (against {versus.against})" if versus.against else ""))
    incomplete = [f"{k} {p.setting}" for k, v in result.frontier.items() for p in v if not p.complete]
    if incomplete:
        lines.append(f"left jobs unfinished, not compared: {', '.join(incomplete)}")
    return lines


@click.command()
@click.option("--trace", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Default: Pollux workload-1 (160 jobs, about a minute for every policy and sweep).")
@click.option("--carbon", "carbon_spec", default="DE-LU", show_default=True)
@click.option("--sweep/--no-sweep", default=True, show_default=True,
              help="Sweep each policy's budget/tolerance to trace the JCT-carbon frontier.")
@_common
def bench(trace: str | None, carbon_spec: str, sweep: bool, nodes: int | None, gpus_per_node: int | None,
          suspend_after_min: float | None, flex_h: float, gpu_range: float, share: float, min_tick: float, max_tick: float, limit: int | None,
          json_out: str | None, plot_out: str | None) -> None:
    """Every policy on the same trace and carbon: JCT, energy and carbon vs carbon-agnostic FIFO."""
    options = _options(flex_h, gpu_range, min_tick, max_tick, share)
    workload = _load(trace, limit)
    spec = _cluster(workload, nodes, gpus_per_node, suspend_after_min)
    result = _run_bench(workload, spec, carbon_spec, options, sweep, min_tick, max_tick)
    title = f"{workload.name} ({len(workload)} jobs), {spec.nodes}x{spec.gpus_per_node} GPUs, carbon {carbon_spec}"
    tables = _tables(json_out)
    tables.print(_summary_table(title, {k: v.summary for k, v in result.runs.items()}, "fifo",
                                result.lower_bound.carbon_kg))
    tables.print(f"carbon lower bound: {result.lower_bound.carbon_kg:.2f} kg (each job alone in its least-carbon "
                 "configuration and start, capacity ignored; docs/policies.md)")
    for line in [*_speedup_lines(result), FORECAST_NOTE]:
        tables.print(line)
    if json_out:
        _write_json(json_out, {"trace": workload.name, "carbon": carbon_spec, "forecast": "perfect",
                               "cluster": spec.__dict__, **result.to_dict()})
    if plot_out:
        from slurm_green.cli.plots import frontier_figure, save

        save(frontier_figure(result, title), plot_out)


@click.command()
@click.option("--sacct", "sacct_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Output of sacct --json, or of sacct --parsable2 -o JobID,JobName,Submit,Start,Elapsed,Timelimit,"
                   "AllocTRES,ReqTRES (other columns are ignored).")
@click.option("--carbon", "carbon_spec", default="DE-LU", show_default=True)
@click.option("--tz", default="UTC", show_default=True, callback=_time_zone,
              help="Time zone of sacct's timestamps (--parsable2 only; --json carries UTC times).")
@_common
def whatif(sacct_path: str, carbon_spec: str, tz: str, nodes: int | None, gpus_per_node: int | None,
           suspend_after_min: float | None, flex_h: float, gpu_range: float, share: float, min_tick: float, max_tick: float, limit: int | None,
           json_out: str | None, plot_out: str | None) -> None:
    """Replay your own sacct history: the carbon and JCT each policy would have given."""
    from slurm_green.sim.sacct import load_sacct

    name = Path(sacct_path).name
    try:
        with reported_warnings():
            history = load_sacct(sacct_path, tz=tz)
    except TraceError as exc:
        raise click.BadParameter(str(exc), param_hint="--sacct") from None
    if not len(history.workload):
        raise click.ClickException(f"{sacct_path}: no finished or running GPU jobs to replay")
    factor = history.time_limit_factor()
    options = _options(flex_h, gpu_range, min_tick, max_tick, share, time_limit_factor=factor)
    workload = history.workload.head(limit) if limit else history.workload
    spec = _cluster(workload, nodes, gpus_per_node, suspend_after_min)
    result = _run_bench(workload, spec, carbon_spec, options, plot_out is not None, min_tick, max_tick)
    tables = _tables(json_out)
    tables.print(_summary_table(f"what if: {len(workload)} GPU jobs from {name}, carbon {carbon_spec}",
                                {k: v.summary for k, v in result.runs.items()}, "fifo",
                                result.lower_bound.carbon_kg))
    own = 0 if workload.time_limit_s is None else int(np.isfinite(workload.time_limit_s).sum())
    tables.print(_limit_note(factor, options.time_limit_factor, own, len(workload)))
    if own:
        tables.print(_past_limit_note({k: int(v.summary["past_limit"]) for k, v in result.runs.items()}))
    tables.print(FORECAST_NOTE)
    if json_out:
        _write_json(json_out, {"sacct": sacct_path, "carbon": carbon_spec, "forecast": "perfect",
                               "time_limit_factor": options.time_limit_factor, **result.to_dict()})
    if plot_out:
        from slurm_green.cli.plots import frontier_figure, save

        save(frontier_figure(result, f"what if: {name}, carbon {carbon_spec}"), plot_out)


def _past_limit_note(past: dict[str, int]) -> str:
    """Jobs that ran past the limit in force when they started: live Slurm would stop them there.
    A decision that slows a job raises its limit (``SetTimeLimit``, docs/enactment.md), so these
    are the jobs it could not cover: no limit submitted, a partition's MaxTime, a model's error."""
    return ("jobs past their time limit (live Slurm stops a job there; the replay lets it finish): "
            + ", ".join(f"{name} {count}" for name, count in past.items()))


def _limit_note(site_factor: float | None, used: float, own: int, jobs: int) -> str:
    """What the replay's time limits are: Slurm backfills by them, so they shape every wait."""
    if site_factor is None:
        return f"time limits: no Timelimit in the history, runtime x {used:g} assumed"
    rest = "" if own == jobs else (f"; the {jobs - own} without one: runtime x {used:.3g}, the median "
                                   "Timelimit/Elapsed of the others")
    return f"time limits: each job's own Timelimit from the history ({own} of {jobs} jobs){rest}"

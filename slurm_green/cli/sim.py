"""``slurm-green simulate | bench | whatif``: the controller on traces, in simulated time."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from slurm_green.sim.cluster import ClusterSpec, default_cluster
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.workload import Workload

console = Console(stderr=True)
out = Console(width=140)
#: Carbon is replayed this far past the last submission (long jobs and deferrals end inside it).
CARBON_TAIL_S = 180 * 86400.0


def _models() -> object:
    from slurm_green.models.registry import default_registry

    return default_registry()


def _truth(gpu: str | None) -> object | None:
    """How jobs really run when that differs from what the controller believes (``--true-gpu``)."""
    if gpu is None:
        return None
    from slurm_green.models.registry import default_registry

    try:
        return default_registry(gpu.lower())
    except (KeyError, FileNotFoundError, ValueError) as exc:
        raise click.BadParameter(f"no fitted models for {gpu!r}: {exc}", param_hint="--true-gpu") from None


def _signal(spec: str, workload: Workload) -> object:
    from slurm_green.sim.carbon import replayed_signal

    try:
        return replayed_signal(spec, float(workload.submit[0]) - 3600.0, float(workload.submit[-1]) + CARBON_TAIL_S)
    except (ValueError, OSError) as exc:
        raise click.BadParameter(str(exc), param_hint="--carbon") from None


def _cluster(workload: Workload, nodes: int | None, gpus_per_node: int | None) -> ClusterSpec:
    spec = default_cluster(workload.name)
    return replace(spec, nodes=nodes or spec.nodes, gpus_per_node=gpus_per_node or spec.gpus_per_node)


def _options(flex_h: float, gpu_range: float) -> TraceOptions:
    return TraceOptions(flex_s=flex_h * 3600.0, gpu_range=gpu_range)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f}"


def _common(func):  # type: ignore[no-untyped-def]
    for option in reversed([
        click.option("--nodes", type=int, default=None, help="Cluster nodes (default: per trace, see docs)."),
        click.option("--gpus-per-node", type=int, default=None),
        click.option("--flex", "flex_h", type=float, default=24.0, show_default=True,
                     help="Hours of start-time flexibility every trace job grants."),
        click.option("--gpu-range", type=float, default=2.0, show_default=True,
                     help="Jobs accept requested/R .. requested*R GPUs."),
        click.option("--min-tick", type=float, default=300.0, show_default=True,
                     help="Controller ticks at events, at most this often (sim seconds)."),
        click.option("--max-tick", type=float, default=900.0, show_default=True,
                     help="...and at least this often while jobs are pending."),
        click.option("--limit", type=int, default=None, help="Only the first N jobs of the trace."),
        click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None),
        click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None),
    ]):
        func = option(func)
    return func


def _load(trace: str | None, limit: int | None) -> Workload:
    from slurm_green.sim.traces import default_trace, load_trace

    path = Path(trace) if trace else default_trace()
    if not path.exists():
        raise click.BadParameter(f"{path} does not exist (set SLURM_GREEN_DATA?)", param_hint="--trace")
    workload = load_trace(path)
    return workload.head(limit) if limit else workload


def _summary_table(title: str, rows: dict[str, dict[str, float]], reference: str | None,
                   lower_bound_kg: float | None = None) -> Table:
    table = Table(title=title)
    for col in ("policy", "avg JCT h", "p50 h", "p99 h", "energy kWh", "carbon kg", "util", "frag"):
        table.add_column(col, justify="right")
    if reference:
        for col in ("JCT x", "energy x", "carbon x"):
            table.add_column(col, justify="right")
    if lower_bound_kg:
        table.add_column("carbon / LB", justify="right")
    ref = rows.get(reference) if reference else None
    for name, s in rows.items():
        cells = [name, _hours(s["avg_jct_s"]), _hours(s["p50_jct_s"]), _hours(s["p99_jct_s"]),
                 f"{s['energy_kwh']:.1f}", f"{s['carbon_kg']:.2f}", f"{s['gpu_utilisation']:.2f}",
                 f"{s['fragmentation']:.2f}"]
        if ref:
            cells += [f"{s['avg_jct_s'] / ref['avg_jct_s']:.3f}", f"{s['energy_kwh'] / ref['energy_kwh']:.3f}",
                      f"{s['carbon_kg'] / ref['carbon_kg']:.3f}"]
        if lower_bound_kg:
            cells.append(f"{s['carbon_kg'] / lower_bound_kg:.2f}")
        table.add_row(*cells)
    return table


@click.command()
@click.option("--trace", type=click.Path(dir_okay=False), default=None,
              help="Philly CSV, Gavel .trace, Pollux workload-N.csv or Alibaba pod list (default: Pollux workload-1).")
@click.option("--carbon", "carbon_spec", default="DE-LU", show_default=True,
              help="Region of the shared data (DE-LU, GB, US-CAL-CISO...), csv:PATH, or synthetic.")
@click.option("--policy", "policy_name", default="greenflow", show_default=True)
@click.option("--budget", type=float, default=None, help="GreenFlow/PowerFlow budget fraction of carbon-agnostic.")
@click.option("--true-gpu", default=None,
              help="Jobs really run as the models fitted for this GPU (e.g. p100); the controller keeps v100's.")
@click.option("--learn", is_flag=True, help="Finished jobs' true throughput and power refine the controller's models.")
@_common
def simulate(trace: str | None, carbon_spec: str, policy_name: str, budget: float | None, true_gpu: str | None,
             learn: bool, nodes: int | None, gpus_per_node: int | None, flex_h: float, gpu_range: float,
             min_tick: float, max_tick: float, limit: int | None, json_out: str | None, plot_out: str | None) -> None:
    """Replay a trace through the controller with one policy and report JCT, energy and carbon."""
    from slurm_green.sim.bench import make_policy
    from slurm_green.sim.runner import simulate as run

    try:
        policy = make_policy(policy_name, budget)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from None
    workload = _load(trace, limit)
    spec = _cluster(workload, nodes, gpus_per_node)
    signal = _signal(carbon_spec, workload)
    models = _models()
    truth = _truth(true_gpu)
    with _progress() as progress:
        task = progress.add_task(f"{policy.name} on {workload.name}", total=len(workload))
        result = run(workload, spec, policy, signal, models, carbon_spec, _options(flex_h, gpu_range),
                     min_tick, max_tick, on_progress=lambda done: progress.update(task, completed=done),
                     truth=truth, learn=learn)
    out.print(_summary_table(f"{workload.name}, {spec.nodes}x{spec.gpus_per_node} GPUs, carbon {carbon_spec}",
                                   {policy.name: result.summary}, None))
    console.print(f"{result.ticks} controller ticks, {result.wall_s:.1f} s wall")
    if json_out:
        Path(json_out).write_text(json.dumps({"policy": policy.name, "trace": workload.name, "carbon": carbon_spec,
                                              "cluster": spec.__dict__, "ticks": result.ticks,
                                              "wall_s": result.wall_s, **result.summary}, indent=2))
    if plot_out:
        _plot_run(result, signal, plot_out, f"{policy.name} on {workload.name} ({carbon_spec})")


def _plot_run(result: object, signal: object, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    record = result.record  # type: ignore[attr-defined]
    t = np.asarray(record.sample_t)
    hours = (t - t[0]) / 3600.0
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    top.step(hours, record.sample_busy, where="post")
    top.set_ylabel("busy GPUs")
    top.set_title(title)
    grid = np.arange(t[0], t[-1], 3600.0)
    bottom.plot((grid - t[0]) / 3600.0, signal.value_at(grid), color="tab:green")  # type: ignore[attr-defined]
    bottom.set_ylabel("gCO2/kWh")
    bottom.set_xlabel("hours since first submission")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _run_bench(workload: Workload, spec: ClusterSpec, carbon_spec: str, options: TraceOptions, sweep: bool,
               min_tick: float, max_tick: float, policies: tuple[str, ...] | None = None):  # type: ignore[no-untyped-def]
    from slurm_green.sim.bench import POLICY_NAMES, run_bench

    signal = _signal(carbon_spec, workload)
    models = _models()
    with _progress() as progress:
        task = progress.add_task("policies", total=None)
        result = run_bench(workload, spec, signal, models, carbon_spec, options, policies or POLICY_NAMES,
                           sweep=sweep, on_run=lambda what: progress.update(task, description=what, advance=1),
                           min_tick_s=min_tick, max_tick_s=max_tick)
    return result


def _speedup_lines(result) -> list[str]:  # type: ignore[no-untyped-def]
    """GreenFlow (PowerFlow) against each baseline at equal carbon (energy); "not reached", never NaN."""
    from slurm_green.sim.bench import speedup_text

    lines = []
    for policy, x, ratios in (("GreenFlow", "carbon", result.equal_carbon), ("PowerFlow", "energy", result.equal_energy)):
        for base, ratio in ratios.items():
            lines.append(f"{policy} at {base}'s {x}: {base} JCT / {policy} JCT = {speedup_text(ratio)}"
                         + (f"  ({policy}'s sweep never gets that low)" if not np.isfinite(ratio) else ""))
    return lines


@click.command()
@click.option("--trace", type=click.Path(dir_okay=False), default=None,
              help="Default: Pollux workload-1 (160 jobs, about a minute for every policy and sweep).")
@click.option("--carbon", "carbon_spec", default="DE-LU", show_default=True)
@click.option("--sweep/--no-sweep", default=True, show_default=True,
              help="Sweep each policy's budget/tolerance to trace the JCT-carbon frontier.")
@_common
def bench(trace: str | None, carbon_spec: str, sweep: bool, nodes: int | None, gpus_per_node: int | None,
          flex_h: float, gpu_range: float, min_tick: float, max_tick: float, limit: int | None,
          json_out: str | None, plot_out: str | None) -> None:
    """Every policy on the same trace and carbon: JCT, energy and carbon vs carbon-agnostic FIFO."""
    from slurm_green.sim.bench import plot_frontier

    workload = _load(trace, limit)
    spec = _cluster(workload, nodes, gpus_per_node)
    result = _run_bench(workload, spec, carbon_spec, _options(flex_h, gpu_range), sweep, min_tick, max_tick)
    data = result.to_dict()
    title = f"{workload.name} ({len(workload)} jobs), {spec.nodes}x{spec.gpus_per_node} GPUs, carbon {carbon_spec}"
    out.print(_summary_table(title, {k: v.summary for k, v in result.runs.items()}, "fifo",
                                   result.lower_bound.carbon_kg))
    out.print(f"carbon lower bound: {result.lower_bound.carbon_kg:.2f} kg (oracle, capacity ignored, "
              f"{result.lower_bound.horizon_s / 86400:g}-day window)")
    for line in _speedup_lines(result):
        out.print(line)
    if json_out:
        Path(json_out).write_text(json.dumps({"trace": workload.name, "carbon": carbon_spec,
                                              "cluster": spec.__dict__, **data}, indent=2, default=float))
    if plot_out:
        plot_frontier(result, plot_out, title)


@click.command()
@click.option("--sacct", "sacct_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Output of sacct --parsable2 -o JobID,JobName,User,Account,Partition,State,Submit,Eligible,"
                   "Start,End,Elapsed,Timelimit,NNodes,AllocTRES,ReqTRES,Comment")
@click.option("--carbon", "carbon_spec", default="DE-LU", show_default=True)
@click.option("--tz", default="UTC", show_default=True, help="Time zone of sacct's timestamps.")
@_common
def whatif(sacct_path: str, carbon_spec: str, tz: str, nodes: int | None, gpus_per_node: int | None,
           flex_h: float, gpu_range: float, min_tick: float, max_tick: float, limit: int | None,
           json_out: str | None, plot_out: str | None) -> None:
    """Replay your own sacct history: the carbon and JCT each policy would have given."""
    from slurm_green.sim.bench import plot_frontier
    from slurm_green.sim.sacct import load_sacct

    try:
        workload = load_sacct(sacct_path, tz=tz)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sacct") from None
    if not len(workload):
        raise click.ClickException(f"{sacct_path}: no finished or running GPU jobs to replay")
    workload = workload.head(limit) if limit else workload
    spec = _cluster(workload, nodes, gpus_per_node)
    result = _run_bench(workload, spec, carbon_spec, _options(flex_h, gpu_range), plot_out is not None,
                        min_tick, max_tick)
    out.print(_summary_table(f"what if: {len(workload)} GPU jobs from {sacct_path}, carbon {carbon_spec}",
                                   {k: v.summary for k, v in result.runs.items()}, "fifo",
                                   result.lower_bound.carbon_kg))
    if json_out:
        Path(json_out).write_text(json.dumps({"sacct": sacct_path, "carbon": carbon_spec, **result.to_dict()},
                                             indent=2, default=float))
    if plot_out:
        plot_frontier(result, plot_out, f"what if: {sacct_path}")

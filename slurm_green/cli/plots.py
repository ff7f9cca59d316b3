"""The simulator's figures: a run's busy GPUs over its carbon, and the policies' JCT-carbon frontier.

Figures are built on ``matplotlib.figure.Figure`` (no pyplot state, no backend
switch), returned for tests to inspect and written by :func:`save`. Readability
choices, each from a figure a user could not read: titles carry file names, not
paths; the carbon-agnostic FIFO reference is drawn last, as a large star, so no
policy's line hides it; every swept point says which setting it is; the log axis
reads ``40``, not ``4x10^1``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from slurm_green.core.forecast import CarbonForecast
from slurm_green.sim.bench import BenchResult
from slurm_green.sim.runner import RunResult

#: The reference every ratio in the tables is taken against.
REFERENCE = "fifo"


def run_figure(result: RunResult, signal: CarbonForecast, title: str) -> Figure:
    """Busy GPUs (top) over the carbon intensity (bottom), in hours since the first submission."""
    record = result.record
    t = np.asarray(record.sample_t)
    fig = Figure(figsize=(8, 5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.step((t - t[0]) / 3600.0, record.sample_busy, where="post")
    top.set_ylabel("busy GPUs")
    top.set_title(title)
    grid = np.arange(t[0], t[-1], 3600.0)
    bottom.plot((grid - t[0]) / 3600.0, signal.value_at(grid), color="tab:green")
    bottom.set_ylabel("gCO2/kWh")
    bottom.set_xlabel("hours since first submission")
    fig.tight_layout()
    return fig


def frontier_figure(result: BenchResult, title: str) -> Figure:
    """Average JCT against carbon for every policy's sweep, each point labelled with its setting."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for name, points in result.frontier.items():
        if name == REFERENCE:
            continue
        pts = sorted(points, key=lambda p: p.carbon_kg)
        [line] = ax.plot([p.carbon_kg for p in pts], [p.avg_jct_s / 3600 for p in pts], marker="o", label=name,
                         zorder=2)
        for p in pts if len(pts) > 1 else ():
            ax.annotate(p.setting, (p.carbon_kg, p.avg_jct_s / 3600), textcoords="offset points", xytext=(4, 3),
                        fontsize=6, color=line.get_color())
    for p in result.frontier.get(REFERENCE, ()):
        ax.plot([p.carbon_kg], [p.avg_jct_s / 3600], linestyle="none", marker="*", markersize=16, color="black",
                markeredgecolor="white", zorder=5, label=f"{REFERENCE} (carbon-agnostic)")
    ax.axvline(result.lower_bound.carbon_kg, color="k", linestyle="--", label="carbon lower bound")
    ax.set_xlabel("carbon of the jobs (kg CO2eq)")
    ax.set_ylabel("average JCT (h, log scale)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.4)))
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def save(fig: Figure, path: str | Path) -> None:
    fig.savefig(path, dpi=120)

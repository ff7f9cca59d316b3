"""Readers for the shared GPU job traces (see PROVENANCE.md, section B), each into a ``Workload``.

Traces with relative times (Gavel, Pollux, Alibaba) are placed at ``origin`` (POSIX
seconds); Philly's absolute timestamps carry no time zone and are read as UTC. How
each trace's job size is obtained:

- Philly (Pollux's preprocessing): ``duration`` at ``num_gpus``, full power.
- Gavel: ``total_steps`` of work; the models give steps/s per configuration.
- Pollux workloads: samples to reach the target metric, i.e. the last row of the
  application's ``validation-<batch>.csv`` (batch nearest the job's) times that batch;
  the models give samples/s.
- Alibaba v2023: ``deletion_time - scheduled_time`` (``creation_time`` if never
  scheduled); tasks without GPUs are dropped, and a fractional GPU counts as one
  (GPU sharing is not replayed).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.sim.workload import Workload

#: Monday 2023-01-02 00:00 UTC: where relative traces start, inside the 2023 carbon data.
DEFAULT_ORIGIN = 1672617600.0


def load_philly(path: Path) -> Workload:
    frame = pd.read_csv(path).dropna(subset=["timestamp", "duration", "num_gpus"])
    frame = frame[frame.duration > 0]
    submit = pd.to_datetime(frame.timestamp).dt.tz_localize("UTC")
    epoch = (submit - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    return Workload.from_columns("philly", epoch, frame.num_gpus.to_numpy(), [""] * len(frame),
                                 duration_s=frame.duration.to_numpy())


def load_gavel(path: Path, origin: float = DEFAULT_ORIGIN) -> Workload:
    frame = pd.read_csv(path, sep="\t", header=None,
                        names=["job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps",
                               "arrival_time", "scale_factor"])
    return Workload.from_columns("gavel", origin + frame.arrival_time.to_numpy(), frame.scale_factor.to_numpy(),
                                 frame.job_type.astype(str).tolist(), work=frame.total_steps.to_numpy())


def pollux_samples_to_target(app: str, batch_size: int, perf_dir: Path | None = None) -> float:
    """Samples the app trained to reach its target, from the validation run nearest ``batch_size``."""
    folder = (perf_dir or shared_data_dir() / "perf_energy") / "pollux" / app
    runs = {int(m.group(1)): p for p in folder.glob("validation-*.csv")
            if (m := re.fullmatch(r"validation-(\d+)\.csv", p.name))}
    if not runs:
        raise FileNotFoundError(f"no validation-*.csv for {app} in {folder}")
    batch = min(runs, key=lambda b: (abs(np.log(b / batch_size)), b))
    last = pd.read_csv(runs[batch]).iloc[-1]
    return float(last["iteration"]) * batch


def load_pollux(path: Path, origin: float = DEFAULT_ORIGIN, perf_dir: Path | None = None) -> Workload:
    frame = pd.read_csv(path)
    cache: dict[tuple[str, int], float] = {}
    work = [cache.setdefault((a, int(b)), pollux_samples_to_target(a, int(b), perf_dir))
            for a, b in zip(frame.application, frame.batch_size)]
    return Workload.from_columns(f"pollux-{path.stem}", origin + frame.time.to_numpy(),
                                 frame.num_replicas.to_numpy(), frame.application.astype(str).tolist(),
                                 work=np.asarray(work))


def load_alibaba(path: Path, origin: float = DEFAULT_ORIGIN) -> Workload:
    frame = pd.read_csv(path)
    frame = frame[frame.num_gpu >= 1]
    began = frame.scheduled_time.fillna(frame.creation_time)
    duration = (frame.deletion_time - began).to_numpy(dtype=np.float64)
    keep = duration > 0
    frame = frame[keep]
    return Workload.from_columns("alibaba", origin + frame.creation_time.to_numpy(dtype=np.float64),
                                 frame.num_gpu.to_numpy(), [""] * len(frame), duration_s=duration[keep])


def load_trace(path: str | Path, origin: float = DEFAULT_ORIGIN) -> Workload:
    """Read any shared trace, recognised by its file name."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith(".trace"):
        return load_gavel(path, origin)
    if "philly" in name and name.endswith(".csv"):
        return load_philly(path)
    if name.startswith("workload-") and name.endswith(".csv"):
        return load_pollux(path, origin)
    if "alibaba" in name or "pod_list" in name:
        return load_alibaba(path, origin)
    raise ValueError(f"{path}: unknown trace (expected Philly CSV, Gavel .trace, Pollux workload-N.csv, "
                     "Alibaba pod list, or use `whatif` for sacct output)")


def default_trace() -> Path:
    """The fast default: Pollux's workload-1 (160 jobs over about 8 h)."""
    return shared_data_dir() / "job_traces" / "pollux_workloads" / "workload-1.csv"

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

from collections.abc import Callable

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.core.green_options import MAX_GPUS
from slurm_green.sim.workload import Workload

#: Monday 2023-01-02 00:00 UTC: where relative traces start, inside the 2023 carbon data.
DEFAULT_ORIGIN = 1672617600.0
#: A job longer than a year is a logging or unit error, not a job (Philly's longest ran 54 days).
MAX_DURATION_S = 365 * 86400.0


class TraceError(ValueError):
    """A file that cannot be read as a trace: unknown kind, unreadable, missing columns, or no job in it."""


class TraceWarning(UserWarning):
    """Rows of a trace dropped while reading it; the message counts them by reason."""


def read_table(path: Path, columns: tuple[str, ...], **read_csv: object) -> pd.DataFrame:
    """``pd.read_csv`` with a :class:`TraceError` naming the file for an empty, unparsable or incomplete one."""
    try:
        frame = pd.read_csv(path, **read_csv)
    except pd.errors.EmptyDataError:
        raise TraceError(f"{path}: empty file") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not a readable table: {' '.join(str(exc).split())}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)} (has {', '.join(map(str, frame.columns))})")
    return frame


def numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A column as floats; text that is not a number becomes NaN (then counted as unreadable)."""
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)


def kept_rows(path: Path, reasons: list[tuple[str, np.ndarray]]) -> np.ndarray:
    """Rows that none of ``reasons`` (why, mask of bad rows) applies to.

    The dropped rows are counted by the first reason that applies, in one
    :class:`TraceWarning`: a replay of a trace that lost jobs says how many and why.
    """
    total = len(reasons[0][1])
    keep = np.ones(total, dtype=bool)
    counts = []
    for why, bad in reasons:
        hit = int((bad & keep).sum())
        if hit:
            counts.append(f"{hit} {why}")
        keep &= ~bad
    if counts:
        warnings.warn(f"{path.name}: dropped {total - int(keep.sum())} of {total} rows: {', '.join(counts)}",
                      TraceWarning, stacklevel=3)
    return keep


def _size_reasons(submit: np.ndarray, gpus: np.ndarray, size: np.ndarray, size_name: str,
                  longest: float = np.inf) -> list[tuple[str, np.ndarray]]:
    return [
        ("with a missing or unreadable value", ~(np.isfinite(submit) & np.isfinite(gpus) & np.isfinite(size))),
        ("asking for no GPUs", gpus < 1),
        # A count no int64 holds would wrap (1e30 read as one GPU), and a fraction be cut (2.7 as 2).
        (f"asking for a fractional count of GPUs or over {MAX_GPUS}", (gpus != np.floor(gpus)) | (gpus > MAX_GPUS)),
        (f"with a {size_name} of 0 or less", size <= 0),
        ("longer than a year", size > longest),
    ]


def load_philly(path: Path) -> Workload:
    frame = read_table(path, ("timestamp", "duration", "num_gpus"))
    # Naive stamps are UTC (the trace's); one written with an offset is the instant it names.
    submit = pd.to_datetime(frame.timestamp, errors="coerce", format="mixed", utc=True)
    epoch = (submit - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    duration, gpus = numbers(frame, "duration"), numbers(frame, "num_gpus")
    keep = kept_rows(path, _size_reasons(epoch, gpus, duration, "duration", MAX_DURATION_S))
    return Workload.from_columns("philly", epoch[keep], gpus[keep], [""] * int(keep.sum()), duration_s=duration[keep])


def load_gavel(path: Path, origin: float = DEFAULT_ORIGIN) -> Workload:
    names = ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time", "scale_factor")
    frame = read_table(path, names, sep="\t", header=None, names=list(names))
    arrival, gpus, steps = numbers(frame, "arrival_time"), numbers(frame, "scale_factor"), numbers(frame, "total_steps")
    keep = kept_rows(path, _size_reasons(arrival, gpus, steps, "step count"))
    return Workload.from_columns("gavel", origin + arrival[keep], gpus[keep],
                                 frame.job_type.astype(str)[keep].tolist(), work=steps[keep])


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
    frame = read_table(path, ("time", "application", "num_replicas", "batch_size"))
    time, gpus, batch = numbers(frame, "time"), numbers(frame, "num_replicas"), numbers(frame, "batch_size")
    keep = kept_rows(path, [*_size_reasons(time, gpus, batch, "batch size"),
                            ("with a batch size below 1 or fractional", (batch < 1) | (batch != np.floor(batch)))])
    apps = frame.application.astype(str)[keep].tolist()
    cache: dict[tuple[str, int], float] = {}
    work = [cache.setdefault((a, int(b)), pollux_samples_to_target(a, int(b), perf_dir))
            for a, b in zip(apps, batch[keep])]
    return Workload.from_columns(f"pollux-{path.stem}", origin + time[keep], gpus[keep], apps, work=np.asarray(work))


def load_alibaba(path: Path, origin: float = DEFAULT_ORIGIN) -> Workload:
    frame = read_table(path, ("num_gpu", "creation_time", "scheduled_time", "deletion_time"))
    frame = frame[numbers(frame, "num_gpu") >= 1]  # CPU-only tasks are not GPU jobs: left out by design
    created = numbers(frame, "creation_time")
    began = np.where(np.isfinite(numbers(frame, "scheduled_time")), numbers(frame, "scheduled_time"), created)
    duration = numbers(frame, "deletion_time") - began
    gpus = numbers(frame, "num_gpu")  # whole GPUs; a share of one (gpu_milli) still takes one
    keep = kept_rows(path, _size_reasons(created, gpus, duration, "duration", MAX_DURATION_S))
    return Workload.from_columns("alibaba", origin + created[keep], gpus[keep], [""] * int(keep.sum()),
                                 duration_s=duration[keep])


def load_trace(path: str | Path, origin: float = DEFAULT_ORIGIN) -> Workload:
    """Read any shared trace, recognised by its file name; :class:`TraceError` when it holds no job."""
    path = Path(path)
    workload = _reader(path)(path, origin)
    if not len(workload):
        raise TraceError(f"{path}: no jobs to replay")
    return workload


def _reader(path: Path) -> Callable[[Path, float], Workload]:
    """The loader of ``path``'s trace format, told by its name; each takes (path, origin)."""
    name = path.name.lower()
    if name.endswith(".trace"):
        return load_gavel
    if "philly" in name and name.endswith(".csv"):
        return lambda p, _origin: load_philly(p)  # absolute timestamps: no origin
    if name.startswith("workload-") and name.endswith(".csv"):
        return load_pollux
    if "alibaba" in name or "pod_list" in name:
        return load_alibaba
    raise TraceError(f"{path}: unknown trace (expected a Philly CSV, a Gavel .trace, a Pollux workload-N.csv or "
                     "an Alibaba pod list, recognised by the file name; use `whatif` for sacct output)")


def default_trace() -> Path:
    """The fast default: Pollux's workload-1 (160 jobs over about 8 h)."""
    return shared_data_dir() / "job_traces" / "pollux_workloads" / "workload-1.csv"

"""Readers for the measured profiles in ``perf_energy/`` (see PROVENANCE.md, section C).

Each reader returns plain rows in the units the fits use, so the fitting code never
touches file formats and the hot path never touches pandas.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from pathlib import Path

import pandas as pd

# Maximum board power limit of each GPU in the Zeus sweeps: the cap fraction is power_limit / this.
ZEUS_MAX_LIMIT_W = {"v100": 250.0, "a40": 300.0, "p100": 250.0}
POLLUX_APPS = ("cifar10", "imagenet", "deepspeech2", "ncf", "bert", "yolov3")
GAVEL_GPUS = ("v100", "p100", "k80")
#: The files a fit reads, relative to ``perf_energy/`` (globs): their hash names the data in the parameters.
FIT_INPUTS = ("gavel/simulation_throughputs.json", "zeus/summary_power_*.csv", "pollux/*/placements.csv",
              "pollux/*/scalability.csv", "perseus/stage_profile_*.csv", "h100/cap_sweep.csv",
              "h100/colocate_timeslice.csv", "h100/colocate_mps.csv")


@dataclass(frozen=True, slots=True)
class ScalingRow:
    """One measured multi-GPU point: ``throughput`` in the job's units/s with ``gpus`` over ``nodes``."""

    gpus: int
    nodes: int
    throughput: float


@dataclass(frozen=True, slots=True)
class CapRow:
    """One Zeus point: cap fraction, seconds per epoch and average board power (W)."""

    cap_fraction: float
    time_s: float
    power_w: float


_GAVEL_KEY = re.compile(r"^\('(.*)', (\d+)\)$")


def _gavel_key(key: str) -> tuple[str, int]:
    """Gavel keys are Python tuple reprs, ``"('ResNet-50 (batch size 64)', 1)"``."""
    match = _GAVEL_KEY.match(key)
    if match is None:
        raise ValueError(f"unexpected Gavel key {key!r}")
    return match.group(1), int(match.group(2))


@lru_cache(maxsize=4)
def gavel(perf: Path) -> dict[str, dict[tuple[str, int], dict[str | tuple[str, int], Any]]]:
    """``{worker_type: {(job_type, scale_factor): {"null": tput, (other, 1): [self, other]}}}``
    (the values as JSON has them: a number alone, a pair shared)."""
    raw = json.loads((perf / "gavel" / "simulation_throughputs.json").read_text())
    return {
        worker: {
            _gavel_key(key): {("null" if k == "null" else _gavel_key(k)): v for k, v in inner.items()}
            for key, inner in entries.items()
        }
        for worker, entries in raw.items()
    }


def gavel_job_types(perf: Path) -> list[str]:
    return sorted({job for job, _ in gavel(perf)["v100"]})


def gavel_scaling_rows(perf: Path, gpu: str, job_type: str) -> list[ScalingRow]:
    """Consolidated rows are on one server; ``*_unconsolidated`` put each GPU on its own server."""
    rows = []
    for worker, spread in ((gpu, False), (f"{gpu}_unconsolidated", True)):
        for (job, scale), inner in gavel(perf).get(worker, {}).items():
            tput = float(inner.get("null", 0.0))
            if job == job_type and tput > 0 and not (spread and scale == 1):
                rows.append(ScalingRow(scale, scale if spread else 1, tput))
    return sorted(rows, key=lambda r: (r.nodes > 1, r.gpus))


def gavel_pairs(perf: Path, gpu: str) -> dict[tuple[str, str], tuple[float, float]]:
    """Single-GPU co-location: ``(a, b) -> (tput_a_when_shared, tput_b_when_shared)``, steps/s."""
    pairs = {}
    for (job, scale), inner in gavel(perf)[gpu].items():
        if scale != 1:
            continue
        for other, value in inner.items():
            if other != "null":
                pairs[(job, other[0])] = (float(value[0]), float(value[1]))
    return pairs


def pollux_placements(perf: Path, app: str) -> pd.DataFrame:
    """Rows with ``gpus``, ``nodes``, ``local_bsz``, ``step_time`` from both Pollux files."""
    base = perf / "pollux" / app
    placed = pd.read_csv(base / "placements.csv", dtype={"placement": str})
    placed["gpus"] = placed["placement"].map(lambda p: sum(int(c) for c in p))
    placed["nodes"] = placed["placement"].str.len()
    placed["source"] = "placements"
    scal = pd.read_csv(base / "scalability.csv").rename(columns={"num_replicas": "gpus", "num_nodes": "nodes"})
    scal["source"] = "scalability"
    cols = ["gpus", "nodes", "local_bsz", "step_time", "source"]
    return pd.concat([placed[cols], scal[cols]], ignore_index=True)


def pollux_local_bsz(frame: pd.DataFrame) -> int:
    """The per-GPU batch the model is fitted at: the median of those measured in both files."""
    both = sorted(set(frame.loc[frame.source == "placements", "local_bsz"])
                  & set(frame.loc[frame.source == "scalability", "local_bsz"]))
    return int(both[len(both) // 2])


def pollux_scaling_rows(perf: Path, app: str, source: str) -> list[ScalingRow]:
    """Samples/s at the app's fitted local batch; ``source`` is "placements" or "scalability"."""
    frame = pollux_placements(perf, app)
    bsz = pollux_local_bsz(frame)
    sel = frame[(frame.local_bsz == bsz) & (frame.source == source)]
    grouped = sel.groupby(["gpus", "nodes"], as_index=False)["step_time"].median()
    return [ScalingRow(int(r.gpus), int(r.nodes), float(r.gpus * bsz / r.step_time)) for r in grouped.itertuples()]


def zeus_summary(perf: Path, gpu: str) -> dict[tuple[str, int], list[CapRow]]:
    """``(network, batch_size) -> rows by cap``, averaged over datasets and optimizers."""
    frame = pd.read_csv(perf / "zeus" / f"summary_power_{gpu}.csv")
    mean = frame.groupby(["network", "batch_size", "power_limit"], as_index=False)[
        ["time_per_epoch", "average_power"]].mean()
    out: dict[tuple[str, int], list[CapRow]] = {}
    for (net, bs), group in mean.groupby(["network", "batch_size"]):
        out[(str(net), int(bs))] = [
            CapRow(r.power_limit / ZEUS_MAX_LIMIT_W[gpu], float(r.time_per_epoch), float(r.average_power))
            for r in group.sort_values("power_limit").itertuples()
        ]
    return out


def zeus_profiles(perf: Path) -> dict[tuple[str, str, int], list[CapRow]]:
    """``(gpu, network, n_gpus) -> per-cap windows``: seconds per window and mean power per GPU."""
    out: dict[tuple[str, str, int], list[CapRow]] = {}
    for path in sorted((perf / "zeus" / "profile_data").glob("*.csv")):
        gpu, net, ids = path.stem.split("+")
        frame = pd.read_csv(path)
        energy_cols = [c for c in frame.columns if c.endswith("_energy")]
        rows = []
        for r in frame.itertuples():
            limit = float(str(r.window_name).rsplit("_", 1)[1])
            per_gpu_w = sum(getattr(r, c) for c in energy_cols) / len(energy_cols) / r.elapsed_time
            rows.append(CapRow(limit / ZEUS_MAX_LIMIT_W[gpu.lower()], float(r.elapsed_time), per_gpu_w))
        out[(gpu.lower(), net, len(energy_cols))] = sorted(rows, key=lambda c: c.cap_fraction)
    return out


def perseus(perf: Path) -> dict[str, pd.DataFrame]:
    """Per GPU: SM clock (MHz) -> time (s) and energy (J) of one micro-batch through all stages."""
    out = {}
    for path in sorted((perf / "perseus").glob("stage_profile_*.csv")):
        gpu = path.stem.split("+")[1].removesuffix("_bf16")
        frame = pd.read_csv(path)
        out[gpu] = frame.groupby("frequency", as_index=False)[["time", "energy"]].sum()
    return out


def h100_sweep(perf: Path) -> dict[str, list[CapRow]]:
    """``workload -> rows by cap`` of the H100 cap sweep (see ``cap_sweep``)."""
    return cap_sweep(perf / "h100" / "cap_sweep.csv")


def cap_sweep(path: Path) -> dict[str, list[CapRow]]:
    """``workload -> rows by cap`` of a sweep in ``cap_sweep.py``'s format (the shared H100's, or one
    made on another board); cap fraction of the highest limit swept (the board's maximum),
    seconds per training step, average board power."""
    frame = pd.read_csv(path)
    top = float(frame["cap_w"].max())
    return {
        str(workload): [CapRow(float(r.cap_w) / top, 1.0 / float(r.steps_per_s), float(r.avg_power_w))
                        for r in group.sort_values("cap_w").itertuples()]
        for workload, group in frame.groupby("workload")
    }


def h100_board_w(perf: Path) -> tuple[float, float]:
    """(lowest, highest) power limit of the H100 sweep: the board's range (PROVENANCE: 200-700 W)."""
    caps = pd.read_csv(perf / "h100" / "cap_sweep.csv")["cap_w"]
    return float(caps.min()), float(caps.max())


def h100_idle_w(perf: Path) -> float:
    """The H100's measured idle board power (the ``idle`` row of the co-location run)."""
    frame = pd.read_csv(perf / "h100" / "colocate_timeslice.csv")
    return float(frame.loc[frame["mode"] == "idle", "avg_power_w"].iloc[0])


@dataclass(frozen=True, slots=True)
class PairRow:
    """One measured pair on the H100: steps/s and power (W) of each alone, both shared, the board's."""

    a: str
    b: str
    alone_a: float
    alone_b: float
    power_a_w: float
    power_b_w: float
    shared_a: float
    shared_b: float
    pair_w: float


H100_PAIR_FILES = {"timeslice": ("colocate_timeslice.csv", "pair-timeslice"), "mps": ("colocate_mps.csv", "pair-mps")}


def h100_pairs(perf: Path, mechanism: str = "timeslice") -> list[PairRow]:
    """The H100 pairs under ``mechanism`` (``timeslice``: what gres/shard gives; ``mps``), each
    job's rate and power alone from the time-slicing run's ``alone`` rows (the MPS run has none)."""
    solo = pd.read_csv(perf / "h100" / "colocate_timeslice.csv")
    alone = {str(r.a): (float(r.a_steps_per_s), float(r.avg_power_w)) for r in solo[solo["mode"] == "alone"].itertuples()}
    name, mode = H100_PAIR_FILES[mechanism]
    frame = pd.read_csv(perf / "h100" / name)
    return [PairRow(str(r.a), str(r.b), alone[str(r.a)][0], alone[str(r.b)][0], alone[str(r.a)][1], alone[str(r.b)][1],
                    float(r.a_steps_per_s), float(r.b_steps_per_s), float(r.avg_power_w))
            for r in frame[frame["mode"] == mode].itertuples()]


def h100_colocation(perf: Path, mechanism: str = "timeslice") -> tuple[dict[str, float], dict[tuple[str, str], tuple[float, float]]]:
    """Each workload's steps/s alone, and ``(a, b) -> (a's, b's steps/s)`` when both share the GPU."""
    rows = h100_pairs(perf, mechanism)
    alone = {r.a: r.alone_a for r in rows} | {r.b: r.alone_b for r in rows}
    return alone, {(r.a, r.b): (r.shared_a, r.shared_b) for r in rows}


def h100_steps_per_s(perf: Path) -> dict[str, float]:
    """Each H100 workload's steps/s at the highest limit (uncapped)."""
    return {w: 1.0 / rows[-1].time_s for w, rows in h100_sweep(perf).items()}


def perseus_top_time_s(perf: Path) -> dict[str, float]:
    """Per GPU: seconds per GPT-3 micro-batch through all stages at the highest SM clock."""
    return {gpu: float(frame.sort_values("frequency")["time"].iloc[-1]) for gpu, frame in perseus(perf).items()}


def data_sha256(perf: Path) -> str:
    """A hash of every file a fit reads (names and bytes): which data the parameters came from."""
    digest = hashlib.sha256()
    for pattern in FIT_INPUTS:
        for path in sorted(perf.glob(pattern)):
            digest.update(str(path.relative_to(perf)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]

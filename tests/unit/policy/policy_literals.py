"""Literal snapshots, forecasts and a tiny closed-form model for policy tests (imported by them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.core.cluster import ClusterSnapshot, Job, Node
from slurm_green.core.decision import DecisionContext, DecisionMemo
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.models import Config, ModelRegistry

T0 = pd.Timestamp("2023-06-01T00:00:00Z")
NOW = T0.timestamp()
HOUR = 3600.0


@dataclass(frozen=True)
class SublinearModel:
    """Throughput g^0.8 (scaling loses efficiency), slower under a cap; power g * 250 W * cap.

    So more GPUs cost more energy per unit of work, and lower caps cost less.
    """

    job_type: str = "literal"

    def throughput(self, config: Config) -> float:
        return config.gpus ** 0.8 * (0.6 + 0.4 * config.cap_fraction)

    def power_w(self, config: Config) -> float:
        return config.gpus * 250.0 * config.cap_fraction


class LiteralModels:
    revision = 0

    def board_power_w(self, gpu: str | None = None) -> tuple[float, float]:
        return 50.0, 250.0

    def for_job(self, job_type: str | None, gpu: str | None = None) -> SublinearModel:
        return SublinearModel()

    def allowed_caps(self, gpu: str | None = None, *, accept_cap: bool = True, floor: float = 0.0,
                     step: float = 0.05) -> tuple[float, ...]:
        """Every ``step`` from ``floor`` (at least 0.3, this board's minimum) to 1."""
        lowest = max(0.3, floor)
        return tuple(sorted({round(lowest, 4), 1.0} | {round(k * step, 4) for k in range(1, round(1 / step))
                                                         if k * step > lowest}))


def signal(values: list[float], start: pd.Timestamp = T0) -> CarbonSignal:
    index = pd.date_range(start, periods=len(values), freq="h")
    return CarbonSignal.from_series(pd.Series(np.asarray(values, dtype=float), index=index))


def nodes(count: int, gpus: int = 8, used: dict[int, tuple[int, ...]] | None = None,
          per_switch: int = 4) -> tuple[Node, ...]:
    used = used or {}
    return tuple(Node(f"n{i}", gpus_total=gpus, gpus_allocated=len(used.get(i, ())),
                      gpu_indices_allocated=used.get(i, ()), features=(f"switch=sw{i // per_switch}",))
                 for i in range(count))


def pending(job_id: int, gpus: int = 1, runtime_h: float = 1.0, flex_h: float = 6.0, low: int | None = None,
            high: int | None = None, cap: bool = True, submit: float = NOW, gpus_per_node: int = 8) -> Job:
    options = GreenOptions(max_delay_s=flex_h * HOUR, gpus_min=low, gpus_max=high if low else None,
                           accept_cap=cap, deadline=submit + flex_h * HOUR)
    per_node, count = (gpus, 1) if gpus <= gpus_per_node else (gpus_per_node, gpus // gpus_per_node)
    return Job(job_id, name="literal", submit_time=submit, time_limit_s=runtime_h * HOUR,
               gpus_per_node=per_node, num_nodes=count, admin_comment=format_marker(options))


def snapshot(jobs: list[Job], node_list: tuple[Node, ...]) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=NOW, jobs=tuple(jobs), nodes=node_list)


def context(snap: ClusterSnapshot, forecast: CarbonForecast | None, models: ModelRegistry,
            now: float = NOW) -> DecisionContext:
    """A one-off decision's context: a fresh memo, as a controller's first tick has."""
    return DecisionContext(snap, forecast, models, now, DecisionMemo())

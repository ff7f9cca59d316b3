"""A running job's model, corrected by how the job was measured to scale.

The models predict a job type's throughput by GPU count from profiles of other runs; a
job on this site may scale worse (a slower interconnect, a smaller batch, a data loader
that cannot keep up). An elastic job that ran at two GPU counts has said, through its
helper's reports, how fast it went at each (``core.progress.MeasuredRate``). The reports
are in the job's own units, which the models do not share, so only the ratio is used:
the measured speedup from the smallest count it ran at to each larger one, over the
modelled speedup between the same two (each at the frozen share it ran with). Below 1
the job scales worse than modelled, and its model is scaled down by that factor from
there on.

**Only downward.** The reports are written by the job's user. The factor is capped at 1
and never rises with the GPU count, so a report can make more GPUs look *less* worth to
its own job (grown later, shrunk sooner: ``policy/running.py``), never more: it can make its
job the one shrunk in another's place, never another job shrunk or denied growth. A job
that scales better than modelled keeps its model. Between two measured counts the factor is interpolated linearly; beyond the largest it
stays at the last measured one (nothing says it gets better, and guessing it worse would
be a guess).
"""

from __future__ import annotations

from collections.abc import Sequence

from slurm_green.core.models import Config, JobModel
from slurm_green.core.progress import MeasuredRate
from slurm_green.models.freezing import frozen_throughput

#: The smallest factor: a report can say its job scales a hundred times worse than modelled, no
#: worse (its rates are any finite numbers a user wrote; a rate of zero would divide by zero).
FLOOR = 0.01


def scaling_factors(model: JobModel, measured: Sequence[MeasuredRate]) -> tuple[tuple[int, float], ...]:
    """(GPU count, factor <= 1) from the job's smallest measured count up, the factor never
    rising; empty with fewer than two counts in one unit. One report at a count is enough: a
    job is often resized soon after it starts, and a report that caught a pause (a checkpoint,
    an evaluation pass) can only make its own job look to scale worse."""
    rates = sorted((m for m in measured if m.per_s > 0 and m.gpus >= 1), key=lambda m: m.gpus)
    if not rates:
        return ()
    base = rates[0]
    rates = [m for m in rates if m.unit == base.unit]
    if len(rates) < 2:
        return ()
    modelled_base = frozen_throughput(model, Config(base.gpus), base.frozen)
    if modelled_base <= 0:
        return ()
    points, factor = [(base.gpus, 1.0)], 1.0
    for m in rates[1:]:
        modelled = frozen_throughput(model, Config(m.gpus), m.frozen)
        if modelled <= 0:
            continue
        factor = max(FLOOR, min(factor, (m.per_s / base.per_s) / (modelled / modelled_base)))
        points.append((m.gpus, factor))
    return tuple(points) if len(points) > 1 else ()


def factor_at(points: Sequence[tuple[int, float]], gpus: int) -> float:
    """The correction at ``gpus``: 1 up to the first point, linear between points, the last beyond."""
    if not points or gpus <= points[0][0]:
        return 1.0
    for (low, f_low), (high, f_high) in zip(points, points[1:]):
        if gpus <= high:
            return f_low + (f_high - f_low) * (gpus - low) / (high - low)
    return points[-1][1]


class MeasuredScaling:
    """``model`` with its throughput scaled by ``points`` (``scaling_factors``); power as modelled,
    so a GPU that waits on its peers costs what the model says and work per joule falls."""

    __slots__ = ("job_type", "model", "points")

    def __init__(self, model: JobModel, points: tuple[tuple[int, float], ...]) -> None:
        self.job_type, self.model, self.points = model.job_type, model, points

    def throughput(self, config: Config) -> float:
        return self.model.throughput(config) * factor_at(self.points, config.gpus)

    def power_w(self, config: Config) -> float:
        return self.model.power_w(config)

    def said(self) -> str:
        """What a decision's reason adds."""
        last_gpus, last = self.points[-1]
        return f"; scaled by x{last:.2f} at {last_gpus} GPUs as measured (its reports at {self.points[0][0]}" \
               f"-{last_gpus} GPUs)"


def corrected(model: JobModel, measured: Sequence[MeasuredRate]) -> JobModel:
    """``model``, or ``MeasuredScaling`` of it when the job's reports measured it scaling worse."""
    points = scaling_factors(model, measured)
    return MeasuredScaling(model, points) if any(f < 1 - 1e-9 for _, f in points) else model

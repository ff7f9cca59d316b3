"""Typed changes to jobs (pending ones; a running elastic job's checkpoint and requeue), and
their typed outcomes.

A backend turns each action into a mechanism (``scontrol update`` for Slurm, a state
change for the simulator) and answers with an ``ActionResult``, never a traceback,
so that one failed action cannot stop the rest of a plan.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SetStartTime:
    """Earliest start (Slurm ``StartTime``); ``start`` is POSIX seconds."""

    job_id: int
    start: float


@dataclass(frozen=True, slots=True)
class SetGpus:
    """GPUs per node (enacted as ``Gres=gpu[:type]:N``) and, optionally, the node count."""

    job_id: int
    gpus_per_node: int
    num_nodes: int | None = None


@dataclass(frozen=True, slots=True)
class SetNodes:
    """Pin the job to these nodes (``ReqNodeList``): how a placement decision is enacted."""

    job_id: int
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetTimeLimit:
    """Slurm ``TimeLimit``, whole minutes: raised for a job that a decision slows (a power cap,
    fewer GPUs, a shared GPU), so that Slurm does not stop it at the limit its user set for
    the configuration asked (``controller/planner.py``). Raising a limit needs Slurm's
    Operator level, which the controller's account has."""

    job_id: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Hold:
    job_id: int


@dataclass(frozen=True, slots=True)
class Release:
    job_id: int


@dataclass(frozen=True, slots=True)
class SetDecision:
    """Write the controller's signed decision token into the job's decision field."""

    job_id: int
    token: str


@dataclass(frozen=True, slots=True)
class SetGpuFreq:
    """GPU clocks for the job's steps (Slurm ``TresFreq``, e.g. ``gpu:medium``): how a cap
    decision is enacted at sites that use ``--gpu-freq`` instead of NVML power limits."""

    job_id: int
    tres_freq: str


@dataclass(frozen=True, slots=True)
class ShareGpus:
    """Run the job on GPUs it shares with ``with_job`` (co-location, decided by a policy's
    ``JobDecision.share_with``). Slurm enacts it with ``gres/shard`` requests pinned to the
    other job's node; the simulator starts the job on the other job's GPUs. Idempotent:
    a backend answers success without change when the sharing is already in force."""

    job_id: int
    with_job: int


@dataclass(frozen=True, slots=True)
class SignalJob:
    """Send a running job's steps ``signal`` (``scancel --signal``; ``batch``: the batch
    script's shell instead, ``--batch``): how the controller asks an elastic job to write
    a checkpoint before it is requeued at another size (``controller/resize.py``)."""

    job_id: int
    signal: str = "USR2"
    batch: bool = False


@dataclass(frozen=True, slots=True)
class RequeueHold:
    """Stop a running job and put it back in the queue, held (``scontrol requeuehold``), so
    its size can change before it starts again from its checkpoint; a ``Release`` follows."""

    job_id: int


@dataclass(frozen=True, slots=True)
class SetNice:
    job_id: int
    nice: int


Action = (SetStartTime | SetGpus | SetNodes | SetTimeLimit | Hold | Release | SetDecision | SetGpuFreq | SetNice
          | ShareGpus | SignalJob | RequeueHold)


class ActionError(str, enum.Enum):
    """Why an action failed, in terms a controller can act on."""

    JOB_GONE = "job_gone"
    NOT_PENDING = "not_pending"
    PERMISSION_DENIED = "permission_denied"
    UNREACHABLE = "unreachable"
    INVALID = "invalid"
    OTHER = "other"
    #: Not tried: another action for the same job failed first, and this one depends on it
    #: (a start without its decision token, GPU count or clocks in force).
    BLOCKED = "blocked"


@dataclass(frozen=True, slots=True)
class ActionResult:
    action: Action
    error: ActionError | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

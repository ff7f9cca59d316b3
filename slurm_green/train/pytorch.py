"""The PyTorch adapter: a plain training loop gains checkpoint-and-resume at any world size,
progress reports and opt-in layer freezing with three lines (``pip install slurm-green[train]``)::

    green = GreenTrainer(model, optimizer, global_batch=256, checkpoint_dir="ckpt")  # resumes if it can
    for x, y in green.batches(train_set, steps=10_000, micro_batch=64):               # this rank's share
        green.backward(loss_fn(model(x), y))                                           # not loss.backward()

``GreenTrainer`` owns what a restart at another size touches, so the user's loop need not:

* **The data order** (``plan.BatchPlan``): one stream of samples for the whole job, an
  optimizer step takes the next ``global_batch``, each rank its share in micro-batches of
  ``micro_batch``. At a smaller world each rank accumulates more micro-batches; the global
  batch, and so the training, stays the same (``on_resize="scale"`` scales the global
  batch and the learning rates with the world instead: Goyal et al.'s linear rule).
* **The optimizer step.** ``backward`` weighs the micro-batch's mean loss by its share of
  the global batch; at the step's end the gradients are summed over the ranks
  (``torch.distributed``, any backend), then ``optimizer.step()``. Do not wrap the model
  in DistributedDataParallel: its own averaging would count twice (the adapter's
  all-reduce does not overlap the backward pass as DDP's does).
* **Checkpoints** on a signal (``signals.CheckpointSignal``), at the last step, or when
  ``checkpoint()`` is called: model, optimizer (and scheduler), steps and samples done, the
  global batch and world it ran at, the frozen prefix and the freezing histories, the
  random generators' states. Written whole (``checkpoint.atomic_write``) by rank 0 and
  reported (``ProgressReporter.update(..., checkpointed=True)``). The request is all-reduced
  at every step's end, so every rank answers it at the same step. SIGUSR1 (Slurm's
  warning, ``sbatch --signal=USR1@120``): checkpoint, and the loop ends with
  ``interrupted`` set. SIGUSR2 (the controller's resize): checkpoint and train on; the
  controller may then requeue the job and restart it at another size from that checkpoint.
* **Progress reports** (``progress.ProgressReporter``, rank 0): samples done across
  restarts and the frozen share, where the controller reads them.
* **Freezing** (``Freezing``, opt-in): every ``check_every`` steps each layer's mean
  gradient norm joins its history and ``freeze.frozen_prefix`` decides how many front
  layers to freeze (never beyond ``max_share``). A frozen layer's parameters stop
  requiring gradients; with the input not requiring them either, autograd records
  nothing for the frozen prefix (no graph, no saved activations, no backward: what
  ``torch.no_grad`` would give, with nothing to wrap). The optimizer keeps its groups:
  PyTorch's optimizers skip a parameter without a gradient.

Exact equivalence across world sizes needs a model whose result does not depend on how
the batch is cut (no BatchNorm) and no randomness in the step (dropout draws differ per
rank); otherwise a resumed run is equivalent in distribution only. A Lightning callback
is not provided. PyTorch is imported here only: ``slurm_green.train`` works without it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from slurm_green.train.checkpoint import atomic_write
from slurm_green.train.freeze import frozen_prefix, frozen_share
from slurm_green.train.plan import BatchPlan, accumulation
from slurm_green.train.progress import ProgressReporter
from slurm_green.train.signals import CheckpointSignal, Request

log = logging.getLogger(__name__)

CHECKPOINT = "green.pt"
FORMAT = 1
RESIZES = ("accumulate", "scale")
_LEVELS = (None, Request.KEEP_GOING, Request.STOP)  # all-reduced by MAX: stop wins


@dataclass(frozen=True)
class Freezing:
    """Opt-in layer freezing: ``frozen_prefix``'s ``max_share``, ``threshold`` and ``window``,
    checked every ``check_every`` optimizer steps on ``layers`` (front to back; default: an
    ``nn.Sequential``'s children that have parameters) weighted by ``costs`` (default 1 each).

    Why ``threshold`` 0.2: at 0.1 nothing froze in 300-600 steps of any model tried (the
    digits MLP on CPU, ResNet-18 and ResNet-50 on an H100), while 0.2 froze the MLP and
    ResNet-50 for at most 0.2 points of held-out accuracy; 0.35 cost ResNet-50 2 points
    (docs/training.md)."""

    max_share: float = 0.5
    threshold: float = 0.2
    window: int = 3
    check_every: int = 20
    layers: Sequence[nn.Module] | None = None
    costs: Sequence[float] | None = None


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the world size (0 and 1 outside ``torch.distributed``)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class GreenTrainer:
    """See the module docstring. ``global_batch``: samples per optimizer step over all ranks
    (a checkpoint's own value wins on resume); ``seed``: the data order's; ``scheduler``: a
    learning-rate scheduler stepped after each optimizer step and checkpointed; ``reporter``:
    by default ``ProgressReporter.from_environment()`` on rank 0 (off outside a Slurm job)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, global_batch: int,
                 checkpoint_dir: str | Path, seed: int = 0, scheduler: Any = None,
                 freeze: Freezing | None = None, on_resize: str = "accumulate",
                 reporter: ProgressReporter | None = None, signal: CheckpointSignal | None = None) -> None:
        if on_resize not in RESIZES:
            raise ValueError(f"on_resize {on_resize!r}: expected one of {', '.join(RESIZES)}")
        self.model, self.optimizer, self.scheduler, self.seed = model, optimizer, scheduler, seed
        self.path = Path(checkpoint_dir) / CHECKPOINT
        self.rank, self.world = rank_and_world()
        self.global_batch = global_batch
        self.step = 0        # optimizer steps done, across restarts
        self.samples = 0     # samples done, across restarts: the position in the data stream
        self.interrupted = False
        self.signal = signal or CheckpointSignal()
        self.reporter = reporter if reporter is not None else \
            (ProgressReporter.from_environment() if self.rank == 0 else None)
        self.freeze = freeze
        self.layers = _layers(model, freeze) if freeze else []
        self.frozen = 0
        self.histories: list[list[float]] = [[] for _ in self.layers]
        self._norm_sums: list[Any] = [0.0] * len(self.layers)  # tensors: read at a check, not every step
        self._weight = 0.0
        if self.path.exists():
            self._resume(on_resize)
        if self.global_batch < self.world:
            raise ValueError(f"global batch {self.global_batch} < world size {self.world}: every rank needs a sample")

    # ---- the loop ----

    def batches(self, dataset: Any, steps: int, micro_batch: int, **loader_args: Any) -> Iterator[Any]:
        """This rank's micro-batches (collated by a ``DataLoader`` with ``loader_args``) until
        ``steps`` optimizer steps are done or a stop signal (SIGUSR1) has been answered by a
        checkpoint; a keep-going signal (SIGUSR2) is answered by a checkpoint and training goes on."""
        plan = BatchPlan(len(dataset), micro_batch, self.seed)
        if self.reporter is not None:
            self.reporter.total = steps * self.global_batch  # the samples done when the last step is
        loader = DataLoader(dataset, batch_sampler=_Sampler(self, plan, steps), **loader_args)
        micro = iter(loader)
        self.signal.install()
        try:
            while self.step < steps:
                for indices in plan.micro_batches(self.samples, self.global_batch, self.rank, self.world):
                    self._weight = len(indices) / self.global_batch
                    yield next(micro)
                self._finish_step()
                request = self._signalled()
                if request is Request.STOP:
                    self.interrupted = True
                    log.info("stop signal: checkpoint at step %d, stopping", self.step)
                    self.checkpoint()
                    return
                if request is Request.KEEP_GOING and self.step < steps:  # at the last step: the final one serves
                    log.info("keep-going signal: checkpoint at step %d, training on", self.step)
                    self.checkpoint()
            self.checkpoint()
        finally:
            self.signal.uninstall()

    def backward(self, loss: torch.Tensor) -> None:
        """Back-propagate a micro-batch's *mean* loss, weighted by its share of the global batch."""
        (loss * self._weight).backward()

    def accumulation(self, micro_batch: int) -> int:
        """Micro-batches per optimizer step on the busiest rank at this world size."""
        return accumulation(self.global_batch, micro_batch, self.world)

    @property
    def frozen_share(self) -> float:
        """The frozen share of the layers (by cost): models/freezing.py's ``f``."""
        return frozen_share(self.frozen, self._costs()) if self.layers else 0.0

    # ---- one optimizer step ----

    def _finish_step(self) -> None:
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        if self.world > 1:
            for grad in grads:
                dist.all_reduce(grad)  # each rank's part is already weighted: the sum is the global mean
        if self.freeze is not None:
            self._note_gradients()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()
        self.step += 1
        self.samples += self.global_batch
        if self.freeze is not None and self.step % self.freeze.check_every == 0:
            self._check_freezing(self.freeze)
        if self.reporter is not None:
            self.reporter.update(self.samples, self.frozen_share)

    def _signalled(self) -> Request | None:
        """The request any rank took (stop wins): all answer it at the same step, so the
        checkpoint is one. Each rank takes (clears) its own request here, before the checkpoint:
        a signal during the checkpoint asks again at the next step."""
        request = self.signal.take()
        if self.world > 1:
            device = next(self.model.parameters()).device  # NCCL reduces GPU tensors only
            flag = torch.tensor([_LEVELS.index(request)], device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            request = _LEVELS[int(flag.item())]
        return request

    # ---- freezing ----

    def _costs(self) -> list[float]:
        assert self.freeze is not None
        return list(self.freeze.costs) if self.freeze.costs is not None else [1.0] * len(self.layers)

    def _note_gradients(self) -> None:
        """Add each trainable layer's gradient norm (the same on every rank: after the all-reduce).
        Kept as tensors on the parameters' device: reading one on the host each step would make
        a GPU wait."""
        for i, layer in enumerate(self.layers[self.frozen:], start=self.frozen):
            norms = [torch.linalg.vector_norm(p.grad) for p in layer.parameters() if p.grad is not None]
            if norms:
                self._norm_sums[i] = self._norm_sums[i] + torch.linalg.vector_norm(torch.stack(norms))

    def _check_freezing(self, freeze: Freezing) -> None:
        for i in range(self.frozen, len(self.layers)):
            self.histories[i].append(float(self._norm_sums[i]) / freeze.check_every)
            self._norm_sums[i] = 0.0
        prefix = frozen_prefix(self.histories, threshold=freeze.threshold, window=freeze.window,
                               max_share=freeze.max_share, already=self.frozen, costs=freeze.costs)
        if prefix > self.frozen:
            log.info("step %d: freezing layers %d-%d (frozen share %.2f)", self.step, self.frozen, prefix - 1,
                     frozen_share(prefix, self._costs()))
            self._apply_frozen(prefix)

    def _apply_frozen(self, prefix: int) -> None:
        for layer in self.layers[:prefix]:
            for p in layer.parameters():
                p.requires_grad_(False)
                p.grad = None
        self.frozen = prefix

    # ---- checkpoints ----

    def checkpoint(self) -> Path:
        """Write the checkpoint now (rank 0; every rank must call it) and report it. A signal's
        request is not cleared here (the loop takes it at a step's end)."""
        if self.rank == 0:
            state = {"format": FORMAT, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                     "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                     "step": self.step, "samples": self.samples, "global_batch": self.global_batch,
                     "world": self.world, "seed": self.seed, "frozen": self.frozen, "histories": self.histories,
                     "rng": _rng_state()}

            def save(handle: BinaryIO) -> None:
                torch.save(state, handle)

            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, save)
            if self.reporter is not None:
                self.reporter.update(self.samples, self.frozen_share, checkpointed=True)
        if self.world > 1:
            dist.barrier()  # no rank goes on (or exits) before the checkpoint is whole
        return self.path

    def _resume(self, on_resize: str) -> None:
        """Load the checkpoint; every rank takes rank 0's random generators' states."""
        state = torch.load(self.path, map_location="cpu", weights_only=True)
        if state.get("format") != FORMAT:
            raise ValueError(f"{self.path}: checkpoint format {state.get('format')!r}, expected {FORMAT}")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.samples, self.seed = state["step"], state["samples"], state["seed"]
        if self.global_batch != state["global_batch"]:
            log.warning("global batch %d asked, %d in the checkpoint: the checkpoint's is kept",
                        self.global_batch, state["global_batch"])
        self.global_batch = state["global_batch"]
        if on_resize == "scale" and state["world"] != self.world:
            self._scale(self.world / state["world"])
        if self.layers:
            self.histories = [list(h) for h in state["histories"]]
            self._apply_frozen(state["frozen"])
        _set_rng_state(state["rng"])
        log.info("resumed from %s at step %d (%d samples), world %d -> %d, global batch %d",
                 self.path, self.step, self.samples, state["world"], self.world, self.global_batch)

    def _scale(self, factor: float) -> None:
        """Linear scaling on resize: global batch and learning rates by the world's ratio."""
        self.global_batch = max(round(self.global_batch * factor), 1)
        for group in self.optimizer.param_groups:
            group["lr"] *= factor


class _Sampler:
    """The ``DataLoader``'s batch sampler: this rank's micro-batches from the step the trainer
    is at when iteration starts (the loader may run ahead of the training, so it does not read
    the trainer's counters as it goes)."""

    def __init__(self, trainer: GreenTrainer, plan: BatchPlan, steps: int) -> None:
        self.trainer, self.plan, self.steps = trainer, plan, steps

    def __iter__(self) -> Iterator[list[int]]:
        t = self.trainer
        first, start, batch = t.step, t.samples, t.global_batch  # read once: the counters move as training runs
        for step in range(first, self.steps):
            yield from self.plan.micro_batches(start + (step - first) * batch, batch, t.rank, t.world)


def _layers(model: nn.Module, freeze: Freezing) -> list[nn.Module]:
    if freeze.layers is not None:
        layers = list(freeze.layers)
    elif isinstance(model, nn.Sequential):
        layers = [m for m in model.children() if any(True for _ in m.parameters())]
    else:
        raise ValueError("Freezing(layers=...) is needed for a model that is not an nn.Sequential: "
                         "the front-to-back order of its blocks is not known otherwise")
    if freeze.costs is not None and len(freeze.costs) != len(layers):
        raise ValueError(f"{len(freeze.costs)} costs for {len(layers)} layers: expected one per layer")
    return layers


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)

"""Which samples each rank trains on, step by step, at any world size (no PyTorch).

Why: a job that restarts at another GPU count must go on where it stopped and, to match
an uninterrupted run, see the same samples in each optimizer step. So the order is a
property of the job, not of the world: one stream of sample indices, each epoch a
permutation seeded by ``(seed, epoch)``; an optimizer step takes the next
``global_batch`` of them, counted by the samples done (a number the checkpoint keeps).
Rank ``r`` of ``world`` takes every ``world``-th of the step's samples from the ``r``-th
on, cut into micro-batches of at most ``micro_batch`` (what fits one GPU's memory): the
fewer the ranks, the more micro-batches each accumulates, and the step's global batch
is the same.
"""

from __future__ import annotations

import random


class BatchPlan:
    """The sample stream of a data set of ``dataset_size`` samples, shuffled per epoch with ``seed``."""

    def __init__(self, dataset_size: int, micro_batch: int, seed: int = 0) -> None:
        if dataset_size < 1 or micro_batch < 1:
            raise ValueError(f"dataset_size {dataset_size!r}, micro_batch {micro_batch!r}: expected both >= 1")
        self.dataset_size, self.micro_batch, self.seed = dataset_size, micro_batch, seed
        self._epoch: tuple[int, list[int]] | None = None  # the last epoch's permutation, reused step after step

    def indices(self, start: int, count: int) -> list[int]:
        """Samples ``start`` to ``start + count`` of the stream (``start``: samples done so far)."""
        out: list[int] = []
        position = start
        while len(out) < count:
            epoch, offset = divmod(position, self.dataset_size)
            take = min(count - len(out), self.dataset_size - offset)
            out += self._permutation(epoch)[offset:offset + take]
            position += take
        return out

    def micro_batches(self, start: int, global_batch: int, rank: int, world: int) -> list[list[int]]:
        """Rank ``rank``'s micro-batches of the optimizer step that begins at sample ``start``."""
        if not 0 <= rank < world or global_batch < world:
            raise ValueError(f"rank {rank!r} of {world!r}, global batch {global_batch!r}: "
                             "expected 0 <= rank < world <= global batch")
        share = self.indices(start, global_batch)[rank::world]
        return [share[i:i + self.micro_batch] for i in range(0, len(share), self.micro_batch)]

    def _permutation(self, epoch: int) -> list[int]:
        if self._epoch is None or self._epoch[0] != epoch:
            order = list(range(self.dataset_size))
            random.Random(f"{self.seed}:{epoch}").shuffle(order)
            self._epoch = (epoch, order)
        return self._epoch[1]


def accumulation(global_batch: int, micro_batch: int, world: int) -> int:
    """Micro-batches the busiest rank accumulates per optimizer step."""
    share = (global_batch + world - 1) // world
    return (share + micro_batch - 1) // micro_batch

"""The PyTorch adapter on a real small training job: an MLP on scikit-learn's digits, on CPU.

Needs PyTorch and scikit-learn: ``make train-test`` runs this file in a Debian image with
both (docker/train-test); where they are missing (the host's venv) it is skipped. One
thread, fixed seeds: the runs are deterministic, and the assertions are on the work
done and skipped, not on the clock (step times are printed, ``pytest -s`` shows them).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("sklearn.datasets")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from slurm_green.controller.progress import ProgressReader  # noqa: E402
from slurm_green.core import progress  # noqa: E402
from slurm_green.train.progress import ProgressReporter  # noqa: E402
from slurm_green.train.pytorch import CHECKPOINT, Freezing, GreenTrainer  # noqa: E402

HIDDEN = 256
GLOBAL_BATCH = 128
MICRO_BATCH = 32
LOSS = nn.CrossEntropyLoss()


@pytest.fixture(autouse=True)
def one_thread() -> None:
    torch.set_num_threads(1)  # deterministic sums, steadier timings, and the machine is shared


def digits() -> tuple[Any, Any]:
    """Train and held-out sets: 1,297 and 500 of the 1,797 8x8 digits, split by a fixed seed."""
    x, y = datasets.load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train, test = order[:1297], order[1297:]
    return TensorDataset(x[train], y[train]), TensorDataset(x[test], y[test])


def mlp(seed: int = 1) -> Any:
    """Five linear layers (four hidden of 256): wide enough that the backward pass dominates a step."""
    torch.manual_seed(seed)
    sizes = [64, HIDDEN, HIDDEN, HIDDEN, HIDDEN, 10]
    layers: list[Any] = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def sgd(model: Any) -> Any:
    """SGD with weight decay, as vision models train: without it the MLP memorises the 1,297
    digits, and its gradient norms fall towards zero instead of settling."""
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)


def accuracy(model: Any, test: Any) -> float:
    x, y = test.tensors
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def train(trainer: GreenTrainer, data: Any, steps: int, signal_at: int | None = None,
          micro_batch: int = MICRO_BATCH, signum: int = signal.SIGUSR1,
          on_step: Callable[[GreenTrainer], None] | None = None) -> list[tuple[float, int]]:
    """The user's loop (the lines under ``for``), plus the test's timing and signal (``signum``
    during the step after ``signal_at``); for each optimizer step, the seconds it took and the
    layers frozen after it. ``on_step``: called at each step's first micro-batch."""
    steps_done, last_step, last_time = [], trainer.step, time.perf_counter()
    for x, y in trainer.batches(data, steps=steps, micro_batch=micro_batch):
        if trainer.step != last_step:
            now = time.perf_counter()
            steps_done.append((now - last_time, trainer.frozen))
            last_step, last_time = trainer.step, now
            if on_step is not None:
                on_step(trainer)
        if signal_at is not None and trainer.step == signal_at:
            os.kill(os.getpid(), signum)  # what Slurm's --signal=USR1@120 (or the controller's USR2) sends
            signal_at = None
        trainer.backward(LOSS(trainer.model(x), y))
    return steps_done


def same_state(a: Any, b: Any) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def difference(a: Any, b: Any) -> float:
    """The largest difference between two models' parameters."""
    sa, sb = a.state_dict(), b.state_dict()
    return max(float((sa[k] - sb[k]).abs().max()) for k in sa)


def test_sigusr1_checkpoints_and_the_resumed_run_continues_exactly(tmp_path: Path) -> None:
    train_set, _ = digits()
    whole = mlp()
    train(GreenTrainer(whole, sgd(whole), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "whole",
                       reporter=None), train_set, steps=40)

    first = mlp()
    green = GreenTrainer(first, sgd(first), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "cut", reporter=None)
    assert green.accumulation(MICRO_BATCH) == 4
    train(green, train_set, steps=40, signal_at=20)
    assert green.interrupted and green.step == 21 and (tmp_path / "cut" / CHECKPOINT).exists()
    after_checkpoint = torch.rand(3)
    assert not list((tmp_path / "cut").glob(".*.tmp"))  # the temporary file was renamed

    second = mlp(seed=99)  # another initialisation: everything must come from the checkpoint
    resumed = GreenTrainer(second, sgd(second), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "cut",
                           reporter=None)
    assert (resumed.step, resumed.samples) == (21, 21 * GLOBAL_BATCH)
    assert same_state(second, first)
    assert torch.equal(torch.rand(3), after_checkpoint)  # the random generator resumes too
    train(resumed, train_set, steps=40)
    assert resumed.step == 40 and not resumed.interrupted
    assert same_state(second, whole)  # same world, same order of sums: bit for bit


def test_sigusr2_checkpoints_reports_and_trains_on_and_the_checkpoint_resumes_exactly(tmp_path: Path) -> None:
    """The controller's resize signal: a checkpoint at the step's end, reported, and the loop
    goes on; a job requeued then would restart from that checkpoint and end the same."""
    train_set, _ = digits()
    whole = mlp()
    train(GreenTrainer(whole, sgd(whole), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "whole",
                       reporter=None), train_set, steps=40)

    (tmp_path / "progress").mkdir()
    reporter = ProgressReporter(tmp_path / "progress", 4343, every_s=3600)
    report = tmp_path / "progress" / "4343.progress.json"
    seen: dict[str, Any] = {}

    def at_step(trainer: GreenTrainer) -> None:
        """Right after step 21's end (the checkpoint asked for during it): keep what the
        controller would see, before the last step's checkpoint replaces the file."""
        if trainer.step == 21:
            shutil.copytree(tmp_path / "run", tmp_path / "at-21")
            seen["record"] = progress.decode(report.read_bytes(), 4343)

    first = mlp()
    green = GreenTrainer(first, sgd(first), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "run",
                         reporter=reporter)
    signalled = time.time()
    train(green, train_set, steps=40, signal_at=20, signum=signal.SIGUSR2, on_step=at_step)
    assert not green.interrupted and green.step == 40
    assert same_state(first, whole)  # the checkpoint changed nothing in the training
    record = seen["record"]
    assert record.done == 21 * GLOBAL_BATCH and signalled <= record.checkpoint == record.time
    assert record.total == 40 * GLOBAL_BATCH  # the loop's own length: the controller's time-left estimate
    assert torch.load(tmp_path / "at-21" / CHECKPOINT, weights_only=True)["step"] == 21
    final = progress.decode(report.read_bytes(), 4343)
    assert final.done == 40 * GLOBAL_BATCH and final.checkpoint >= record.checkpoint

    second = mlp(seed=99)  # requeued: a new process from the step-21 checkpoint
    resumed = GreenTrainer(second, sgd(second), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "at-21",
                           reporter=None)
    assert (resumed.step, resumed.samples) == (21, 21 * GLOBAL_BATCH)
    train(resumed, train_set, steps=40)
    assert resumed.step == 40 and not resumed.interrupted
    assert same_state(second, whole)  # bit for bit


def _distributed_worker(rank: int, world: int, directory: str, steps: int, signal_at: int,
                        signum: int = signal.SIGUSR1) -> None:
    """One rank of a world-2 job (gloo on CPU); rank 1 alone gets the signal, as when Slurm
    signals one task: both ranks must stop (SIGUSR1), or checkpoint and go on (SIGUSR2), at
    the same step."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{directory}/rendezvous", rank=rank, world_size=world)
    try:
        train_set, _ = digits()
        model = mlp()
        green = GreenTrainer(model, sgd(model), global_batch=GLOBAL_BATCH, checkpoint_dir=Path(directory) / "ckpt",
                             reporter=None)
        assert green.accumulation(MICRO_BATCH) == 2
        if signum == signal.SIGUSR1:
            train(green, train_set, steps=steps, signal_at=signal_at if rank == 1 else None)
            assert green.interrupted and green.step == signal_at + 1
        else:
            def keep(trainer: GreenTrainer) -> None:
                if rank == 0 and trainer.step == signal_at + 1:
                    shutil.copytree(Path(directory) / "ckpt", Path(directory) / "kept")
            train(green, train_set, steps=steps, signal_at=signal_at if rank == 1 else None, signum=signum,
                  on_step=keep)
            assert not green.interrupted and green.step == steps
    finally:
        dist.destroy_process_group()


def test_a_world_2_job_resumes_at_world_1_with_the_same_global_batch(tmp_path: Path) -> None:
    train_set, _ = digits()
    mp.spawn(_distributed_worker, args=(2, str(tmp_path), 40, 20), nprocs=2, join=True)

    shutil.copytree(tmp_path / "ckpt", tmp_path / "copy")
    model = mlp(seed=99)
    green = GreenTrainer(model, sgd(model), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "ckpt", reporter=None)
    assert (green.world, green.step, green.global_batch, green.accumulation(MICRO_BATCH)) == (1, 21, GLOBAL_BATCH, 4)
    train(green, train_set, steps=40)

    whole, regrouped = mlp(), mlp()
    train(GreenTrainer(whole, sgd(whole), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "whole",
                       reporter=None), train_set, steps=40)
    train(GreenTrainer(regrouped, sgd(regrouped), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "regrouped",
                       reporter=None), train_set, steps=40, micro_batch=2 * MICRO_BATCH)
    # Float sums grouped otherwise differ in the last bits, and SGD with momentum carries that
    # on: the yardstick is the same run accumulating 2 micro-batches of 64 instead of 4 of 32.
    # (A real difference is far larger: a global batch of 127 instead of 128 moves the
    # parameters by about 2e-3, another data order by 2e-2.)
    rounding, resized = difference(regrouped, whole), difference(model, whole)
    print(f"\nworld 2 -> 1 at step 21 of 40: parameters differ from the uninterrupted run by {resized:.1e}; "
          f"micro-batches of 64 instead of 32 by {rounding:.1e}")
    assert resized <= max(4 * rounding, 1e-6)

    # The user's other choice, Goyal et al.'s linear rule, from the same world-2 checkpoint.
    scaled = mlp()
    optimizer = sgd(scaled)
    rescaled = GreenTrainer(scaled, optimizer, global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "copy",
                            on_resize="scale", reporter=None)
    assert (rescaled.global_batch, optimizer.param_groups[0]["lr"]) == (GLOBAL_BATCH // 2, 0.025)


def test_sigusr2_to_one_rank_checkpoints_every_rank_at_the_same_step_and_both_train_on(tmp_path: Path) -> None:
    mp.spawn(_distributed_worker, args=(2, str(tmp_path), 30, 20, signal.SIGUSR2), nprocs=2, join=True)
    state = torch.load(tmp_path / "kept" / CHECKPOINT, weights_only=True)
    assert (state["step"], state["world"]) == (21, 2)
    assert torch.load(tmp_path / "ckpt" / CHECKPOINT, weights_only=True)["step"] == 30


def test_freezing_skips_the_prefix_backward_and_keeps_accuracy_and_reports_progress(tmp_path: Path) -> None:
    """400 steps with and without freezing (at most 60 % of the 5 layers); the frozen run's
    report is read back by the controller's reader."""
    train_set, test_set = digits()
    steps, max_share, bound = 400, 0.6, 0.02
    plain = mlp()
    plain_steps = train(GreenTrainer(plain, sgd(plain), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "plain",
                                     reporter=None), train_set, steps)

    frozen = mlp()
    reporter = ProgressReporter(tmp_path / "progress", 4242, every_s=0)
    (tmp_path / "progress").mkdir()
    freezing = Freezing(max_share=max_share, threshold=0.2, window=3, check_every=20)
    green = GreenTrainer(frozen, sgd(frozen), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "frozen",
                         freeze=freezing, reporter=reporter)
    frozen_steps = train(green, train_set, steps)

    # What was frozen: a prefix, within the user's bound, and no gradient reaches it.
    assert 1 <= green.frozen and green.frozen_share <= max_share
    prefix = [p for layer in green.layers[:green.frozen] for p in layer.parameters()]
    assert all(not p.requires_grad and p.grad is None for p in prefix)
    outputs: list[Any] = []
    green.layers[green.frozen - 1].register_forward_hook(lambda m, i, o: outputs.append(o))
    green.layers[-1].register_forward_hook(lambda m, i, o: outputs.append(o))
    frozen(train_set.tensors[0][:8])
    assert not outputs[0].requires_grad and outputs[0].grad_fn is None  # no graph built: nothing to go back through
    assert outputs[1].requires_grad
    trainable = sum(p.numel() for p in frozen.parameters() if p.requires_grad)
    total = sum(p.numel() for p in frozen.parameters())

    # Accuracy within the bound, and the step time, printed (not asserted: the machine is shared).
    plain_acc, frozen_acc = accuracy(plain, test_set), accuracy(frozen, test_set)
    first = next(i for i, (_, layers) in enumerate(frozen_steps) if layers) + 1
    before = statistics.median(t for t, _ in plain_steps[:first])
    late_plain = statistics.median(t for t, _ in plain_steps[first:])
    late_frozen = statistics.median(t for t, _ in frozen_steps[first:])
    print(f"\nfreezing {green.frozen} of {len(green.layers)} layers at step {first} of {steps}: "
          f"median step {before * 1e3:.1f} ms before; after it {late_plain * 1e3:.1f} ms unfrozen, "
          f"{late_frozen * 1e3:.1f} ms frozen ({1 - late_frozen / late_plain:.0%} less); "
          f"{trainable:,} of {total:,} parameters train; "
          f"held-out accuracy {plain_acc:.3f} unfrozen, {frozen_acc:.3f} frozen")
    assert abs(frozen_acc - plain_acc) <= bound

    # The controller accepts the report; a restart keeps the frozen prefix.
    record = ProgressReader(tmp_path / "progress").read(4242, getpass.getuser(), time.time())
    assert record is not None and (record.done, record.frozen) == (steps * GLOBAL_BATCH, green.frozen_share)
    again = mlp(seed=99)
    resumed = GreenTrainer(again, sgd(again), global_batch=GLOBAL_BATCH, checkpoint_dir=tmp_path / "frozen",
                           freeze=freezing, reporter=None)
    assert resumed.frozen == green.frozen and sum(p.numel() for p in again.parameters() if p.requires_grad) == trainable

"""On a real GPU: the training helper's own freezing decisions, and what a checkpoint-restart costs.

Two experiments with ``slurm_green.train.GreenTrainer``, the helper a user adds to a plain
PyTorch loop (bf16 autocast, as the H100 sweeps ran):

* ``freeze``: a real small task, scikit-learn's 8x8 digits (1,297 training and 500 held-out
  images, split by a fixed seed, upsampled and repeated to 3 channels), on torchvision's
  ResNet-18 at 32 px (the CIFAR-size workload of perf_energy/h100) and ResNet-50 at 64 px,
  cut into front-to-back blocks (stem, layer1..4, head), trained from the same seed without
  freezing and with the helper's ``Freezing`` (check every 20 steps, a window of 3, at most
  half the blocks: its defaults) at each threshold of ``--thresholds`` (the runs kept: 0.1,
  0.2, 0.25, 0.35), 600 steps of batch 128, SGD lr 0.05 with momentum. Written per 20-step window:
  the frozen share, seconds per step (synchronised) and GPU joules per step (NVML); per
  run: the steps at which blocks froze and the held-out accuracy at the end.
* ``restart``: a checkpoint-restart cycle as the controller's resize makes one. A training
  process (ResNet-50 at 224 px, batch 128, SGD with momentum; or the 12-layer transformer,
  AdamW; synthetic data already on the GPU, as ``workloads.py``'s) runs until its step
  rate is steady, gets SIGUSR1 (Slurm's warning, as
  ``scancel --signal=USR1`` sends it), writes its checkpoint and exits; a new process
  resumes from it. Measured: signal to exit, start to the first step done after resuming,
  the checkpoint's size, and the cycle's cost in steps of steady training. Both processes
  run on the same one GPU: a restart at another GPU count adds the collective's set-up,
  which one GPU cannot show; the scheduler's own delay (requeue, a new start) is not in it.

Usage: python3 benchmarks/h100/freeze_restart.py --out $OUT [freeze] [restart] [--steps 600]
       [--signal-after 80] [--models resnet50,transformer]
(``SG_DEVICE=cpu`` tries it out where no GPU is; its figures then mean nothing.)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
#: ``cpu`` only to try the script out where no GPU is (its figures then mean nothing).
DEVICE = os.environ.get("SG_DEVICE", "cuda")


def sync() -> None:
    import torch
    if DEVICE == "cuda":
        torch.cuda.synchronize()


class Meter:
    """GPU 0's energy counter, joules, read as the Epilog reads it (``NvmlBackend``); 0 without a GPU."""

    def __init__(self) -> None:
        from slurm_green.gpu.nvml import NvmlBackend
        self.backend = NvmlBackend() if DEVICE == "cuda" else None

    def joules(self) -> float:
        return (self.backend.energy_j(0) or 0.0) if self.backend is not None else 0.0


def blocks(resnet):
    """torchvision's ResNet as front-to-back blocks the helper can freeze (an nn.Sequential)."""
    from torch import nn
    return nn.Sequential(nn.Sequential(resnet.conv1, resnet.bn1, resnet.relu, resnet.maxpool),
                         resnet.layer1, resnet.layer2, resnet.layer3, resnet.layer4,
                         nn.Sequential(resnet.avgpool, nn.Flatten(), resnet.fc))


def digits(size: int):
    import numpy as np
    import torch
    from sklearn import datasets
    from torch.nn import functional as F
    x, y = datasets.load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x = torch.tensor(x[order] / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)
    y = torch.tensor(y[order], dtype=torch.long)
    train = torch.utils.data.TensorDataset(x[500:], y[500:])
    return train, (x[:500], y[:500])


def freeze_run(arch: str, size: int, threshold: float | None, steps: int, workdir: Path, meter: Meter) -> tuple[list[dict], dict]:
    import torch
    import torchvision
    from torch import nn
    from slurm_green.train.pytorch import Freezing, GreenTrainer

    torch.manual_seed(0)
    model = blocks(getattr(torchvision.models, arch)(num_classes=10)).to(DEVICE).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    ckpt = workdir / f"{arch}-{threshold}"
    green = GreenTrainer(model, opt, global_batch=128, checkpoint_dir=ckpt, seed=0,
                         freeze=None if threshold is None else Freezing(threshold=threshold), reporter=None)
    train, (tx, ty) = digits(size)
    rows, froze, window = [], [], 20
    last_frozen, t0, e0 = 0, None, None
    for x, y in green.batches(train, steps=steps, micro_batch=128, pin_memory=True):
        x = x.to(DEVICE, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(DEVICE, non_blocking=True)
        if t0 is None:
            sync()
            t0, e0 = time.perf_counter(), meter.joules()
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        green.backward(loss)
        if green.frozen != last_frozen:
            froze.append({"step": green.step, "frozen_blocks": green.frozen, "share": round(green.frozen_share, 3)})
            last_frozen = green.frozen
        if green.step % window == 0 and green.step > 0:
            sync()
            t1, e1 = time.perf_counter(), meter.joules()
            rows.append({"model": arch, "px": size, "threshold": threshold, "step": green.step,
                         "frozen_share": round(green.frozen_share, 3), "s_per_step": round((t1 - t0) / window, 5),
                         "j_per_step": round((e1 - e0) / window, 3), "loss": round(loss.item(), 4)})
            t0, e0 = t1, e1
    model.eval()
    with torch.no_grad(), torch.autocast(DEVICE, dtype=torch.bfloat16):
        pred = model(tx.to(DEVICE).to(memory_format=torch.channels_last)).argmax(1).cpu()
    accuracy = float((pred == ty).float().mean())
    return rows, {"model": arch, "px": size, "threshold": threshold, "steps": steps, "froze": froze,
                  "held_out_accuracy": round(accuracy, 4)}


def freeze_experiment(out: Path, steps: int, archs: tuple[str, ...], thresholds: tuple[float, ...]) -> None:
    meter = Meter()
    workdir = Path("/tmp/sg-freeze")
    all_rows, summary = [], []
    for arch in archs:
        size = PIXELS[arch]
        for threshold in (None, *thresholds):
            rows, result = freeze_run(arch, size, threshold, steps, workdir, meter)
            all_rows += rows
            summary.append(result)
            print(json.dumps(result), flush=True)
            with open(out / "freeze_windows.csv", "w", newline="") as handle:
                writer = csv.DictWriter(handle, list(all_rows[0]))
                writer.writeheader()
                writer.writerows(all_rows)
            (out / "freeze_summary.json").write_text(json.dumps(summary, indent=1))
    print(",".join(all_rows[0]))  # on the console too: the files may not come back from a lent machine
    for row in all_rows:
        print(",".join(str(v) for v in row.values()))


#: Each model's image size in the freezing runs.
PIXELS = {"resnet18": 32, "resnet50": 64}


# ---- restart ----

#: (width, layers, sequence, batch): workloads.py's transformer, and a tiny one to try the script on a CPU.
TRANSFORMERS = {"transformer": (768, 12, 1024, 16), "tiny-transformer": (48, 2, 16, 4)}

def trainer_process(arch: str, ckpt: str) -> None:
    """One training process: prints ``step <n> <unix time>`` after each synchronised step."""
    t_start = time.time()
    import torch
    import torchvision
    from torch import nn
    from slurm_green.train.pytorch import GreenTrainer
    torch.manual_seed(0)
    if arch == "resnet50":
        model = torchvision.models.resnet50().to(DEVICE).to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        data = torch.utils.data.TensorDataset(
            torch.randint(0, 255, (512, 3, 224, 224), dtype=torch.uint8, device=DEVICE),
            torch.randint(0, 1000, (512,), device=DEVICE))
        batch = 128

        def loss_of(x, y):
            x = x.float().div_(255).to(memory_format=torch.channels_last)
            return nn.functional.cross_entropy(model(x), y)
    else:
        width, layers, seq, batch = TRANSFORMERS[arch]
        layer = nn.TransformerEncoderLayer(width, 12, 4 * width, batch_first=True, norm_first=True)
        model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(DEVICE)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        data = torch.utils.data.TensorDataset(torch.randn(4 * batch, seq, width, device=DEVICE),
                                              torch.zeros(4 * batch, device=DEVICE))

        def loss_of(x, _y):
            return model(x).float().pow(2).mean()
    t_load = time.time()
    green = GreenTrainer(model, opt, global_batch=batch, checkpoint_dir=ckpt, reporter=None)
    t_ready = time.time()
    print(f"ready start={t_start:.3f} built={t_load:.3f} resumed={t_ready:.3f} at_step={green.step}", flush=True)
    last = green.step
    for x, y in green.batches(data, steps=100_000, micro_batch=batch):  # the data is on the GPU already
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            green.backward(loss_of(x, y))
        if green.step > last:  # a step was completed (its time: with the next one's forward and backward)
            sync()
            last = green.step
            print(f"step {green.step} {time.time():.4f}", flush=True)
    print(f"exit {time.time():.4f} interrupted={green.interrupted}", flush=True)


def run_until(arch: str, ckpt: Path, signal_after: int) -> dict:
    """Start a training process, SIGUSR1 it after ``signal_after`` steps; times of what happened."""
    started = time.time()
    proc = subprocess.Popen([sys.executable, __file__, "_train", arch, str(ckpt)], stdout=subprocess.PIPE, text=True)
    steps: list[tuple[int, float]] = []
    ready = signalled = None
    exit_line = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        word = line.split()
        if word[0] == "ready":
            ready = dict(kv.split("=") for kv in word[1:])
        elif word[0] == "step":
            steps.append((int(word[1]), float(word[2])))
            if len(steps) == signal_after and signalled is None:
                signalled = time.time()
                proc.send_signal(signal.SIGUSR1)
        elif word[0] == "exit":
            exit_line = line.strip()
    proc.wait()
    ended = time.time()
    return {"started": started, "ready": ready, "steps": steps, "signalled": signalled, "ended": ended,
            "exit": exit_line, "returncode": proc.returncode}


def restart_experiment(out: Path, signal_after: int, archs: tuple[str, ...] = ("resnet50", "transformer")) -> None:
    results = []
    for arch in archs:
        ckpt = Path(f"/tmp/sg-restart-{arch}")
        subprocess.run(["rm", "-rf", str(ckpt)])
        first = run_until(arch, ckpt, signal_after)
        second = run_until(arch, ckpt, max(signal_after // 2, 2))
        steady = [t for _, t in first["steps"][signal_after // 3:]]
        step_s = (steady[-1] - steady[0]) / (len(steady) - 1)
        size = (ckpt / "green.pt").stat().st_size
        resumed_at = int(second["ready"]["at_step"])
        to_exit = first["ended"] - first["signalled"]
        to_first_step = second["steps"][0][1] - second["started"]
        cycle = to_exit + to_first_step
        result = {"model": arch, "steady_s_per_step": round(step_s, 4), "checkpoint_mb": round(size / 1e6, 1),
                  "signal_to_exit_s": round(to_exit, 2), "start_to_first_step_s": round(to_first_step, 2),
                  "start_to_trainer_ready_s": round(float(second["ready"]["resumed"]) - second["started"], 2),
                  "cycle_s": round(cycle, 2), "cycle_in_steps": round(cycle / step_s - 1, 1),
                  "steps_seen_before_signal": signal_after, "last_step_printed_before_exit": first["steps"][-1][0],
                  "resumed_at_step": resumed_at, "first_exit_line": first["exit"], "second_ready": second["ready"]}
        results.append(result)
        print(json.dumps(result), flush=True)
        (out / "restart.json").write_text(json.dumps(results, indent=1))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_train":
        trainer_process(sys.argv[2], sys.argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", nargs="*", default=["freeze", "restart"], choices=["freeze", "restart"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=600, help="freeze: optimizer steps per run")
    parser.add_argument("--freeze-models", default="resnet18,resnet50", help="freeze: which models")
    parser.add_argument("--thresholds", default="0.1,0.25", help="freeze: Freezing thresholds tried (0.1: its default)")
    parser.add_argument("--signal-after", type=int, default=80, help="restart: steps before the signal")
    parser.add_argument("--models", default="resnet50,transformer", help="restart: which models")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if "freeze" in args.what:
        freeze_experiment(args.out, args.steps, tuple(args.freeze_models.split(",")),
                          tuple(float(t) for t in args.thresholds.split(",")))
    if "restart" in args.what:
        restart_experiment(args.out, args.signal_after, tuple(args.models.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

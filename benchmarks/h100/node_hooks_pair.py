"""On a real GPU: slurm-green's Prolog and Epilog (the wrappers slurm.conf names) enact a
co-location EaCO decided, under CUDA MPS (or time-sliced), and the pair's slowdown is measured.

Run as root on a machine with one NVIDIA GPU, from the repository root (no Slurm needed:
the hooks get the environment slurmd would give them). For each pair ``A+B@CAP``:

1. each workload alone at the board's default limit, then alone at the cap (the
   references: the model's rate at a cap and its slowdown are checked apart);
2. Prolog of job A, then of job B, each a gres/mps job (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``
   set; with ``--mechanism timeslice`` a gres/shard job, and no MPS) whose Comment carries a
   decision token signed for it with the cap: the first starts the MPS control daemon and
   the uid's server, both claim the GPU; the limit in force is read after each;
3. both workloads at once (MPS clients, or time-sliced), for ``--seconds``: each one's
   steps/s and the board's average power (NVML's energy counter);
4. Epilog of B, then of A: the limit after each, whether the daemon still runs, and the
   energy each Epilog left for the controller (split between the two jobs by overlap).

Writes ``hooks.csv`` (``hooks_timeslice.csv`` time-sliced; one row per run) and ``hooks.log``
(the hooks' own lines) to ``--out``. Usage (the device tool, with the shared ``workloads.py``
carried in .device/; the pairs are what ``benchmarks/h100_pair.py --args`` prints):

    python3 benchmarks/h100/node_hooks_pair.py --workloads .device --out $OUT [--mechanism timeslice] \
        resnet50+resnet18@0.55 resnet18+transformer@0.6 resnet18+lstm_lm@0.6
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from slurm_green.core import decision_token, telemetry  # noqa: E402
from slurm_green.gpu.mps import MpsControl  # noqa: E402
from slurm_green.gpu.nvml import NvmlBackend  # noqa: E402
from slurm_green.gpu.wrappers import HookSettings, install  # noqa: E402

FIELDS = ("run", "a", "b", "cap", "a_steps_per_s", "b_steps_per_s", "avg_power_w", "seconds", "limit_w", "note")


def worker(workloads: str, name: str, seconds: float, ready, go, out) -> None:
    sys.path.insert(0, workloads)
    import torch
    from workloads import ALL
    step = ALL[name]()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    ready.set()
    go.wait()
    t0, k = time.time(), 0
    while time.time() - t0 < seconds:
        step()
        k += 1
        if k % 5 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    out.put((name, k / (time.time() - t0)))


def measure(nvml: NvmlBackend, workloads: str, names: list[str], seconds: float, env: dict[str, str],
            during=None) -> tuple[list[float], float]:
    """Steps/s of each workload run at once (one process each), and the board's average power."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in names]
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        procs = [ctx.Process(target=worker, args=(workloads, n, seconds, r, go, out)) for n, r in zip(names, readies)]
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    for r in readies:
        if not r.wait(600):
            raise RuntimeError(f"{names}: a worker did not get ready")
    e0, t0 = nvml.energy_j(0), time.time()
    go.set()
    if during is not None:
        time.sleep(min(5.0, seconds / 2))
        during()
    rates = dict(out.get(timeout=seconds + 300) for _ in names)
    watts = (nvml.energy_j(0) - e0) / (time.time() - t0)
    for p in procs:
        p.join()
    return [rates[n] for n in names], watts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pairs", nargs="+", help="A+B@CAP: two workloads of workloads.py and the decided cap")
    parser.add_argument("--workloads", required=True, help="folder holding perf_energy/h100/workloads.py")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--mechanism", choices=("mps", "timeslice"), default="mps")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    workloads = str(Path(args.workloads).resolve())
    control = shutil.which("nvidia-cuda-mps-control") or "/usr/bin/nvidia-cuda-mps-control"
    daemon = MpsControl(Path(control), log=print)  # the hooks' own view of the daemon

    work = Path("/tmp/sg-node")
    shutil.rmtree(work, ignore_errors=True)
    (work / "telemetry").mkdir(parents=True)
    key = work / "decision.key"
    key.write_bytes(os.urandom(32).hex().encode())
    hooks = install(work / "hooks", HookSettings(python=sys.executable, home=str(ROOT), timeout_s=30,
                                                 log=str(args.out / "hooks.log")))
    conf = work / "gpu.conf"
    conf.write_text(f"SLURM_GREEN_GPU_BACKEND=nvml\nSLURM_GREEN_STATE_DIR={work / 'state'}\n"
                    f"SLURM_GREEN_DECISION_KEY={key}\nSLURM_GREEN_TELEMETRY_DIR={work / 'telemetry'}\n"
                    f"SLURM_GREEN_MPS_CONTROL={control}\n")

    nvml = NvmlBackend()
    limits = nvml.limits(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=index,name,pci.bus_id,power.min_limit,power.max_limit,"
                          "power.default_limit,power.limit", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    probe = {"minors": nvml.minors, "model": nvml.model(0), "pci": nvml.pci_bus_id(0),
             "limits_w": [limits.min_w, limits.max_w, limits.default_w, limits.current_w], "nvidia_smi": smi,
             "mps_control": control, "python": sys.version.split()[0]}
    (args.out / "probe.json").write_text(json.dumps(probe, indent=1))
    print(json.dumps(probe), flush=True)
    default_w = limits.default_w

    rows: list[dict[str, object]] = []

    def record(**row: object) -> None:
        rows.append(row)
        print(row, flush=True)
        with open(args.out / ("hooks.csv" if args.mechanism == "mps" else "hooks_timeslice.csv"), "w",
                  newline="") as handle:
            writer = csv.DictWriter(handle, FIELDS)
            writer.writeheader()
            writer.writerows(rows)

    took: list[str] = []

    def hook(kind: str, job: int, cap: float) -> float:
        env = {"PATH": os.environ.get("PATH", ""), "SLURM_GREEN_GPU_CONF": str(conf), "SLURM_JOB_ID": str(job),
               "SLURM_JOB_GPUS": "0", "SLURM_JOB_UID": str(os.getuid()), "SLURMD_NODENAME": "h100",
               "CUDA_VISIBLE_DEVICES": "0",
               **({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100"} if args.mechanism == "mps" else {}),
               "SLURM_JOB_COMMENT": "green: share=yes " + decision_token.sign(key.read_bytes().strip(), job, {"cap": cap})}
        began = time.time()
        done = subprocess.run([str(work / "hooks" / kind)], env=env, capture_output=True, text=True, timeout=60)
        took.append(f"{kind} {job} {time.time() - began:.2f}s")
        if done.returncode != 0:
            raise RuntimeError(f"{kind} {job} exited {done.returncode}: {done.stderr}")
        return nvml.limits(0).current_w

    alone_done: set[tuple[str, float]] = set()
    job = 1000
    for spec in args.pairs:
        names, cap_text = spec.split("@")
        a, b = names.split("+")
        cap = float(cap_text)
        for name in (a, b):
            for fraction in (1.0, cap):
                if (name, fraction) in alone_done:
                    continue
                alone_done.add((name, fraction))
                watts = round(fraction * limits.max_w)
                nvml.set_limit(0, watts)
                try:
                    (rate,), power = measure(nvml, workloads, [name], args.seconds, {})
                finally:
                    nvml.set_limit(0, default_w)
                record(run="alone", a=name, b="", cap=fraction, a_steps_per_s=round(rate, 3), b_steps_per_s="",
                       avg_power_w=round(power, 1), seconds=args.seconds, limit_w=watts, note="")
        try:
            ja, jb = job + 1, job + 2
            job += 10
            before = nvml.limits(0).current_w
            e0 = nvml.energy_j(0)
            after_a = hook("prolog", ja, cap)
            daemon_a = daemon.running()
            after_b = hook("prolog", jb, cap)
            apps: list[str] = []

            def look() -> None:
                apps.append(subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                                            "--format=csv,noheader"], capture_output=True, text=True).stdout.strip())

            (ra, rb), power = measure(nvml, workloads, [a, b], args.seconds, {"CUDA_VISIBLE_DEVICES": "0"}, look)
            after_eb = hook("epilog", jb, cap)
            daemon_b = daemon.running()
            after_ea = hook("epilog", ja, cap)
            drawn = nvml.energy_j(0) - e0
            daemon_end = daemon.running()
            left = {p.name: telemetry.read(p) for p in sorted((work / "telemetry").glob("*.json"))}
            split = {k: round(v.energy_j) for k, v in left.items() if v.job_id in (ja, jb)}
            note = (f"limit {before:g} W; after prolog A {after_a:g}, prolog B {after_b:g}, epilog B {after_eb:g}, "
                    f"epilog A {after_ea:g}; MPS daemon after prolog A {daemon_a}, after epilog B {daemon_b}, "
                    f"after epilog A {daemon_end}; energy left by the Epilogs {split} of {drawn:.0f} J drawn "
                    f"from prolog A to epilog A; hooks took {', '.join(took[-4:])}; compute apps: {' | '.join(apps)}")
            record(run=f"pair-{args.mechanism}-hooks", a=a, b=b, cap=cap, a_steps_per_s=round(ra, 3), b_steps_per_s=round(rb, 3),
                   avg_power_w=round(power, 1), seconds=args.seconds, limit_w=after_b, note=note)
        except Exception as exc:  # noqa: BLE001 - one pair's failure is a row, the others still run
            record(run="error", a=a, b=b, cap=cap, a_steps_per_s="", b_steps_per_s="", avg_power_w="",
                   seconds=args.seconds, limit_w=nvml.limits(0).current_w, note=f"{type(exc).__name__}: {exc}")
            nvml.set_limit(0, default_w)
    nvml.set_limit(0, default_w)
    nvml.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Emulated GPU power limits: a per-node JSON state file, for clusters without GPUs.

The Docker test cluster has /dev/nvidiaN character devices but no GPUs; this backend
keeps, per minor number, the board's min/max/default limit and the current limit in
a file (default /var/lib/slurm-green/gpus.json) so that tests can read what the
Prolog and Epilog did. A device appears, with A100-like defaults (100-400 W), when it
is first addressed. Fault switches on a device rehearse GPU errors: ``"fail": true``
makes changes fail, ``"fail_read": true`` makes reading its limits or energy fail too. Energy is the integral of the limit over time (an upper bound).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slurm_green.gpu.power import BoardLimits, GpuError

A100_LIMITS_W = {"min_w": 100.0, "max_w": 400.0, "default_w": 400.0}


class EmulatedBackend:
    name = "emulated"

    def __init__(self, path: str | Path, clock=time.time) -> None:
        self.path = Path(path)
        self._clock = clock

    @contextmanager
    def _state(self, write: bool) -> Iterator[dict]:
        """The file's devices under an exclusive lock; written back (atomically) if ``write``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = json.loads(self.path.read_text()) if self.path.exists() else {"devices": {}}
            except (OSError, ValueError) as exc:
                raise GpuError(f"emulated GPU state {self.path} unreadable: {exc}") from exc
            yield state["devices"]
            if write:
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
                os.replace(tmp, self.path)

    def _device(self, devices: dict, minor: int) -> dict:
        now = self._clock()
        device = devices.setdefault(
            str(minor), {**A100_LIMITS_W, "current_w": A100_LIMITS_W["default_w"], "energy_j": 0.0, "at": now}
        )
        device["energy_j"] += device["current_w"] * max(0.0, now - device["at"])
        device["at"] = now
        return device

    def limits(self, minor: int) -> BoardLimits:
        with self._state(write=True) as devices:
            d = self._readable(devices, minor)
            return BoardLimits(d["min_w"], d["max_w"], d["default_w"], d["current_w"])

    def set_limit(self, minor: int, watts: float) -> None:
        with self._state(write=True) as devices:
            d = self._device(devices, minor)
            if d.get("fail"):
                raise GpuError(f"GPU {minor}: emulated failure (\"fail\" is set in {self.path})")
            if not d["min_w"] <= watts <= d["max_w"]:
                raise GpuError(f"GPU {minor}: {watts:g} W outside {d['min_w']:g}-{d['max_w']:g} W")
            d["current_w"] = float(watts)

    def energy_j(self, minor: int) -> float | None:
        with self._state(write=True) as devices:
            return self._readable(devices, minor)["energy_j"]

    def _readable(self, devices: dict, minor: int) -> dict:
        device = self._device(devices, minor)
        if device.get("fail_read"):
            raise GpuError(f"GPU {minor}: emulated read failure (\"fail_read\" is set in {self.path})")
        return device

    def close(self) -> None:
        pass

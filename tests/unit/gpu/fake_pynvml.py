"""A stand-in for the ``pynvml`` module (nvidia-ml-py): the only fake, as there is no GPU here.

Same function names, argument order and units (milliwatts, millijoules) as pynvml.
Devices are listed in NVML index order, which on purpose differs from minor order.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field


class NVMLError(Exception):
    pass


@dataclass
class FakeGpu:
    minor: int
    min_mw: int = 100_000
    max_mw: int = 400_000
    default_mw: int = 400_000
    limit_mw: int = 400_000
    energy_mj: int = 0
    bus_id: bytes = b"00000000:00:00.0"
    name: str = "NVIDIA A100-SXM4-80GB"
    fail_set: bool = False
    fail_energy: bool = False
    set_calls: list[int] = field(default_factory=list)


def make_pynvml(gpus: list[FakeGpu], init_error: bool = False) -> types.ModuleType:
    """A module object whose device *index* i is ``gpus[i]``."""
    module = types.ModuleType("pynvml")
    module.NVMLError = NVMLError
    module.initialised = False

    def nvmlInit() -> None:
        if init_error:
            raise NVMLError("Driver Not Loaded")
        module.initialised = True

    def nvmlShutdown() -> None:
        module.initialised = False

    def gpu(handle: FakeGpu) -> FakeGpu:
        if not module.initialised:
            raise NVMLError("Uninitialized")
        return handle

    def nvmlDeviceSetPowerManagementLimit(handle: FakeGpu, limit: int) -> None:
        device = gpu(handle)
        if device.fail_set:
            raise NVMLError("Insufficient Permissions")
        if not isinstance(limit, int) or not device.min_mw <= limit <= device.max_mw:
            raise NVMLError("Invalid Argument")
        device.set_calls.append(limit)
        device.limit_mw = limit

    module.nvmlInit = nvmlInit
    module.nvmlShutdown = nvmlShutdown
    module.nvmlDeviceGetCount = lambda: len(gpus)
    module.nvmlDeviceGetHandleByIndex = lambda index: gpus[index]
    module.nvmlDeviceGetMinorNumber = lambda h: gpu(h).minor
    module.nvmlDeviceGetPowerManagementLimitConstraints = lambda h: [gpu(h).min_mw, gpu(h).max_mw]
    module.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: gpu(h).default_mw
    module.nvmlDeviceGetPowerManagementLimit = lambda h: gpu(h).limit_mw
    module.nvmlDeviceSetPowerManagementLimit = nvmlDeviceSetPowerManagementLimit
    def nvmlDeviceGetTotalEnergyConsumption(handle: FakeGpu) -> int:
        device = gpu(handle)
        if device.fail_energy:
            raise NVMLError("Not Supported")
        return device.energy_mj

    module.nvmlDeviceGetTotalEnergyConsumption = nvmlDeviceGetTotalEnergyConsumption
    module.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=gpu(h).bus_id)
    module.nvmlDeviceGetName = lambda h: gpu(h).name
    return module


def four_gpus() -> list[FakeGpu]:
    """Index order 0..3 holds minors 2, 0, 3, 1, each with its own limits and bus id."""
    return [
        FakeGpu(minor=2, min_mw=150_000, max_mw=300_000, default_mw=300_000, limit_mw=300_000, bus_id=b"0000:41:00.0"),
        FakeGpu(minor=0, min_mw=100_000, max_mw=400_000, default_mw=400_000, limit_mw=350_000, bus_id=b"0000:01:00.0"),
        FakeGpu(minor=3, min_mw=100_000, max_mw=500_000, default_mw=450_000, limit_mw=450_000, bus_id=b"0000:81:00.0"),
        FakeGpu(minor=1, min_mw=125_000, max_mw=250_000, default_mw=250_000, limit_mw=250_000, bus_id=b"0000:21:00.0"),
    ]

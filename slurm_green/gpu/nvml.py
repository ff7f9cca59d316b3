"""Power limits of real NVIDIA GPUs through NVML (the ``pynvml`` module of nvidia-ml-py).

NVML speaks milliwatts and numbers devices by its own index; this backend speaks watts
and addresses devices by /dev/nvidiaN minor number (nvmlDeviceGetMinorNumber), which
is what Slurm puts in SLURM_JOB_GPUS. Setting a limit needs root; the limit lasts
until it is changed or the driver is reloaded.
"""

from __future__ import annotations

from types import ModuleType

from slurm_green.gpu.power import BoardLimits, GpuError


def _pynvml() -> ModuleType:
    """nvidia-ml-py's binding, imported only where a GPU's limits are set (it is an extra)."""
    try:
        import pynvml
    except ImportError as exc:
        raise GpuError(f"NVML binding not installed (nvidia-ml-py): {exc}") from exc
    return pynvml


class NvmlBackend:
    name = "nvml"

    def __init__(self, binding: ModuleType | None = None) -> None:
        """Initialise NVML (``binding``: pynvml, or a test's stand-in) and map minor numbers to
        handles; raises GpuError if NVML is unusable."""
        nvml = binding if binding is not None else _pynvml()
        self._nvml = nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError, or OSError when libnvidia-ml is absent
            raise GpuError(f"NVML did not initialise: {exc}") from exc
        try:
            count = nvml.nvmlDeviceGetCount()
        except Exception as exc:
            nvml.nvmlShutdown()
            raise GpuError(f"NVML could not list devices: {exc}") from exc
        # One device NVML cannot open (a GPU fallen off the bus: GPU_IS_LOST, until a reboot) must
        # not take the others with it, or no Epilog on the node could restore their limits.
        self._by_minor = {}
        self._unopened: list[str] = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                self._by_minor[int(nvml.nvmlDeviceGetMinorNumber(handle))] = handle
            except Exception as exc:
                self._unopened.append(f"index {index}: {exc}")

    def _handle(self, minor: int):
        try:
            return self._by_minor[minor]
        except KeyError:
            unopened = f"; NVML could not open {', '.join(self._unopened)}" if self._unopened else ""
            raise GpuError(f"no NVIDIA GPU with minor number {minor} (have {sorted(self._by_minor)}{unopened})") from None

    def limits(self, minor: int) -> BoardLimits:
        handle = self._handle(minor)
        try:
            low_mw, high_mw = self._nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
            default_mw = self._nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle)
            current_mw = self._nvml.nvmlDeviceGetPowerManagementLimit(handle)
        except Exception as exc:
            raise GpuError(f"GPU {minor}: reading power limits failed: {exc}") from exc
        return BoardLimits(low_mw / 1000, high_mw / 1000, default_mw / 1000, current_mw / 1000)

    def set_limit(self, minor: int, watts: float) -> None:
        handle = self._handle(minor)
        try:
            self._nvml.nvmlDeviceSetPowerManagementLimit(handle, int(round(watts * 1000)))
        except Exception as exc:
            raise GpuError(f"GPU {minor}: setting the power limit to {watts:g} W failed: {exc}") from exc

    def energy_j(self, minor: int) -> float | None:
        try:
            return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle(minor)) / 1000
        except Exception:  # not supported before Volta: telemetry is optional
            return None

    @property
    def minors(self) -> list[int]:
        return sorted(self._by_minor)

    def model(self, minor: int) -> str:
        """The board's name as NVML gives it, e.g. "NVIDIA A100-SXM4-80GB"."""
        try:
            name = self._nvml.nvmlDeviceGetName(self._handle(minor))
        except Exception as exc:
            raise GpuError(f"GPU {minor}: reading its name failed: {exc}") from exc
        return name.decode() if isinstance(name, bytes) else str(name)

    def pci_bus_id(self, minor: int) -> str:
        """For logs and cross-checks against nvidia-smi."""
        bus_id = self._nvml.nvmlDeviceGetPciInfo(self._handle(minor)).busId
        return bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass


def gpu_models() -> list[str]:
    """This host's GPU names in minor order, for ``install``; [] where NVML is not usable."""
    try:
        backend = NvmlBackend()
    except GpuError:
        return []
    try:
        return [backend.model(minor) for minor in backend.minors]
    except GpuError:
        return []
    finally:
        backend.close()

"""Power limits of real NVIDIA GPUs through NVML (the ``pynvml`` module of nvidia-ml-py).

NVML speaks milliwatts and numbers devices by its own index; this backend speaks watts
and addresses devices by the number Slurm puts in SLURM_JOB_GPUS, its GRES index. Which
device that is depends on the node's gres.conf (``NUMBERINGS``): with ``File=/dev/nvidia[0-N]``
(what ``install`` writes) it is the /dev/nvidiaN minor number (nvmlDeviceGetMinorNumber);
with ``AutoDetect=nvml`` Slurm lists the GPUs in NVML's index order (its ``gpu_nvml.c``
loops over nvmlDeviceGetHandleByIndex and logs "GPU index N is different from minor number
M" where the two differ; ``gres_gpu.c`` keeps that order, sorting by links), so it is NVML's
index. Setting a limit needs root; the limit lasts until it is changed or the driver is
reloaded.
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


#: How Slurm numbers a node's GPUs in SLURM_JOB_GPUS: by /dev/nvidiaN minor (gres.conf names the
#: device files in order), or by NVML index (gres.conf ``AutoDetect=nvml``).
NUMBERINGS = ("minor", "index")
#: Which gres.conf each numbering fits, for the logs and ``gpu.check`` of a node where the two differ.
NUMBERING_RULE = ("gres.conf AutoDetect=nvml numbers GPUs by index (SLURM_GREEN_GPU_NUMBERING=index), "
                  "File=/dev/nvidia[0-N] in order, without AutoDetect, by minor (=minor)")


class NvmlBackend:
    name = "nvml"

    def __init__(self, binding: ModuleType | None = None, numbering: str = "minor") -> None:
        """Initialise NVML (``binding``: pynvml, or a test's stand-in) and map Slurm's GPU numbers
        (``numbering``: one of ``NUMBERINGS``) to handles; raises GpuError if NVML is unusable."""
        if numbering not in NUMBERINGS:
            raise ValueError(f"GPU numbering {numbering!r}: expected one of {', '.join(NUMBERINGS)}")
        nvml = binding if binding is not None else _pynvml()
        self._nvml = nvml
        self.numbering = numbering
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
        self._by_number = {}
        self._unopened: list[str] = []
        #: (NVML index, minor number) of each device NVML opened, in index order.
        self.devices: list[tuple[int, int]] = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
            except Exception as exc:
                self._unopened.append(f"index {index}: {exc}")
                continue
            self._by_number[self.number_of(index, minor)] = handle
            self.devices.append((index, minor))

    def number_of(self, index: int, minor: int) -> int:
        """The number Slurm gives the device of this NVML index and minor, by ``numbering``."""
        return minor if self.numbering == "minor" else index

    @property
    def renumbered(self) -> list[tuple[int, int]]:
        """(NVML index, minor) of each device whose two numbers differ: where the numbering matters."""
        return [(index, minor) for index, minor in self.devices if index != minor]

    @property
    def unopened(self) -> list[str]:
        """The devices NVML lists but could not open, each with why."""
        return list(self._unopened)

    @property
    def described(self) -> str:
        """"NVML", and where NVML's index and the minor number differ on this node, which of
        them SLURM_JOB_GPUS is read as: a gres.conf that numbers the GPUs the other way makes
        the hooks cap another job's GPU (docs/enactment.md)."""
        if not self.renumbered:
            return "NVML"
        pairs = ", ".join(f"index {index} is /dev/nvidia{minor}" for index, minor in self.renumbered)
        return (f"NVML (GPU numbers read as {'minor numbers' if self.numbering == 'minor' else 'NVML indices'}, "
                f"SLURM_GREEN_GPU_NUMBERING={self.numbering}; here {pairs}: {NUMBERING_RULE})")

    def _handle(self, minor: int):
        try:
            return self._by_number[minor]
        except KeyError:
            unopened = f"; NVML could not open {', '.join(self._unopened)}" if self._unopened else ""
            kind = "minor number" if self.numbering == "minor" else "NVML index"
            raise GpuError(f"no NVIDIA GPU with {kind} {minor} (have {sorted(self._by_number)}{unopened})") from None

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
        """Slurm's numbers of the GPUs NVML opened (minor numbers with the default numbering)."""
        return sorted(self._by_number)

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

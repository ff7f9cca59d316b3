"""The NVML backend against a fake pynvml whose index order differs from minor order."""

from __future__ import annotations

import sys

import pytest
from fake_pynvml import make_pynvml

from slurm_green.gpu.nvml import NvmlBackend
from slurm_green.gpu.power import BoardLimits, GpuError


def test_devices_are_addressed_by_minor_number_not_index(fake_nvml, gpus) -> None:
    backend = NvmlBackend()
    for device in gpus:
        assert backend.limits(device.minor) == BoardLimits(
            device.min_mw / 1000, device.max_mw / 1000, device.default_mw / 1000, device.limit_mw / 1000
        )
        assert backend.pci_bus_id(device.minor) == device.bus_id.decode()


def test_set_limit_reaches_the_right_board_in_milliwatts(fake_nvml, gpus) -> None:
    backend = NvmlBackend()
    backend.set_limit(0, 212.5)  # minor 0 is NVML index 1
    by_minor = {g.minor: g for g in gpus}
    assert by_minor[0].set_calls == [212_500]
    assert all(g.set_calls == [] for g in gpus if g.minor != 0)
    assert backend.limits(0).current_w == 212.5


def test_index_numbering_addresses_devices_by_nvml_index(fake_nvml, gpus) -> None:
    """gres.conf AutoDetect=nvml: Slurm's GPU 0 is NVML's index 0 (minor 2 here), not /dev/nvidia0."""
    backend = NvmlBackend(numbering="index")
    backend.set_limit(0, 212.5)
    assert gpus[0].set_calls == [212_500] and all(g.set_calls == [] for g in gpus[1:])
    assert backend.minors == [0, 1, 2, 3]
    with pytest.raises(GpuError, match="no NVIDIA GPU with NVML index 4"):
        backend.limits(4)


def test_the_description_names_the_numbering_only_where_it_matters(fake_nvml, gpus) -> None:
    described = NvmlBackend().described
    assert described.startswith("NVML (GPU numbers read as minor numbers, SLURM_GREEN_GPU_NUMBERING=minor")
    assert "index 0 is /dev/nvidia2, index 1 is /dev/nvidia0, index 2 is /dev/nvidia3, index 3 is /dev/nvidia1" \
        in described
    for index, gpu in enumerate(gpus):
        gpu.minor = index
    assert NvmlBackend(numbering="index").described == "NVML"


def test_an_unknown_numbering_is_refused(fake_nvml) -> None:
    with pytest.raises(ValueError, match="expected one of minor, index"):
        NvmlBackend(numbering="pci")


def test_driver_errors_become_gpu_errors(fake_nvml, gpus) -> None:
    backend = NvmlBackend()
    gpus[3].fail_set = True  # minor 1
    with pytest.raises(GpuError, match="GPU 1"):
        backend.set_limit(1, 200)
    with pytest.raises(GpuError, match="no NVIDIA GPU with minor number 7"):
        backend.limits(7)


def test_a_gpu_nvml_cannot_open_leaves_the_others_usable(fake_nvml, gpus) -> None:
    """A GPU fallen off the bus (NVML_ERROR_GPU_IS_LOST until a reboot): the node's other GPUs
    are still capped and restored; the lost one's error says what NVML said."""
    opened = fake_nvml.nvmlDeviceGetHandleByIndex

    def lost(index: int):
        if index == 0:
            raise fake_nvml.NVMLError("GPU is lost")
        return opened(index)

    fake_nvml.nvmlDeviceGetHandleByIndex = lost
    backend = NvmlBackend()
    backend.set_limit(0, 200)  # minor 0 is NVML index 1
    assert {g.minor: g for g in gpus}[0].set_calls == [200_000]
    with pytest.raises(GpuError, match=r"minor number 2 .*could not open index 0: GPU is lost"):
        backend.limits(gpus[0].minor)


def test_energy_is_reported_in_joules(fake_nvml, gpus) -> None:
    gpus[2].energy_mj = 5_000_000  # minor 3
    assert NvmlBackend().energy_j(3) == 5000


def test_close_shuts_nvml_down(fake_nvml) -> None:
    backend = NvmlBackend()
    backend.close()
    assert fake_nvml.initialised is False


def test_unusable_nvml_raises_gpu_error(monkeypatch, gpus, no_nvml) -> None:
    with pytest.raises(GpuError, match="not installed"):
        NvmlBackend()
    monkeypatch.setitem(sys.modules, "pynvml", make_pynvml(gpus, init_error=True))
    with pytest.raises(GpuError, match="did not initialise"):
        NvmlBackend()


def test_gpu_models_in_minor_order(fake_nvml, gpus) -> None:
    from slurm_green.gpu.nvml import gpu_models

    gpus[0].name = "NVIDIA H100 80GB HBM3"  # index 0 is minor 2
    assert gpu_models() == ["NVIDIA A100-SXM4-80GB"] * 2 + ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"]
    assert not fake_nvml.initialised  # shut down again


def test_gpu_models_without_nvml_is_empty(no_nvml) -> None:
    from slurm_green.gpu.nvml import gpu_models

    assert gpu_models() == []

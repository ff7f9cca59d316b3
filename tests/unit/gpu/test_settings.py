"""Settings (file, then environment) and which backend they select."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_green.gpu.emulated import EmulatedBackend
from slurm_green.gpu.nvml import NvmlBackend
from slurm_green.gpu.settings import GpuSettings, load_settings, open_backend


def test_defaults_without_file_or_environment(tmp_path) -> None:
    assert load_settings({"SLURM_GREEN_GPU_CONF": str(tmp_path / "absent")}) == GpuSettings()


def test_environment_overrides_the_file(tmp_path) -> None:
    conf = tmp_path / "gpu.conf"
    conf.write_text(
        "# site settings\nSLURM_GREEN_GPU_BACKEND=emulated\nexport SLURM_GREEN_DEFAULT_CAP='0.8'\n"
        "SLURM_GREEN_STATE_DIR=/srv/sg  # comment\n"
    )
    settings = load_settings({"SLURM_GREEN_GPU_CONF": str(conf), "SLURM_GREEN_DEFAULT_CAP": "0.6"})
    assert settings.backend == "emulated"
    assert settings.default_cap == 0.6
    assert settings.jobs_dir == Path("/srv/sg/jobs")


@pytest.mark.parametrize(
    ("name", "value"),
    [("SLURM_GREEN_GPU_BACKEND", "cuda"), ("SLURM_GREEN_DEFAULT_CAP", "1.2"), ("SLURM_GREEN_DEFAULT_CAP", "0"),
     ("SLURM_GREEN_GPU_ENACTMENT", "watts")],
)
def test_bad_values_are_refused(tmp_path, name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        load_settings({"SLURM_GREEN_GPU_CONF": str(tmp_path / "absent"), name: value})


def test_auto_prefers_nvml(fake_nvml, tmp_path) -> None:
    backend, how = open_backend(GpuSettings(emulated_state=tmp_path / "g.json", emulated_state_explicit=True))
    assert isinstance(backend, NvmlBackend) and how.startswith("NVML")


def test_numbering_reaches_the_backend_and_a_bad_one_is_refused(fake_nvml, tmp_path) -> None:
    absent = str(tmp_path / "absent")
    assert load_settings({"SLURM_GREEN_GPU_CONF": absent}).numbering == "minor"
    settings = load_settings({"SLURM_GREEN_GPU_CONF": absent, "SLURM_GREEN_GPU_NUMBERING": " Index "})
    backend, how = open_backend(settings)
    assert isinstance(backend, NvmlBackend) and backend.numbering == "index"
    assert "read as NVML indices" in how
    with pytest.raises(ValueError, match="SLURM_GREEN_GPU_NUMBERING='pci': expected one of minor, index"):
        load_settings({"SLURM_GREEN_GPU_CONF": absent, "SLURM_GREEN_GPU_NUMBERING": "pci"})


def test_auto_without_nvml_emulates_only_when_configured(no_nvml, tmp_path) -> None:
    backend, how = open_backend(GpuSettings())
    assert backend is None and "SLURM_GREEN_GPU_EMULATED_STATE" in how
    backend, _ = open_backend(GpuSettings(emulated_state=tmp_path / "g.json", emulated_state_explicit=True))
    assert isinstance(backend, EmulatedBackend) and backend.path == tmp_path / "g.json"


def test_explicit_choices(no_nvml, tmp_path) -> None:
    assert open_backend(GpuSettings(backend="nvml"))[0] is None
    assert open_backend(GpuSettings(backend="none"))[0] is None
    assert isinstance(open_backend(GpuSettings(backend="emulated", emulated_state=tmp_path / "g"))[0], EmulatedBackend)

"""``python3 -m slurm_green.gpu.check`` against the stand-in NVML (index order differs from minor order)."""

from __future__ import annotations

import io

from slurm_green.gpu.check import main


def run(environ: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    return main(environ, out), out.getvalue()


def test_each_gpu_is_listed_with_the_number_the_hooks_give_it(fake_nvml, gpus, tmp_path) -> None:
    code, text = run({"SLURM_GREEN_GPU_CONF": str(tmp_path / "absent"), "SLURM_GREEN_GPU_NUMBERING": "index"})
    assert code == 0
    rows = [line.split() for line in text.splitlines() if line.split()[:1] and line.split()[0].isdigit()]
    # slurm number, NVML index, minor: by index under "index"; the fake's index 0 is minor 2.
    assert [row[:3] for row in rows] == [["0", "0", "2"], ["1", "1", "0"], ["2", "2", "3"], ["3", "3", "1"]]
    assert "0000:41:00.0" in rows[0] and "150/300/300," in rows[0]
    assert "differ on this node" in text and "in force: index" in text


def test_minor_numbering_and_agreeing_numbers(fake_nvml, gpus, tmp_path) -> None:
    environ = {"SLURM_GREEN_GPU_CONF": str(tmp_path / "absent")}
    _, text = run(environ)
    assert "numbering=minor" in text and "in force: minor" in text
    assert [line.split()[0] for line in text.splitlines() if line.split()[:1] and line.split()[0].isdigit()] == \
        ["2", "0", "3", "1"]
    for index, gpu in enumerate(gpus):
        gpu.minor = index
    _, text = run(environ)
    assert "agree on this node" in text and "differ" not in text


def test_a_gpu_whose_limits_cannot_be_read_is_shown_not_fatal(fake_nvml, gpus, tmp_path) -> None:
    def limit(handle):
        if handle is gpus[2]:
            raise fake_nvml.NVMLError("Unknown Error")
        return handle.limit_mw

    fake_nvml.nvmlDeviceGetPowerManagementLimit = limit
    code, text = run({"SLURM_GREEN_GPU_CONF": str(tmp_path / "absent")})
    assert code == 0 and text.count("NVIDIA A100") == 3
    (row,) = [line for line in text.splitlines() if line.split()[:1] == ["3"]]  # minor 3: NVML index 2
    assert "reading power limits failed: Unknown Error" in row


def test_no_power_control_and_bad_settings(no_nvml, tmp_path) -> None:
    absent = str(tmp_path / "absent")
    code, text = run({"SLURM_GREEN_GPU_CONF": absent})
    assert code == 1 and "GPU power control: none" in text
    code, text = run({"SLURM_GREEN_GPU_CONF": absent, "SLURM_GREEN_GPU_NUMBERING": "bus"})
    assert code == 2 and "SLURM_GREEN_GPU_NUMBERING='bus'" in text

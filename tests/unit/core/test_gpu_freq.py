import pytest

from slurm_green.core import gpu_freq


@pytest.mark.parametrize(
    ("cap", "level"),
    [(0.3, "low"), (0.5, "low"), (0.6, "medium"), (0.7, "medium"), (0.8, "highm1"), (0.95, "high"), (1.0, "high")],
)
def test_a_cap_gets_the_lowest_level_that_does_not_slow_the_job_more(cap: float, level: str) -> None:
    assert gpu_freq.level_for_cap(cap) == level
    assert gpu_freq.cap_for_level(level) >= cap
    assert gpu_freq.tres_freq(cap) == f"gpu:{level}"


@pytest.mark.parametrize(
    ("tres_freq", "level"),
    [("gpu:medium", "medium"), ("gpu:low,memory=high", "low"), ("cpu:2;gpu:highm1", "highm1"), ("", None),
     ("gpu:", None), ("gpu:1410", "1410")],
)
def test_level_of_reads_slurms_tres_freq(tres_freq: str, level: str | None) -> None:
    assert gpu_freq.level_of(tres_freq) == level


def test_unknown_levels_and_clocks_mean_no_cap() -> None:
    assert gpu_freq.cap_for_level("1410") == 1.0

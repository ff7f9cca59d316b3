"""The progress record's format: what a job may write and what the controller refuses."""

from __future__ import annotations

import json

import pytest

from slurm_green.core import progress
from slurm_green.core.progress import JobProgress

GOOD = JobProgress(42, "samples", 1280.0, 64.0, 0.25, 1_790_000_000.0, checkpoint=1_789_999_990.0, total=6400.0)


def fields(**change: object) -> bytes:
    data = json.loads(progress.encode(GOOD))
    data.update(change)
    return json.dumps(data).encode()


def test_a_record_round_trips_and_is_small() -> None:
    data = progress.encode(GOOD)
    assert progress.decode(data, 42) == GOOD and len(data) < 200
    assert GOOD.file_name == "42.progress.json"
    assert json.loads(data)["format"] == 3 == progress.FORMAT


def test_a_format_1_record_still_reads_with_no_checkpoint() -> None:
    """Jobs running an older helper keep reporting: format 1 had no checkpoint field."""
    old = b'{"done": 1280.0, "format": 1, "frozen": 0.25, "job_id": 42, "per_s": 64.0, "time": 1790000000.0, ' \
          b'"unit": "samples"}'
    assert progress.decode(old, 42) == JobProgress(42, "samples", 1280.0, 64.0, 0.25, 1_790_000_000.0)
    assert progress.decode(old, 42).checkpoint == 0.0


def test_a_format_2_record_still_reads_with_no_total() -> None:
    old = without("total", format=2)
    assert progress.decode(old, 42) == JobProgress(42, "samples", 1280.0, 64.0, 0.25, 1_790_000_000.0,
                                                   checkpoint=1_789_999_990.0)


def test_the_time_left_is_the_units_to_go_at_the_rate_less_the_reports_age() -> None:
    assert GOOD.time_left_s(GOOD.time) == (6400 - 1280) / 64
    assert GOOD.time_left_s(GOOD.time + 30) == (6400 - 1280) / 64 - 30
    assert GOOD.time_left_s(GOOD.time + 10**6) == 0.0           # overdue: not negative
    assert GOOD.time_left_s(GOOD.time - 30) == (6400 - 1280) / 64  # a clock behind: no more than reported
    for unknown in (JobProgress(42, "steps", 10, 1, 0, 5), JobProgress(42, "steps", 10, 0, 0, 5, total=20)):
        assert unknown.time_left_s(5) is None


def without(key: str, **change: object) -> bytes:
    data = json.loads(progress.encode(GOOD))
    del data[key]
    data.update(change)
    return json.dumps(data).encode()


@pytest.mark.parametrize("data", [
    b"\xff\xfe not utf-8", b"caf\xe9", b"[" * 4000, b"{not json", b"[]", b"null",
    b" " * (progress.MAX_BYTES + 1),
    fields(extra=1), fields(format=4), fields(format=0), fields(format=True), fields(format=2.0),
    fields(format="3"), fields(format=None), without("format"),
    fields(format=1), fields(format=2),    # an older format with format 3's keys
    without("total"),                      # format 3 without it
    without("checkpoint", format=True),    # True == 1, but not a format
    without("total", format=1), without("total", format=2, extra=0),
    fields(checkpoint=-1), fields(checkpoint=True), fields(checkpoint="1"), fields(checkpoint=None),
    fields(checkpoint=10**400), fields(checkpoint=GOOD.time + 1),   # a checkpoint after the record's time
    fields(job_id=43), fields(job_id="42"),
    fields(total=-1), fields(total=True), fields(total="6400"), fields(total=None), fields(total=10**400),
    fields(job_id=True), fields(unit="epochs"), fields(unit=["samples"]), fields(done=-1), fields(done=True),
    fields(done="12"), fields(per_s=10**400), fields(frozen=1.5), fields(frozen=None),
    b'{"done": NaN, "format": 1, "frozen": 0, "job_id": 42, "per_s": 1, "time": 1, "unit": "steps"}',
    b'{"done": 1e999, "format": 1, "frozen": 0, "job_id": 42, "per_s": 1, "time": 1, "unit": "steps"}',
    fields(unit="\udcff"),
    b'{"checkpoint": NaN, "done": 1, "format": 2, "frozen": 0, "job_id": 42, "per_s": 1, "time": 1, "unit": "steps"}',
    b'{"checkpoint": Infinity, "done": 1, "format": 2, "frozen": 0, "job_id": 42, "per_s": 1, "time": 1, '
    b'"unit": "steps"}',
])
def test_anything_but_exactly_a_record_of_this_job_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        progress.decode(data, 42)

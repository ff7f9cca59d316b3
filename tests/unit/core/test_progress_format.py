"""The progress record's format: what a job may write and what the controller refuses."""

from __future__ import annotations

import json

import pytest

from slurm_green.core import progress
from slurm_green.core.progress import JobProgress

GOOD = JobProgress(42, "samples", 1280.0, 64.0, 0.25, 1_790_000_000.0)


def fields(**change: object) -> bytes:
    data = json.loads(progress.encode(GOOD))
    data.update(change)
    return json.dumps(data).encode()


def test_a_record_round_trips_and_is_small() -> None:
    data = progress.encode(GOOD)
    assert progress.decode(data, 42) == GOOD and len(data) < 200
    assert GOOD.file_name == "42.progress.json"


@pytest.mark.parametrize("data", [
    b"\xff\xfe not utf-8", b"caf\xe9", b"[" * 4000, b"{not json", b"[]", b"null",
    b" " * (progress.MAX_BYTES + 1),
    fields(extra=1), fields(format=2), fields(format=True), fields(job_id=43), fields(job_id="42"),
    fields(job_id=True), fields(unit="epochs"), fields(unit=["samples"]), fields(done=-1), fields(done=True),
    fields(done="12"), fields(per_s=10**400), fields(frozen=1.5), fields(frozen=None),
    b'{"done": NaN, "format": 1, "frozen": 0, "job_id": 42, "per_s": 1, "time": 1, "unit": "steps"}',
    b'{"done": 1e999, "format": 1, "frozen": 0, "job_id": 42, "per_s": 1, "time": 1, "unit": "steps"}',
    fields(unit="\udcff"),
])
def test_anything_but_exactly_a_record_of_this_job_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        progress.decode(data, 42)

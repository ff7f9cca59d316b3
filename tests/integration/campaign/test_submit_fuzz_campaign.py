"""Submission fuzz: 10,000 generated --comment / job-name inputs through the real job_submit.lua.

Users write --comment and the job name; both reach the plugin as C strings of any bytes
but NUL, up to Slurm's 1,024-byte limit. Most inputs go through job_submit.lua in a
real Lua 5.1 (the unit tests' harness: fast), the option grammar fuzzed with hypothesis;
a seeded sample goes through real `sbatch` as alice on the Docker cluster. Every input
is judged by the Python reference (tests/unit/job_submit/reference.py). Printed, all
expected 0: plugin errors, valid submissions rejected, invalid ones accepted, markers
that differ from the reference, decision tokens that survive.

    flock /tmp/sg-cluster.lock env SLURM_GREEN_SLURM=24.11 .venv/bin/pytest -m integration -s \\
        tests/integration/campaign/test_submit_fuzz_campaign.py
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from cluster import Cluster
from raw_bytes import Submission, read_back, sbatch_raw
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from slurm_green.core import decision_token
from slurm_green.core.green_options import NO_VAL

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "job_submit"))
from lua_plugin import start_plugin  # noqa: E402
from reference import ITEMS, JOINS, comments, expected_submission  # noqa: E402

TOTAL = 10_000
LIVE_SAMPLE = 300
LIVE_LIMIT_MIN = 5  # the live sample's --time: job_submit.lua records it in the marker (limit=300)
SLURM_LIMIT = 1024  # bytes of a comment or job name; slurmctld refuses longer ("... too long")
# The form of a non-UTF-8 comment from issue 11, and the long-comment shape.
EDGES = [
    (b"green:flex=1h caf\xe9", b"fuzz"),
    (b"green:flex=1h", b"\xff\xfename"),
    (b"\xff" * SLURM_LIMIT, b"n" * SLURM_LIMIT),
    (b"green:flex=10m,cap=yes " + b"w" * (SLURM_LIMIT - 23), b"fuzz"),
    (b"green:flex=10m,cap=yes " + b"w" * (SLURM_LIMIT - 22), b"fuzz"),
    (b"a\nb green:on\r\n", b"line\nbreak"),
    (b"green:flex=6h gpus=2", b"fuzz"),
    (b"green:flex=6h,flex=1h", b"fuzz"),
    (b"\x1b[31mgreen:cap=no\x1b[0m", b"\x01\x02\x7f"),
    (b"", b""),
]


# ------------------------------------------------------------------ inputs


def _random_bytes(rng: random.Random, length: int, low: int = 1) -> bytes:
    return bytes(rng.randint(low, 255) for _ in range(length))


def _length(rng: random.Random) -> int:
    """Mostly short, often right at Slurm's limit."""
    return rng.choice([rng.randint(0, 40), rng.randint(0, 300), rng.randint(SLURM_LIMIT - 3, SLURM_LIMIT + 3)])


def _grammar(rng: random.Random) -> bytes:
    items = [rng.choice(ITEMS) for _ in range(rng.randint(1, 5))]
    text = items[0] + "".join(rng.choice(JOINS) + item for item in items[1:])
    prefix = rng.choice(["green:", "GREEN:", "green: ", "green", ""])
    words = [prefix + text]
    for _ in range(rng.randint(0, 2)):
        words.insert(rng.randint(0, len(words)), rng.choice(["note", "gpus=4", "caf\xe9", "sg1.x", "green:off"]))
    encoded = " ".join(words).encode("utf-8", "surrogateescape")
    return encoded if rng.random() < 0.7 else encoded + b" " + _random_bytes(rng, rng.randint(1, 12), 0x80)


def _padded_to_the_limit(rng: random.Random) -> bytes:
    head = rng.choice([b"green:flex=10m,cap=yes ", b"green:off ", b"green:flex=6h gpus=2 ", b""])
    return head + b"w" * max(0, rng.randint(SLURM_LIMIT - 2, SLURM_LIMIT + 2) - len(head))


def _token_bait(rng: random.Random) -> bytes:
    token = decision_token.sign(_random_bytes(rng, 32), rng.randint(1, 2**31), {"cap": 0.1}).encode()
    return rng.choice([b"green:flex=1h ", b"", b"x"]) + token + _random_bytes(rng, rng.randint(0, 8), 0x80)


_COMMENTS = {
    "random bytes": lambda rng: _random_bytes(rng, _length(rng)),
    "non-UTF-8 bytes": lambda rng: _random_bytes(rng, _length(rng), 0x80),
    "option grammar": _grammar,
    "at the 1,024-byte limit": _padded_to_the_limit,
    "decision-token bait": _token_bait,
}


def random_submission(rng: random.Random) -> Submission:
    """One user input of every kind the campaign covers, from a seeded generator."""
    comment = _COMMENTS[rng.choice(sorted(_COMMENTS))](rng)
    name = rng.choice([b"fuzz", _random_bytes(rng, _length(rng)), _random_bytes(rng, rng.randint(1, 20), 0x80)])
    return Submission(comment, name)


_NUL_FREE = st.binary(max_size=SLURM_LIMIT + 4).map(lambda b: b.replace(b"\0", b"\x01"))
SUBMISSIONS = st.one_of(
    comments().map(lambda text: Submission(text.encode("utf-8", "surrogateescape"))),
    st.builds(Submission, _NUL_FREE, _NUL_FREE),
    st.randoms(use_true_random=False).map(random_submission),
)

# ------------------------------------------------------------------ the judge


def reference(submission: Submission, time_limit_min: int = NO_VAL) -> str | None | ValueError:
    """The marker the plugin must write (None: none) for a job submitted with ``time_limit_min``
    (NO_VAL: no --time), or the error it must refuse with."""
    try:
        return expected_submission(submission.comment.decode("utf-8", "surrogateescape"),
                                   time_limit=time_limit_min)[0]
    except ValueError as error:
        return error


def _without_deadline(marker: str | None) -> str | None:
    return None if marker is None else re.sub(r";deadline=\d+", "", marker)


def _tally(counts: Counter, expected: str | None | ValueError, accepted: bool, marker: str | None,
           comment: bytes = b"") -> None:
    """Count one input; the first few whose marker differs from the reference are printed."""
    counts["inputs"] += 1
    if isinstance(expected, ValueError):
        counts["invalid (the reference refuses)"] += 1
        counts["invalid accepted"] += accepted
    else:
        counts["valid"] += 1
        counts["valid rejected"] += not accepted
        differs = accepted and _without_deadline(marker) != _without_deadline(expected)
        counts["marker differs from the reference"] += differs
        if differs and counts["marker differs from the reference"] <= 3:
            print(f"\n  marker differs: comment {comment[:120]!r}: plugin {marker!r}, reference {expected!r}")


def _report(title: str, counts: Counter) -> None:
    print(f"\n{title}")
    for name, count in sorted(counts.items()):
        print(f"  {name:46s} {count:6d}")


_ZERO = ("plugin errors", "invalid accepted", "valid rejected", "marker differs from the reference",
         "decision tokens surviving")

# ------------------------------------------------------------------ through the Lua harness


def test_fuzzed_submissions_through_the_plugin_in_lua() -> None:
    lua = start_plugin()
    counts: Counter = Counter()

    @given(submission=SUBMISSIONS)
    @settings(max_examples=TOTAL - LIVE_SAMPLE - len(EDGES), deadline=None, database=None,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    def run(submission: Submission) -> None:
        answer = lua.submit(comment=submission.comment, name=submission.name, tres_per_node="gres/gpu:1")
        counts["plugin errors"] += len(answer.messages("error"))
        comment = answer.job.get("comment", "")
        counts["decision tokens surviving"] += answer.rc == 0 and decision_token.find_token(str(comment)) is not None
        expected = reference(submission)
        _tally(counts, expected, answer.rc == 0, answer.job.get("admin_comment"),  # type: ignore[arg-type]
               submission.comment)
        if len(submission.comment) > SLURM_LIMIT or len(submission.name) > SLURM_LIMIT:
            counts["over 1,024 bytes (slurmctld refuses them too)"] += 1

    try:
        run()
    finally:
        lua.close()
        _report("job_submit.lua in Lua 5.1, fuzzed with hypothesis:", counts)
    assert {name: counts[name] for name in _ZERO} == dict.fromkeys(_ZERO, 0)
    assert counts["inputs"] == TOTAL - LIVE_SAMPLE - len(EDGES)
    assert counts["valid"] > 1000 and counts["invalid (the reference refuses)"] > 1000  # both sides exercised


# ------------------------------------------------------------------ through real sbatch

def _slurmctld_log(c: Cluster, since: float) -> str:
    p = subprocess.run(["docker", "logs", "--since", str(int(since)), c.container("slurmctld")],
                       capture_output=True, text=True, errors="replace", timeout=60)
    return p.stdout + p.stderr


def test_a_sample_through_real_sbatch(cluster: Cluster) -> None:
    rng = random.Random(20261123)
    sample = [Submission(comment, name) for comment, name in EDGES]
    sample += [random_submission(rng) for _ in range(LIVE_SAMPLE)]
    started = time.time() - 1
    results = sbatch_raw(cluster, "alice", sample, args=("--hold", "-t", str(LIVE_LIMIT_MIN), "--gres=gpu:1"))
    accepted = [r.job_id for r in results if r.job_id is not None]
    back = read_back(cluster, accepted)
    counts: Counter = Counter()
    for submission, result in zip(sample, results):
        expected = reference(submission, LIVE_LIMIT_MIN)
        over_limit = len(submission.comment) > SLURM_LIMIT or len(submission.name) > SLURM_LIMIT
        if over_limit:  # slurmctld refuses these itself; the plugin may have refused first
            counts["over 1,024 bytes, refused"] += result.rc != 0
            counts["over 1,024 bytes, accepted (expected 0)"] += result.rc == 0
            continue
        if isinstance(expected, ValueError):
            counts["refusals saying what is allowed"] += b"slurm-green:" in result.stderr and b"green:off" in result.stderr
        marker = None
        if result.job_id is not None:
            comment, show = back[result.job_id]
            found = re.search(rb"AdminComment=(sg:\S+)", show)
            marker = found.group(1).decode() if found else None
            if decision_token.find_token(submission.comment.decode("utf-8", "surrogateescape")) is None:
                counts["comments changed on the way in"] += comment != submission.comment
            else:  # the plugin strips the token and keeps the rest
                counts["submitted with a decision token"] += 1
                counts["decision tokens surviving"] += decision_token.find_token(
                    comment.decode("utf-8", "surrogateescape")) is not None
        _tally(counts, expected, result.rc == 0, marker, submission.comment)
    log = _slurmctld_log(cluster, started)
    counts["plugin errors"] = len(re.findall(r"job_submit\.lua \w+ failed|job_submit/lua.*(?:error|fail)", log, re.I))
    _report(f"real sbatch on Slurm {cluster.version} as alice ({len(sample)} submissions):", counts)
    assert {name: counts[name] for name in _ZERO} == dict.fromkeys(_ZERO, 0)
    assert counts["over 1,024 bytes, accepted (expected 0)"] == counts["comments changed on the way in"] == 0
    assert counts["refusals saying what is allowed"] == counts["invalid (the reference refuses)"]
    assert counts["valid"] > 50 and counts["invalid (the reference refuses)"] > 20

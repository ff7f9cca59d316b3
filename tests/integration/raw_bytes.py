"""Jobs with exactly the bytes a user typed, submitted and read back through `docker exec`.

`docker exec` passes argv through JSON, which replaces bytes that are not UTF-8; users'
comments and job names may hold any byte but NUL. So the bytes travel hex-encoded on
stdin, and a small script inside the container hands them to sbatch (and reads squeue's
and scontrol's raw output back) as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from cluster import Cluster


@dataclass(frozen=True)
class Submission:
    """What a user types: any bytes but NUL."""

    comment: bytes
    name: bytes = b"fuzz"


@dataclass(frozen=True)
class Submitted:
    rc: int
    job_id: int | None
    stderr: bytes


_SUBMITTER = r"""
import json, subprocess, sys
results = []
for comment, name, extra in json.load(sys.stdin):
    argv = [b"sbatch", b"--parsable", b"--output=/dev/null", b"--chdir=/tmp",
            *(bytes.fromhex(arg) for arg in extra),
            b"--comment=" + bytes.fromhex(comment), b"--job-name=" + bytes.fromhex(name)]
    p = subprocess.run(argv, input=b"#!/bin/bash\nsleep 1\n", capture_output=True)
    results.append([p.returncode, p.stdout.hex(), p.stderr.hex()])
json.dump(results, sys.stdout)
"""

_READER = r"""
import json, subprocess, sys
out = {}
for job in json.load(sys.stdin):
    comment = subprocess.run(["squeue", "-h", "-j", job, "-o", "%k"], capture_output=True).stdout
    show = subprocess.run(["scontrol", "show", "job", job], capture_output=True).stdout
    out[job] = [comment.hex(), show.hex()]
json.dump(out, sys.stdout)
"""


def sbatch_raw(c: Cluster, user: str, submissions: Sequence[Submission],
               args: Sequence[str] = ("--hold", "-t", "5", "--gres=gpu:1")) -> list[Submitted]:
    """Submit each as USER with exactly these comment and job-name bytes (one `docker exec`).

    `docker exec` passes argv through JSON, which would replace non-UTF-8 bytes; here they
    travel hex-encoded on stdin and a script in the container hands them to sbatch as they
    are. The jobs are held by default (they stay in the queue until cancelled)."""
    batch = [[s.comment.hex(), s.name.hex(), [a.encode().hex() for a in args]] for s in submissions]
    p = c.exec("controller", "python3", "-c", _SUBMITTER, user=user, input=json.dumps(batch), timeout=600)
    results = []
    for rc, out, err in json.loads(p.stdout):
        job_id = bytes.fromhex(out).split(b";")[0].strip()
        results.append(Submitted(rc, int(job_id) if rc == 0 and job_id.isdigit() else None, bytes.fromhex(err)))
    return results


def read_back(c: Cluster, jobs: list[int]) -> dict[int, tuple[bytes, bytes]]:
    """Comment (squeue %k, raw) and `scontrol show job` text of each job, as root."""
    p = c.exec("controller", "python3", "-c", _READER, input=json.dumps([str(j) for j in jobs]), timeout=600)
    return {int(job): (bytes.fromhex(k)[:-1], bytes.fromhex(show)) for job, (k, show) in json.loads(p.stdout).items()}

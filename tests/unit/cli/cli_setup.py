"""What the CLI tests share: a controller config in a temporary folder, and a PATH without Slurm."""

from __future__ import annotations

from pathlib import Path

#: A source that parses and fails at its first read (no such file), so carbon never decides the outcome.
DEAD_SOURCE = "csv:/nonexistent/carbon.csv"


def write_config(folder: Path, sources: str = f'["{DEAD_SOURCE}"]', extra: str = "") -> Path:
    path = folder / "config.toml"
    path.write_text(f'[controller]\nstate_db = "{folder}/state.db"\ndecision_key_file = "{folder}/none.key"\n'
                    f'[carbon]\nsources = {sources}\ncache_dir = "{folder}/cache"\n{extra}')
    return path


def no_slurm(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty)}


#: Captured `squeue --json` output of Slurm 24.11 (the shape every job record here takes).
SQUEUE_24_11 = Path(__file__).parents[1] / "slurm" / "fixtures" / "24.11" / "squeue.json"


def carbon_csv(folder: Path, now: float, low_from_h: float, low_to_h: float, high: float = 450.0,
               low: float = 60.0) -> Path:
    """An hourly ``timestamp,value`` file from an hour before ``now`` for 48 h: ``high``, except
    ``low`` in the hours starting ``low_from_h`` to ``low_to_h`` hours after now's hour."""
    import datetime as dt

    hour = int(now // 3600 * 3600)
    lines = ["timestamp,value"]
    for h in range(-1, 48):
        stamp = dt.datetime.fromtimestamp(hour + h * 3600, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        lines.append(f"{stamp},{low if low_from_h <= h < low_to_h else high}")
    path = folder / "carbon.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def fake_squeue(folder: Path, jobs: list[dict]) -> dict[str, str]:
    """A PATH whose ``squeue`` answers ``--jobs N`` as Slurm 24.11 does: the job's record from
    the captured output with ``jobs``' fields over it, or 'Invalid job id specified', exit 1."""
    import json
    import os

    template = json.loads(SQUEUE_24_11.read_text())
    records = {str(job["job_id"]): {**template["jobs"][0], **job} for job in jobs}
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    for job_id, record in records.items():
        (folder / f"job-{job_id}.json").write_text(json.dumps({**template, "jobs": [record]}))
    script = bin_dir / "squeue"
    script.write_text(f'#!/bin/sh\nfor last; do :; done\nif [ -f "{folder}/job-$last.json" ]; then cat "{folder}/job-$last.json";'
                      ' else echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi\n')
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def slurm_time(t: float) -> dict:
    return {"set": True, "infinite": False, "number": int(t)}

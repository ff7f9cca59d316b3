"""Per-job accounting from the state store: what was decided, what happened, what it saved.

"Carbon at once" is the first decision's estimate for starting when the job was first
seen; "decided" is the last decision's estimate for the window it was given. Both
are model estimates (GPU power x runtime x forecast intensity), not metered energy.
"Run" energy and carbon are accounted while the job ran: the decided configuration's
modelled power over the time it actually ran, at the grid's intensity of those hours.
"Metered" energy is what the job's GPUs drew as their Epilogs measured it (NVML energy
counters), where telemetry is configured; the rest of the node is not in it.

The cap shown is the one *enacted*: read from the last decision token (or ``--gpu-freq``)
that Slurm accepted, not from the plan. A decision Slurm refused shows as no cap, with
the planned one beside it (``decided_cap_fraction``), so the report never claims a cap
that no node was told about.

For accounting (``slurm-green report --user/--since/--until``): a job belongs to a
period when it was in the system during it (``in_period``, as ``sacct -S -E``
selects), its energy is the metered one where the Epilog measured it, else the
modelled one (``energy_kwh``), and ``summary`` sums jobs per user or account with the
same saving rule as ``totals``.
"""

from __future__ import annotations

import json

from slurm_green.controller.config import Config
from slurm_green.controller.store import Row, StateStore
from slurm_green.core.decision_token import InvalidToken, unverified_payload


def enacted_caps(store: StateStore, job_id: int | None = None) -> dict[int, float | None]:
    """Per job (or for ``job_id`` only), the cap of the last decision Slurm accepted
    (``None``: one without a cap).

    Jobs with no accepted decision are absent. A ``--gpu-freq`` site enacts the cap of
    the decision in force when its ``TresFreq`` update was accepted."""
    caps: dict[int, float | None] = {}
    if job_id is None:
        latest = {job: row["cap_fraction"] for job, row in store.latest_decisions().items()}
    else:
        latest = {job_id: row["cap_fraction"] for row in store.decisions(job_id)[-1:]}
    for action in store.actions(job_id):
        if not action["ok"]:
            continue
        job = int(action["job_id"])
        if action["kind"] == "SetDecision":
            try:
                cap = unverified_payload(str(json.loads(str(action["detail"]))["token"])).get("cap")
            except (InvalidToken, ValueError, KeyError, TypeError):
                continue
            caps[job] = float(cap) if isinstance(cap, (int, float)) else None
        elif action["kind"] == "SetGpuFreq":
            caps[job] = latest.get(job)
    return caps


def job_rows(store: StateStore) -> list[Row]:
    jobs = {int(row["job_id"]): row for row in store.jobs()}
    by_job: dict[int, list[Row]] = {}
    for row in store.decisions():
        by_job.setdefault(int(row["job_id"]), []).append(row)
    caps = enacted_caps(store)
    rows = []
    for job_id, decisions in sorted(by_job.items()):
        first, last = decisions[0], decisions[-1]
        seen = jobs.get(job_id, {})
        rows.append({
            "job_id": job_id,
            "user": seen.get("user"),
            "name": seen.get("name"),
            "submit_time": seen.get("submit_time"),
            "decided_start": last["start_at"],
            "actual_start": seen.get("start_time"),
            "end_time": seen.get("end_time"),
            "state": seen.get("state"),
            "cap_fraction": caps.get(job_id),
            "decided_cap_fraction": last["cap_fraction"],
            "gpu_type": last.get("gpu_type"),
            "reason": last["reason"],
            "expected_energy_kwh": last["expected_energy_kwh"],
            "expected_carbon_kg": last["expected_carbon_kg"],
            "carbon_if_now_kg": first["carbon_if_now_kg"],
            "energy_as_asked_kwh": first.get("energy_as_asked_kwh"),
            "run_energy_kwh": seen.get("energy_kwh"),
            "run_carbon_kg": seen.get("carbon_kg"),
            "metered_energy_kwh": seen.get("metered_energy_kwh"),
        })
    return rows


def totals(rows: list[Row]) -> dict[str, float]:
    pairs = [(float(r["expected_carbon_kg"]), float(r["carbon_if_now_kg"])) for r in rows
             if r["expected_carbon_kg"] is not None and r["carbon_if_now_kg"] is not None]
    decided = sum(p[0] for p in pairs)
    at_once = sum(p[1] for p in pairs)
    energy = [(float(r["expected_energy_kwh"]), float(r["energy_as_asked_kwh"])) for r in rows
              if r.get("expected_energy_kwh") is not None and r.get("energy_as_asked_kwh") is not None]
    return {"jobs": len(rows), "decided_kg": decided, "at_once_kg": at_once, "saved_kg": at_once - decided,
            "saved_fraction": (at_once - decided) / at_once if at_once else 0.0,
            "saved_kwh": sum(asked - decided_kwh for decided_kwh, asked in energy)}


def job_report(config: Config) -> tuple[list[Row], dict[str, float]]:
    store = StateStore(config.controller.state_db, read_only=True)
    try:
        rows = job_rows(store)
    finally:
        store.close()
    return rows, totals(rows)


def in_period(row: Row, since: float | None, until: float | None, now: float) -> bool:
    """Whether the job was in the system during ``[since, until)``, as ``sacct -S -E`` selects:
    from its start (or, never started, its submission) to its end (or now)."""
    begin = row["actual_start"] if row["actual_start"] is not None else row["submit_time"]
    end = row["end_time"] if row["end_time"] is not None else now
    if begin is None:
        return since is None and until is None
    return (until is None or float(begin) < until) and (since is None or float(end) >= since)


def energy_kwh(row: Row) -> tuple[float | None, str]:
    """The job's energy and how it is known: metered by its Epilog where it was, else modelled."""
    if row["metered_energy_kwh"] is not None:
        return float(row["metered_energy_kwh"]), "metered"
    if row["run_energy_kwh"] is not None:
        return float(row["run_energy_kwh"]), "modelled"
    return None, "none"


def summary(rows: list[Row], key: str) -> list[Row]:
    """Per value of ``key`` (``user``, ``account``): jobs, energy (metered where measured),
    carbon as run, and the estimated carbon saved (``totals``' rule)."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key) or "unknown"), []).append(row)
    out = []
    for name, members in sorted(groups.items()):
        kwh = [energy_kwh(r) for r in members]
        saved = totals(members)
        out.append({
            key: name, "jobs": len(members),
            "energy_kwh": sum(k for k, _ in kwh if k is not None),
            "metered_jobs": sum(how == "metered" for _, how in kwh),
            "run_carbon_kg": sum(float(r["run_carbon_kg"]) for r in members
                                 if r["run_carbon_kg"] is not None),
            "saved_kg": saved["saved_kg"], "at_once_kg": saved["at_once_kg"],
        })
    return out

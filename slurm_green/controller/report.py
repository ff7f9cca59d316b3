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
"""

from __future__ import annotations

import json

from slurm_green.controller.config import Config
from slurm_green.controller.store import StateStore
from slurm_green.core.decision_token import InvalidToken, unverified_payload


def enacted_caps(store: StateStore) -> dict[int, float | None]:
    """Per job, the cap of the last decision Slurm accepted (``None``: one without a cap).

    Jobs with no accepted decision are absent. A ``--gpu-freq`` site enacts the cap of
    the decision in force when its ``TresFreq`` update was accepted."""
    caps: dict[int, float | None] = {}
    latest = {job_id: row["cap_fraction"] for job_id, row in store.latest_decisions().items()}
    for action in store.actions():
        if not action["ok"]:
            continue
        job_id = int(action["job_id"])  # type: ignore[arg-type]
        if action["kind"] == "SetDecision":
            try:
                cap = unverified_payload(str(json.loads(str(action["detail"]))["token"])).get("cap")
            except (InvalidToken, ValueError, KeyError, TypeError):
                continue
            caps[job_id] = float(cap) if isinstance(cap, (int, float)) else None
        elif action["kind"] == "SetGpuFreq":
            caps[job_id] = latest.get(job_id)  # type: ignore[assignment]
    return caps


def job_rows(store: StateStore) -> list[dict[str, object]]:
    jobs = {int(row["job_id"]): row for row in store.jobs()}  # type: ignore[arg-type]
    by_job: dict[int, list[dict[str, object]]] = {}
    for row in store.decisions():
        by_job.setdefault(int(row["job_id"]), []).append(row)  # type: ignore[arg-type]
    caps = enacted_caps(store)
    rows = []
    for job_id, decisions in sorted(by_job.items()):
        first, last = decisions[0], decisions[-1]
        seen = jobs.get(job_id, {})
        rows.append({
            "job_id": job_id,
            "user": seen.get("user"),
            "submit_time": seen.get("submit_time"),
            "decided_start": last["start_at"],
            "actual_start": seen.get("start_time"),
            "state": seen.get("state"),
            "cap_fraction": caps.get(job_id),
            "decided_cap_fraction": last["cap_fraction"],
            "reason": last["reason"],
            "expected_energy_kwh": last["expected_energy_kwh"],
            "expected_carbon_kg": last["expected_carbon_kg"],
            "carbon_if_now_kg": first["carbon_if_now_kg"],
            "run_energy_kwh": seen.get("energy_kwh"),
            "run_carbon_kg": seen.get("carbon_kg"),
            "metered_energy_kwh": seen.get("metered_energy_kwh"),
        })
    return rows


def totals(rows: list[dict[str, object]]) -> dict[str, float]:
    pairs = [(float(r["expected_carbon_kg"]), float(r["carbon_if_now_kg"])) for r in rows  # type: ignore[arg-type]
             if r["expected_carbon_kg"] is not None and r["carbon_if_now_kg"] is not None]
    decided = sum(p[0] for p in pairs)
    at_once = sum(p[1] for p in pairs)
    return {"jobs": len(rows), "decided_kg": decided, "at_once_kg": at_once, "saved_kg": at_once - decided,
            "saved_fraction": (at_once - decided) / at_once if at_once else 0.0}


def job_report(config: Config) -> tuple[list[dict[str, object]], dict[str, float]]:
    store = StateStore(config.controller.state_db, read_only=True)
    try:
        rows = job_rows(store)
    finally:
        store.close()
    return rows, totals(rows)

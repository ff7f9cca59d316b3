"""Per-job accounting from the state store: what was decided, what happened, what it saved.

"Carbon at once" is the first decision's estimate for starting when the job was first
seen; "decided" is the last decision's estimate for the window it was given. Both
are model estimates (GPU power x runtime x forecast intensity), not metered energy.
"Run" energy and carbon are accounted while the job ran: the decided configuration's
modelled power over the time it actually ran, at the grid's intensity of those hours.
"Metered" energy is what the job's GPUs drew as their Epilogs measured it (NVML energy
counters), where telemetry is configured; the rest of the node is not in it.
"""

from __future__ import annotations

from slurm_green.controller.config import Config
from slurm_green.controller.store import StateStore


def job_rows(store: StateStore) -> list[dict[str, object]]:
    jobs = {int(row["job_id"]): row for row in store.jobs()}  # type: ignore[arg-type]
    by_job: dict[int, list[dict[str, object]]] = {}
    for row in store.decisions():
        by_job.setdefault(int(row["job_id"]), []).append(row)  # type: ignore[arg-type]
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
            "cap_fraction": last["cap_fraction"],
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
    store = StateStore(config.controller.state_db)
    try:
        rows = job_rows(store)
    finally:
        store.close()
    return rows, totals(rows)

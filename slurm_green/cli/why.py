"""``slurm-green why JOBID``: why a job waits, what it runs under (its time limit too, which a
decision that slows it raises), and what it should save.

For the job's owner: Slurm's view of the job (one ``squeue --json --jobs`` call, what
``squeue`` already shows them), the controller's decisions for that job only (its
store opened read-only: nothing is created or written), the cap Slurm accepted (the
report's rule, ``report.enacted_caps``), and the carbon intensity now and at the
decided start, from the forecast the controller uses (``when.read_forecast``), else
from the stored decision's estimates.

Where the store is not readable by the user (a site that keeps it private), the
Slurm view is shown and the line says why the rest is missing. A job that has left
Slurm is shown from the store only to the user the store recorded for it (or root):
the store holds every user's jobs, and ``why`` must not show more than ``squeue`` would.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import click

from slurm_green.carbon.errors import CarbonError
from slurm_green.cli.caller import caller
from slurm_green.cli.errors import CliError
from slurm_green.cli.timefmt import iso, local_time_option, relative, stamp
from slurm_green.cli.when import mean_intensity, read_forecast, saving
from slurm_green.controller.config import DEFAULT_PATH, Config, load_config
from slurm_green.controller.report import enacted_caps
from slurm_green.controller.store import StateStore
from slurm_green.core.actions import ActionError
from slurm_green.core.cluster import Job
from slurm_green.core.decision_token import find_token
from slurm_green.core.green_options import GreenOptions, parse_marker
from slurm_green.core.text import terminal_safe
from slurm_green.slurm import schema
from slurm_green.slurm.commands import SCONTROL_ENV
from slurm_green.slurm.errors import SlurmError, classify
from slurm_green.slurm.runner import CommandRunner, LocalRunner


def read_job(job_id: int, runner: CommandRunner | None = None, timeout_s: float = 15.0) -> Job | None:
    """The job as ``squeue`` shows it to this user (ended ones within MinJobAge too); ``None``
    when Slurm does not know it or does not show it to this user."""
    argv = ("squeue", "--json", "--states=all", "--jobs", str(job_id))
    result = (runner or LocalRunner()).run(argv, timeout=timeout_s, env=SCONTROL_ENV)
    if not result.ok:
        message = (result.stderr or result.stdout).strip()
        if classify(message) is ActionError.JOB_GONE:
            return None
        raise SlurmError(classify(message), f"squeue failed: {message}")
    try:
        document = json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise SlurmError(ActionError.OTHER, f"squeue --json printed no JSON: {exc}") from None
    return next((job for job in schema.parse_jobs(document) if job.job_id == job_id), None)


def stored(config: Config, job_id: int) -> tuple[dict[str, Any], str | None]:
    """The controller's record of one job (its decisions, the enacted cap, what the store saw),
    and a note when the store cannot be read here (missing, or private to the service user)."""
    try:
        store = StateStore(config.controller.state_db, read_only=True)
    except (OSError, sqlite3.Error) as exc:
        return {}, f"controller's store not readable here ({exc})"
    try:
        decisions = store.decisions(job_id)
        seen = store.job(job_id)
        caps = enacted_caps(store, job_id)
        rates = _measured(store, job_id)
    except sqlite3.Error as exc:  # a store the file mode lets us open but not read
        return {}, f"controller's store not readable here ({exc})"
    finally:
        store.close()
    return {"decisions": decisions, "seen": seen, "cap": caps.get(job_id), "cap_enacted": job_id in caps,
            "measured": rates}, None


def _measured(store: StateStore, job_id: int) -> list[dict[str, Any]]:
    """The rates the controller kept of the job's own reports, by GPU count (``[elastic]``); none
    from a store an older controller wrote (no ``rates`` table: a read-only store gains none)."""
    try:
        rates = store.rates([job_id]).get(job_id, ())
    except sqlite3.OperationalError:
        return []
    return [{"gpus": r.gpus, "unit": r.unit, "per_s": r.per_s, "frozen": r.frozen, "reports": r.readings}
            for r in rates]


def _may_see(record: dict[str, Any]) -> bool:
    """A job Slurm no longer shows: only its owner (as the store recorded it) or root may read it."""
    return os.geteuid() == 0 or (record.get("seen") or {}).get("user") == caller()


def _carbon(config: Config, start: float | None, runtime_s: float, now: float) -> dict[str, Any]:
    """Intensity now and at ``start`` from the forecast; ``{}`` when no source answers (the
    stored estimates are then the only carbon figures shown)."""
    if start is None or not config.carbon.sources:
        return {}
    try:
        forecast = read_forecast(config, (), now, max(start - now, 0) / 3600 + runtime_s / 3600 + 1)
    except CarbonError as exc:
        return {"forecast_error": str(exc)}
    now_g = mean_intensity(forecast.signal, now, runtime_s)
    then_g = mean_intensity(forecast.signal, max(start, now), runtime_s)
    return {"now_g_per_kwh": round(now_g, 1), "at_start_g_per_kwh": round(then_g, 1),
            "saving_fraction": round(saving(now_g, then_g), 4), "forecast": forecast.source,
            "synthetic": forecast.synthetic}


def explain(config: Config, job_id: int, now: float) -> dict[str, Any]:
    """Everything ``why`` shows, as JSON-ready values (times as POSIX seconds)."""
    job = read_job(job_id, timeout_s=config.slurm.command_timeout_s)
    record, store_note = stored(config, job_id)
    if job is None and not (record.get("decisions") and _may_see(record)):
        raise CliError(f"job {job_id}: Slurm does not show it (ended more than MinJobAge ago, never existed, "
                       "or not visible to you); `sacct -j` shows finished jobs")
    options: GreenOptions | None = parse_marker(job.admin_comment) if job else None
    seen = record.get("seen") or {}
    decisions = record.get("decisions") or []
    last = decisions[-1] if decisions else {}
    runtime_s = float(last.get("expected_runtime_s") or (job.time_limit_s if job and job.time_limit_s else 3600))
    out: dict[str, Any] = {
        "job_id": job_id,
        "user": job.user if job else seen.get("user"),
        "name": job.name if job else seen.get("name"),
        "state": job.state.value if job else seen.get("state"),
        "managed": bool(options and options.managed) if job else bool(decisions),
        "flex_s": options.max_delay_s if options else None,
        "deadline": options.deadline if options else None,
        "slurm_start": (job.eligible_time if job.is_pending else job.start_time) if job else seen.get("start_time"),
        "decided_start": last.get("start_at"),
        "gpus_per_node": (last.get("gpus_per_node") or (job.gpus_per_node if job else None)),
        "num_nodes": (last.get("num_nodes") or (job.num_nodes if job else None)),
        "cap_enacted": record.get("cap") if record.get("cap_enacted") else None,
        "cap_decided": last.get("cap_fraction"),
        "time_limit_s": job.time_limit_s if job else None,
        "time_limit_submitted_s": options.time_limit_s if options else None,
        "gpu_type": last.get("gpu_type"),
        "model_params": last.get("model_params"),
        "model_assumed": last.get("model_assumed"),
        "reason": last.get("reason"),
        "decided_at": last.get("decided_at"),
        "decisions": len(decisions),
        "expected_carbon_kg": last.get("expected_carbon_kg"),
        "carbon_if_now_kg": decisions[0].get("carbon_if_now_kg") if decisions else None,
        "token_in_comment": bool(job and find_token(job.comment)),
        "measured": record.get("measured") or [],
        "notes": [store_note] if store_note else [],
    }
    if job is not None and job.is_pending and out["managed"]:
        out.update(_carbon(config, out["decided_start"] or out["slurm_start"], runtime_s, now))
    if job is not None and not out["managed"]:
        out["notes"].append("not managed by slurm-green (no green: option, or green:off): Slurm schedules it as usual")
    return out


def _gpus(out: dict[str, Any]) -> str:
    per_node, nodes = out["gpus_per_node"], out["num_nodes"] or 1
    planned = f", planned as {out['gpu_type']}" if out.get("gpu_type") else ""
    return "-" if not per_node else f"{per_node * nodes} ({nodes} node(s) x {per_node}){planned}"


def _cap(out: dict[str, Any]) -> str:
    enacted = "none enacted" if out["cap_enacted"] is None else f"{out['cap_enacted']:.0%} enacted"
    decided = "none" if out["cap_decided"] is None else f"{out['cap_decided']:.0%}"
    return f"{enacted} (decided: {decided}) of the GPUs' maximum power"


def _model(out: dict[str, Any]) -> str:
    """Whether the job's model was fitted for its job and GPU type or assumed, and why (the
    decision's record: the job's name matching no modelled type, a GPU type nobody profiled)."""
    params = f"parameters {out['model_params']}" if out["model_params"] else "parameters not recorded"
    if out["model_assumed"]:
        return f"assumed ({out['model_assumed']}; {params})"
    return f"fitted for its job type and GPU type ({params})"


def _limit(out: dict[str, Any]) -> str:
    """The job's time limit, and the one it was submitted with where a decision raised it."""
    def clock(seconds: float) -> str:
        minutes = round(seconds / 60)
        return f"{minutes // 60}:{minutes % 60:02d} h"

    limit, submitted = out["time_limit_s"], out["time_limit_submitted_s"]
    if not limit:
        return "none"
    raised = f" (submitted with {clock(submitted)}; raised for the slower configuration decided)" \
        if submitted and limit >= submitted + 60 else ""
    return clock(limit) + raised


def render(out: dict[str, Any], now: float, local: bool) -> list[str]:
    """The lines a person reads, each made ``terminal_safe`` whole: the job's name, user and comment-derived
    fields, the reason, the model's note (it quotes the job's name), the rates' units (the job's own reports)
    and the notes are untrusted text, and a newline or escape sequence in any of them must not forge a line or
    reach the reader's terminal."""
    def at(t: float | None) -> str:
        return "-" if t is None else f"{stamp(t, local)} ({relative(float(t), now)})"

    flex = f", may wait {out['flex_s'] / 3600:.1f} h" if out["flex_s"] else ""
    lines = [f"job {out['job_id']} ({out['user'] or '?'}, {out['name'] or '?'}): {out['state']}"
             f"{', managed by slurm-green' if out['managed'] else ''}{flex}"]
    if out["managed"]:
        lines += [
            f"decided start:  {at(out['decided_start'])}",
            f"Slurm's start:  {at(out['slurm_start'])}",
            f"deadline:       {at(out['deadline'])}",
            f"GPUs:           {_gpus(out)}",
            f"power cap:      {_cap(out)}",
            f"time limit:     {_limit(out)}",
        ]
        if "now_g_per_kwh" in out:
            lines.append(f"carbon:         {out['at_start_g_per_kwh']:.0f} gCO2eq/kWh at the decided start vs "
                         f"{out['now_g_per_kwh']:.0f} now ({out['saving_fraction']:.0%} less; forecast: "
                         f"{out['forecast']}{', SYNTHETIC data' if out['synthetic'] else ''})")
        if out["expected_carbon_kg"] is not None and out["carbon_if_now_kg"] is not None:
            lines.append(f"estimate:       {out['expected_carbon_kg']:.3f} kg CO2 as decided vs "
                         f"{out['carbon_if_now_kg']:.3f} kg had it started when first seen")
        if out["model_assumed"] is not None:  # None: a decision an older controller made, which did not say
            lines.append(f"model:          {_model(out)}")
        if out["measured"]:
            lines.append("measured:       " + ", ".join(
                f"{r['per_s']:.4g} {r['unit']}/s on {r['gpus']} GPU(s) ({r['reports']} report(s))"
                for r in out["measured"]) + " (its own reports; how it scales between them rates it)")
        lines.append(f"reason:         {out['reason'] or '-'}"
                     + (f" (decided {at(out['decided_at'])})" if out["decided_at"] else ""))
    if "forecast_error" in out:
        lines.append(f"note: no forecast now ({out['forecast_error']})")
    lines += [f"note: {note}" for note in out["notes"]]
    return [terminal_safe(line) for line in lines]


@click.command("why")
@click.argument("job_id", type=click.IntRange(min=1), metavar="JOBID")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_PATH,
              show_default=True, help="Controller configuration (its state_db and carbon sources are read).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (times as ISO 8601).")
@local_time_option
def why(job_id: int, config_path: Path, as_json: bool, local_time: bool) -> None:
    """Why a job waits: its decided start, deadline, GPUs, power cap, carbon now and then, and the reason."""
    now = time.time()
    out = explain(load_config(config_path), job_id, now)
    if as_json:
        times = ("deadline", "slurm_start", "decided_start", "decided_at")
        click.echo(json.dumps({**out, **{key: iso(out[key], local_time) for key in times}}, indent=2))
        return
    for line in render(out, now, local_time):
        click.echo(line)

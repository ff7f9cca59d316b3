"""Turn a job's signed decision into GPU power limits at start, and undo them at the end.

Rule for GPUs shared by several jobs (gres/shard): a GPU runs at the *loosest* limit
any of its current jobs asks for (a job without a cap asks for the GPU's baseline), so
one job's cap never slows another job that was promised full power. When a job ends,
its GPUs go to the loosest wish of the jobs still on them; the last job to leave
restores the baseline, the limit found before the first of them started. The
controller gives both jobs of a pair it co-locates the same cap (controller/planner.py),
so the loosest wish is the cap each was promised. The energy a shared GPU draws is split
between its jobs by time overlap (``claims.split_energy``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from slurm_green.core import decision_token
from slurm_green.core.telemetry import NodeEnergy
from slurm_green.gpu.claims import ClaimStore, GpuClaim, JobClaims, split_energy
from slurm_green.gpu.power import BoardLimits, GpuError, PowerBackend, cap_watts

Log = Callable[[str], None]


def job_gpus(text: str | None) -> list[int]:
    """Minor numbers from SLURM_JOB_GPUS ("0,1", "0-2,5"; empty or unset: none)."""
    minors: set[int] = set()
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        low, _, high = part.partition("-")
        minors.update(range(int(low), int(high or low) + 1))
    return sorted(minors)


def decided_cap(comment: str, job_id: int, key_file: Path, default: float | None, log: Log,
                array_of: Callable[[int], int | None] | None = None) -> float | None:
    """The cap fraction the controller signed for this job, else the site default: the rule of
    ``decision_token.signed_cap``, with the site key read from ``key_file``.

    A task of a job array also accepts a token signed for its own array: the controller
    decides for the pending array as one record, and every task Slurm splits off copies its
    Comment with a new job id. ``array_of(job_id)`` says which array the job is a task of
    (asked only when the token is not signed for the job itself).
    """
    return decision_token.signed_cap(
        comment, lambda token: _verify(decision_token.load_key(key_file), job_id, token, array_of), default, log)


def _verify(key: bytes, job_id: int, token: str, array_of: Callable[[int], int | None] | None) -> dict[str, object]:
    try:
        return decision_token.verify(key, job_id, token)
    except decision_token.InvalidToken:
        array = array_of(job_id) if array_of is not None else None
        if array is None or array == job_id:
            raise
    try:
        return decision_token.verify(key, array, token)
    except decision_token.InvalidToken:
        raise decision_token.InvalidToken(
            f"decision token not signed for job {job_id} nor for its array {array}") from None


# ``scontrol show job -o`` starts every record with these fields, in this order, before any
# field a user writes (JobName, Comment...): anchored at the start, user text cannot fake them.
_ARRAY_TASK = re.compile(r"JobId=(\d+) ArrayJobId=(\d+) ArrayTaskId=(\d+) ")


def array_job_of(job_id: int, log: Log, timeout_s: float = 5.0) -> int | None:
    """The array this job is a task of, asked of slurmctld; None if it is none or no answer.

    slurmd gives the Prolog no SLURM_ARRAY_JOB_ID (seen on 24.11 with PrologFlags=Alloc),
    so this one RPC is the way to know; it is made only for a token not signed for the job.
    """
    import subprocess  # only here: most Prologs never need it (4 ms of every job start)

    try:
        done = subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"could not ask slurmctld whether job {job_id} is an array task: {exc}")
        return None
    match = _ARRAY_TASK.match(done.stdout.decode(errors="replace"))
    if done.returncode != 0 or match is None or int(match.group(1)) != job_id:
        return None
    return int(match.group(2))


def heal(backend: PowerBackend, store: ClaimStore, job_id: int, log: Log) -> list[JobClaims]:
    """Under the lock: forget jobs whose Epilog marked them ended but did not finish, give
    every GPU no live job holds its baseline back; returns the live records of other jobs."""
    for gone in sorted(store.abandoned() - {job_id}):
        log(f"job {gone}: its Epilog died before it was done; its claims are released")
        store.remove(gone)
    others = store.others(job_id)
    held = {m for r in others for m in r.gpus} | set((store.load(job_id) or JobClaims(job_id)).gpus)
    baselines = store.baselines()
    for minor, watts in sorted(baselines.items()):
        if minor in held:
            continue
        try:
            current = backend.limits(minor).current_w
            if current != watts:
                backend.set_limit(minor, watts)
                log(f"gpu {minor}: {current:g} W -> {watts:g} W (restored: no job holds it)")
            del baselines[minor]
        except GpuError as exc:
            log(f"gpu {minor}: error, could not restore {watts:g} W yet: {exc}")
    if baselines != store.baselines():
        store.save_baselines(baselines)
    return others


def apply_caps(backend: PowerBackend, store: ClaimStore, job_id: int, minors: list[int],
               fraction: float | None, log: Log) -> JobClaims:
    """Prolog: claim the job's GPUs and set each to the loosest wish of its holders."""
    claims = JobClaims(job_id)
    with store.locked():
        others = heal(backend, store, job_id, log)
        store.unmark_ended(job_id)
        earlier_run = store.load(job_id)  # a Prolog that ran before, without its Epilog
        baselines = store.baselines()
        for minor in minors:
            try:
                limits = backend.limits(minor)
                held = [r.gpus[minor] for r in others if minor in r.gpus]
                claims.shared = claims.shared or bool(held)
                mine_before = earlier_run.gpus.get(minor) if earlier_run else None
                found = GpuClaim(baselines.get(minor, limits.current_w), 0)
                baseline = (held[0] if held else mine_before or found).baseline_w
                baselines.setdefault(minor, baseline)
                # A cap only ever lowers the limit the site set (the baseline): a fraction of the
                # board's maximum above it (a board the site runs at 300 of 400 W) is no cap at all.
                want = min(cap_watts(fraction, limits), baseline) if fraction is not None else baseline
                claims.gpus[minor] = GpuClaim(baseline, want)
                reading = _reading(backend, minor)
                split_energy([r for r in others if minor in r.gpus], minor, reading)  # theirs, up to now
                if reading is not None:
                    claims.energy_mark_j[minor], claims.energy_j[minor] = reading, 0.0
                target = max([want, *(c.want_w for c in held)])
                if target != limits.current_w:
                    store.save_baselines(baselines)  # known before the limit changes
                    backend.set_limit(minor, target)
                shared = f", shared with {len(held)} job(s)" if held else ""
                log(f"gpu {minor}: {limits.current_w:g} W -> {target:g} W (job wants {want:g} W{shared})")
            except GpuError as exc:
                log(f"gpu {minor}: error, limit left as is: {exc}")
        for other in others:  # they now share a GPU with this job: their energy is not theirs alone
            if other.gpus.keys() & set(minors):
                other.shared = True
                store.save(other)
        store.save(claims)
        store.save_baselines(baselines)
    return claims


def restore_caps(backend: PowerBackend, store: ClaimStore, job_id: int, node: str, log: Log,
                 minors: list[int] | None = None) -> NodeEnergy | None:
    """Epilog: give the job's GPUs the loosest wish of the jobs still on them, else their baseline.

    The energy returned is the job's part of what its GPUs drew: on a GPU shared with
    other jobs, each stretch between two changes of its holders is split equally among
    the jobs that held it then (``claims.split_energy``).

    Without a readable record of the job, ``minors`` (SLURM_JOB_GPUS) and the kept
    baselines say what to restore. Returns the GPU energy the job drew here since its
    Prolog, or None when a GPU's energy counter could not be read at either end (a
    partial sum would mislead) or the record was lost.
    """
    with store.locked():
        others = heal(backend, store, job_id, log)
        claims = store.load(job_id)
        baselines = store.baselines()
        if claims is None:
            lost = [m for m in (minors or []) if m in baselines]
            if not lost:
                store.remove(job_id)
                return None
            log(f"no readable GPU record for this job: restoring GPUs {lost} from the kept baselines")
            claims = JobClaims(job_id, {m: GpuClaim(baselines[m], baselines[m]) for m in lost}, started_at=None)
        energies: list[float | None] = []
        shared = claims.shared
        board: BoardLimits | None = None  # the node's board range, for the models
        changed: dict[int, JobClaims] = {}  # other holders' records, saved once every limit is set
        for minor, claim in sorted(claims.gpus.items()):
            holders = [r for r in others if minor in r.gpus]
            held = [r.gpus[minor] for r in holders]
            shared = shared or bool(held)
            target = max(c.want_w for c in held) if held else baselines.get(minor, claim.baseline_w)
            split_energy([claims, *holders], minor, _reading(backend, minor))
            changed.update({holder.job_id: holder for holder in holders})  # their part so far, and the new mark
            energy = claims.energy_j.get(minor) if minor in claims.energy_mark_j else None
            energies.append(energy)
            drawn = f", {energy:.0f} J since job start" if energy is not None else ""
            try:
                limits = backend.limits(minor)
                board = board or limits
                current = limits.current_w
                if target != current:
                    backend.set_limit(minor, target)
                if not held:
                    baselines.pop(minor, None)
                why = f"{len(held)} other job(s) still on it" if held else "restored"
                log(f"gpu {minor}: {current:g} W -> {target:g} W ({why}){drawn}")
            except GpuError as exc:
                log(f"gpu {minor}: error, could not set {target:g} W (the next job's hook retries): {exc}")
        # Writes last, the record's removal (no disk space needed) first: on a full disk the limits
        # are back and the job holds nothing; a baseline kept too long only restores a limit in force.
        store.remove(job_id)
        for holder in changed.values():
            store.save(holder)
        store.save_baselines(baselines)
    if not energies or None in energies or claims.started_at is None:
        return None
    seconds = max(0.0, time.time() - claims.started_at)
    return NodeEnergy(job_id, node, len(energies), sum(e for e in energies if e is not None), seconds, shared,
                      board_min_w=board.min_w if board else None, board_max_w=board.max_w if board else None,
                      board_default_w=board.default_w if board else None, started_at=claims.started_at)


def _reading(backend: PowerBackend, minor: int) -> float | None:
    """The GPU's energy counter now; None when it cannot be read."""
    try:
        return backend.energy_j(minor)
    except GpuError:
        return None

"""Turn a job's signed decision into GPU power limits at start, and undo them at the end.

Rule for GPUs shared by several jobs (gres/shard): a GPU runs at the *loosest* limit
any of its current jobs asks for (a job without a cap asks for the GPU's baseline), so
one job's cap never slows another job that was promised full power. When a job ends,
its GPUs go to the loosest wish of the jobs still on them; the last job to leave
restores the baseline, the limit found before the first of them started.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from slurm_green.core import decision_token
from slurm_green.core.telemetry import NodeEnergy
from slurm_green.gpu.claims import ClaimStore, GpuClaim, JobClaims
from slurm_green.gpu.power import GpuError, PowerBackend, cap_watts

Log = Callable[[str], None]


def job_gpus(text: str | None) -> list[int]:
    """Minor numbers from SLURM_JOB_GPUS ("0,1", "0-2,5"; empty or unset: none)."""
    minors: set[int] = set()
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        low, _, high = part.partition("-")
        minors.update(range(int(low), int(high or low) + 1))
    return sorted(minors)


def decided_cap(comment: str, job_id: int, key_file: Path, default: float | None, log: Log) -> float | None:
    """The cap fraction the controller signed for this job, else the site default.

    A valid token without ``cap`` means "no cap". Anything else that is not a valid,
    correctly signed decision for *this* job (no token, forged, another job's token,
    missing key, malformed cap) falls back to ``default``.
    """
    token = decision_token.find_token(comment)
    if token is None:
        log(f"no decision token: site default cap {default}")
        return default
    try:
        payload = decision_token.verify(decision_token.load_key(key_file), job_id, token)
    except (OSError, ValueError) as exc:  # InvalidToken is a ValueError
        log(f"decision token ignored ({exc}): site default cap {default}")
        return default
    cap = payload.get("cap")
    if cap is None:
        return None
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0 < cap <= 1:
        log(f"signed cap {cap!r} is not a fraction in (0, 1]: site default cap {default}")
        return default
    return float(cap)


def apply_caps(backend: PowerBackend, store: ClaimStore, job_id: int, minors: list[int],
               fraction: float | None, log: Log) -> JobClaims:
    """Prolog: claim the job's GPUs and set each to the loosest wish of its holders."""
    claims = JobClaims(job_id)
    with store.locked():
        others = store.others(job_id)
        earlier_run = store.load(job_id)  # a Prolog that ran before, without its Epilog
        for minor in minors:
            try:
                limits = backend.limits(minor)
                held = [r.gpus[minor] for r in others if minor in r.gpus]
                claims.shared = claims.shared or bool(held)
                mine_before = earlier_run.gpus.get(minor) if earlier_run else None
                baseline = (held[0] if held else mine_before or GpuClaim(limits.current_w, 0)).baseline_w
                want = cap_watts(fraction, limits) if fraction is not None else baseline
                claims.gpus[minor] = GpuClaim(baseline, want)
                energy = backend.energy_j(minor)
                if energy is not None:
                    claims.energy_start_j[minor] = energy
                target = max([want, *(c.want_w for c in held)])
                if target != limits.current_w:
                    backend.set_limit(minor, target)
                shared = f", shared with {len(held)} job(s)" if held else ""
                log(f"gpu {minor}: {limits.current_w:g} W -> {target:g} W (job wants {want:g} W{shared})")
            except GpuError as exc:
                log(f"gpu {minor}: error, limit left as is: {exc}")
        for other in others:  # they now share a GPU with this job: their energy is not theirs alone
            if not other.shared and other.gpus.keys() & set(minors):
                other.shared = True
                store.save(other)
        store.save(claims)
    return claims


def restore_caps(backend: PowerBackend, store: ClaimStore, job_id: int, node: str, log: Log) -> NodeEnergy | None:
    """Epilog: release the job's GPUs; restore each unless other jobs still hold it.

    Returns the GPU energy the job drew here since its Prolog, or None when a GPU's
    energy counter could not be read at either end (a partial sum would mislead).
    """
    with store.locked():
        claims = store.load(job_id)
        if claims is None:
            log("no GPU record for this job: nothing to restore")
            return None
        others = store.others(job_id)
        energies: list[float | None] = []
        shared = claims.shared
        for minor, claim in sorted(claims.gpus.items()):
            held = [r.gpus[minor] for r in others if minor in r.gpus]
            shared = shared or bool(held)
            target = max(c.want_w for c in held) if held else claim.baseline_w
            energy = _energy_since_start(backend, claims, minor)
            energies.append(energy)
            drawn = f", {energy:.0f} J since job start" if energy is not None else ""
            try:
                current = backend.limits(minor).current_w
                if target != current:
                    backend.set_limit(minor, target)
                why = f"{len(held)} other job(s) still on it" if held else "restored"
                log(f"gpu {minor}: {current:g} W -> {target:g} W ({why}){drawn}")
            except GpuError as exc:
                log(f"gpu {minor}: error, could not set {target:g} W (set it by hand): {exc}")
        store.remove(job_id)
    if not energies or None in energies or claims.started_at is None:
        return None
    seconds = max(0.0, time.time() - claims.started_at)
    return NodeEnergy(job_id, node, len(energies), sum(e for e in energies if e is not None), seconds, shared)


def _energy_since_start(backend: PowerBackend, claims: JobClaims, minor: int) -> float | None:
    start = claims.energy_start_j.get(minor)
    try:
        end = backend.energy_j(minor) if start is not None else None
    except GpuError:
        return None
    return end - start if end is not None and start is not None and end >= start else None

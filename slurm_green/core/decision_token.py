"""Signed decisions: how the controller tells a compute node's Prolog what to enforce.

The controller holds only Slurm operator rights, and operators cannot write
AdminComment, so the decision travels in a user-writable field (the job's Comment).
It is therefore signed: an HMAC-SHA256 over the job id and the payload with a
site key that users cannot read. A user can neither forge a decision nor move one
from another job; a missing or bad token makes the Prolog apply the site default.
Standard library only, because the Prolog imports it on every job start.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from slurm_green.core.regular_file import open_regular

#: ``sign`` and ``verify`` with the site key bound: what the controller and the planner hold.
Signer = Callable[[int, dict[str, object]], str]
Verifier = Callable[[int, str], dict[str, object]]

PREFIX = "sg1."
#: A site key is a few dozen bytes (``openssl rand -hex 32``); a file much larger is not one.
_KEY_FILE_LIMIT = 4096
_TOKEN = re.compile(r"sg1\.[A-Za-z0-9_-]+\.[0-9a-f]{64}")


class InvalidToken(ValueError):
    """The token is absent, malformed, or not signed by this site for this job."""


def load_key(path: str | Path) -> bytes:
    """The site key; refused (ValueError) when every user may read or change the file: any
    user could then sign the decisions the Prolog applies (the controller then sends no caps,
    the Prolog applies the site default).

    Read only from a regular file of at most ``_KEY_FILE_LIMIT`` bytes (``core.regular_file``),
    its mode checked on the file opened (not on the path, which could be swapped in between):
    a FIFO named here would block every Prolog until a writer came, and Slurm drains a node
    whose Prolog outlives PrologTimeout; ``/dev/zero`` would be read for ever. Either is an
    ``OSError`` at once, which both callers turn into "no key" (the site default cap)."""
    path = Path(path)
    with open_regular(path) as file:
        mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
        if mode & 0o007:
            raise ValueError(f"decision key {path} is open to every user (mode {mode:04o}): "
                             f"chmod 0400, or 0440 with the controller's group")
        key = file.read(_KEY_FILE_LIMIT + 1)
    if len(key) > _KEY_FILE_LIMIT:
        raise ValueError(f"decision key {path} is larger than {_KEY_FILE_LIMIT} bytes, not a key")
    key = key.strip()
    if len(key) < 16:
        raise ValueError(f"decision key {path} is shorter than 16 bytes")
    return key


def _mac(key: bytes, job_id: int, body: str) -> str:
    # hmac.digest: the one-shot C path, same MAC as hmac.new(...).hexdigest() without an HMAC object.
    return hmac.digest(key, f"{job_id}.{body}".encode(), hashlib.sha256).hex()


def sign(key: bytes, job_id: int, payload: dict[str, object]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).decode()
    body = body.rstrip("=")
    return f"{PREFIX}{body}.{_mac(key, job_id, body)}"


def verify(key: bytes, job_id: int, token: str) -> dict[str, object]:
    if not _TOKEN.fullmatch(token):
        raise InvalidToken("malformed decision token")
    body, mac = token[len(PREFIX):].split(".")
    if not hmac.compare_digest(mac, _mac(key, job_id, body)):
        raise InvalidToken(f"decision token not signed for job {job_id}")
    return _payload(body)


def unverified_payload(token: str) -> dict[str, object]:
    """The payload of a token without checking its MAC: only for tokens the controller
    itself wrote and recorded (its report of what it enacted), never for a job's comment."""
    if not _TOKEN.fullmatch(token):
        raise InvalidToken("malformed decision token")
    return _payload(token[len(PREFIX):].split(".")[0])


def _payload(body: str) -> dict[str, object]:
    padded = body + "=" * (-len(body) % 4)
    try:
        payload = json.loads(base64.urlsafe_b64decode(padded))
    except ValueError as exc:
        raise InvalidToken("decision payload is not JSON") from exc
    if not isinstance(payload, dict):
        raise InvalidToken("decision payload is not an object")
    return payload


def find_token(text: str) -> str | None:
    match = _TOKEN.search(text)
    return match.group(0) if match else None


def replace_token(text: str, token: str) -> str:
    """``text`` with its token (if any) replaced by ``token``; the user's words are kept."""
    kept = " ".join(word for word in text.split() if not word.startswith(PREFIX))
    return f"{kept} {token}".strip()


def signed_cap(comment: str, verify: Callable[[str], dict[str, object]], default: float | None,
               log: Callable[[str], None]) -> float | None:
    """The cap fraction the controller signed into a job's ``comment``, else ``default``.

    The one rule for what a job's GPUs run under: the Prolog applies it (``gpu.enact.decided_cap``,
    with the site key and the site default) and so does the simulator's Prolog (``sim/engine.py``).
    ``verify(token)`` returns the payload of a token signed for this job and raises ``ValueError``
    (``InvalidToken``) or ``OSError`` (an unreadable key) otherwise. A valid token without ``cap``
    means "no cap" (None). Anything else that is not a valid, correctly signed decision for this
    job (no token, forged, another job's token, missing key, a cap that is not a fraction in
    (0, 1]) falls back to ``default``.
    """
    token = find_token(comment)
    if token is None:
        log(f"no decision token: site default cap {default}")
        return default
    try:
        payload = verify(token)
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

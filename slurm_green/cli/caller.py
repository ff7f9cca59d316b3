"""Who runs a command, for the checks and records that name a user.

From the process's effective uid, never from ``$USER``/``$LOGNAME`` (what
``getpass.getuser`` reads first): any user may set those, and ``why`` would then show
another user's ended jobs."""

from __future__ import annotations

import os
import pwd


def caller() -> str:
    """The user name of the effective uid, or the uid itself where no passwd entry has it."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)

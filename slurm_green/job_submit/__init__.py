"""The job_submit.lua plugin slurmctld runs, shipped inside the package.

The wheel carries it, so an admin copies it from any install (``install --print`` names
the file); the Docker cluster and the Lua tests read this same file.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def plugin_path() -> Path:
    """The installed ``job_submit.lua`` (a real file: wheels are installed unpacked)."""
    return Path(str(files(__name__) / "job_submit.lua"))

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

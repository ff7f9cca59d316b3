"""The checkpoint protocol without PyTorch: docs/training.md's "Any loop" example, run as
written in a fresh Python with SIGUSR2 (checkpoint, keep going) and SIGUSR1 (checkpoint,
stop) sent during it, then restarted from its checkpoint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from slurm_green.core import progress

DOCS = Path(__file__).resolve().parents[3] / "docs" / "training.md"
JOB = 4444

# The user's pieces the example leaves to them, and the test's signals and observations:
# SIGUSR2 during step 4 and SIGUSR1 during step 8, as the controller and Slurm send them.
PRELUDE = textwrap.dedent("""
    import os, signal, sys
    STEPS = 10
    SEND = {4: signal.SIGUSR2, 8: signal.SIGUSR1} if os.environ.get("SEND") else {}
    seen = []

    def train_step(state):
        state["weights"] = [w + 1.0 for w in state["weights"]]
        if state["step"] == 4:   # the step after the keep-going checkpoint: what the controller saw
            seen.append({"ckpt": json.loads(ckpt.read_text()),
                         "report": open(os.environ["REPORT"]).read()})
        if state["step"] + 1 in SEND:
            os.kill(os.getpid(), SEND[state["step"] + 1])
""")
EPILOGUE = textwrap.dedent("""
    print(json.dumps({"step": state["step"], "seen": seen, "torch": "torch" in sys.modules}))
""")


def example() -> str:
    text = DOCS.read_text()
    section = text[text.index("### Any loop, without PyTorch"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run(tmp_path: Path, send: bool) -> dict:
    script = tmp_path / "loop.py"
    script.write_text(PRELUDE + example() + EPILOGUE)
    report = tmp_path / "progress" / f"{JOB}.progress.json"
    env = {"PYTHONPATH": str(DOCS.parents[1]), "SLURM_JOB_ID": str(JOB), "PATH": "/usr/bin:/bin",
           "SLURM_GREEN_PROGRESS_DIR": str(tmp_path / "progress"), "REPORT": str(report)}
    if send:
        env["SEND"] = "1"
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_docs_any_loop_checkpoints_keeps_going_stops_and_resumes(tmp_path: Path) -> None:
    (tmp_path / "progress").mkdir()
    report = tmp_path / "progress" / f"{JOB}.progress.json"

    first = run(tmp_path, send=True)
    assert not first["torch"]
    # SIGUSR2 during step 4: a checkpoint of step 4, reported, and the loop went on...
    [seen] = first["seen"]
    assert seen["ckpt"] == {"step": 4, "weights": [4.0] * 4}
    at_4 = progress.decode(seen["report"].encode(), JOB)
    assert at_4.done == 4 and at_4.checkpoint > 0
    # ... to SIGUSR1 during step 8: a checkpoint of step 8, and it stopped.
    assert first["step"] == 8 and json.loads((tmp_path / "ckpt.json").read_text())["step"] == 8
    at_8 = progress.decode(report.read_bytes(), JOB)
    assert at_8.done == 8 and at_8.checkpoint >= at_4.checkpoint

    second = run(tmp_path, send=False)   # requeued: resumes from step 8, ends at 10
    assert second["step"] == 10 and second["seen"] == []
    assert json.loads((tmp_path / "ckpt.json").read_text()) == {"step": 10, "weights": [10.0] * 4}
    assert progress.decode(report.read_bytes(), JOB).done == 10

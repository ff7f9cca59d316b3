"""``run --once`` says when the tick ran but Slurm refused its actions (issue 11, item 7).

The controller is assembled from a real config as ``run`` does; only the cluster is an
in-memory backend that refuses every action the way a plain user's ``scontrol`` does
("Invalid user id"), as on a site whose service user never got operator rights.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import pytest
from cli_setup import write_config
from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.cli.controller import EXIT_ACTIONS_FAILED, failed_actions
from slurm_green.controller import assemble as assemble_module
from slurm_green.controller.single_instance import sole_controller
from slurm_green.controller.tick import TickReport
from slurm_green.core.actions import Action, ActionError, ActionResult, SetStartTime
from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.green_options import GreenOptions, format_marker

#: The controller runs on the system clock, so the jobs are placed around the real now.
NOW = time.time()


def deferred(job_id: int) -> Job:
    """A managed GPU job whose fallback start is its deadline, 6 h away, as job_submit.lua leaves it."""
    options = GreenOptions(max_delay_s=6 * 3600, deadline=NOW + 6 * 3600)
    return Job(job_id, name="resnet50", submit_time=NOW - 60, eligible_time=NOW + 6 * 3600, time_limit_s=3600,
               gpus_per_node=1, admin_comment="sg:" + format_marker(options))


class RefusingBackend:
    """Pending managed jobs; every action answered as Slurm answers a user without operator rights."""

    def __init__(self, jobs: Sequence[Job], refuse: Sequence[int]) -> None:
        self.jobs, self.refuse = tuple(jobs), set(refuse)

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(taken_at=NOW, jobs=self.jobs)

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        return [ActionResult(a, ActionError.PERMISSION_DENIED, "Invalid user id") if a.job_id in self.refuse
                else ActionResult(a) for a in actions]


def run_once(monkeypatch, tmp_path, refuse: Sequence[int]):
    real = assemble_module.assemble

    def with_cluster(config, **kwargs):  # type: ignore[no-untyped-def]
        parts = real(config, **kwargs)
        parts.controller.backend = RefusingBackend([deferred(i) for i in range(1, 8)], refuse)
        return parts

    monkeypatch.setattr(assemble_module, "assemble", with_cluster)
    return CliRunner().invoke(main, ["run", "--once", "--allow-root", "--config", str(write_config(tmp_path))])


def test_every_action_refused_exits_non_zero_and_says_why(monkeypatch, tmp_path):
    result = run_once(monkeypatch, tmp_path, refuse=range(1, 8))
    assert result.exit_code == EXIT_ACTIONS_FAILED == 3, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "7 of 7 actions failed (permission_denied x7)" in line and "Invalid user id" in line
    assert "operator rights" in line


def test_one_refused_action_is_enough(monkeypatch, tmp_path):
    result = run_once(monkeypatch, tmp_path, refuse=[4])
    assert result.exit_code == EXIT_ACTIONS_FAILED, result.output
    assert "Error: 1 of 7 actions failed (permission_denied x1); first: job 4 SetStartTime: Invalid user id" in result.output


def test_a_tick_whose_actions_all_went_through_exits_0(monkeypatch, tmp_path):
    result = run_once(monkeypatch, tmp_path, refuse=[])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("race", [ActionError.JOB_GONE, ActionError.NOT_PENDING])
def test_a_job_that_ended_or_started_meanwhile_is_a_race_not_a_failure(race):
    action = SetStartTime(1, NOW)
    report = TickReport(NOW, actions=[action], results=[ActionResult(action, race, "Job has already finished")])
    assert failed_actions(report) is None
    report.results.append(ActionResult(SetStartTime(2, NOW), ActionError.UNREACHABLE, "Socket timed out"))
    assert failed_actions(report) == ("1 of 2 actions failed (unreachable x1); first: job 2 SetStartTime: "
                                      "Socket timed out")


def test_beside_a_running_controller_run_once_is_refused_and_enacts_nothing(monkeypatch, tmp_path):
    """The install steps' check, repeated while the service runs: two controllers would both
    enact every tick (``controller/single_instance.py``). The lock is held here by another
    open of the lock file, which ``flock`` treats as another holder, as it would a process."""
    enacted: list[Action] = []
    real_apply = RefusingBackend.apply
    monkeypatch.setattr(RefusingBackend, "apply", lambda self, actions: enacted.extend(actions) or
                        real_apply(self, actions))
    with sole_controller(tmp_path / "state.db"):
        result = run_once(monkeypatch, tmp_path, refuse=[])
    assert result.exit_code == 1, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "another slurm-green controller is running on this state database" in line
    assert f"pid {os.getpid()} on " in line
    assert enacted == [] and not (tmp_path / "state.db").exists()
    assert run_once(monkeypatch, tmp_path, refuse=[]).exit_code == 0  # once it is gone, the check runs
    assert enacted

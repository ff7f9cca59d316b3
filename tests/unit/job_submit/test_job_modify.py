"""slurm_job_modify: users cannot change what only the controller decides.

Updates are given as job_submit/lua hands them to the script: a field the update leaves
alone is nil (strings), 0 (begin_time) or NO_VAL (node counts); "" clears a string.
"""

from __future__ import annotations

import pytest

from slurm_green.core import decision_token
from slurm_green.core.green_options import GreenOptions, format_marker

from lua_plugin import LuaPlugin, start_plugin

MANAGED = {"job_id": 42, "admin_comment": format_marker(GreenOptions(max_delay_s=3600, deadline=1_700_003_600))}
OPTED_OUT = {"job_id": 43, "admin_comment": format_marker(GreenOptions(managed=False))}
UNMARKED = {"job_id": 44}
ALICE, CONTROLLER, SLURM_USER = 1001, 4242, 64030
ESLURM_ACCESS_DENIED = 2002
NO_VAL = 4294967294

# Every field the controller decides, as scontrol's update reaches the plugin.
FORBIDDEN = [
    ({"begin_time": 1_700_000_100}, "StartTime"),
    ({"comment": "green:flex=0"}, "Comment"),
    ({"comment": decision_token.sign(b"x" * 32, 42, {"cap": 1.0})}, "Comment"),
    ({"comment": ""}, "Comment"),  # Comment= clears it
    ({"tres_per_node": "gres/gpu:8"}, "TresPerNode"),  # also Gres=gpu:8
    ({"tres_per_node": "gres:gpu:8"}, "TresPerNode"),  # 22.05 spelling
    ({"tres_per_node": ""}, "TresPerNode"),
    ({"tres_per_job": "gres/gpu:8"}, "TresPerJob"),
    ({"tres_per_task": "gres/gpu:2"}, "TresPerTask"),
    ({"tres_per_socket": "gres/gpu:1"}, "TresPerSocket"),
    ({"min_nodes": 2}, "NumNodes"),
    ({"max_nodes": 2}, "NumNodes"),
    ({"min_nodes": 1, "max_nodes": 3}, "NumNodes"),
    ({"num_tasks": 4}, "NumTasks"),  # with --gpus-per-task, four tasks are four GPUs
    ({"req_nodes": "node3"}, "ReqNodeList"),
    ({"req_nodes": ""}, "ReqNodeList"),
    ({"exc_nodes": "node[1-2]"}, "ExcNodeList"),
]


@pytest.fixture(scope="module")
def guard(tmp_path_factory):
    """A plugin that resolved its privileged users from a passwd file of our own."""
    passwd = tmp_path_factory.mktemp("etc") / "passwd"
    passwd.write_text(
        f"root:x:0:0::/root:/bin/sh\nslurm:x:{SLURM_USER}:{SLURM_USER}::/:/bin/false\n"
        f"alice:x:{ALICE}:{ALICE}::/home/alice:/bin/sh\nsgreen:x:{CONTROLLER}:{CONTROLLER}::/:/bin/false\n"
    )
    lua = start_plugin()
    lua.set(passwd_file=str(passwd))
    uids = lua.request("resolve", {}).extra
    assert sorted(uids.values()) == [0, CONTROLLER, SLURM_USER]
    yield lua
    lua.close()


@pytest.mark.parametrize(("update", "field"), FORBIDDEN)
def test_user_cannot_change_controller_fields_of_a_managed_job(guard: LuaPlugin, update: dict, field: str) -> None:
    answer = guard.modify(ALICE, MANAGED, **update)
    assert answer.rc == ESLURM_ACCESS_DENIED
    [message] = answer.messages("user")
    assert f"may change its {field}." in message and "job 42" in message and "green:off" in message


def test_every_refused_field_is_named_once(guard: LuaPlugin) -> None:
    update = {name: value for fields, _ in FORBIDDEN for name, value in fields.items()}
    [message] = guard.modify(ALICE, MANAGED, **update).messages("user")
    named = message.split("may change its ")[1].split(".")[0].split(", ")
    assert sorted(named) == sorted({field for _, field in FORBIDDEN})


@pytest.mark.parametrize("uid", [CONTROLLER, 0, SLURM_USER])
@pytest.mark.parametrize(("update", "field"), FORBIDDEN)
def test_controller_root_and_slurm_user_may(guard: LuaPlugin, uid: int, update: dict, field: str) -> None:
    answer = guard.modify(uid, MANAGED, **update)
    assert answer.rc == 0 and answer.messages("user") == []


@pytest.mark.parametrize(
    "update",
    [{"time_limit": 60}, {"begin_time": 0}, {"name": "renamed"}, {"min_nodes": NO_VAL, "max_nodes": NO_VAL},
     {"tres_freq": "gpu:low"}, {"num_tasks": NO_VAL}],
)
def test_other_changes_pass(guard: LuaPlugin, update: dict) -> None:
    answer = guard.modify(ALICE, MANAGED, **update)
    assert answer.rc == 0 and answer.messages("user") == []


@pytest.mark.parametrize("job", [OPTED_OUT, UNMARKED])
@pytest.mark.parametrize(("update", "field"), [f for f in FORBIDDEN if "comment" not in f[0]])
def test_unmanaged_jobs_are_not_guarded(guard: LuaPlugin, job: dict, update: dict, field: str) -> None:
    assert guard.modify(ALICE, job, **update).rc == 0


@pytest.mark.parametrize("job", [OPTED_OUT, UNMARKED])
def test_tokens_written_into_an_unmanaged_job_are_stripped(guard: LuaPlugin, job: dict) -> None:
    token = decision_token.sign(b"x" * 32, job["job_id"], {"cap": 0.2})
    answer = guard.modify(ALICE, job, comment=f"mine {token}")
    assert answer.rc == 0 and answer.job["comment"] == "mine"


def test_tres_freq_is_guarded_when_decisions_are_enacted_as_gpu_freq() -> None:
    lua = start_plugin()
    try:
        assert lua.modify(ALICE, MANAGED, tres_freq="gpu:low").rc == 0
        lua.set(guard_tres_freq=True)
        answer = lua.modify(ALICE, MANAGED, tres_freq="gpu:low")
        assert answer.rc == ESLURM_ACCESS_DENIED and "may change its TresFreq." in answer.messages("user")[0]
    finally:
        lua.close()


def test_a_slurm_without_the_access_denied_code_gets_a_plain_error() -> None:
    lua = start_plugin()
    try:
        lua.request("unexpose", {"@names": "ESLURM_ACCESS_DENIED"})
        assert lua.modify(ALICE, MANAGED, req_nodes="node3").rc == -1
    finally:
        lua.close()


def test_a_runtime_error_in_the_guard_lets_the_update_through(guard: LuaPlugin) -> None:
    answer = guard.modify(ALICE, MANAGED, comment=None)  # reading Comment raises
    assert answer.rc == 0
    assert "let through" in answer.messages("error")[0]

"""slurm_job_modify: users cannot change what only the controller may set."""

from __future__ import annotations

import pytest

from slurm_green.core import decision_token
from slurm_green.core.green_options import GreenOptions, format_marker

from lua_plugin import LuaPlugin, start_plugin

MANAGED = {"job_id": 42, "admin_comment": format_marker(GreenOptions(max_delay_s=3600, deadline=1_700_003_600))}
OPTED_OUT = {"job_id": 43, "admin_comment": format_marker(GreenOptions(managed=False))}
UNMARKED = {"job_id": 44}
ALICE, CONTROLLER, SLURM_USER = 1001, 4242, 64030


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


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"begin_time": 1_700_000_100}, "StartTime"),
        ({"comment": "green:flex=0"}, "Comment"),
        ({"comment": decision_token.sign(b"x" * 32, 42, {"cap": 1.0})}, "Comment"),
        ({"tres_per_node": "gres/gpu:8"}, "TresPerNode"),
    ],
)
def test_user_cannot_change_controller_fields_of_a_managed_job(guard: LuaPlugin, update: dict, field: str) -> None:
    answer = guard.modify(ALICE, MANAGED, **update)
    assert answer.rc == -1
    [message] = answer.messages("user")
    assert field in message and "42" in message and "green:off" in message


@pytest.mark.parametrize("uid", [CONTROLLER, 0, SLURM_USER])
def test_controller_root_and_slurm_user_may(guard: LuaPlugin, uid: int) -> None:
    answer = guard.modify(uid, MANAGED, begin_time=1_700_000_100, comment="sg1.x", tres_per_node="gres/gpu:2")
    assert answer.rc == 0 and answer.messages("user") == []


@pytest.mark.parametrize("update", [{"time_limit": 60}, {"begin_time": 0}, {"name": "renamed"}])
def test_other_changes_pass(guard: LuaPlugin, update: dict) -> None:
    assert guard.modify(ALICE, MANAGED, **update).rc == 0


@pytest.mark.parametrize("job", [OPTED_OUT, UNMARKED])
def test_unmanaged_jobs_are_not_guarded_but_tokens_are_stripped(guard: LuaPlugin, job: dict) -> None:
    assert guard.modify(ALICE, job, begin_time=1_700_000_100).rc == 0
    token = decision_token.sign(b"x" * 32, job["job_id"], {"cap": 0.2})
    answer = guard.modify(ALICE, job, comment=f"mine {token}")
    assert answer.rc == 0 and answer.job["comment"] == "mine"


def test_tres_freq_is_guarded_when_decisions_are_enacted_as_gpu_freq() -> None:
    lua = start_plugin()
    try:
        assert lua.modify(ALICE, MANAGED, tres_freq="gpu:low").rc == 0
        lua.set(guard_tres_freq=True)
        answer = lua.modify(ALICE, MANAGED, tres_freq="gpu:low")
        assert answer.rc == -1 and "TresFreq" in answer.messages("user")[0]
    finally:
        lua.close()


def test_a_runtime_error_in_the_guard_lets_the_update_through(guard: LuaPlugin) -> None:
    answer = guard.modify(ALICE, MANAGED, comment=None)  # reading Comment raises
    assert answer.rc == 0
    assert "let through" in answer.messages("error")[0]

"""job_submit.lua in a real Lua 5.1 interpreter: options, marker, deadline, tokens, guard."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_green.core import decision_token
from slurm_green.core.green_options import NO_VAL16, GreenOptions, format_marker, parse_marker, parse_user_options

from lua_plugin import LuaPlugin, start_plugin
from reference import MAX_FLEX_S, NOW, comments, expected_marker, expected_submission

KEY = b"k" * 32


# --- submission -----------------------------------------------------------------------


def test_opt_in_writes_marker_and_fallback_deadline(plugin: LuaPlugin) -> None:
    comment = "green:flex=6h,gpus=2-8,cap=yes,share=no"
    answer = plugin.submit(comment=comment, tres_per_node="gres/gpu:4")
    assert answer.rc == 0
    assert answer.job["admin_comment"] == expected_marker(comment)
    assert answer.job["begin_time"] == NOW + 6 * 3600
    assert answer.job["comment"] == comment  # the user's words stay


def test_opt_out_is_recorded_and_not_deferred(plugin: LuaPlugin) -> None:
    answer = plugin.submit(comment="green:off", tres_per_node="gres/gpu:4")
    assert answer.rc == 0
    assert answer.job["admin_comment"] == format_marker(GreenOptions(managed=False))
    assert answer.job["begin_time"] == 0


def test_flex_counts_from_a_later_user_begin_time(plugin: LuaPlugin) -> None:
    answer = plugin.submit(comment="green:flex=2h", begin_time=NOW + 600)
    assert answer.job["begin_time"] == NOW + 600 + 7200
    assert f"begin={NOW + 600}" in answer.job["admin_comment"]  # the earliest start: no decision moves it earlier


def test_existing_admin_comment_is_kept_and_an_old_marker_replaced(plugin: LuaPlugin) -> None:
    answer = plugin.submit(comment="green:flex=1h", admin_comment="ticket-42 sg:managed=0;flex=0;cap=1;share=0")
    assert answer.job["admin_comment"] == "ticket-42 " + expected_marker("green:flex=1h")


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("flex=-3h", "flex='-3h'"),
        ("flex=999d", "at most 72h"),
        ("flex=6x", "flex='6x'"),
        ("gpus=0", "gpus='0'"),
        ("gpus=8-2", "gpus='8-2'"),
        ("gpus=1-1000001", "at most 1000000 GPUs"),
        ("gpus=1-99999999999999999999", "at most 1000000 GPUs"),  # stopped every tick once marked
        ("cap=maybe", "cap='maybe'"),
        ("elastic=yes", "elastic='yes'"),
        ("elastic=bogus", "expected requeue or no"),
        ("colour=green", "unknown key 'colour'"),
        ("fast", "'fast'"),
    ],
)
def test_malformed_option_is_refused_with_a_clear_message(plugin: LuaPlugin, option: str, hint: str) -> None:
    with pytest.raises(ValueError):
        parse_user_options(option, MAX_FLEX_S)  # the reference refuses it too
    answer = plugin.submit(comment=f"green:{option}", tres_per_node="gres/gpu:1")
    assert answer.rc == -1
    [message] = answer.messages("user")
    assert hint in message
    assert "green:off" in message and "flex=6h" in message  # says what is allowed
    assert "admin_comment" not in answer.job


@pytest.mark.parametrize(
    ("comment", "hint"),
    [
        ("green:flex=6h gpus=2", "'gpus=2' is outside the green: word"),
        ("green:flex=6h, gpus=2", "'gpus=2' is outside the green: word"),
        ("GPUS=2 green:flex=6h", "'GPUS=2' is outside the green: word"),
        ("green: flex=6h", "'flex=6h' is outside the green: word"),
        ("green:flex=6h x,cap=no", "'x,cap=no' is outside the green: word"),
        ("green:flex=1h green:off", "2 'green:' words"),
        ("green:flex=1h,flex=2h", "'flex' given twice"),
        ("green:GPUS=2,gpus=3", "'gpus' given twice"),
        ("green:cap=yes,share=no,cap=yes", "'cap' given twice"),
        ("green:elastic=requeue,gpus=1-4,ELASTIC=no", "'elastic' given twice"),
        ("green:gpus=1-4 elastic=requeue", "'elastic=requeue' is outside the green: word"),
    ],
)
def test_options_outside_the_green_word_or_given_twice_are_refused(plugin: LuaPlugin, comment: str, hint: str) -> None:
    with pytest.raises(ValueError, match=hint):
        expected_marker(comment)  # the reference refuses it too, for the same reason
    answer = plugin.submit(comment=comment, tres_per_node="gres/gpu:1")
    assert answer.rc == -1
    [message] = answer.messages("user")
    assert hint in message and "green:off" in message and "flex=6h,gpus=2-8" in message


@pytest.mark.parametrize("comment", ["green:flex=6h lr=0.1 run 7", "seed=3 green:on,on", "green:flex=6h flexible=yes"])
def test_other_words_stay_the_users_own(plugin: LuaPlugin, comment: str) -> None:
    answer = plugin.submit(comment=comment)
    assert answer.rc == 0 and answer.job["admin_comment"] == expected_marker(comment)


# --- where the user said the job runs ----------------------------------------------------


@pytest.mark.parametrize("field", ["req_nodes", "exc_nodes", "features", "reservation"])
@pytest.mark.parametrize("value", ["node3", "node[1-2],node4", "a40&ib", ""])
def test_a_node_list_excluded_nodes_a_constraint_or_a_reservation_is_kept_in_the_marker(
        plugin: LuaPlugin, field: str, value: str) -> None:
    """-w, -x, -C and --reservation (job_desc's req_nodes, exc_nodes, features, reservation) make
    the marker say ``own_nodes=1``: the controller then pins the job nowhere and keeps its size.
    A job in a reservation is not deferred (its reservation's nodes wait for it). Empty is not given."""
    reserved = field == "reservation" and bool(value)
    for comment in ("green:flex=1h,gpus=1-4", "green:off"):
        answer = plugin.submit(comment=comment, tres_per_node="gres/gpu:1", **{field: value})
        assert answer.rc == 0
        marker, begin, _ = expected_submission(comment, own_nodes=bool(value), reserved=reserved)
        assert answer.job["admin_comment"] == marker
        assert answer.job["admin_comment"].endswith(";own_nodes=1") == bool(value)
        assert answer.job[field] == value  # recorded, never changed
        assert (answer.job.get("begin_time") or 0) == begin
        assert bool(begin) == (comment != "green:off" and not reserved)


@pytest.mark.parametrize("value", ["0-7", "1,3,5%2", ""])
def test_an_array_is_kept_in_the_marker(plugin: LuaPlugin, value: str) -> None:
    """--array (job_desc's array_inx) makes the marker say ``array=1``: its pending tasks are one
    record to the controller, which then pins it nowhere and keeps its size. Empty is not given."""
    answer = plugin.submit(comment="green:flex=1h,gpus=1-4", tres_per_node="gres/gpu:1", array_inx=value,
                           req_nodes="node1")
    assert answer.rc == 0
    assert answer.job["admin_comment"] == expected_submission("green:flex=1h,gpus=1-4", own_nodes=True,
                                                              array=bool(value))[0]
    assert answer.job["admin_comment"].endswith(";own_nodes=1;array=1" if value else ";own_nodes=1")


@pytest.mark.parametrize("tasks, recorded", [(1, 1), (4, 4), (4294967294, None), (0, None), (None, None)])
def test_a_task_count_the_user_gave_is_kept_in_the_marker(plugin: LuaPlugin, tasks, recorded) -> None:
    """-n (job_desc's num_tasks; NO_VAL where not given): the controller then gives the job no
    more nodes than tasks (a 1-task job spread over 2 nodes waits for ever)."""
    job = {"num_tasks": tasks} if tasks is not None else {}
    answer = plugin.submit(comment="green:flex=1h,gpus=1-8", tres_per_node="gres/gpu:4", **job)
    assert answer.rc == 0
    assert answer.job["admin_comment"] == expected_submission("green:flex=1h,gpus=1-8", tasks=tasks)[0]
    assert parse_marker(answer.job["admin_comment"]).tasks == recorded


@pytest.mark.parametrize("offset", [0, 1])
def test_a_heterogeneous_jobs_components_are_left_to_slurm(plugin: LuaPlugin, offset: int) -> None:
    """Each component of ``sbatch ... : ...`` (job_desc's het_job_offset 0, 1, ...) is submitted
    alone, and Slurm refuses a size or pin on one (and the start sent with it: 24.11), so none is
    marked or deferred, and the user who asked for green options is told. Any other job's offset
    is NO_VAL."""
    answer = plugin.submit(comment="green:flex=6h,gpus=1-4", tres_per_node="gres/gpu:1", het_job_offset=offset)
    assert answer.rc == 0 and not answer.job.get("admin_comment") and not answer.job.get("begin_time"), answer.job
    assert answer.job["comment"] == "green:flex=6h,gpus=1-4"  # the user's, untouched
    [told] = answer.messages("user")
    assert "heterogeneous job is not green-scheduled" in told
    plain = plugin.submit(comment="green:flex=6h,gpus=1-4", tres_per_node="gres/gpu:1", het_job_offset=4294967294)
    assert plain.job["admin_comment"] == expected_marker("green:flex=6h,gpus=1-4") and plain.job["begin_time"]
    assert plugin.submit(comment="green:off", het_job_offset=0).messages("user") == []  # asked for nothing


# --- the submitted time limit ------------------------------------------------------------


@pytest.mark.parametrize(("minutes", "recorded"), [(90, ";limit=5400"), (1, ";limit=60"), (4294967294, None),
                                                   (4294967295, None), (0, None)])
def test_the_submitted_time_limit_is_kept_in_the_marker(plugin: LuaPlugin, minutes: int, recorded: str | None) -> None:
    """--time (minutes) goes into the marker, where the controller reads the job's runtime as asked;
    none given (NO_VAL), UNLIMITED (INFINITE) or 0: nothing is recorded."""
    for comment in ("green:flex=1h,gpus=1-4", "green:off"):
        answer = plugin.submit(comment=comment, tres_per_node="gres/gpu:4", time_limit=minutes)
        assert answer.rc == 0
        assert answer.job["admin_comment"] == expected_submission(comment, time_limit=minutes)[0]
        if recorded is None:
            assert "limit=" not in answer.job["admin_comment"]
        else:
            assert answer.job["admin_comment"].endswith(recorded)
        assert answer.job["time_limit"] == minutes  # the plugin records the limit, it never changes it


# --- elastic=requeue ------------------------------------------------------------------------


def test_an_elastic_job_is_marked_and_made_requeueable(plugin: LuaPlugin) -> None:
    comment = "green:elastic=requeue,gpus=1-4"
    answer = plugin.submit(comment=comment, tres_per_node="gres/gpu:4")
    assert answer.rc == 0 and answer.messages("user") == []
    assert answer.job["admin_comment"] == expected_marker(comment)
    assert answer.job["admin_comment"].endswith(";elastic=1")
    assert answer.job["requeue"] == 1  # as --requeue: a site with JobRequeue=0 would refuse the controller's requeue


@pytest.mark.parametrize("value", ["no", "off", "0", "N", "False"])
def test_elastic_no_leaves_marker_and_requeue_as_without_the_option(plugin: LuaPlugin, value: str) -> None:
    answer = plugin.submit(comment=f"green:gpus=1-4,elastic={value}", tres_per_node="gres/gpu:4")
    plain = plugin.submit(comment="green:gpus=1-4", tres_per_node="gres/gpu:4")
    assert answer.rc == 0
    assert answer.job["admin_comment"] == plain.job["admin_comment"] == expected_marker("green:gpus=1-4")
    assert answer.job["requeue"] == NO_VAL16  # untouched


def test_a_users_no_requeue_stands_and_the_job_is_not_elastic(plugin: LuaPlugin) -> None:
    comment = "green:elastic=requeue,gpus=1-4"
    answer = plugin.submit(comment=comment, tres_per_node="gres/gpu:4", requeue=0)
    assert answer.rc == 0
    assert answer.job["requeue"] == 0
    assert answer.job["admin_comment"] == expected_marker("green:gpus=1-4")  # no elastic=1
    assert (answer.job["admin_comment"], answer.job["begin_time"], answer.job["requeue"]) == expected_submission(
        comment, requeue=0)
    [message] = answer.messages("user")
    assert "--no-requeue" in message and "elastic" in message and "\n" not in message


def test_a_users_requeue_is_kept_for_an_elastic_job(plugin: LuaPlugin) -> None:
    answer = plugin.submit(comment="green:elastic=requeue", requeue=1)
    assert answer.rc == 0 and answer.job["requeue"] == 1 and answer.messages("user") == []
    assert answer.job["admin_comment"].endswith(";elastic=1")


def test_requeue_is_left_alone_for_jobs_that_are_not_elastic(plugin: LuaPlugin) -> None:
    for requeue in (0, 1, NO_VAL16):
        for comment in ("green:flex=1h", "green:off", "no options here"):
            answer = plugin.submit(comment=comment, requeue=requeue)
            assert answer.rc == 0 and answer.job["requeue"] == requeue and answer.messages("user") == []


def test_a_dry_run_site_marks_elastic_jobs_but_leaves_requeue(fresh_plugin: LuaPlugin) -> None:
    fresh_plugin.set(dry_run=True)
    answer = fresh_plugin.submit(comment="green:elastic=requeue")
    assert answer.rc == 0 and answer.job["requeue"] == NO_VAL16
    assert answer.job["admin_comment"].endswith(";elastic=1")


@pytest.fixture(scope="module")
def opt_out():
    """A site that manages unmarked GPU batch jobs (manage_unmarked_gpu_jobs = true)."""
    lua = start_plugin()
    lua.set(manage_unmarked_gpu_jobs=True)
    yield lua
    lua.close()


def test_unmarked_gpu_jobs_are_left_alone_by_default(plugin: LuaPlugin) -> None:
    answer = plugin.submit(tres_per_node="gres/gpu:2")  # opt-in: only green: options manage a job
    assert answer.rc == 0 and "admin_comment" not in answer.job and answer.job["begin_time"] == 0


@pytest.mark.parametrize(
    ("tres", "is_gpu"),
    [
        ({"tres_per_node": "gres/gpu:2"}, True),
        ({"tres_per_node": "gres:gpu:2"}, True),  # 22.05 spelling
        ({"tres_per_node": "gres/gpu:a100:1"}, True),
        ({"tres_per_node": "gres/gpu"}, True),
        ({"tres_per_job": "gres/gpu:8"}, True),
        ({"tres_per_task": "cpu:4,gres/gpu:1"}, True),
        ({"tres_per_node": "gres/gpu:0"}, False),
        ({"tres_per_node": "gres/shard:4"}, False),
        ({"tres_per_node": "gres/gpumem:1"}, False),
        ({"tres_per_task": "cpu:4"}, False),
        ({}, False),
    ],
)
def test_an_opt_out_site_manages_unmarked_jobs_that_ask_for_gpus(opt_out: LuaPlugin, tres: dict, is_gpu: bool) -> None:
    answer = opt_out.submit(**tres)
    assert answer.rc == 0
    if is_gpu:
        assert answer.job["admin_comment"] == format_marker(GreenOptions(deadline=NOW))
    else:
        assert "admin_comment" not in answer.job
    assert answer.job["begin_time"] == 0  # default flex is 0 in the shipped settings


def test_unmarked_interactive_gpu_job_is_left_alone(opt_out: LuaPlugin) -> None:
    answer = opt_out.request("submit", {"@now": NOW, "tres_per_node": "gres/gpu:1"})  # no script: salloc/srun
    assert answer.rc == 0 and "admin_comment" not in answer.job


def test_site_settings_for_unmarked_jobs(fresh_plugin: LuaPlugin) -> None:
    fresh_plugin.set(manage_unmarked_gpu_jobs=True, default_flex_s=7200)
    answer = fresh_plugin.submit(tres_per_node="gres/gpu:2")
    assert answer.job["admin_comment"] == format_marker(GreenOptions(max_delay_s=7200, deadline=NOW + 7200))
    assert answer.job["begin_time"] == NOW + 7200
    fresh_plugin.set(manage_unmarked_gpu_jobs=False)
    assert "admin_comment" not in fresh_plugin.submit(tres_per_node="gres/gpu:2").job


def test_site_maximum_flex_is_a_setting(fresh_plugin: LuaPlugin) -> None:
    fresh_plugin.set(max_flex_s=3600)
    assert fresh_plugin.submit(comment="green:flex=1h").rc == 0
    answer = fresh_plugin.submit(comment="green:flex=61m")
    assert answer.rc == -1 and "at most 1h" in answer.messages("user")[0]


def _token(job_id: int = 7) -> str:
    return decision_token.sign(KEY, job_id, {"cap": 0.1})


@pytest.mark.parametrize(
    "comment",
    [
        f"green:flex=1h {_token()} my run",
        f"x{_token()}",  # find_token searches inside words too
        f"{_token(1)} {_token(2)}",
        f"s{_token()}g1.z.{'a' * 64}".replace(_token(), _token(), 1),
    ],
)
def test_submitted_decision_tokens_are_stripped(plugin: LuaPlugin, comment: str) -> None:
    assert decision_token.find_token(comment) is not None
    answer = plugin.submit(comment=comment)
    assert answer.rc == 0
    assert decision_token.find_token(answer.job.get("comment", "")) is None


def test_comment_without_token_is_untouched(plugin: LuaPlugin) -> None:
    comment = "  green:flex=1h   sg1.not-a-token  "
    assert plugin.submit(comment=comment).job["comment"] == comment


@pytest.mark.timeout(60)  # a hang guard, not a speed target: the quadratic strip took ~9 minutes here
def test_a_token_in_a_long_comment_of_spaces_is_stripped_in_linear_time(plugin: LuaPlugin) -> None:
    """The plugin runs under slurmctld's job lock: a 256 KiB comment (one sbatch argument
    holds 128 KiB) of a token, a word and a long run of spaces must not stall it."""
    comment = _token() + " x" + " " * 256 * 1024 + "x"
    for answer in (plugin.submit(comment=comment), plugin.modify(1000, {"job_id": 7, "admin_comment": ""},
                                                                 comment=comment)):
        assert answer.rc == 0


@given(
    before=st.text(alphabet="ab sg1.-_0123456789abcdef", max_size=30),
    after=st.text(alphabet="ab sg1.-_0123456789abcdef", max_size=30),
    job_id=st.integers(min_value=1, max_value=2**32),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_token_survives_submission(plugin: LuaPlugin, before: str, after: str, job_id: int) -> None:
    comment = before + _token(job_id) + after
    answer = plugin.submit(comment=comment)
    assert answer.rc == 0
    assert decision_token.find_token(answer.job.get("comment", "")) is None


# --- failures of the plugin itself ---------------------------------------------------------


@pytest.mark.parametrize(
    ("broken_field", "comment"),
    [("comment", None), ("tres_per_node", "unmarked"), ("begin_time", "green:flex=1h"), ("admin_comment", "green:on")],
)
def test_a_runtime_error_inside_the_plugin_still_lets_the_job_in(
    opt_out: LuaPlugin, broken_field: str, comment: str | None
) -> None:
    job: dict[str, object] = {"comment": comment, "tres_per_node": "gres/gpu:1"}
    job[broken_field] = None  # reading it raises inside the plugin (opt-out: an unmarked job reads its GPUs)
    answer = opt_out.submit(**job)
    assert answer.rc == 0
    assert answer.messages("user") == []
    [error] = answer.messages("error")
    assert "let through" in error and broken_field in error


# --- the property: Lua and Python agree ------------------------------------------------------

@given(comment=comments(), requeue=st.sampled_from([NO_VAL16, NO_VAL16, 0, 1]))
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_lua_accepts_and_rejects_exactly_what_python_does(plugin: LuaPlugin, comment: str, requeue: int) -> None:
    try:
        marker, _, after = expected_submission(comment, requeue=requeue)
    except ValueError:
        marker, after = "refused", requeue
    answer = plugin.submit(comment=comment, requeue=requeue)
    if marker == "refused":
        assert answer.rc == -1, f"Lua accepted {comment!r}"
    else:
        assert answer.rc == 0, f"Lua refused {comment!r}: {answer.messages('user')}"
        assert answer.job.get("admin_comment") == marker
    assert answer.job["requeue"] == after


_VALID = {"flex": ["0", "30m", "6h"], "gpus": ["1", "1-4", "2-8"], "cap": ["yes", "no"], "share": ["y", "off"],
          "elastic": ["requeue", "Requeue", "no", "0", "off"]}


@given(keys=st.lists(st.sampled_from(sorted(_VALID)), unique=True, min_size=1), data=st.data(),
       requeue=st.sampled_from([NO_VAL16, 0, 1]), begin=st.sampled_from([0, NOW + 3600]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_valid_option_sets_with_elastic_agree_with_python(plugin: LuaPlugin, keys: list[str], data: st.DataObject,
                                                          requeue: int, begin: int) -> None:
    """Accepted combinations (the random comments above are mostly refused ones): marker,
    begin time and requeue field are the reference's, whatever --requeue/--no-requeue said."""
    comment = "green:" + ",".join(f"{key}={data.draw(st.sampled_from(_VALID[key]))}" for key in keys)
    answer = plugin.submit(comment=comment, requeue=requeue, begin_time=begin)
    assert answer.rc == 0
    assert (answer.job["admin_comment"], answer.job["begin_time"], answer.job["requeue"]) == expected_submission(
        comment, begin=begin, requeue=requeue)
    told = [message for message in answer.messages("user") if "--no-requeue" in message]
    assert len(told) == (requeue == 0 and "elastic=requeue" in comment.lower())


@given(flex=st.sampled_from(["0", "0s", "1s", "30m", "6h", "1.5d", "0.0000001s", "72h", "off"]),
       begin=st.sampled_from([0, NOW - 600, NOW, NOW + 1, NOW + 3600]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_deferral_is_the_python_rule_the_simulator_uses(plugin: LuaPlugin, flex: str, begin: int) -> None:
    """Lua's marker and begin time are ``green_options.on_arrival``'s, the simulated plugin's."""
    comment = "green:off" if flex == "off" else f"green:flex={flex}"
    answer = plugin.submit(comment=comment, begin_time=begin)
    assert answer.rc == 0
    assert (answer.job.get("admin_comment"), answer.job["begin_time"]) == expected_submission(comment, begin=begin)[:2]


@pytest.mark.parametrize(
    "option",
    ["gpus=1-" + "9" * 30, "gpus=" + "9" * 25 + "-" + "9" * 24, "gpus=" + "0" * 4300 + "1", "gpus=" + "0" * 4299 + "1",
     "flex=" + "9" * 400, "flex=0.0000001s", "flex=072h", "flex=72.0000000001h"],
)
def test_edge_numbers_agree_with_python(plugin: LuaPlugin, option: str) -> None:
    comment = f"green:{option}"
    try:
        expected = expected_marker(comment)
    except ValueError:
        expected = None
    answer = plugin.submit(comment=comment)
    assert (answer.rc == 0) == (expected is not None)
    assert answer.job.get("admin_comment") == expected


def test_non_ascii_digits_are_refused_by_both(plugin: LuaPlugin) -> None:
    assert plugin.submit(comment="green:flex=\u0663h").rc == -1  # ARABIC-INDIC DIGIT THREE
    with pytest.raises(ValueError):
        parse_user_options("flex=\u0663h", MAX_FLEX_S)


# --- cost -----------------------------------------------------------------------------------


def test_per_job_cost_is_well_under_a_millisecond(plugin: LuaPlugin) -> None:
    job = {"comment": "green:flex=6h,gpus=2-8,cap=yes,share=no", "tres_per_node": "gres/gpu:4",
           "script": "#!/bin/bash\n" + "srun python train.py\n" * 200}
    answer = plugin.request("bench", {"@iterations": 5000, **job})
    seconds = answer.extra["seconds_per_job"]
    print(f"job_submit.lua: {seconds * 1e6:.1f} us per job")
    assert seconds < 2e-4


def test_a_dry_run_site_marks_jobs_but_changes_nothing_users_see(fresh_plugin: LuaPlugin) -> None:
    """With the controller in dry_run, jobs must not wait their flex for a controller that
    never moves them earlier, and users keep changing their own jobs."""
    fresh_plugin.set(dry_run=True)
    answer = fresh_plugin.submit(comment="green:flex=1h")
    assert answer.rc == 0 and answer.job["begin_time"] == 0  # as submitted: no deferral
    assert answer.job["admin_comment"] == format_marker(GreenOptions(max_delay_s=3600, deadline=NOW + 3600))
    managed = {"job_id": 42, "admin_comment": answer.job["admin_comment"]}
    assert fresh_plugin.modify(1001, managed, begin_time=NOW + 60).rc == 0

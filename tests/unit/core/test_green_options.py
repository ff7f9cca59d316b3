import math

import pytest
from hypothesis import given, strategies as st

from slurm_green.core.green_options import (
    KEYS,
    NO_VAL,
    NO_VAL16,
    GreenOptionError,
    GreenOptions,
    find_user_options,
    format_marker,
    on_arrival,
    parse_duration,
    parse_marker,
    parse_user_options,
    plugin_requeue,
    submitted_limit_s,
)

DAY = 86400.0


@pytest.mark.parametrize("text, seconds", [("30m", 1800), ("6h", 21600), ("1.5d", 129600), ("90s", 90), ("2", 7200)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["-3h", "3x", "", "h", "1h30m"])
def test_bad_durations_are_refused(text):
    with pytest.raises(GreenOptionError, match="duration"):
        parse_duration(text)


def test_full_options():
    options = parse_user_options("flex=6h,gpus=2-8,cap=no,share=yes", max_delay_limit_s=DAY)
    assert options == GreenOptions(managed=True, max_delay_s=21600, gpus_min=2, gpus_max=8,
                                   accept_cap=False, accept_share=True)


def test_off_opts_out():
    assert parse_user_options("off", DAY).managed is False


@pytest.mark.parametrize("text, message", [
    ("flex=2d", "at most 24h"),
    ("gpus=8-2", "MIN <= MAX"),
    ("gpus=0", "MIN <= MAX"),
    ("gpus=2-1000001", "at most 1000000 GPUs"),
    ("cap=maybe", "yes or no"),
    ("colour=green", "unknown key"),
    ("flex", "KEY=VALUE"),
])
def test_malformed_options_say_what_is_allowed(text, message):
    with pytest.raises(GreenOptionError, match=message):
        parse_user_options(text, DAY)


def test_user_options_are_found_among_other_words():
    assert find_user_options("my run green:flex=2h notes lr=0.1") == "flex=2h"
    assert find_user_options("nothing here gpus=2") is None


@pytest.mark.parametrize("comment, message", [
    ("green:flex=6h gpus=2", "'gpus=2' is outside the green: word"),
    ("green:flex=6h, gpus=2", "'gpus=2' is outside"),
    ("share=no green:flex=6h", "'share=no' is outside"),
    ("green: flex=6h", "'flex=6h' is outside"),
    ("green:flex=6h green:gpus=2", "2 'green:' words"),
])
def test_options_spread_over_words_are_refused_not_dropped(comment, message):
    with pytest.raises(GreenOptionError, match=message):
        find_user_options(comment)


@pytest.mark.parametrize("text, key", [("flex=1h,flex=2h", "flex"), ("gpus=2,GPUS=4", "gpus"), ("cap=no,on,cap=no", "cap")])
def test_a_key_given_twice_is_refused_not_overwritten(text, key):
    with pytest.raises(GreenOptionError, match=f"'{key}' given twice"):
        parse_user_options(text, DAY)


@given(
    managed=st.booleans(),
    delay=st.integers(0, 7 * 86400),
    gpus=st.one_of(st.none(), st.tuples(st.integers(1, 64), st.integers(0, 64))),
    cap=st.booleans(),
    share=st.booleans(),
    deadline=st.one_of(st.none(), st.integers(0, 2**31)),
    elastic=st.booleans(),
    limit=st.one_of(st.none(), st.integers(60, 365 * 86400)),
    begin=st.one_of(st.none(), st.integers(0, 2**31)),
    own_nodes=st.booleans(),
    array=st.booleans(),
)
def test_marker_round_trips(managed, delay, gpus, cap, share, deadline, elastic, limit, begin, own_nodes, array):
    gmin, gmax = (None, None) if gpus is None else (gpus[0], gpus[0] + gpus[1])
    options = GreenOptions(managed, float(delay), gmin, gmax, cap, share, None if deadline is None else float(deadline),
                           elastic, None if limit is None else float(limit), None if begin is None else float(begin),
                           own_nodes, array)
    assert parse_marker("other words " + format_marker(options)) == options


def test_a_job_whose_user_chose_its_nodes_or_an_array_keeps_its_size_whatever_its_range():
    """``-w``/``-x``/``-C``: the sizes that fit there are the user's to know (``own_nodes``); an
    array's tasks are one record (``array``); for every policy and the resizer. The marker says
    so only then, as before otherwise."""
    options, _ = on_arrival(parse_user_options("flex=6h,gpus=1-8", DAY), 1000.0, own_nodes=True)
    assert options.gpu_bounds(2) == (2, 2) and format_marker(options).endswith(";own_nodes=1")
    options, _ = on_arrival(parse_user_options("flex=6h,gpus=1-8", DAY), 1000.0, array=True)
    assert options.gpu_bounds(2) == (2, 2) and format_marker(options).endswith(";array=1")
    options, _ = on_arrival(parse_user_options("flex=6h,gpus=1-8", DAY), 1000.0)
    assert options.gpu_bounds(2) == (1, 8) and "own_nodes" not in format_marker(options)
    assert "array" not in format_marker(options)


def test_a_running_job_whose_user_chose_its_nodes_is_resized_in_place_within_its_range_and_an_array_task_is_not():
    """The resizer grows or shrinks a running job only on the node it runs on, which the user's
    ``-w``/``-x``/``-C`` allowed: their range holds there; an array's task keeps its size."""
    pinned, _ = on_arrival(parse_user_options("elastic=requeue,gpus=1-2", DAY), 1000.0, own_nodes=True)
    assert pinned.gpu_bounds(1) == (1, 1) and pinned.running_gpu_bounds(1) == (1, 2)
    task, _ = on_arrival(parse_user_options("elastic=requeue,gpus=1-2", DAY), 1000.0, array=True)
    assert task.running_gpu_bounds(1) == (1, 1)
    free, _ = on_arrival(parse_user_options("elastic=requeue,gpus=1-2", DAY), 1000.0)
    assert free.running_gpu_bounds(1) == free.gpu_bounds(1) == (1, 2)


def test_a_later_begin_is_kept_as_the_earliest_start_and_flex_counts_from_it():
    options, deferred = on_arrival(parse_user_options("flex=6h", DAY), 1000.0, begin=5000.0)
    assert (options.earliest, options.deadline, deferred) == (5000.0, 5000.0 + 6 * 3600, 5000 + 6 * 3600)
    assert "begin=5000" in format_marker(options)
    for begin in (None, 0.0, 1000.0, float(NO_VAL)):  # none, past, now, Slurm's "unset": no earliest start
        assert on_arrival(parse_user_options("flex=6h", DAY), 1000.0, begin=begin)[0].earliest is None


# --- elastic ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["requeue", "REQUEUE", " Requeue"])
def test_elastic_requeue_opts_in(value):
    options = parse_user_options(f"elastic={value},gpus=1-4", DAY)
    assert options == GreenOptions(gpus_min=1, gpus_max=4, elastic=True)


@pytest.mark.parametrize("value", ["no", "n", "0", "false", "off", "OFF"])
def test_elastic_no_words_mean_not_elastic(value):
    assert parse_user_options(f"gpus=1-4,elastic={value}", DAY) == parse_user_options("gpus=1-4", DAY)


def test_not_elastic_is_the_default():
    assert parse_user_options("flex=6h", DAY).elastic is False
    assert GreenOptions().elastic is False


@pytest.mark.parametrize("value", ["yes", "on", "1", "bogus", "requeued", ""])
def test_other_elastic_values_are_refused(value):
    with pytest.raises(GreenOptionError, match=f"elastic='{value}': expected requeue or no"):
        parse_user_options(f"elastic={value}", DAY)


def test_elastic_given_twice_is_refused():
    with pytest.raises(GreenOptionError, match="'elastic' given twice: give each of flex, gpus, cap, share, elastic"):
        parse_user_options("elastic=requeue,gpus=2,ELASTIC=no", DAY)


def test_elastic_outside_the_green_word_is_refused():
    with pytest.raises(GreenOptionError, match="'elastic=requeue' is outside the green: word"):
        find_user_options("green:gpus=1-4 elastic=requeue")


def test_error_messages_name_every_key():
    assert KEYS == ("flex", "gpus", "cap", "share", "elastic")
    for text in ("colour=red", "fast"):
        with pytest.raises(GreenOptionError, match="flex, gpus, cap, share, elastic"):
            parse_user_options(text, DAY)


def test_a_marker_that_is_not_elastic_is_the_same_text_as_before():
    """Markers written before the option existed stay byte-identical (and read back not elastic)."""
    options = GreenOptions(max_delay_s=3600, gpus_min=1, gpus_max=4, deadline=1_700_003_600)
    assert format_marker(options) == "sg:managed=1;flex=3600;cap=1;share=0;gmin=1;gmax=4;deadline=1700003600"
    assert format_marker(parse_user_options("flex=1h,elastic=no", DAY)) == "sg:managed=1;flex=3600;cap=1;share=0"
    assert format_marker(GreenOptions(managed=False)) == "sg:managed=0;flex=0;cap=1;share=0"
    assert parse_marker("sg:managed=1;flex=3600;cap=1;share=0;gmin=1;gmax=4").elastic is False


def test_an_elastic_marker_ends_with_elastic_1():
    options = parse_user_options("elastic=requeue,gpus=1-4", DAY)
    assert format_marker(options) == "sg:managed=1;flex=0;cap=1;share=0;gmin=1;gmax=4;elastic=1"
    assert parse_marker("x " + format_marker(options)) == options


@pytest.mark.parametrize("requeue, elastic_after, requeue_after", [
    (None, True, 1), (NO_VAL16, True, 1), (1, True, 1),
    (0, False, 0),  # the user's --no-requeue stands: the job is not elastic
])
def test_on_arrival_and_the_requeue_field_of_an_elastic_job(requeue, elastic_after, requeue_after):
    options, _ = on_arrival(GreenOptions(gpus_min=1, gpus_max=4, elastic=True), now=1000.0, requeue=requeue)
    assert options.elastic is elastic_after
    assert plugin_requeue(options, requeue) == requeue_after


@pytest.mark.parametrize("requeue", [None, NO_VAL16, 0, 1])
def test_requeue_is_left_alone_when_not_elastic(requeue):
    options, _ = on_arrival(GreenOptions(max_delay_s=60), now=1000.0, requeue=requeue)
    assert options.elastic is False and plugin_requeue(options, requeue) == requeue


@pytest.mark.parametrize(("minutes", "seconds"), [(90, 5400.0), (1, 60.0), (None, None), (0, None),
                                                  (NO_VAL, None), (NO_VAL + 1, None)])  # NO_VAL + 1: INFINITE
def test_the_plugin_records_a_submitted_limit_only_when_one_was_given(minutes, seconds):
    assert submitted_limit_s(minutes) == seconds
    options, _ = on_arrival(GreenOptions(max_delay_s=60), now=1000.0, time_limit_s=submitted_limit_s(minutes))
    assert parse_marker(format_marker(options)).time_limit_s == seconds


@pytest.mark.parametrize("limit", ["0", "-60", "nan", "inf"])
def test_a_marker_limit_that_is_not_a_positive_duration_is_none(limit):
    assert parse_marker(f"sg:managed=1;flex=0;cap=1;share=0;limit={limit}").time_limit_s is None


def test_marker_absent_or_garbled():
    assert parse_marker("") is None
    assert parse_marker("sg:flex=abc") is None


def test_unbounded_limit():
    assert parse_user_options("flex=30d", math.inf).max_delay_s == 30 * DAY


def test_a_marker_with_a_count_beyond_the_bound_is_no_managed_job():
    """Written before counts were bounded: left to Slurm, not fed to the policies' int64 arrays."""
    assert parse_marker("sg:managed=1;flex=3600;gmin=1;gmax=99999999999999999999") is None
    assert parse_marker("sg:managed=1;flex=3600;gmin=1;gmax=1000000").gpus_max == 1_000_000

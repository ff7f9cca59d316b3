import math

import pytest
from hypothesis import given, strategies as st

from slurm_green.core.green_options import (
    GreenOptionError,
    GreenOptions,
    find_user_options,
    format_marker,
    parse_duration,
    parse_marker,
    parse_user_options,
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
)
def test_marker_round_trips(managed, delay, gpus, cap, share, deadline):
    gmin, gmax = (None, None) if gpus is None else (gpus[0], gpus[0] + gpus[1])
    options = GreenOptions(managed, float(delay), gmin, gmax, cap, share, None if deadline is None else float(deadline))
    assert parse_marker("other words " + format_marker(options)) == options


def test_marker_absent_or_garbled():
    assert parse_marker("") is None
    assert parse_marker("sg:flex=abc") is None


def test_unbounded_limit():
    assert parse_user_options("flex=30d", math.inf).max_delay_s == 30 * DAY

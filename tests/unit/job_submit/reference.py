"""The Python reference for job_submit.lua's submit path, and generators of user comments.

Shared by the unit tests (Lua against Python on random comments) and the submission
fuzz campaign (tests/integration/campaign), so that both judge the plugin by one rule.
"""

from __future__ import annotations

from hypothesis import strategies as st

from slurm_green.core.green_options import (
    NO_VAL,
    NO_VAL16,
    find_user_options,
    format_marker,
    on_arrival,
    parse_user_options,
    plugin_requeue,
    submitted_limit_s,
)

NOW = 1_700_000_000
MAX_FLEX_S = 72 * 3600  # the shipped site setting


def expected_submission(comment: str, now: int = NOW, max_flex_s: float = MAX_FLEX_S,
                        begin: int = 0, requeue: int = NO_VAL16,
                        time_limit: int = NO_VAL, own_nodes: bool = False,
                        array: bool = False, reserved: bool = False,
                        tasks: int | None = None) -> tuple[str | None, int, int]:
    """What the Python reference says the marker (None: no green option), the begin time
    (0: none) and the requeue field (NO_VAL16: unset) must be after the plugin, for a job
    submitted with ``time_limit`` minutes (NO_VAL: none), and with a node list, excluded
    nodes, a constraint or a reservation where ``own_nodes`` (any of ``-w``, ``-x``, ``-C``,
    ``--reservation`` given, not empty), in a reservation where ``reserved`` (``--reservation``),
    as an array where ``array`` (``--array``, not empty), and with ``tasks`` (``-n``: num_tasks)
    (``green_options.on_arrival``, the simulator's rule too, and ``plugin_requeue``); raises
    GreenOptionError (a ValueError) where the plugin must refuse the submission."""
    text = find_user_options(comment)
    if text is None:
        return None, begin, requeue
    options, deferred = on_arrival(parse_user_options(text, max_flex_s), now, begin or None, requeue,
                                   submitted_limit_s(time_limit), own_nodes, array, reserved, tasks)
    after = plugin_requeue(options, requeue)
    assert after is not None
    return format_marker(options), begin if deferred is None else deferred, after


def expected_marker(comment: str, now: int = NOW, max_flex_s: float = MAX_FLEX_S) -> str | None:
    """The marker of ``expected_submission``."""
    return expected_submission(comment, now, max_flex_s)[0]


_PIECES = st.sampled_from(
    ["flex", "FLEX", "gpus", "cap", "share", "Share", "elastic", "Elastic", "requeue", "REQUEUE",
     "on", "yes", "y", "off", "no", "foo", "=", ",", "-", ".",
     "0", "1", "2", "8", "007", "72", "73", "1.5", "h", "m", "s", "d", "D", "x", "true", "False", " ", "\t"]
)
_ALPHABET = st.sampled_from(list("0123456789.-=,:;hmsdHMSDyesnotrufalcpgxq ") + ["\x1c", "\xa0", "\u2003", "\u3000", "\u00e9"])
ITEMS = ["flex=6h", "FLEX=30m", "flex=1d", "gpus=2", "gpus=2-8", "Gpus=1", "cap=yes", "cap=no", "share=no",
         "share=y", "elastic=requeue", "Elastic=REQUEUE", "elastic=no", "elastic=off", "elastic=yes", "on",
         "colour=red", "lr=0.1", "x", ""]
# How options get joined: commas, and the spaces users type by mistake (green:flex=6h gpus=2).
JOINS = [",", ",", " ", ", ", " ,", ",,", "\t", "\xa0"]
_ITEMS = st.sampled_from(ITEMS)
_JOINS = st.sampled_from(JOINS)


@st.composite
def option_lists(draw) -> str:
    """Plausible options, often with a key twice or a space where a comma belongs."""
    items = draw(st.lists(_ITEMS, min_size=1, max_size=5))
    text = items[0]
    for item in items[1:]:
        text += draw(_JOINS) + item
    return text


@st.composite
def comments(draw) -> str:
    """Comments around the grammar's edges: option-like pieces, prefixes, stray words."""
    body = draw(st.one_of(st.lists(_PIECES, max_size=12).map("".join), st.text(alphabet=_ALPHABET, max_size=25),
                          option_lists()))
    prefix = draw(st.sampled_from(["green:", "GREEN:", "Green:", "green", "grün:", ""]))
    lead = draw(st.sampled_from(["", "note ", "green:flex=1h ", "\u3000", "a\x1fb ", "gpus=2 ", "x,cap=no "]))
    tail = draw(st.sampled_from(["", " more", " green:off", "\xa0x", " gpus=2", " Flex=2h", ",share=no", " lr=1",
                                 ",elastic=requeue", " elastic=requeue"]))
    return lead + prefix + body + tail

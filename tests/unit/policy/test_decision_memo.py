"""A controller's memo only saves work: every policy decides the same with the memo it kept
over earlier ticks as with a fresh one (``core/decision.py``)."""

from __future__ import annotations

import pytest
from policy_literals import NOW, context, nodes, pending, signal, snapshot

from slurm_green.core.decision import DecisionContext, DecisionMemo
from slurm_green.policy.registry import POLICY_NAMES, PolicyKnobs, make_policy


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_a_kept_memo_decides_like_a_fresh_one_as_jobs_and_nodes_change(name, models):
    policy = make_policy(PolicyKnobs(name=name))
    forecast = signal([300.0, 100.0, 50.0, 400.0] * 12)
    idle, busy = nodes(2), nodes(2, used={0: (0, 1, 2)})
    ticks = [
        snapshot([pending(1, gpus=2, low=1, high=4), pending(2)], idle),
        snapshot([pending(2), pending(3, gpus=4, low=2, high=8)], idle),  # same node tuple: the memo's hit
        snapshot([pending(2), pending(3, gpus=4, low=2, high=8)], busy),  # nodes changed
        snapshot([pending(1, gpus=2, low=1, high=4), pending(2)], idle),  # back to the first
    ]
    memo = DecisionMemo()
    for now, snap in enumerate(ticks, start=int(NOW)):
        kept = policy(DecisionContext(snap, forecast, models, float(now), memo))
        assert kept == policy(context(snap, forecast, models, float(now)))

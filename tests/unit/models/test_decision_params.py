"""Every stored decision names the model parameters it was made with (the registry's ``params_id``)."""

from __future__ import annotations

from dataclasses import replace

from slurm_green.controller.store import StateStore
from slurm_green.core.plan import JobDecision
from slurm_green.models import default_registry


def test_the_parameters_id_is_stored_with_the_decision(tmp_path) -> None:
    registry = default_registry()
    store = StateStore(tmp_path / "state.db")
    decision = JobDecision(7, start_at=100.0, power_cap_fraction=0.4, reason="test",
                           model_params=registry.params_id)
    assert store.record_decisions(100.0, [decision]) == 1
    assert store.decisions(7)[0]["model_params"] == registry.params_id
    store.close()
    reopened = StateStore(tmp_path / "state.db")  # reopening adds no second column and keeps the row
    assert reopened.decisions(7)[0]["model_params"] == registry.params_id
    assert reopened.record_decisions(200.0, [replace(decision, model_params=None)]) == 0  # same choice

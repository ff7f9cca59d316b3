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


def test_a_job_name_no_modelled_type_matches_is_assumed_and_says_so() -> None:
    """A name that maps to no modelled job type gets the default model, and the model and the
    registry say so, naming the job, as they do for a GPU type nobody profiled."""
    registry = default_registry()
    guessed, fitted = registry.for_job("my_experiment_v3"), registry.for_job("train_resnet50_bs64")
    assert guessed.job_assumed and not fitted.job_assumed and fitted.job_note == ""
    assert guessed.job_note.startswith("job name 'my_experiment_v3' matches no modelled job type: the "
                                       "conservative default model (")
    assert registry.assumed("my_experiment_v3") == guessed.job_note
    assert registry.assumed("train_resnet50_bs64") == "" and registry.assumed("resnet50", "h100") == ""
    assert registry.assumed(None).startswith("the job has no name: the conservative default model")
    assert registry.assumed("") == registry.assumed(None)
    long_name = "x" * 500  # user text, stored with each decision: quoted in part
    assert f"'{'x' * 64}...' matches no" in registry.assumed(long_name) and "x" * 65 not in registry.assumed(long_name)


def test_an_unprofiled_gpu_type_is_assumed_beside_the_job_name_and_a_learned_board_is_said() -> None:
    registry = default_registry()
    both = registry.assumed("my_experiment_v3", "NVIDIA H200 141GB HBM3e")
    assert both.startswith("job name 'my_experiment_v3' matches no modelled job type")
    assert "; GPU type h200: not profiled and no board limits reported" in both
    assert registry.assumed("resnet50", "h200").startswith("GPU type h200: not profiled and no board limits")
    registry.observe_board("NVIDIA H200", 200.0, 700.0, 700.0)  # the answer follows what the nodes report
    assert registry.assumed("resnet50", "h200").startswith("GPU type h200: not profiled; conservative model "
                                                           "from its board (200-700 W)")


def test_the_answer_is_memoised_per_name(monkeypatch) -> None:
    """Every decision of every tick is stamped (the simulator makes thousands a second): a name
    is looked up once."""
    registry = default_registry()
    looked_up: list[object] = []
    real = registry.for_job
    monkeypatch.setattr(registry, "for_job", lambda *args: looked_up.append(args) or real(*args))
    answers = {registry.assumed("my_experiment_v3", "h100") for _ in range(1000)}
    assert len(answers) == 1 and looked_up == [("my_experiment_v3", "h100")]

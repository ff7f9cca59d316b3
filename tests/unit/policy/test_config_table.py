from policy_literals import LiteralModels, SublinearModel
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.models import Config
from slurm_green.models.registry import default_registry
from slurm_green.policy.config_table import MAX_TYPES, cap_choices, config_table, gpu_options, layout


def test_layouts_split_evenly_over_the_fewest_nodes():
    assert layout(4, 8) == (4, 1)
    assert layout(16, 8) == (8, 2)
    assert layout(6, 4) == (3, 2)
    assert layout(5, 4) is None


def test_gpu_options_are_powers_of_two_in_range_plus_the_request():
    assert gpu_options(6, 3, 12, 8) == (4, 6, 8)
    assert gpu_options(2, 2, 2, 8) == (2,)


def test_table_answers_like_the_model_and_grows_with_new_counts():
    models, memo = LiteralModels(), DecisionMemo()
    small = config_table(models, {"a"}, {1, 2}, (0.5, 1.0), 8, memo=memo)
    model = SublinearModel()
    assert small.throughput[0, 1, 0] == model.throughput(Config(2, 1, 0.5))
    bigger = config_table(models, {"a", "b"}, {16}, (0.5, 1.0), 8, memo=memo)
    assert set(bigger.gpus.tolist()) == {1, 2, 16} and {"a", "b"} <= set(bigger.type_index)
    assert bigger.power_w[bigger.type_index["b"], 2, 1] == model.power_w(Config(16, 2, 1.0))


def test_a_table_per_gpu_type_answers_with_that_types_models():
    registry, memo = default_registry(), DecisionMemo()
    h100 = config_table(registry, {"resnet50"}, {1}, (0.5, 1.0), 8, "h100", memo)
    a40 = config_table(registry, {"resnet50"}, {1}, (0.5, 1.0), 8, "a40", memo)
    untyped = config_table(registry, {"resnet50"}, {1}, (0.5, 1.0), 8, memo=memo)
    assert (h100.gpu_type, a40.gpu_type, untyped.gpu_type) == ("h100", "a40", None)
    assert h100.throughput[0, 0, 1] == registry.for_job("resnet50", "h100").throughput(Config(1, 1, 1.0))
    assert a40.power_w[0, 0, 0] == registry.for_job("resnet50", "a40").power_w(Config(1, 1, 0.5))
    assert untyped.throughput[0, 0, 1] == registry.for_job("resnet50").throughput(Config(1, 1, 1.0))
    assert config_table(registry, {"resnet50"}, {1}, (0.5, 1.0), 8, "h100", memo) is h100  # memoised per type


def test_cap_choices_reach_each_boards_minimum_and_respect_the_floor():
    registry = default_registry()
    assert min(cap_choices(registry, "h100", floor=0.0, step=0.05)) < min(cap_choices(registry, "a40", floor=0.0,
                                                                                      step=0.05))
    assert min(cap_choices(registry, "h100", floor=0.5, step=0.1)) == 0.5
    assert cap_choices(registry, None, floor=0.5, step=0.1) == (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def test_a_table_is_rebuilt_once_telemetry_corrects_the_registry():
    """Found by reading: the memo outlived corrections, so a policy planned with the models as
    they were before the controller learned anything."""
    registry, memo = default_registry(), DecisionMemo()
    before = config_table(registry, {"resnet50"}, {1}, (1.0,), 8, memo=memo)
    assert config_table(registry, {"resnet50"}, {1}, (1.0,), 8, memo=memo) is before
    model = registry.for_job("resnet50")
    for _ in range(20):
        registry.observe("resnet50", Config(gpus=1), measured_power_w=2.0 * model.power_w(Config(gpus=1)))
    after = config_table(registry, {"resnet50"}, {1}, (1.0,), 8, memo=memo)
    assert after.power_w[0, 0, 0] > 1.2 * before.power_w[0, 0, 0]


def test_a_memo_keeps_a_table_for_its_registry_only():
    """Two registries never share a memo's table, even for the same key."""
    memo = DecisionMemo()
    first = config_table(default_registry(), {"resnet50"}, {1}, (1.0,), 8, memo=memo)
    assert config_table(default_registry(), {"resnet50"}, {1}, (1.0,), 8, memo=memo) is not first


def test_a_kept_table_stops_growing_with_job_names_and_answers_the_same():
    """A type is a job's name: where every job has a new one, the union would grow with every
    job and each new name rebuild all of it. Past MAX_TYPES the table starts again from the
    names asked, keeping the counts, and answers as a fresh table does."""
    models, memo = LiteralModels(), DecisionMemo()
    for i in range(MAX_TYPES + 10):
        table = config_table(models, {f"run-{i}"}, {1, 2}, (0.5, 1.0), 8, memo=memo)
    assert len(table.type_index) <= MAX_TYPES
    table = config_table(models, {"last", "run-3"}, {4}, (0.5, 1.0), 8, memo=memo)
    assert {"last", "run-3"} <= table.type_index.keys() and set(table.gpus.tolist()) == {1, 2, 4}
    fresh = config_table(models, {"run-3"}, {1, 2, 4}, (0.5, 1.0), 8)
    assert (table.throughput[table.type_index["run-3"]] == fresh.throughput[0]).all()
    assert (table.power_w[table.type_index["run-3"]] == fresh.power_w[0]).all()

from policy_literals import LiteralModels, SublinearModel
from slurm_green.models.base import Config
from slurm_green.policy.config_table import config_table, gpu_options, layout


def test_layouts_split_evenly_over_the_fewest_nodes():
    assert layout(4, 8) == (4, 1)
    assert layout(16, 8) == (8, 2)
    assert layout(6, 4) == (3, 2)
    assert layout(5, 4) is None


def test_gpu_options_are_powers_of_two_in_range_plus_the_request():
    assert gpu_options(6, 3, 12, 8) == (4, 6, 8)
    assert gpu_options(2, 2, 2, 8) == (2,)


def test_table_answers_like_the_model_and_grows_with_new_counts():
    models = LiteralModels()
    small = config_table(models, {"a"}, {1, 2}, (0.5, 1.0), 8)
    model = SublinearModel()
    assert small.throughput[0, 1, 0] == model.throughput(Config(2, 1, 0.5))
    bigger = config_table(models, {"a", "b"}, {16}, (0.5, 1.0), 8)
    assert set(bigger.gpus.tolist()) == {1, 2, 16} and {"a", "b"} <= set(bigger.type_index)
    assert bigger.power_w[bigger.type_index["b"], 2, 1] == model.power_w(Config(16, 2, 1.0))

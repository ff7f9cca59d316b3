import numpy as np

from policy_literals import NOW, SublinearModel, nodes, pending, signal, snapshot
from slurm_green.models.base import Config
from slurm_green.policy.baselines import FifoPolicy, ZeusCapPolicy, window_baseline


def test_fifo_releases_every_managed_job_now_untouched(models):
    plan = FifoPolicy()(snapshot([pending(1, gpus=4), pending(2)], nodes(1)), signal([100.0] * 24), models, NOW)
    assert [(d.start_at, d.gpus_per_node, d.power_cap_fraction) for d in plan.decisions] == [(NOW, None, None)] * 2


def test_zeus_picks_the_cap_minimising_its_eta_cost(models):
    eta = 0.5
    policy = ZeusCapPolicy(eta=eta)
    plan = policy(snapshot([pending(1, gpus=2)], nodes(1)), None, models, NOW)
    model = SublinearModel()
    max_power = model.power_w(Config(2))
    costs = {c: (eta * model.power_w(Config(2, 1, c)) + (1 - eta) * max_power) / model.throughput(Config(2, 1, c))
             for c in policy.caps}
    assert plan.decisions[0].power_cap_fraction == min(costs, key=costs.get)
    assert plan.decisions[0].start_at == NOW


def test_window_baselines_differ_only_in_the_cap():
    assert window_baseline(cap=False).cap_fraction is None
    assert window_baseline(cap=True).cap_fraction is not None

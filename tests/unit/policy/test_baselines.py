import dataclasses

import numpy as np

from policy_literals import NOW, SublinearModel, context, nodes, pending, signal, snapshot
from slurm_green.core.cluster import Node
from slurm_green.core.models import Config
from slurm_green.models.registry import default_registry
from slurm_green.policy.baselines import FifoPolicy, ZeusCapPolicy


def test_fifo_releases_every_managed_job_now_untouched(models):
    plan = FifoPolicy()(context(snapshot([pending(1, gpus=4), pending(2)], nodes(1)), signal([100.0] * 24), models))
    assert [(d.start_at, d.gpus_per_node, d.power_cap_fraction) for d in plan.decisions] == [(NOW, None, None)] * 2


def test_zeus_picks_the_cap_minimising_its_eta_cost(models):
    eta = 0.5
    policy = ZeusCapPolicy(eta=eta)
    plan = policy(context(snapshot([pending(1, gpus=2)], nodes(1)), None, models))
    model = SublinearModel()
    max_power = model.power_w(Config(2))
    costs = {c: (eta * model.power_w(Config(2, 1, c)) + (1 - eta) * max_power) / model.throughput(Config(2, 1, c))
             for c in models.allowed_caps(None, floor=policy.floor, step=policy.step)}
    assert plan.decisions[0].power_cap_fraction == min(costs, key=costs.get)
    assert plan.decisions[0].start_at == NOW


def _typed_nodes() -> tuple[Node, ...]:
    return (Node("h0", gpus_total=8, gpu_type="h100", partitions=("fast",)),
            Node("a0", gpus_total=8, gpu_type="a40", partitions=("slow",)),
            Node("a1", gpus_total=8, gpu_type="a40", partitions=("slow",)))


def test_zeus_plans_each_job_on_its_partitions_gpu_type_with_that_types_models():
    registry = default_registry()
    jobs = [dataclasses.replace(pending(1), name="resnet50", partition="fast"),
            dataclasses.replace(pending(2), name="resnet50", partition="slow"),
            dataclasses.replace(pending(3), name="resnet50", partition="gone")]
    plan = ZeusCapPolicy(eta=1.0, floor=0.0, step=0.05)(context(snapshot(jobs, _typed_nodes()), None, registry))
    assert [d.gpu_type for d in plan.decisions] == ["h100", "a40", "a40"]  # unknown partition: cluster majority
    for decision in plan.decisions:  # eta 1: the energy-optimal cap of that type's allowed set
        assert decision.power_cap_fraction == registry.energy_optimal_cap("resnet50", decision.gpu_type)
    assert plan.decisions[0].power_cap_fraction != plan.decisions[1].power_cap_fraction  # the type decides


def test_type_blind_zeus_plans_with_the_registrys_own_type_and_names_none():
    registry = default_registry()
    jobs = [dataclasses.replace(pending(1), name="resnet50", partition="fast")]
    plan = ZeusCapPolicy(eta=1.0, floor=0.0, step=0.05, typed=False)(context(snapshot(jobs, _typed_nodes()), None,
                                                                            registry))
    assert plan.decisions[0].gpu_type is None
    assert plan.decisions[0].power_cap_fraction == registry.energy_optimal_cap("resnet50")


def test_zeus_never_asks_a_board_for_less_than_its_minimum():
    registry = default_registry()
    registry.observe_board("h100", min_w=560.0, max_w=700.0, default_w=700.0)  # a board that stops at 0.8
    jobs = [dataclasses.replace(pending(1), name="resnet50", gpu_type="h100")]
    plan = ZeusCapPolicy(eta=1.0, floor=0.0)(context(snapshot(jobs, _typed_nodes()), None, registry))
    assert plan.decisions[0].power_cap_fraction >= 0.8

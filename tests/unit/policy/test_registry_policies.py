"""The controller's policies by name: configuration file -> registry -> a policy that decides."""

import subprocess
import sys

import pytest
from policy_literals import HOUR, NOW, context, nodes, pending, signal, snapshot

from slurm_green.controller.config import ConfigError, load_config
from slurm_green.policy.greenflow import GreenFlowPolicy
from slurm_green.policy.priced_sharing import Colocation
from slurm_green.policy.registry import POLICY_NAMES, PolicyKnobs, make_policy
from slurm_green.policy.running import GrowRunning, ShrinkRunning
from slurm_green.policy.window import WindowPolicy
from slurm_green.policy.window_aware import CapacityAwareWindowPolicy


#: What ``icefrog`` needs besides its name: the resizer that enacts its running-job decisions.
ELASTIC = '[elastic]\nrequeue = true\nprogress_dir = "/var/spool/slurm-green/progress"\n'


def configured(tmp_path, policy: str, rest: str = ""):
    path = tmp_path / "c.toml"
    path.write_text("[policy]\n" + policy + rest)
    return make_policy(load_config(path).policy)


def test_every_name_the_configuration_accepts_builds_that_policy(tmp_path):
    assert POLICY_NAMES == ("window", "window-aware", "fifo", "zeus", "greenflow", "powerflow", "eaco", "icefrog")
    for name in POLICY_NAMES:
        assert configured(tmp_path, f'name = "{name}"\n', ELASTIC if name == "icefrog" else "").name == name


def test_icefrog_is_greenflow_that_grows_and_shrinks_running_jobs_and_needs_requeue(tmp_path):
    icefrog = configured(tmp_path, 'name = "icefrog"\nbudget_fraction = 0.8\n', ELASTIC)
    assert isinstance(icefrog, ShrinkRunning) and isinstance(icefrog.inner, GrowRunning)
    assert icefrog.inner.inner == GreenFlowPolicy(budget_fraction=0.8) and icefrog.budget_fraction == 0.8
    with pytest.raises(ConfigError, match="resizes running elastic jobs: set \\[elastic\\] requeue = true"):
        configured(tmp_path, 'name = "icefrog"\n')


def test_greenflow_and_powerflow_get_their_budget_and_runtime_from_the_file(tmp_path):
    green = configured(tmp_path, 'name = "greenflow"\nbudget_fraction = 0.8\ndefault_runtime_h = 2\n')
    assert green == GreenFlowPolicy(budget_fraction=0.8, default_runtime_s=7200.0)
    power = configured(tmp_path, 'name = "powerflow"\nplace_nodes = false\n')
    assert (power.resource, power.budget_fraction, power.place) == ("energy", 1.0, False)


def test_defaults_are_the_benchs_and_the_window_keeps_its_cap(tmp_path):
    assert configured(tmp_path, 'name = "greenflow"\n') == GreenFlowPolicy(budget_fraction=1.0)
    assert configured(tmp_path, "cap_fraction = 0.6\n") == WindowPolicy(cap_fraction=0.6)
    aware = configured(tmp_path, 'name = "window-aware"\ncap_fraction = 0.6\ndefault_runtime_h = 2\n')
    assert aware == CapacityAwareWindowPolicy(cap_fraction=0.6, default_runtime_s=7200.0)


@pytest.mark.parametrize("text, says", [
    ('name = "greenflw"\n', "policy.name: Value error, unknown policy; choose from window, window-aware, fifo, zeus, greenflow, powerflow, eaco, icefrog"),
    ('name = "greenflow"\nbudget_fraction = 0\n', "policy.budget_fraction: Input should be greater than 0"),
    ('budget = 1\n', "policy.budget: unknown key (allowed here: name, cap_fraction, default_runtime_h, "
                     "budget_fraction, place_nodes, gpu_time_slack, runtime_slack, growth_horizon_h, budget_slack, "
                     "eta, placement, colocate)"),
    ('name = "eaco"\ncolocate = true\n', "policy.colocate prices co-location in GreenFlow's cost: it needs "
                                          "policy.name = 'greenflow', 'powerflow' or 'icefrog'"),
    ('name = "greenflow"\nruntime_slack = -0.1\n', "policy.runtime_slack: Input should be greater than or equal to 0"),
    ('name = "greenflow"\nplacement = { pwr = 0.5, fdg = 0.5 }\n',
     "policy.placement: Value error, unknown placement plugin(s) fdg; choose from packing, best_fit, buddy, fgd, pwr"),
])
def test_a_bad_policy_setting_is_refused_naming_the_key(tmp_path, text, says):
    path = tmp_path / "c.toml"
    path.write_text("[policy]\n" + text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert says in str(info.value)


def test_the_guards_reach_greenflow_and_powerflow(tmp_path):
    knobs = "gpu_time_slack = 0.3\nruntime_slack = 0.5\ngrowth_horizon_h = 4\nbudget_slack = 0\n"
    for name in ("greenflow", "powerflow"):
        policy = configured(tmp_path, f'name = "{name}"\n' + knobs)
        assert (policy.gpu_time_slack, policy.runtime_slack, policy.growth_horizon_s, policy.budget_slack) == (
            0.3, 0.5, 4 * 3600.0, 0.0)


def test_an_unknown_name_reaching_the_registry_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="unknown policy 'sjf'; choose from window, window-aware, fifo, zeus, greenflow, "
                                         "powerflow, eaco, icefrog"):
        make_policy(PolicyKnobs(name="sjf"))


def test_the_registry_loads_without_the_controller():
    """The old cycle: registry -> controller.config -> ... -> controller.assemble -> registry."""
    script = ("import sys, slurm_green.policy.registry; "
              "print(sorted(m for m in sys.modules if m.startswith('slurm_green.controller')))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    subprocess.run([sys.executable, "-c", "import slurm_green.controller.assemble"], check=True)


def test_a_configured_greenflow_resizes_and_places_an_elastic_job(tmp_path, models):
    """What the live controller will enact: a GPU count inside the user's range and a node list."""
    # Guards loosened: the literal model's g^0.8 scaling holds more GPU-hours per extra GPU.
    policy = configured(tmp_path, 'name = "greenflow"\ngpu_time_slack = 1.0\n')
    job = pending(1, gpus=1, low=1, high=4, runtime_h=2.0, gpus_per_node=4)
    plan = policy(context(snapshot([job], nodes(2, gpus=4)), signal([100.0] * 48), models))
    [decision] = plan.decisions
    assert decision.gpus_per_node is not None and 1 <= decision.gpus_per_node * decision.num_nodes <= 4
    assert decision.nodes is not None and len(decision.nodes) == decision.num_nodes
    assert decision.start_at == NOW and decision.expected_runtime_s < 2.0 * HOUR


@pytest.mark.parametrize("name", ["greenflow", "powerflow"])
def test_colocate_reaches_greenflow_and_powerflow_off_by_default(tmp_path, name):
    assert configured(tmp_path, f'name = "{name}"\n').colocation is None
    assert configured(tmp_path, f'name = "{name}"\ncolocate = true\n').colocation == Colocation()

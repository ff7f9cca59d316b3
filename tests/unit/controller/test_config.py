from pathlib import Path

import pytest

from slurm_green.controller.config import Config, ConfigError, load_config


def test_empty_file_is_all_defaults(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("")
    assert load_config(path) == Config()


def test_values_are_read(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[controller]\ninterval_s = 60\n[carbon]\nsources = ["csv:/x.csv", "ukgrid"]\nmax_age_s = 60\n')
    config = load_config(path)
    assert config.controller.interval_s == 60
    assert config.carbon.sources == ["csv:/x.csv", "ukgrid"] and config.carbon.max_age_s == 60


def test_errors_name_every_bad_key(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[controller]\ninterval_s = -5\ncolour = "green"\n[policy]\ncap_fraction = 1.5\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert "controller.interval_s" in text and "greater than 0" in text
    assert "controller.colour: unknown key (allowed here: interval_s, state_db," in text
    assert "policy.cap_fraction" in text


def test_inf_and_nan_are_refused_naming_the_key(tmp_path):
    """TOML has both; no setting means them, and each would crash the controller later
    (``horizon_h = inf``: the forecast's window cannot be built)."""
    path = tmp_path / "c.toml"
    path.write_text("[carbon]\nhorizon_h = inf\n[policy]\nbudget_fraction = nan\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert "carbon.horizon_h" in text and "policy.budget_fraction" in text and "finite" in text


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes('[policy]\nname = "window"  # caf\u00e9\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"c.toml: not UTF-8 \(TOML files are\): byte 31 cannot be read"):
        load_config(path)


def test_an_unknown_section_lists_the_sections(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[carbn]\nsources = ['synthetic']\n")
    with pytest.raises(ConfigError, match=r"carbn: unknown key \(allowed here: controller, slurm, carbon, policy, gpu, budget, elastic\)"):
        load_config(path)


def test_broken_toml_and_missing_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[controller\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "absent.toml")


@pytest.mark.parametrize("text, words", [
    ('[budget]\ncarbon_kg = 40\n', "budget.carbon_kg is kept only by policy.name = greenflow or icefrog (policy.name is 'window')"),
    ('[policy]\nname = "greenflow"\n[budget]\nenergy_kwh = 5\n',
     "budget.energy_kwh is kept only by policy.name = powerflow"),
    ('[policy]\nname = "greenflow"\n[budget]\ncarbon_kg = 4\nenergy_kwh = 5\n', "not both"),
    ('[policy]\nname = "greenflow"\n[budget]\ncarbon_kg = 4\ntimezone = "Mars/Base"\n',
     "budget.timezone: Value error, not an IANA time zone"),
    ('[policy]\nname = "greenflow"\n[budget]\ncarbon_kg = 0\n', "budget.carbon_kg: Input should be greater than 0"),
    ('[policy]\nname = "greenflow"\n[budget]\ncarbon_kg = 4\nperiod = "month"\n', "budget.period"),
])
def test_a_period_budget_nobody_would_keep_is_refused(tmp_path, text, words):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert words in str(info.value)


def test_a_period_budget_for_its_policy(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[policy]\nname = "powerflow"\n[budget]\nenergy_kwh = 500\nperiod = "week"\ntimezone = "Asia/Kolkata"\n')
    budget = load_config(path).budget
    assert (budget.limit, budget.period, budget.timezone) == (500.0, "week", "Asia/Kolkata")


def test_elastic_requeue_is_off_by_default_and_needs_a_place_to_read_progress(tmp_path):
    assert not Config().elastic.requeue and Config().progress_dir is None
    path = tmp_path / "c.toml"
    path.write_text("[elastic]\nrequeue = true\n")
    with pytest.raises(ConfigError, match="elastic.requeue needs elastic.progress_dir or controller.telemetry_dir"):
        load_config(path)
    path.write_text('[controller]\ntelemetry_dir = "/spool/t"\n[elastic]\nrequeue = true\nsignal = "sigusr1"\n')
    config = load_config(path)
    assert config.progress_dir == Path("/spool/t/progress") and config.elastic.signal == "USR1"
    for bad, why in (("TERM", "stops the job"), ("USR9", "not a signal name")):
        path.write_text(f'[elastic]\nprogress_dir = "/p"\nsignal = "{bad}"\n')
        with pytest.raises(ConfigError, match=why):
            load_config(path)


def test_shrinking_when_dear_needs_a_priced_policy_and_requeue(tmp_path):
    path = tmp_path / "c.toml"
    elastic = '[elastic]\nprogress_dir = "/p"\nshrink_when_dear = true\n'
    for policy, requeue in (("fifo", "true"), ("greenflow", "false")):
        path.write_text(f'[policy]\nname = "{policy}"\n{elastic}requeue = {requeue}\n')
        with pytest.raises(ConfigError, match="shrink_when_dear trades by a budget's price"):
            load_config(path)
    path.write_text(f'[policy]\nname = "powerflow"\n{elastic}requeue = true\n')
    assert load_config(path).elastic.shrink_when_dear


def test_learning_a_jobs_scaling_from_its_reports_is_on_unless_the_site_turns_it_off(tmp_path):
    from slurm_green.controller.assemble import build_resizer
    from slurm_green.controller.store import StateStore

    path, store = tmp_path / "c.toml", StateStore(tmp_path / "s.db")
    for line, learns, settle in (("", True, 300.0), ("learn_scaling = false\nsettle_s = 5\n", False, 5.0)):
        path.write_text(f'[elastic]\nrequeue = true\nprogress_dir = "{tmp_path}"\n{line}')
        resizer = build_resizer(load_config(path), store)
        assert resizer is not None and (resizer.settings.learn_scaling, resizer.settings.settle_s) == (learns, settle)


def test_a_write_prefix_with_the_pyslurm_backend_is_refused_naming_both_keys(tmp_path):
    """pyslurm cannot run its changes through sudo: refused when the file is read, not as an
    internal error at the first tick (the factory raises for it)."""
    path = tmp_path / "c.toml"
    path.write_text('[slurm]\nbackend = "pyslurm"\nwrite_prefix = ["sudo", "-n"]\n')
    refused = r"\n  slurm.write_prefix runs scontrol through a command, which slurm.backend = 'pyslurm' cannot"
    with pytest.raises(ConfigError, match=refused):
        load_config(path)
    for backend in ("cli", "auto"):
        path.write_text(f'[slurm]\nbackend = "{backend}"\nwrite_prefix = ["sudo", "-n"]\n')
        assert load_config(path).slurm.write_prefix == ["sudo", "-n"]

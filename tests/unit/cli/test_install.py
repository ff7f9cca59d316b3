"""``slurm-green install``: the snippets an admin pastes, and the hooks it writes."""

from __future__ import annotations

import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_green.cli import install as install_module
from slurm_green.cli import main
from slurm_green.gpu import wrappers
from slurm_green.job_submit import plugin_path

REPO = Path(__file__).resolve().parents[3]


def invoke(*args: str, config: Path | None = None) -> str:
    argv = ["install", *args, *(["--config", str(config)] if config else [])]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    return result.output


def lines_starting(output: str, prefix: str) -> list[str]:
    return [line.removeprefix(prefix) for line in output.splitlines() if line.startswith(prefix)]


def section(output: str, title: str) -> str:
    """The lines of one printed section, from its header to the next one."""
    start = output.index(title)
    after = [output.find(h, start + 1) for h in ("\n# ---", "\n-- ---")]
    return output[start:min([a for a in after if a > 0], default=len(output))]


@pytest.fixture(autouse=True)
def no_gpus_here(monkeypatch) -> None:
    """This host's NVML: none, unless a test says otherwise."""
    monkeypatch.setattr(install_module, "gpu_models", lambda: [])


def test_print_names_every_piece() -> None:
    output = invoke("--print", "--gpus-per-node", "8")
    for piece in ("JobSubmitPlugins=lua", "PrologFlags=Alloc", "Prolog=", "Epilog=", "adminlevel=Operator",
                  "[Service]", "ExecStart=", "job_submit_green.lua"):
        assert piece in output, piece


def test_nothing_asked_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["install"])
    assert result.exit_code == 2 and "give --print, --hooks DIR, or both" in result.output


def test_service_account_defaults_to_the_readmes_ops_and_is_a_flag() -> None:
    assert lines_starting(invoke("--print"), "sacctmgr -i add user sgreen ") == ["account=ops adminlevel=Operator"]
    assert "account=hpc-admin adminlevel=Operator" in invoke("--print", "--account", "hpc-admin")
    assert "sacctmgr -i add user sgreen account=ops" in (REPO / "README.md").read_text().replace(
        "sacctmgr add user", "sacctmgr -i add user")


def test_prolog_flags_are_to_be_merged_not_replaced() -> None:
    text = section(invoke("--print"), "# --- slurm-green: add to slurm.conf")
    assert "MERGE, do not replace" in text and "scontrol show config | grep -i '^PrologFlags'" in text
    assert "PrologFlags=Contain,X11,Alloc" in text
    assert lines_starting(text, "PrologFlags=") == ["Alloc"]


def test_prolog_and_epilog_lines_name_the_fixed_place_and_explain_chaining(tmp_path) -> None:
    text = section(invoke("--print"), "# --- slurm-green: add to slurm.conf")
    assert lines_starting(text, "Prolog=") == [f"{wrappers.HOOKS_DIR}/prolog"]
    assert lines_starting(text, "Epilog=") == [f"{wrappers.HOOKS_DIR}/epilog"]
    assert "/opt/slurm-green" not in "".join(lines_starting(text, "Prolog=") + lines_starting(text, "Epilog="))
    assert "calls ours from its scripts" in text
    # with --hooks DIR, the lines name DIR
    text = section(invoke("--print", "--hooks", str(tmp_path / "h")), "# --- slurm-green: add to slurm.conf")
    assert lines_starting(text, "Prolog=") == [str(tmp_path / "h" / "prolog")]


def test_hooks_writes_the_wrappers_with_the_nodes_settings(tmp_path) -> None:
    output = invoke("--hooks", str(tmp_path / "h"), "--node-python", "/opt/venv/bin/python3", "--prefix", "",
                    "--hook-timeout", "15")
    prolog = (tmp_path / "h" / "prolog").read_text()
    assert output.strip() == f"# wrote {tmp_path / 'h' / 'prolog'}, {tmp_path / 'h' / 'epilog'}"
    assert "SLURM_GREEN_PYTHON=${SLURM_GREEN_PYTHON:-/opt/venv/bin/python3}" in prolog
    assert "SLURM_GREEN_HOME=${SLURM_GREEN_HOME-''}" in prolog and "SLURM_GREEN_HOOK_TIMEOUT:-15" in prolog
    assert prolog == wrappers.render("prolog", wrappers.HookSettings("/opt/venv/bin/python3", "", 15))


def test_a_relative_node_python_is_refused_in_one_line(tmp_path) -> None:
    result = CliRunner().invoke(main, ["install", "--hooks", str(tmp_path / "h"), "--node-python", "python3"])
    assert result.exit_code == 1 and "absolute path" in result.output and not (tmp_path / "h").exists()


def test_exec_start_defaults_to_the_documented_venv_and_is_a_flag() -> None:
    [exec_start] = lines_starting(invoke("--print"), "ExecStart=")
    assert exec_start == "/opt/slurm-green/venv/bin/python -m slurm_green.cli run --config /etc/slurm-green/config.toml"
    assert sys.executable not in invoke("--print")  # not whatever ran this command
    [exec_start] = lines_starting(invoke("--print", "--python", sys.executable), "ExecStart=")
    argv = shlex.split(exec_start)
    # the same interpreter and module, asked for help instead of running the daemon
    done = subprocess.run([*argv[: argv.index("run")], "run", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--once" in done.stdout, done.stderr


def test_read_write_paths_cover_every_directory_the_controller_writes(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[controller]\nstate_db = "/srv/sg/state.db"\ntelemetry_dir = "/shared/sg/telemetry"\n'
                      'model_corrections = "/srv/sg-models/corrections.json"\n')
    [paths] = lines_starting(invoke("--print", config=config), "ReadWritePaths=")
    assert paths.split() == ["/srv/sg", "/var/cache/slurm-green", "-/shared/sg/telemetry", "-/srv/sg-models"]


def test_gres_type_is_never_a_silent_a100() -> None:
    text = section(invoke("--print", "--gpus-per-node", "4"), "# --- slurm-green: gres.conf")
    assert "a100" not in text and "Type=" not in text.replace("No GPU type", "")
    assert "Name=gpu File=/dev/nvidia[0-3]" in text and "--gpu-type" in text
    assert "AutoDetect=nvml" in text and "SLURM_GREEN_GPU_NUMBERING=index" in text
    text = invoke("--print", "--gpus-per-node", "4", "--gpu-type", "h100")
    assert "Name=gpu Type=h100 File=/dev/nvidia[0-3]" in text and "Gres=gpu:h100:4,shard:16" in text


def test_gres_type_comes_from_nvml_when_this_host_has_one_kind(monkeypatch) -> None:
    monkeypatch.setattr(install_module, "gpu_models", lambda: ["NVIDIA H100 80GB HBM3"] * 2)
    text = invoke("--print", "--gpus-per-node", "2")
    assert "Name=gpu Type=h100 File=/dev/nvidia[0-1]" in text and "NVML found on this host: NVIDIA H100" in text
    monkeypatch.setattr(install_module, "gpu_models", lambda: ["NVIDIA A40", "NVIDIA H100 80GB HBM3"])
    assert "Type=" not in section(invoke("--print"), "# --- slurm-green: gres.conf").replace("No GPU type", "")


@pytest.mark.parametrize(("model", "kind"), [("NVIDIA A100-SXM4-80GB", "a100"), ("Tesla V100-PCIE-16GB", "v100"),
                                             ("NVIDIA A40", "a40"), ("NVIDIA GeForce RTX 4090", "4090"),
                                             ("NVIDIA", None)])
def test_gres_type_from_an_nvml_name(model: str, kind: str | None) -> None:
    assert install_module.gres_type(model) == kind


def test_a_bad_gpu_type_is_refused() -> None:
    result = CliRunner().invoke(main, ["install", "--print", "--gpu-type", "a100 x"])
    assert result.exit_code == 2 and "--gpu-type" in result.output


def site_plugin_with_chain(tmp_path: Path, ours: Path):
    """A site's own job_submit.lua (it refuses jobs named ``forbidden`` and sets the partition)
    with the printed chain appended, loading ``ours``, behind the Lua 5.1 test harness."""
    sys.path.insert(0, str(REPO / "tests" / "unit" / "job_submit"))
    from lua_plugin import LUA, LuaPlugin

    if LUA is None:
        pytest.skip("lua5.1 not installed")
    chain = section(invoke("--print"), "-- --- slurm-green: only for a site")
    site = tmp_path / "job_submit.lua"
    site.write_text(
        "function slurm_job_submit(job_desc, part_list, submit_uid)\n"
        "    if job_desc.name == 'forbidden' then return slurm.ERROR end\n"
        "    job_desc.partition = 'site-checked'\n"
        "    return slurm.SUCCESS\n"
        "end\n"
        "function slurm_job_modify(job_desc, job_rec, part_list, modify_uid) return slurm.SUCCESS end\n"
        + chain.replace("/etc/slurm/job_submit_green.lua", str(ours))
        + "return slurm.SUCCESS\n")
    return LuaPlugin(site)


def test_the_printed_job_submit_chain_runs_the_sites_checks_then_ours(tmp_path) -> None:
    """The Lua section, appended to a site's own job_submit.lua, in Lua 5.1 with the test harness."""
    lua = site_plugin_with_chain(tmp_path, plugin_path())
    try:
        refused = lua.submit(name="forbidden", comment="green:flex=1h")
        assert refused.rc != 0 and "admin_comment" not in refused.job  # ours never saw it
        passed = lua.submit(name="train", comment="green:flex=1h")
        assert passed.rc == 0 and passed.job["partition"] == "site-checked"
        assert str(passed.job["admin_comment"]).startswith("sg:managed=1;flex=3600")
    finally:
        lua.close()


@pytest.mark.parametrize("green", ["missing", "broken"])
def test_the_printed_job_submit_chain_keeps_the_site_plugin_working_without_ours(tmp_path, green) -> None:
    """Ours absent (not copied to a backup controller) or broken (a typo in its SETTINGS): the
    site's checks still run and submissions still pass."""
    ours = tmp_path / "job_submit_green.lua"
    if green == "broken":
        ours.write_text(plugin_path().read_text().replace("local SETTINGS = {", "local SETTINGS = {,", 1))
    lua = site_plugin_with_chain(tmp_path, ours)
    try:
        assert lua.submit(name="forbidden", comment="green:flex=1h").rc != 0
        passed = lua.submit(name="train", comment="green:flex=1h")
        assert passed.rc == 0 and passed.job["partition"] == "site-checked" and "admin_comment" not in passed.job
    finally:
        lua.close()


def test_the_printed_plugin_line_copies_the_installed_plugin(tmp_path) -> None:
    """The line names the head node's interpreter, whose install carries job_submit.lua."""
    [line] = [x for x in invoke("--print", "--python", sys.executable).splitlines()
              if x.startswith("install -m 0644 ") and x.endswith(" /etc/slurm/job_submit.lua")]
    target = tmp_path / "job_submit.lua"
    subprocess.run(["sh", "-c", line.replace("/etc/slurm/job_submit.lua", shlex.quote(str(target)))], check=True)
    assert target.read_bytes() == plugin_path().read_bytes()


def test_nodes_get_a_venv_with_the_nvml_extra() -> None:
    """Debian 12+ refuses a system-wide pip install (PEP 668): the printed node steps use a venv."""
    text = section(invoke("--print"), "# --- slurm-green: installation steps")
    assert "python3 -m venv /opt/slurm-green/venv && /opt/slurm-green/venv/bin/pip install 'slurm-green[nvml]'" in text
    assert "--node-python /opt/slurm-green/venv/bin/python --prefix ''" in text


def test_a_dry_run_config_says_to_set_the_plugins_dry_run_too(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[controller]\ndry_run = false\n")
    assert "dry_run = true` in the plugin" not in invoke("--print", config=config)
    config.write_text("[controller]\ndry_run = true\n")
    assert "set `dry_run = true` in the plugin's SETTINGS too" in invoke("--print", config=config)


def test_the_telemetry_and_progress_directories_are_made_for_the_controllers_user(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[controller]\n")
    assert "telemetry" not in section(invoke("--print", config=config), "# --- slurm-green: installation steps")
    config.write_text('[controller]\ntelemetry_dir = "/shared/sg/telemetry"\n'
                      '[elastic]\nrequeue = true\nprogress_dir = "/shared/sg/progress"\n')
    output = invoke("--print", config=config)
    steps = section(output, "# --- slurm-green: installation steps")
    assert "install -d -o sgreen -m 0755 /shared/sg/telemetry" in steps
    assert "install -d -o sgreen -m 1733 /shared/sg/progress" in steps
    [paths] = lines_starting(output, "ReadWritePaths=")
    assert "-/shared/sg/progress" in paths.split()


def test_the_printed_steps_never_leave_the_key_readable_by_others(tmp_path) -> None:
    """Pasted one by one under the usual umask 022, no step leaves the decision key readable
    by group or others: a user who opened it in between keeps the key that signs the caps."""
    key = tmp_path / "decision.key"
    config = tmp_path / "config.toml"
    config.write_text(f'[controller]\nstate_db = "{tmp_path}/state.db"\ndecision_key_file = "{key}"\n')
    steps = section(invoke("--print", config=config), "# --- slurm-green: installation steps")
    pasted = [line for line in steps.splitlines() if str(key) in line and not line.startswith("#")
              and "/path/to/" not in line]
    modes = []
    for line in pasted:
        subprocess.run(["bash", "-c", f"umask 022; {line}"], capture_output=True)  # chown to sgreen may fail here
        if key.exists():
            modes.append((line, stat.S_IMODE(key.stat().st_mode)))
    assert modes and len(key.read_bytes()) > 32
    assert [(line, oct(mode)) for line, mode in modes if mode & 0o077] == []


def test_paths_with_spaces_and_quotes_stay_one_argument_in_the_steps_and_the_unit(tmp_path) -> None:
    """A state directory with a space, a key file with a quote: the pasted steps must not
    `chmod 0400 /etc/slurm` (the key's path split in two), nor the unit split a path."""
    config = tmp_path / "config.toml"
    config.write_text('[controller]\nstate_db = "/srv/slurm green/state.db"\n'
                      "decision_key_file = \"/etc/slurm green/it's.key\"\n")
    output = invoke("--print", config=config)
    [state] = [x for x in output.splitlines() if x.startswith("install -d -o sgreen -m 0750 ")]
    assert shlex.split(state)[-2] == "/srv/slurm green"
    [chmod] = [x for x in output.splitlines() if x.startswith("chown ")]
    assert shlex.split(chmod.split(";")[1]) == ["chmod", "0400", "/etc/slurm green/it's.key"]
    [paths] = lines_starting(section(output, "# --- slurm-green: /etc/systemd/system"), "ReadWritePaths=")
    assert paths.startswith('"/srv/slurm green" ')
    assert f'--config "{config}"' in output or f"--config {config}" in output

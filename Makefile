# slurm-green: every target installs what it needs (virtual env, packages, images).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
SLURM   ?= 24.11
# Slurm versions the integration suite runs against; the first is the default cluster.
SLURM_VERSIONS ?= 24.11 22.05 26.05

.PHONY: venv host-tools unit train-test integration test campaign demo cluster-up cluster-down bench bench-cluster clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/.installed

# The job_submit.lua tests run the plugin under Lua 5.1, the Lua Debian's Slurm links.
# Installed with apt-get when missing (as root; otherwise it says what to run).
host-tools:
	@command -v lua5.1 >/dev/null || { \
	  [ "$$(id -u)" = 0 ] || { echo "need lua5.1: sudo apt-get install -y lua5.1" >&2; exit 1; }; \
	  echo "installing lua5.1 (apt-get)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q lua5.1 >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q lua5.1 >/dev/null; }; }

# The package ships py.typed: it is type-checked ([tool.mypy] in pyproject.toml) before the tests run.
unit: venv host-tools
	$(BIN)/mypy
	SLURM_GREEN_REQUIRE_LUA=1 $(BIN)/pytest -q tests/unit

# The training helper's PyTorch adapter, for real (CPU, Debian's python3-torch in a Docker image
# built when missing; the host's venv has no PyTorch and skips those tests). `-s` prints the
# measured step times and accuracies (docs/training.md).
train-test:
	./docker/train-test -s

integration: venv
	./tests/integration/run_all_versions.sh $(SLURM_VERSIONS)

test: unit train-test integration

# Fault-injection and hostile-user campaigns on the Docker cluster (long; not part of `make test`).
# Each prints its counts; the figures are in docs/hardening.md.
campaign: venv host-tools
	SLURM_GREEN_SLURM=$(SLURM) $(BIN)/pytest -m "integration and campaign" -s tests/integration/campaign

cluster-up: venv
	./docker/cluster up --slurm $(SLURM)

cluster-down:
	./docker/cluster down

demo: venv
	./docker/demo

# Benchmarks print figures (no pass/fail): models, carbon, policies, simulator, placement, co-location
# (about 20 min before the last four were added; online_refinement alone takes ~5 min).
bench: venv
	$(BIN)/python benchmarks/model_error.py
	$(BIN)/python benchmarks/carbon_forecast.py
	$(BIN)/python benchmarks/policy_decision_time.py
	$(BIN)/python benchmarks/philly_sim_time.py
	$(BIN)/python benchmarks/policy_comparison.py
	$(BIN)/python benchmarks/online_refinement.py --trace gavel_philly_ee9e8c_seed0.trace
	$(BIN)/python benchmarks/online_refinement.py --trace gavel_philly_ee9e8c_seed0.trace --elastic 1.0
	$(BIN)/python benchmarks/placement_fgd.py
	$(BIN)/python benchmarks/greenflow_placement.py
	$(BIN)/python benchmarks/mixed_cluster.py
	$(BIN)/python benchmarks/colocation.py
	$(BIN)/python benchmarks/h100_pair.py
	$(BIN)/python benchmarks/carbon_bounds.py --quick
	$(BIN)/python benchmarks/period_budget.py --limit 500
	$(BIN)/python benchmarks/elastic_resize.py
	$(BIN)/python benchmarks/elastic_resize.py --budget 0.8 --loads 1,3
	$(BIN)/python benchmarks/layer_freezing.py
	$(BIN)/python benchmarks/layer_freezing.py --penalty 0

# ...and on the Docker cluster: snapshot cost and job_submit.lua's cost per submission.
bench-cluster: cluster-up
	$(BIN)/python benchmarks/snapshot_cost.py --slurm $(SLURM)
	$(BIN)/python benchmarks/submit_overhead.py --slurm $(SLURM)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache

# slurm-green: every target installs what it needs (virtual env, packages, images).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
SLURM   ?= 24.11
# Slurm versions the integration suite runs against; the first is the default cluster.
SLURM_VERSIONS ?= 24.11 22.05 26.05

.PHONY: venv unit integration test demo cluster-up cluster-down bench clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/.installed

unit: venv
	$(BIN)/pytest -q tests/unit

integration: venv
	./tests/integration/run_all_versions.sh $(SLURM_VERSIONS)

test: unit integration

cluster-up: venv
	./docker/cluster up --slurm $(SLURM)

cluster-down:
	./docker/cluster down

demo: venv
	./docker/demo

clean:
	rm -rf $(VENV) .pytest_cache

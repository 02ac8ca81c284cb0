# Two commands do all set-up: `make run` (the default grid) and `make test` (the suite).
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTHON ?= python3

.PHONY: venv run test lint slurm-up slurm-down clean

$(STAMP): requirements.txt requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt -c requirements.lock
	$(BIN)/python -m pip install --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

# The default grid (config/config.yaml): CPU only, a few minutes on 2 cores.
run: venv
	$(BIN)/snakemake --workflow-profile profiles/local
	@echo
	@echo "Tables:  $$(ls results/tables/*.md | tr '\n' ' ')"
	@echo "Figures: $$(ls results/figures/*.pdf | tr '\n' ' ')"
	@echo "Tidy:    results/tidy.parquet results/tidy.csv"

# The whole suite. As root it first installs and starts the local Slurm
# (tools/slurm-local/start.sh) so the real-scheduler tests run too.
test: venv
	@if [ "$$(id -u)" = 0 ]; then tools/slurm-local/start.sh; \
	 else echo "not root: the local Slurm is not started; Slurm tests will skip"; fi
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check src scripts tests
	$(BIN)/snakemake --lint

slurm-up:
	tools/slurm-local/start.sh

slurm-down:
	tools/slurm-local/stop.sh

clean:
	rm -rf results/* .snakemake
	touch results/.gitkeep

# Two commands do all set-up: `make run` (the default grid) and `make test` (the suite).
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# The interpreter the venv is made from (the locks are made for Python 3.11): the
# distribution's own python3.11 where it can make a venv, else the first python3 on PATH;
# `make PYTHON=...` chooses another (remove .venv first). The suite and the rules spend
# much of their CPU in Python: a pyenv build with a shared libpython and without
# --enable-optimizations ran the suite 10% slower than Debian's statically linked one
# (docs/install.md, "The venv").
DISTRIBUTION_PYTHON := /usr/bin/python3.11
PYTHON ?= $(if $(shell $(DISTRIBUTION_PYTHON) -c 'import ensurepip' 2>/dev/null && echo 1),$(DISTRIBUTION_PYTHON),python3)
# The CUDA stack the GPU backends use: 13 (default: PyPI's torch; Turing to Blackwell GPUs,
# NVIDIA driver >= 580) or 12 (GPUs before Turing, or a driver < 580 and >= 525.60.13; torch's
# CUDA 12.6 build from the PyTorch wheel index). See docs/install.md, "CUDA stacks"; `accelbench doctor`
# names the stack each GPU needs.
CUDA ?= 13
ifeq ($(filter $(CUDA),12 13),)
$(error CUDA must be 12 or 13, not '$(CUDA)')
endif
# pyproject.toml lists the dependencies; the stack's lock pins them, with hashes (`make lock`).
LOCK := requirements-cuda$(CUDA).lock
# What is not in the lock: nothing on CUDA 13; on CUDA 12 torch's CUDA 12 build from the
# PyTorch wheel index and the CUDA wheels that must match it (requirements-cuda12.txt).
OFF_LOCK := $(if $(filter 12,$(CUDA)),requirements-cuda12.txt)
STAMP := $(VENV)/.installed-cuda$(CUDA)
# uv's block of the lock (its `uv==` line and hashes): uv installs the lock and makes it.
UV_PIN = awk '/^uv==/ {keep = 1; print; next} keep && /^ +--hash=/ {print; next} {keep = 0}' $(LOCK)
# The package is installed editable: its bytecode (and the test helpers') is compiled before
# a run, as the lock's is at install, so that where PYTHONDONTWRITEBYTECODE is set the
# hundreds of processes of a run or the suite do not each compile what they import. Only
# what changed since is compiled again.
BYTECODE = $(BIN)/python -m compileall -q src

$(STAMP): pyproject.toml $(LOCK) $(OFF_LOCK)
	$(PYTHON) -m venv $(VENV)
	@# pip >= 25.1 reads pyproject.toml's dependency groups (--group).
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"
	@# uv first, at the lock's own pin, checked against its hashes.
	$(UV_PIN) > $(VENV)/uv-pin.txt
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(VENV)/uv-pin.txt
	@# The two stacks' CuPy builds install the same module: remove the other one first.
	$(BIN)/uv pip uninstall --quiet --python $(BIN)/python cupy-cuda12x cupy-cuda13x
	@# Exactly the lock, each file checked against its hash. uv unpacks in parallel and links
	@# from its cache (minutes with pip; seconds once cached); compiled now, as pip would, so
	@# that no import compiles where PYTHONDONTWRITEBYTECODE is set.
	$(BIN)/uv pip install --python $(BIN)/python --require-hashes --no-deps --compile-bytecode \
		-r $(LOCK)
	@# The package with pyproject.toml's lists, which the lock must satisfy: --no-index lets
	@# nothing else in (CUDA 12: only what requirements-cuda12.txt names, and its needs).
	$(BIN)/python -m pip install --no-build-isolation $(if $(OFF_LOCK),-r $(OFF_LOCK),--no-index) \
		-e ".[cuda$(CUDA)]" --group test --group build --group docs
	rm -f $(VENV)/.installed*
	touch $(STAMP)

venv: $(STAMP)

# The default grid (config/config.yaml): CPU only, a few minutes on 2 cores.
run: venv
	$(BYTECODE)
	@# The grid's records (all that the aggregation, from `tidy` on, reads)...
	$(BIN)/snakemake --cores all --config cuda_stack=$(CUDA) --omit-from tidy
	@# ...then a fresh host's first cells again, now that the grid has shown its drift
	@# (accelbench.run.first_cells): their intervals then hold a rerun minutes later.
	@# The aggregation follows, once.
	again="$$($(BIN)/accelbench first-cells)" && \
		$(BIN)/snakemake --cores all --config cuda_stack=$(CUDA) $${again:+--forcerun $$again}
	$(BIN)/snakemake --report results/report.html --config cuda_stack=$(CUDA)
	@echo
	@echo "Tables:  $$(ls results/tables/*.md | tr '\n' ' ')"
	@echo "Figures: $$(ls results/figures/*.pdf | tr '\n' ' ')"
	@echo "Tidy:    results/tidy.parquet results/tidy.csv"
	@echo "Report:  results/report.html (it opens with results/summary.html)"

# The whole suite. As root it first installs and starts the local Slurm
# (tools/slurm-local/start.sh) so the real-scheduler tests run too, and installs
# pdflatex and Chromium (tools/paper-tools/install.sh) for the paper-ready output
# tests (tests/test_paper_ready.py). The tests run
# in TEST_WORKERS processes (pytest-xdist): the Slurm tests one after another in one
# of them (they mostly wait for the scheduler), the others alongside (tests/conftest.py);
# then, alone, the tests that measure the machine's own load (marker `quiet`, all in
# tests/conftest.py's QUIET_MODULE).
TEST_WORKERS ?= 3
test: venv
	$(BYTECODE) tests
	@if [ "$$(id -u)" = 0 ]; then tools/slurm-local/start.sh && tools/paper-tools/install.sh; \
	 else echo "not root: no local Slurm, no TeX or Chromium installed; their tests will skip"; fi
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not quiet"
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -m quiet tests/test_contention.py

# Style, Snakemake's own best-practice checks, the locks against pyproject.toml, and the
# documentation site built strictly (into a folder of its own, thrown away); .ci/run runs it
# before the tests.
RUFF_PATHS := src scripts tests tools benchmarks docs/hooks setup.py
lint: venv
	$(BIN)/ruff check $(RUFF_PATHS)
	$(BIN)/ruff format --check $(RUFF_PATHS)
	$(BIN)/snakefmt --check Snakefile workflow src/accelbench/studies
	$(BIN)/snakemake --lint
	$(BIN)/python tools/lock.py --check
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		$(MKDOCS) build --strict --quiet --site-dir "$$tmp"

# The documentation site (mkdocs.yml, docs/) into site/: a broken link or anchor, a page
# left out of the nav or an included file that moved fails it. The config reference is
# generated from workflow/schemas/config.schema.yaml as it builds.
# `.venv/bin/mkdocs serve` serves it while you edit.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: venv
	$(MKDOCS) build --strict

# Both locks anew from pyproject.toml with uv, in a venv of its own; the versions pinned
# stay unless UPGRADE=1 (docs/install.md, "Dependencies and locks"). Needs PyPI.
LOCK_VENV := .venv-lock
lock:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(UV_PIN) > $(LOCK_VENV)/uv-pin.txt
	$(LOCK_VENV)/bin/python -m pip install --quiet --require-hashes --no-deps -r $(LOCK_VENV)/uv-pin.txt
	$(LOCK_VENV)/bin/python -m pip install --quiet packaging
	PATH="$(abspath $(LOCK_VENV))/bin:$$PATH" $(LOCK_VENV)/bin/python tools/lock.py \
		$(if $(UPGRADE),--upgrade)

# The acceptance check of the GPU half, on a GPU node or in a GPU job
# (docs/gpu-acceptance.md): the doctor, the GPU grid through the workflow (every
# experiment measured anew), then the verdict on its records, kept in reference/<gpu>/;
# GPU_GRID=config/gpu-full.yaml runs the complete grid (about half an hour). The tests
# that run the CUDA backends for real are their own step, `make gpu-tests` (two minutes
# on 8 workers): the grid runs every backend the check judges.
# GPU_RESUME=1 goes on from a check that ran out of time: a doctor that passed is not run
# again, the lock of the workflow it stopped is lifted, and the records it measured are
# kept. The data science workloads join where RAPIDS is installed; find_spec imports
# nothing. Each step prints the time it starts.
GPU_CHECK_LOGS := results/gpu-check
GPU_PASSED := results/.gpu-check-passed
GPU_GRID ?= config/gpu.yaml
GPU_TEST_WORKERS ?= 8
RAPIDS_INSTALLED = $(shell $(BIN)/python -c 'import importlib.util as u; \
	print(all(u.find_spec(m) for m in ("cudf", "cuml", "cugraph")))' 2>/dev/null)
GPU_CONFIGS = $(GPU_GRID) $(if $(filter True,$(RAPIDS_INSTALLED)),config/gpu-rapids.yaml)
GPU_VERDICT = $(BIN)/accelbench gpu-check $(addprefix --configfile ,$(GPU_CONFIGS))
STEP = @echo "[$$(date +%T)] gpu-check:"
gpu-check: venv
	@nvidia-smi -L >/dev/null 2>&1 || { echo "gpu-check needs an NVIDIA GPU; nvidia-smi lists none here" >&2; exit 1; }
	mkdir -p $(GPU_CHECK_LOGS) $(GPU_PASSED)
	$(if $(GPU_RESUME),,rm -f $(GPU_PASSED)/*)
	$(STEP) the doctor
	test -e $(GPU_PASSED)/doctor || { set -o pipefail; \
		$(BIN)/accelbench doctor | tee $(GPU_CHECK_LOGS)/doctor.txt && touch $(GPU_PASSED)/doctor; }
	$(STEP) the grid $(GPU_CONFIGS)
	$(if $(GPU_RESUME),$(BIN)/snakemake --unlock --configfile $(GPU_CONFIGS) --config cuda_stack=$(CUDA))
	$(BIN)/snakemake --cores all --configfile $(GPU_CONFIGS) --config cuda_stack=$(CUDA) \
		$(if $(GPU_RESUME),,--forceall)
	$(STEP) the verdict
	$(GPU_VERDICT)
	$(STEP) done

# The tests that run the CUDA backends for real (marker `gpu`): every kernel, backend and
# dtype, the training loop's precisions and strategies, DDP over NCCL; kept beside the
# check's output in results/gpu-check/pytest-gpu.txt.
gpu-tests: venv
	@nvidia-smi -L >/dev/null 2>&1 || { echo "gpu-tests needs an NVIDIA GPU; nvidia-smi lists none here" >&2; exit 1; }
	mkdir -p $(GPU_CHECK_LOGS)
	set -o pipefail; PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -m gpu \
		-n $(GPU_TEST_WORKERS) | tee $(GPU_CHECK_LOGS)/pytest-gpu.txt

# The verdict alone, on the records there are: after a check cut short by its time
# (tools/gpu-check/run.sh), what was measured is judged and kept all the same.
gpu-verdict: venv
	$(GPU_VERDICT)

# A committed reference's tables, figures, summary and tidy table drawn anew from its
# records by this version's analysis; the records and the verdict stay as they were.
REF ?= reference/nvidia-h200
redraw: venv
	$(BIN)/python -m accelbench.studies.gpu_acceptance.redraw $(REF) --cores $$(nproc)

# The result record's JSON Schema, generated from src/accelbench/records/record.py (a test checks
# that the committed file is what the code checks).
record-schema: venv
	$(BIN)/python -c 'from accelbench.records import record; record.write_schema()'

slurm-up:
	tools/slurm-local/start.sh

slurm-down:
	tools/slurm-local/stop.sh

clean:
	rm -rf results/* .snakemake
	touch results/.gitkeep

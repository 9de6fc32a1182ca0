# Two commands do everything on a fresh machine with Python 3.11, 3.12 or 3.13:
#   make reproduce   set up .venv and run the whole pipeline at the default scale (ends with the report path)
#   make test        set up .venv with the test extras and run the test suite
# The first of python3.11, python3.12, python3.13 on the PATH (3.11 first: the paper-scale record was made with it),
# else python3 if it is one of them; PYTHON=/path/to/python chooses.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
CORES  ?= 2
SNAKEMAKE_ARGS ?=
# pytest-xdist workers for make test (auto: one per core; 0: all tests in one process)
TEST_WORKERS ?= auto
# Every install is constrained to the lock: the versions of the whole dependency tree (make lock writes it).
LOCK   := requirements/constraints.txt
# Which PyTorch build (docs/install.md). Empty: pip's own indexes decide (PyPI: the CUDA build on Linux x86-64, the CPU
# build elsewhere). cpu: the CPU-only build from PyTorch's index (no nvidia-* packages); cu<version> (e.g. cu126): that
# CUDA build from PyTorch's index. Choose it when .venv is created (rm -rf .venv to switch).
TORCH  ?=
TORCH_INDEX := $(if $(TORCH),--extra-index-url https://download.pytorch.org/whl/$(TORCH))
PIP_INSTALL := $(BIN)/python -m pip install --quiet -c $(LOCK) $(TORCH_INDEX)
# The lock tool, pinned: make lock installs it into .venv/lock-tools
UV_VERSION := 0.13.9
LOCK_TOOLS := $(VENV)/lock-tools
LOCK_ARGS ?=

.PHONY: reproduce test install lock clean-results test-slurm

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null || { \
	  echo "make: '$(PYTHON)' is not Python 3.11, 3.12 or 3.13; install one or choose it: make PYTHON=/path/to/python3.11" >&2; \
	  exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The install for one set of extras; redone when the dependency list or the lock changes.
#   kaggle  what make reproduce needs: the pipeline and its Kaggle download route
#   test    everything: the pipeline, the Kaggle route, the SLURM executor and the test tools
$(VENV)/.installed-%: pyproject.toml $(LOCK) | $(BIN)/python
	$(PIP_INSTALL) -e '.[$*]'
	touch $@

install: $(VENV)/.installed-test

reproduce: $(VENV)/.installed-kaggle
	$(BIN)/snakemake --profile profiles/default --cores $(CORES) $(SNAKEMAKE_ARGS)
	@echo "Report: $(CURDIR)/results/report/index.html"

test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# Regenerate the lock from pyproject.toml: every extra, for every platform and every Python that requires-python
# allows; then the conda environment of the rules from it (workflow/envs/dpfl.yaml). uv keeps the versions already in the lock where pyproject.toml still allows them; LOCK_ARGS="--upgrade" (or
# --upgrade-package NAME) moves them to the newest ones.
lock: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade --target $(LOCK_TOOLS) uv==$(UV_VERSION)
	$(LOCK_TOOLS)/bin/uv pip compile pyproject.toml --all-extras --universal -o $(LOCK) $(LOCK_ARGS)
	$(BIN)/python tools/lock/conda_env.py

# Not part of `make test` or CI: a throwaway single-node Slurm cluster on this machine (needs root or sudo, and apt-get
# when slurm-wlm/munge are missing) runs a few figures through profiles/slurm and compares their tables with a local
# build. Options (SLURM_TEST_ONLY, SLURM_TEST_SCALE, ...) in the header of tools/slurm/test_slurm.sh.
test-slurm: install
	bash tools/slurm/test_slurm.sh

clean-results:
	rm -rf results .snakemake

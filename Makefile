# Two commands do everything on a fresh machine with Python 3.11:
#   make reproduce   set up .venv and run the whole pipeline at the default scale (ends with the report path)
#   make test        set up .venv with the test extras and run the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
CORES  ?= 2
SNAKEMAKE_ARGS ?=
# pytest-xdist workers for make test (auto: one per core; 0: all tests in one process)
TEST_WORKERS ?= auto

.PHONY: reproduce test install clean-results test-slurm

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall when the dependency list changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

reproduce: install
	$(BIN)/snakemake --profile profiles/default --cores $(CORES) $(SNAKEMAKE_ARGS)
	@echo "Report: $(CURDIR)/results/report/index.html"

test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# Not part of `make test` or CI: a throwaway single-node Slurm cluster on this machine (needs root or sudo, and apt-get
# when slurm-wlm/munge are missing) runs a few figures through profiles/slurm and compares their tables with a local
# build. Options (SLURM_TEST_ONLY, SLURM_TEST_SCALE, ...) in the header of tools/slurm/test_slurm.sh.
test-slurm: install
	bash tools/slurm/test_slurm.sh

clean-results:
	rm -rf results .snakemake

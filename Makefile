# MDLoader: `make demo` and `make test` work on a fresh machine (they create .venv first).
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Open MPI wheel as root and on 2 oversubscribed cores, without flags from the user.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export PRTE_MCA_rmaps_default_mapping_policy := :oversubscribe
export OMPI_MCA_osc := ^ucx
export OMP_NUM_THREADS ?= 1
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install demo test test-fast bench bench-gil docs clean
install: $(STAMP)

$(STAMP): pyproject.toml requirements/lock.txt tools/install.sh
	bash tools/install.sh

demo: install
	bash tools/demo.sh

# The suite in two pytest-xdist workers: one test's waiting (MPI ranks past a watchdog timeout,
# Slurm polls, subprocesses importing torch) overlaps another's work. Tests sharing a launch, the
# one-node Slurm or a module's fixtures stay on one worker, the longest first
# (tests/common/xdist_schedule.py). TEST_WORKERS=0 runs it in one process; pytest alone is serial.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

test: install
	$(PY) -m pytest $(XDIST)

test-fast: install
	$(PY) -m pytest $(XDIST) -m "not slow and not slurm and not cluster"

bench: install
	bash tools/bench.sh

# The GIL-free producer's targets alone (producer CPU a step, data-wait at 1-2 ms; bench/RESULTS.md).
bench-gil: install
	$(PY) -m bench.gil.targets

# The documentation site into site/ (strict: a broken link or reference fails; make test builds it too).
docs: install
	$(VENV)/bin/mkdocs build --strict --site-dir site
	@echo "docs: open site/index.html"

clean:
	rm -rf build run site .pytest_cache .hypothesis

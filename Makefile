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

test: install
	$(PY) -m pytest

test-fast: install
	$(PY) -m pytest -m "not slow and not slurm and not cluster"

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

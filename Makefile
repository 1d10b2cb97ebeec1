# The two commands: `make run` (the embedded app with demo data) and `make test`
# (the whole suite against PostgreSQL and Redis). Each sets itself up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
REQS := requirements.txt requirements-test.txt
STAMP := $(VENV)/.installed-$(shell cat $(REQS) | sha256sum | cut -c1-12)

# Test services: this machine's PostgreSQL and Redis unless the environment says otherwise.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/arbiter
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

.PHONY: setup run test bench-import clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(REQS) | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r requirements-test.txt
	rm -f $(VENV)/.installed-*
	touch $@

setup: $(STAMP)

run: setup
	scripts/run_embedded.sh

test: setup
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/pytest $(PYTEST_ARGS)

bench-import: setup
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python benchmarks/import_trajectories.py

clean:
	rm -rf $(VENV) test-output

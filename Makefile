# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test lint fmt typecheck contracts pytest bench install dev clean coverage bytecode

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $@

install: $(STAMP)
dev: $(DEV_STAMP)

## The project's own modules as bytecode, as an installed wheel has them: an editable install leaves
## them as source, and where PYTHONDONTWRITEBYTECODE is set every nexo process would compile them
## again at each start (0.2-0.5 s of CPU). Files already up to date are skipped.
PACKAGES := orchestrator servers channel_servers shared
bytecode: | $(BIN)/python
	$(BIN)/python -m compileall -q -j 0 $(PACKAGES)

## Start the default mesh (console channel + built-in servers) and open the chat.
run: $(STAMP) bytecode
	@command -v bwrap >/dev/null 2>&1 || echo "nexo: bubblewrap is not installed, so the agent gets no shell tool; install it with: sudo apt-get install bubblewrap" >&2
	$(BIN)/nexo run --chat $(ARGS)

## Lint, type check, import contracts and the whole test suite.
test: dev lint typecheck contracts pytest

lint: dev
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

fmt: dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: dev
	$(BIN)/mypy

contracts: dev
	$(BIN)/lint-imports

## Two workers (one per core of the CI machine), each test file on one worker: the scenario
## suites spend most of their time waiting on the processes they start. Files are handed out in
## collection order, longest first (tests/scheduling.py), not xdist's most-tests-first.
PYTEST_WORKERS ?= 2

PYTEST = $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

pytest: dev bytecode
	$(PYTEST) $(PYTEST_ARGS)

## The same tests with branch coverage of every process they start (servers included), failing
## below 90%. Tracing each process costs about as much again as the tests themselves, so it is a
## target of its own rather than part of `make test`.
coverage: dev bytecode
	rm -f .coverage .coverage.*
	$(PYTEST) --cov --cov-report=term $(PYTEST_ARGS)

bench: dev bytecode
	$(BIN)/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) .coverage .coverage.* .mypy_cache .ruff_cache .pytest_cache

# Quickstart targets. Each creates .venv from the project's own files and
# installs what it needs; nothing else is assumed but Python 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test test-fast bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

## Main job: Adult demo (non-private vs private models at a few epsilons).
demo: $(STAMP)
	$(BIN)/python examples/adult_demo.py

## The whole test suite (what CI runs).
test: $(STAMP)
	$(BIN)/python -m pytest

## Without the slow statistical checks.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_adult.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

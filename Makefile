# Quickstart targets. Each creates .venv from the project's own files and
# installs what it needs; nothing else is assumed but Python 3.11.
#
# Two install levels, each remembered by a stamp named after pyproject.toml's
# checksum (an edited pyproject.toml reinstalls): `demo` installs the runtime
# dependencies and [plot] (matplotlib, for the figure); `test`, `test-fast`
# and `bench` install [test] (torch, dask, hypothesis, pytest-xdist, ...),
# which contains [plot], so it stamps both levels.
PYTHON ?= python3
# CPU-only torch: `make test TORCH_INDEX=https://download.pytorch.org/whl/cpu` installs
# [test]'s torch pin from that index first, so that `.[test]` keeps it instead of
# pulling the CUDA build from PyPI (gigabytes). Empty (the default): pip's own
# configuration decides (its index, or find-links with a local CPU wheel), so CI
# never depends on an index it may not reach. README "Install" says the same.
TORCH_INDEX ?=
TORCH_PIN := $(shell sed -n 's/.*"\(torch==[^"]*\)".*/\1/p' pyproject.toml | head -n 1)
VENV := .venv
BIN := $(VENV)/bin
HASH := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO_STAMP := $(VENV)/.installed-demo-$(HASH)
TEST_STAMP := $(VENV)/.installed-test-$(HASH)

DOCS_VENV := .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed-docs-$(HASH)

.PHONY: demo test test-slow test-fast bench docs clean

$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[plot]"
	rm -f $(VENV)/.installed-*
	touch $(DEMO_STAMP)

$(TEST_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(if $(TORCH_INDEX),$(BIN)/python -m pip install --quiet "$(TORCH_PIN)" --index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet -e ".[test]"
	rm -f $(VENV)/.installed-*
	touch $(TEST_STAMP) $(DEMO_STAMP)

## Main job: Adult demo (non-private vs private models at a few epsilons).
demo: $(DEMO_STAMP)
	$(BIN)/python examples/adult_demo.py

## The test suite without the slow checks, serially (CI's first job; README gives its time).
test: $(TEST_STAMP)
	$(BIN)/python -m pytest -m "not slow"

## The slow checks alone (@pytest.mark.slow: statistical checks, the fingerprints of
## every fit, the docs' CLI transcripts); CI runs them as a job of their own.
test-slow: $(TEST_STAMP)
	$(BIN)/python -m pytest -m slow

## Without the slow checks, on every core (pytest-xdist); about 2 minutes.
test-fast: $(TEST_STAMP)
	$(BIN)/python -m pytest -m "not slow" -n auto

## The docs site, warnings as errors (docs/contributing.md); HTML in build/docs/html.
$(DOCS_STAMP): pyproject.toml
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install --quiet -e ".[docs]"
	rm -f $(DOCS_VENV)/.installed-*
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(DOCS_VENV)/bin/sphinx-build -W --keep-going -n -b html docs build/docs/html

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/bench_adult.py

clean:
	rm -rf $(VENV) $(DOCS_VENV) build *.egg-info .pytest_cache
	rm -rf docs/generated docs/auto_examples docs/api_reference.rst

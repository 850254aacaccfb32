# sowdb developer commands. Every target creates the virtual environment first if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup test lint typecheck unit bench-expr clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check setuptools==80.9.0
	$(BIN)/pip install --quiet --disable-pip-version-check --no-build-isolation -e '.[dev]'
	touch $(STAMP)

## The whole suite: lint, types, tests. This is what CI runs.
test: lint typecheck unit

lint: setup
	$(BIN)/ruff check server tests tools
	$(BIN)/ruff format --check server tests tools

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest

bench-expr: setup
	$(BIN)/python tools/bench/bench_expr.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

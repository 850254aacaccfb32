# sowdb developer commands. Every target creates the virtual environment first if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup run test lint typecheck unit generate bench bench-subscriptions bench-history bench-views bench-expr clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check setuptools==80.9.0
	$(BIN)/pip install --quiet --disable-pip-version-check --no-build-isolation -e '.[dev]'
	touch $(STAMP)

## Start the server on its embedded default: built-in demo config, 127.0.0.1:9007, data in ./data.
run: setup
	$(BIN)/sowd

## The whole suite: lint (ruff, buf, generated code), types, tests. This is what CI runs.
test: lint typecheck unit

lint: setup
	$(BIN)/ruff check server clients tests tools
	$(BIN)/ruff format --check server clients tests tools
	$(BIN)/buf lint
	$(BIN)/python tools/codegen/generate.py --check

## Regenerate the Python API package (clients/python/sowdb_api) from proto/.
generate: setup
	$(BIN)/python tools/codegen/generate.py

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest

## Benchmarks of the server (issue 3 figures): 1M orders, publish and queries.
bench: setup
	$(BIN)/python tools/bench/bench_server.py

## Subscription benchmarks: latency, fan-out, snapshot.
bench-subscriptions: setup
	$(BIN)/python tools/bench/bench_subscriptions.py

## History benchmarks (issue 5): historical vs current query, recovery rate, start-up.
bench-history: setup
	cd tools/bench && ../../$(BIN)/python bench_history.py

## Views and pages (issue 6): window upkeep CPU share, view upkeep rate.
bench-views: setup
	cd tools/bench && ../../$(BIN)/python bench_views.py

bench-expr: setup
	$(BIN)/python tools/bench/bench_expr.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

# gb300 developer entry points. `make plan` and `make test` are the README Quickstart.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.gb300-installed
STACK ?= reference

.PHONY: setup plan test lint typecheck unit bench clean

$(STAMP): pyproject.toml constraints.txt
	scripts/bootstrap-venv "$(PY)" "$(VENV)"
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,lint]'
	touch $@

setup: $(STAMP)

plan: $(STAMP)
	$(BIN)/gb300 plan --stack $(STACK)

lint: $(STAMP)
	$(BIN)/ruff check infra policies tests $(wildcard bench)
	$(BIN)/ruff format --check infra policies tests $(wildcard bench)

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite runs on every core (pytest-xdist), a test file to a worker at a time: a file's module fixtures
# (a booted node, a planned stack) are made once. TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= auto

unit: $(STAMP)
	scripts/ensure-test-tools
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

test: lint typecheck unit

# The baseline the benchmark measures beside this checkout: main before issue 26 (bench/RESULTS.md).
BENCH_BASELINE ?= 7a80294

bench: $(STAMP)
	$(BIN)/python bench/plan_bench.py --baseline-ref $(BENCH_BASELINE)
	$(BIN)/python bench/heal_bench.py
	$(BIN)/python bench/goodput_bench.py
	$(BIN)/python bench/engine_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

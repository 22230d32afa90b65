# Two entry points: `make demo` and `make test`. Both create (or reuse) .venv and
# install cloudtwin with everything its tests need, from this repository's files.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cloudtwin compare examples/leaf-spine-perftest.yaml --strategies ecmp,ecmp-qp,adaptive,spray,pinning

test: $(STAMP)
	$(BIN)/python -m pytest -q src tests

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist

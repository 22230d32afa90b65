# Two entry points: `make demo` and `make test`. Both create (or reuse) .venv and
# install cloudtwin with everything its tests need, from this repository's files.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: demo test lint bench clean chromium nftables

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,web]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cloudtwin compare examples/leaf-spine-perftest.yaml --strategies ecmp,ecmp-qp,adaptive,spray,pinning

test: $(STAMP) chromium nftables
	$(BIN)/python -m pytest -q src tests

# The evaluation report is checked in headless Chromium (Debian's package). Installed
# only when missing; as root directly, otherwise through sudo when there is one.
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "make: chromium is missing and this user cannot install it (apt-get install chromium)" >&2; exit 1; fi; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium \
	  || { $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }; \
	fi

# Federations realised in network namespaces translate global-nat addresses with nft
# (Debian's nftables). Installed only when missing and only as root (the namespace tests
# need root anyway; without it they skip and say why).
nftables:
	@if ! command -v nft >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y nftables \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nftables; }; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/collectives.py
	$(BIN)/python benchmarks/logs.py
	$(BIN)/python benchmarks/intercloud.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist

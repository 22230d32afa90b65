# Two entry points: `make demo` and `make test`. Both create (or reuse) .venv and
# install cloudtwin with everything its tests need, from this repository's files.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: demo test lint bench clean chromium nftables qemu simgrid datapath-tools

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,web,nic,ray,mobility]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cloudtwin compare examples/leaf-spine-perftest.yaml --strategies ecmp,ecmp-qp,adaptive,spray,pinning

# Two workers, one test file each at a time (module fixtures are built once per file):
# the suite takes about half as long on the 2-core machines CI runs on.
test: $(STAMP) chromium nftables qemu
	$(BIN)/python -m pytest -q -n 2 --dist loadfile src tests

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

# Real live migrations calibrate the migration model (benchmarks/qemu_migration.py and one
# test): Debian's QEMU, busybox-static, the cloud kernel and a C compiler for the guest's
# dirtier. Installed only when missing, like chromium above.
QEMU_PACKAGES := qemu-system-x86 busybox-static linux-image-cloud-amd64 gcc libc6-dev cpio
qemu:
	@if ! command -v qemu-system-x86_64 >/dev/null || [ ! -x /bin/busybox ] || ! command -v gcc >/dev/null \
	  || ! command -v cpio >/dev/null || ! ls /boot/vmlinuz-*-cloud-amd64 >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "make: QEMU is missing and this user cannot install it (apt-get install $(QEMU_PACKAGES))" >&2; exit 1; fi; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(QEMU_PACKAGES) \
	  || { $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(QEMU_PACKAGES); }; \
	fi

# `cloudtwin calibrate datapath` measures the kernel's datapath (the linux-kernel NIC profile)
# with Debian's netsniff-ng (trafgen) and nftables; not needed by the tests. Root only.
datapath-tools:
	@if ! command -v trafgen >/dev/null || ! command -v nft >/dev/null; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends netsniff-ng nftables \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends netsniff-ng nftables; }; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/collectives.py
	$(BIN)/python benchmarks/logs.py
	$(BIN)/python benchmarks/sweep.py
	$(BIN)/python benchmarks/service.py
	$(BIN)/python benchmarks/intercloud.py
	$(BIN)/python benchmarks/migrations.py

clean:
	rm -rf $(VENV) $(SIMGRID_VENV) .pytest_cache .mypy_cache .ruff_cache build dist

# SimGrid 4.1, for benchmarks/vs_simgrid.py only (never needed by the tests). It has no
# wheel: it is compiled against Debian's Boost into its own virtual environment (about 8
# minutes on 2 cores). The benchmark finds it there by itself.
SIMGRID_VENV := .simgrid-venv
simgrid: $(SIMGRID_VENV)/.installed

$(SIMGRID_VENV)/.installed:
	@if ! dpkg -s libboost-dev >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y libboost-dev cmake g++; \
	fi
	$(PYTHON) -m venv $(SIMGRID_VENV)
	$(SIMGRID_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel 'pybind11<3' numpy pyarrow
	MAKEFLAGS= $(SIMGRID_VENV)/bin/python -m pip install --no-build-isolation simgrid==4.1
	touch $@

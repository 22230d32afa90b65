"""Shared fixtures for the ops tests: the Loghub-2k sample logs."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest

LOGHUB = Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets" / "loghub-2k"
SYSTEMS = ["HDFS", "Hadoop", "Spark", "Zookeeper", "BGL", "OpenSSH", "Apache", "Linux"]


def _raw_lines(system: str) -> list[str]:
    path = LOGHUB / system / f"{system}_2k.log"
    return path.read_text(encoding="utf-8").splitlines()


def _structured(system: str) -> list[dict[str, str]]:
    path = LOGHUB / system / f"{system}_2k.log_structured.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def raw_lines() -> Callable[[str], list[str]]:
    """The raw lines of one system's 2k sample, without line endings."""
    return _raw_lines


@pytest.fixture
def structured() -> Callable[[str], list[dict[str, str]]]:
    """The ground-truth rows of one system (Content, EventId, EventTemplate, ...)."""
    return _structured


@pytest.fixture(params=SYSTEMS)
def system(request: pytest.FixtureRequest) -> str:
    return str(request.param)

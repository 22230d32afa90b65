"""Shared fixtures for the ops tests: the Loghub-2k sample logs."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest

SYSTEMS = ["HDFS", "Hadoop", "Spark", "Zookeeper", "BGL", "OpenSSH", "Apache", "Linux"]


@pytest.fixture
def raw_lines(loghub: Path) -> Callable[[str], list[str]]:
    """The raw lines of one system's 2k sample, without line endings."""

    def lines(system: str) -> list[str]:
        return (loghub / system / f"{system}_2k.log").read_text(encoding="utf-8").splitlines()

    return lines


@pytest.fixture
def structured(loghub: Path) -> Callable[[str], list[dict[str, str]]]:
    """The ground-truth rows of one system (Content, EventId, EventTemplate, ...)."""

    def rows(system: str) -> list[dict[str, str]]:
        path = loghub / system / f"{system}_2k.log_structured.csv"
        with path.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))

    return rows


@pytest.fixture(params=SYSTEMS)
def system(request: pytest.FixtureRequest) -> str:
    return str(request.param)

"""Fixtures of the service tests: a store with real evaluation runs, an app over it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web extra (fastapi) is not installed")

from fastapi.testclient import TestClient  # noqa: E402

from cloudtwin.evaluation import usecases  # noqa: E402
from cloudtwin.scenario.loader import load_scenario  # noqa: E402
from cloudtwin.service import ServiceSettings, create_app  # noqa: E402
from cloudtwin.service.examples import default_examples_dir  # noqa: E402
from cloudtwin.store.database import Store  # noqa: E402

HERE = Path(__file__).parent
SMALL = HERE / "small.yaml"
TOKEN = "test-token-0123456789"

#: The runs the shared store holds: (overrides, strategies), stored as runs 1, 2, 3.
RUNS = [
    ((), ("ecmp", "pinning")),
    (("seed=4",), ("ecmp", "adaptive")),
    (("name=other-perftest",), ("ecmp", "spray", "pinning")),
]


@pytest.fixture(scope="session")
def stored_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with the three evaluation runs of RUNS, made once."""
    db = tmp_path_factory.mktemp("store") / "runs.duckdb"
    text = SMALL.read_text()
    with Store(db) as store:
        for overrides, strategies in RUNS:
            scenario = load_scenario(text, SMALL.name, overrides)
            usecases.evaluate(scenario, strategies, store=store)
    return db


@pytest.fixture
def db(stored_runs: Path, tmp_path: Path) -> Path:
    """A private copy of the shared store (a test may write to it)."""
    copy = tmp_path / "cloudtwin.duckdb"
    shutil.copyfile(stored_runs, copy)
    return copy


@pytest.fixture
def client(db: Path, tmp_path: Path) -> Iterator[TestClient]:
    """The service over the copy, its snapshots in the test's folder."""
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    settings = ServiceSettings(
        db=db, token=TOKEN, examples_dir=default_examples_dir(), snapshot_dir=snapshots,
        snapshot_interval_s=0.05,
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def auth() -> dict[str, str]:
    """The header every change needs."""
    return {"Authorization": f"Bearer {TOKEN}"}

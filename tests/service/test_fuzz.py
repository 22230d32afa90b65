"""Fuzzing the API from its own OpenAPI schema: whatever is sent, never a 5xx."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis (dev extra) is not installed")

from tests.service.conftest import TOKEN  # noqa: E402

from cloudtwin.service import ServiceSettings, create_app  # noqa: E402
from cloudtwin.service.examples import default_examples_dir  # noqa: E402

_STATE: dict[str, Path] = {}


def _app() -> object:
    """The app over a store with runs (made by the session fixture on first use)."""
    return _STATE["app"]


@pytest.fixture(scope="module", autouse=True)
def app_over_runs(stored_runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    folder = tmp_path_factory.mktemp("fuzz")
    db = folder / "fuzz.duckdb"  # a private copy: a fuzzed job may store a run
    shutil.copyfile(stored_runs, db)
    settings_ = ServiceSettings(db=db, token=TOKEN, examples_dir=default_examples_dir(),
                                snapshot_dir=folder)
    app = create_app(settings_)
    _STATE["app"] = app
    yield
    app.state.jobs.close()
    app.state.snapshots.close()


def test_no_request_makes_the_service_fail(app_over_runs: None) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", _app())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        _fuzz(operation)


def _fuzz(operation: object) -> None:
    @given(case=operation.as_strategy())  # type: ignore[attr-defined]
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: object) -> None:
        response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})  # type: ignore[attr-defined]
        where = f"{case.method} {case.formatted_path} {case.query}: {response.text[:300]}"  # type: ignore[attr-defined]
        assert response.status_code < 500, where
        if response.status_code >= 400:
            assert response.json()["error"]["message"], where

    check()

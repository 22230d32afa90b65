"""A hostile job does not take the service down: it keeps answering and stops on SIGTERM.

`(a+)+b<Content>` over lines of a's backtracks exponentially in Python's `re`, which holds
the interpreter all along: the service then answered nothing and ignored SIGTERM. The
service runs in a subprocess here, as a user starts it; nothing below asserts a duration
(the bounds are generous, for a loaded machine).
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.service.server import Server, running_server

HOSTILE = {"format": "(a+)+b<Content>", "source": "hostile", "text": ("a" * 40 + "\n") * 20}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One service with the hostile ingest submitted (the tests below run in file order)."""
    folder = tmp_path_factory.mktemp("hostile")
    with running_server(folder / "hostile.duckdb", folder) as started:
        bearer = {"Authorization": f"Bearer {started.token}"}
        answer = httpx.post(started.url + "/api/logs/ingest", json=HOSTILE, headers=bearer, timeout=30)
        assert answer.status_code == 202, answer.text
        yield started


def test_the_service_answers_while_a_hostile_ingest_runs(server: Server) -> None:
    for _ in range(3):
        assert httpx.get(server.url + "/api/runs", timeout=10).status_code == 200


def test_sigterm_stops_the_service_with_a_hostile_ingest(server: Server) -> None:
    server.process.send_signal(signal.SIGTERM)
    try:
        code = server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("cloudtwin serve was still running 10 s after SIGTERM")
    # uvicorn ends by raising the signal it caught again, after its shutdown
    assert code in (0, -signal.SIGTERM), Path(server.output).read_text()[-2000:]
    assert "Traceback" not in Path(server.output).read_text()

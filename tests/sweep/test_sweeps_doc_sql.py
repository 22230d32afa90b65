"""The query docs/sweeps.md shows ranks points by their number, not by its text."""

from __future__ import annotations

import io
import json
import shlex
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from tests.sweep.test_sweeps_doc import DOC, console_commands

from cloudtwin.cli.app import main
from cloudtwin.store.database import Store
from cloudtwin.store.sweeps import PointRecord, ensure_sweeps_schema, save_points


def test_the_docs_query_ranks_by_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (query,) = [c for c in console_commands(DOC) if c.startswith("cloudtwin logs sql")]
    # as text, "9.5" > "100.0" > "10.2"; as numbers 100 > 10.2 > 9.5
    gbps = {"a": 9.5, "b": 100.0, "c": 10.2}
    records = [PointRecord(key, (f"seed={key}",), "ok", json.dumps({"aggregate_gbps": v}), None, 0.0)
               for key, v in gbps.items()]
    monkeypatch.chdir(tmp_path)
    with Store(tmp_path / "sweeps.duckdb") as store:
        ensure_sweeps_schema(store)
        save_points(store, records, "task", "s", "run", "0")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([*shlex.split(query)[1:], "--json"])
    assert code == 0, err.getvalue()
    assert [row["gbps"] for row in json.loads(out.getvalue())] == [100.0, 10.2, 9.5]

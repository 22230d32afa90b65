"""Logs and diagnosis through the service, over a store the diagnose example filled."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.cli.cli_helpers import CLOUDTWIN, REPO, cloudtwin
from tests.service.conftest import TOKEN, auth
from tests.service.test_api import wait_job

from cloudtwin.diagnosis.usecase import diagnose
from cloudtwin.scenario.loader import load_scenario
from cloudtwin.service import ServiceSettings, create_app
from cloudtwin.store.database import Store

EXAMPLE = REPO / "examples" / "diagnose.yaml"


@pytest.fixture(scope="module")
def ops_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("ops") / "ops.duckdb"
    with Store(db) as store:
        diagnose(store, load_scenario(EXAMPLE.read_text(), EXAMPLE.name))
    return db


@pytest.fixture(scope="module")
def ops(ops_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = ServiceSettings(db=ops_db, token=TOKEN, snapshot_dir=tmp_path_factory.mktemp("snap"))
    with TestClient(create_app(settings)) as client:
        yield client


def test_diagnosis_equals_the_cli_and_carries_the_fabric(ops: TestClient, ops_db: Path) -> None:
    answer = ops.get("/api/diagnosis?top=5").json()
    cli = cloudtwin("diagnose", "--db", str(ops_db), "--top", "5", "--json")
    assert cli.returncode == 0, cli.stderr
    assert answer["suspects"] == json.loads(cli.stdout)["suspects"]
    names = {n["name"] for n in answer["fabric"]["nodes"]}
    top = answer["suspects"][0]["component"]
    assert top == "leaf1-spine2"  # the cable the example fails
    assert {"leaf1", "spine2"} <= names
    assert sorted(["leaf1", "spine2"]) in [sorted(c) for c in answer["fabric"]["cables"]]


def test_the_diagnosis_page_highlights_the_suspect_on_the_fabric(ops: TestClient) -> None:
    page = ops.get("/diagnosis").text
    assert re.search(r'<tr class="suspect"><td>1</td><td>leaf1-spine2</td>', page)
    figure = json.loads(re.search(r'id="figure-fabric">(.*?)</script>', page, re.S).group(1))
    marked = [t for t in figure["data"] if t.get("name") == "#1 leaf1-spine2"]
    assert len(marked) == 1 and marked[0]["line"]["color"] == "#d62728"


def test_the_run_is_named_and_an_unknown_one_is_404_naming_the_field(ops: TestClient) -> None:
    answer = ops.get("/api/diagnosis?top=1&run=diagnose").json()
    assert (answer["run"], answer["runs"]) == ("diagnose", ["diagnose"])
    bad = ops.get("/api/diagnosis?run=bogus")
    assert bad.status_code == 404 and bad.json()["error"]["field"] == "run"
    assert "holds: diagnose" in bad.json()["error"]["message"]
    lines = ops.get("/api/logs/search?text=down&run=diagnose&limit=3").json()["lines"]
    assert lines and all(line["source"].startswith("twin/diagnose/") for line in lines)
    assert ops.get("/api/logs/search?text=down&run=bogus").status_code == 404
    page = ops.get("/diagnosis?run=bogus")
    assert page.status_code == 404 and "--run bogus" in page.text


def test_logs_search_templates_and_anomalies(ops: TestClient) -> None:
    lines = ops.get("/api/logs/search?text=link%20failure&limit=5").json()["lines"]
    assert lines and all("link failure" in line["content"].lower() for line in lines)
    templates = ops.get("/api/logs/templates?limit=3").json()["templates"]
    assert len(templates) == 3 and templates[0]["lines"] >= templates[-1]["lines"]
    found = ops.get("/api/logs/anomalies?window_s=0.05").json()["anomalies"]
    assert found and {a["kind"] for a in found} <= {"burst", "new", "silent"}
    timeline = ops.get("/api/logs/timeline?window_s=0.05").json()
    assert len(timeline["windows"]) == len(timeline["lines"]) and sum(timeline["lines"]) > 0


def test_the_logs_page_shows_lines_and_the_anomaly_timeline(ops: TestClient) -> None:
    page = ops.get("/logs?text=Ethernet").text
    assert 'id="figure-logs"' in page and 'id="anomalies"' in page
    assert "Ethernet" in page
    bad = ops.get("/api/logs/anomalies?window_s=0")
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "window_s"


def test_ingesting_logs_needs_the_token_and_equals_the_cli(
    db: Path, client: TestClient, tmp_path: Path, hdfs_2k: Path
) -> None:
    text = hdfs_2k.read_text()
    body = {"format": "hdfs", "source": "hdfs-upload", "text": text}
    before = db.read_bytes()
    refused = client.post("/api/logs/ingest", json=body)
    assert refused.status_code == 401 and db.read_bytes() == before
    bad = client.post("/api/logs/ingest", json={**body, "format": "nonsense"}, headers=auth())
    assert bad.status_code == 400 and "nonsense" in bad.json()["error"]["message"]
    job = wait_job(client, client.post("/api/logs/ingest", json=body, headers=auth()).json()["job_id"])
    assert job["state"] == "done", job["error"]
    cli = subprocess.run(
        [str(CLOUDTWIN), "logs", "ingest", "-", "--format", "hdfs", "--source", "hdfs-upload",
         "--db", str(tmp_path / "cli.duckdb"), "--json"],
        input=text, capture_output=True, text=True, timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    assert [job["result"]] == json.loads(cli.stdout)
    assert job["result"]["lines"] == 2000
    assert len(client.get("/api/logs/templates?limit=1000").json()["templates"]) == job["result"]["templates"]

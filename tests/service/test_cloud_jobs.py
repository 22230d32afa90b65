"""Every job kind of the service on the shipped one-cloud example and on the same file
uploaded: `evaluate` runs the cloud and stores it as a run (the runs page and /api/runs read
it), the kinds that simulate one fabric answer 400 naming the kind and command that run it."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from tests.cli.cli_helpers import REPO
from tests.service.conftest import auth
from tests.service.test_api import wait_job

CLOUD = (REPO / "examples" / "one-cloud.yaml").read_text()


@pytest.mark.parametrize("source", ["example", "upload"])
@pytest.mark.parametrize("kind", ["compare", "nccl-tests"])
def test_one_fabric_kinds_name_the_kind_that_runs_a_cloud(client: TestClient, kind: str, source: str) -> None:
    body = {"example": "one-cloud"} if source == "example" else {"scenario_yaml": CLOUD}
    answer = client.post("/api/jobs", json={"kind": kind, **body}, headers=auth())
    assert answer.status_code == 400, answer.text
    message = answer.json()["detail"][0]["msg"] if "detail" in answer.json() else answer.text
    assert "kind evaluate runs it whole" in answer.text and "--site NAME" in answer.text, message


@pytest.mark.parametrize("source", ["example", "upload"])
def test_evaluate_runs_the_cloud_and_stores_it(client: TestClient, source: str) -> None:
    body = {"example": "one-cloud"} if source == "example" else {"scenario_yaml": CLOUD}
    answer = client.post(
        "/api/jobs", json={"kind": "evaluate", "strategies": ["ecmp", "pinning"], **body}, headers=auth()
    )
    assert answer.status_code == 202, answer.text
    job = wait_job(client, answer.json()["job_id"])
    assert job["state"] == "done", job
    result = job["result"]
    assert result["kind"] == "cloud" and list(result["strategies"]) == ["ecmp", "pinning"]
    run_id = result["run_id"]
    stored = client.get(f"/api/runs/{run_id}").json()
    assert stored["scenario"] == "one-cloud" and stored["recommendation"] == result["recommendation"]
    listed = client.get("/api/runs").json()
    assert run_id in [r["run_id"] for r in listed["runs"]]
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    for plot in ("migration-timeline", "site-completion", "wan-timeline"):
        assert f"cloud-plot {plot}" in page.text
    assert 'id="faults"' in page.text and "east gateway" in page.text


def test_the_example_is_offered_as_a_cloud(client: TestClient) -> None:
    examples = {e["name"]: e["workload"] for e in client.get("/api/examples").json()["examples"]}
    assert examples["one-cloud"] == "cloud"

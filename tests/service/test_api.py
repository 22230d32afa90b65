"""The HTTP API through httpx: runs, jobs (token, progress, cancel, results), errors."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.cli.cli_helpers import REPO, cloudtwin
from tests.service.conftest import SMALL, auth


def wait_job(client: TestClient, job_id: int, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] in ("done", "failed", "cancelled"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish in {timeout_s} s")


def test_runs_are_listed_newest_first_with_total(client: TestClient) -> None:
    page = client.get("/api/runs").json()
    assert page["total"] == 3
    assert [r["run_id"] for r in page["runs"]] == [3, 2, 1]
    assert page["runs"][0]["scenario"] == "other-perftest"


def test_runs_filter_sort_and_pages(client: TestClient) -> None:
    assert [r["run_id"] for r in client.get("/api/runs?scenario=OTHER").json()["runs"]] == [3]
    assert [r["run_id"] for r in client.get("/api/runs?strategy=adaptive").json()["runs"]] == [2]
    assert [r["run_id"] for r in client.get("/api/runs?seed=4").json()["runs"]] == [2]
    by_seed = client.get("/api/runs?sort=seed&order=asc").json()["runs"]
    assert [r["seed"] for r in by_seed] == [3, 3, 4]
    assert [r["run_id"] for r in by_seed[:2]] == [1, 3]  # ties by run id, same order
    second = client.get("/api/runs?sort=run_id&order=asc&limit=2&offset=2").json()
    assert second["total"] == 3 and [r["run_id"] for r in second["runs"]] == [3]


def test_one_run_is_byte_identical_to_results_show(client: TestClient, db: Path) -> None:
    shown = cloudtwin("results", "show", "2", "--json", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    answer = client.get("/api/runs/2")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.content == shown.stdout.encode()


def test_compare_runs_side_by_side(client: TestClient) -> None:
    runs = client.get("/api/runs/compare?runs=1,3").json()["runs"]
    assert [r["run_id"] for r in runs] == [1, 3]
    assert list(runs[1]["strategies"]) == ["ecmp", "spray", "pinning"]
    shown = client.get("/api/runs/1").json()
    assert runs[0]["strategies"]["pinning"]["aggregate_gbps"] == (
        shown["strategies"]["pinning"]["performance"]["aggregate_gbps"]
    )


def test_run_plots_hold_every_strategy(client: TestClient) -> None:
    plots = client.get("/api/runs/1/plots").json()
    assert set(plots["timelines"]) == set(plots["fct"]) == {"ecmp", "pinning"}
    q = plots["fct"]["ecmp"]["fct_s"]
    assert q == sorted(q) and q[0] > 0


def test_errors_are_json_naming_the_field(client: TestClient) -> None:
    missing = client.get("/api/runs/99")
    assert missing.status_code == 404
    assert missing.json()["error"]["field"] == "run_id"
    bad = client.get("/api/runs?limit=0")
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"
    ids = client.get("/api/runs/compare?runs=1,x")
    assert ids.status_code == 422 and ids.json()["error"]["field"] == "runs"
    # a superscript one is a digit to str.isdigit() but not to int()
    ids = client.get("/api/runs/compare?runs=1,\u00b9")
    assert ids.status_code == 422 and ids.json()["error"]["field"] == "runs"
    body = client.post("/api/jobs", json={"example": "leaf-spine-perftest", "kind": "sweep"}, headers=auth())
    assert body.status_code == 422 and body.json()["error"]["field"] == "kind"


def test_a_broken_uploaded_scenario_names_its_key(client: TestClient) -> None:
    text = SMALL.read_text().replace("leaves: 4", "leaves: -4")
    answer = client.post("/api/jobs", json={"scenario_yaml": text}, headers=auth())
    assert answer.status_code == 400
    assert "fabric.leaves" in answer.json()["error"]["message"]
    assert answer.json()["error"]["field"] == "fabric.leaves"
    assert client.get("/api/jobs").json()["jobs"] == []


def test_an_unknown_scenario_key_answers_400_naming_the_field(client: TestClient) -> None:
    text = SMALL.read_text().replace("spines: 2", "spines: 2\n  spinez: 3")
    answer = client.post("/api/jobs", json={"scenario_yaml": text}, headers=auth())
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "field": "fabric.spinez",
        "message": "scenario_yaml:8: fabric.spinez: unknown key (did you mean `spines`?)",
    }


@pytest.mark.parametrize("kind", ["compare", "evaluate", "nccl-tests"])
def test_an_unknown_strategy_answers_400_naming_the_field(client: TestClient, kind: str) -> None:
    example = "routing-strategies" if kind == "nccl-tests" else "leaf-spine-perftest"
    body = {"kind": kind, "example": example, "strategies": ["ecmp", "nosuch"]}
    answer = client.post("/api/jobs", json=body, headers=auth())
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["field"] == "strategies" and "unknown strategy 'nosuch'" in error["message"]
    assert client.get("/api/jobs").json()["jobs"] == []


def test_an_override_without_a_value_names_the_overrides_field(client: TestClient) -> None:
    body = {"example": "leaf-spine-perftest", "overrides": ["fabric.leaves"]}
    answer = client.post("/api/jobs", json=body, headers=auth())
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == "overrides"


@pytest.mark.parametrize(
    ("log_format", "reason"),
    [
        (r"(a)\1 <Content>", "cannot run in time linear"),
        (r"(?=a)a <Content>", "cannot run in time linear"),
        ("<Date> ( <Content>", "not a valid pattern"),
        ("<Date> <Level>", "no <Content>"),
    ],
)
def test_an_ingest_format_that_cannot_run_answers_400_naming_format(
    client: TestClient, log_format: str, reason: str
) -> None:
    body = {"format": log_format, "source": "s", "text": "a b c\n"}
    answer = client.post("/api/logs/ingest", json=body, headers=auth())
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == "format"
    assert reason in answer.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/api/logs/search?text=a&", "/api/logs/anomalies?", "/api/logs/timeline?"])
@pytest.mark.parametrize("field", ["since", "until"])
def test_a_time_outside_the_years_in_utc_is_400_naming_it(client: TestClient, path: str, field: str) -> None:
    """9999-12-31T23:59:59-14:00 is in year 10000 in UTC: it was an OverflowError (a 500,
    found once by the fuzz test)."""
    answer = client.get(f"{path}{field}=9999-12-31T23:59:59-14:00")
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == field


def test_changes_without_the_token_are_refused_and_write_nothing(client: TestClient, db: Path) -> None:
    before = db.read_bytes()
    request = {"kind": "evaluate", "scenario_yaml": SMALL.read_text(), "strategies": ["ecmp"]}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic eA=="}):
        answer = client.post("/api/jobs", json=request, headers=headers)
        assert answer.status_code == 401
        assert answer.json()["error"]["field"] == "Authorization"
        assert answer.headers["www-authenticate"] == "Bearer"
    assert client.post("/api/jobs/1/cancel").status_code == 401
    assert client.get("/api/jobs").json()["jobs"] == []
    assert client.get("/api/runs").json()["total"] == 3
    assert db.read_bytes() == before


def test_a_compare_job_equals_the_cli_for_the_same_scenario_and_seed(client: TestClient) -> None:
    request = {"scenario_yaml": SMALL.read_text(), "strategies": ["ecmp", "pinning"], "seed": 11}
    submitted = client.post("/api/jobs", json=request, headers=auth())
    assert submitted.status_code == 202
    job = wait_job(client, submitted.json()["job_id"])
    assert job["state"] == "done", job["error"]
    assert job["progress"] == 1.0
    cli = cloudtwin("compare", str(SMALL), "--strategies", "ecmp,pinning", "--set", "seed=11", "--json")
    assert cli.returncode == 0, cli.stderr
    assert job["result"] == json.loads(cli.stdout)


def test_an_evaluate_job_stores_a_run_the_pages_then_show(client: TestClient, db: Path) -> None:
    request = {"kind": "evaluate", "scenario_yaml": SMALL.read_text(), "strategies": ["ecmp", "pinning"]}
    job = wait_job(client, client.post("/api/jobs", json=request, headers=auth()).json()["job_id"])
    assert job["state"] == "done", job["error"]
    assert job["result"]["run_id"] == 4
    assert client.get("/api/runs").json()["total"] == 4
    shown = cloudtwin("results", "show", "4", "--json", "--db", str(db))
    assert client.get("/api/runs/4").content == shown.stdout.encode()
    # the same scenario and seed as run 1: the same numbers
    first = client.get("/api/runs/1").json()
    assert first["strategies"] == job["result"]["strategies"]


def test_a_running_job_can_be_cancelled(client: TestClient) -> None:
    request = {"example": "leaf-spine-perftest", "strategies": ["ecmp", "adaptive", "spray", "pinning"]}
    job_id = client.post("/api/jobs", json=request, headers=auth()).json()["job_id"]
    assert client.post(f"/api/jobs/{job_id}/cancel", headers=auth()).status_code == 200
    job = wait_job(client, job_id, timeout_s=60)
    assert job["state"] == "cancelled" and job["result"] is None


def test_examples_are_listed_and_a_job_can_start_from_one(client: TestClient) -> None:
    names = {e["name"] for e in client.get("/api/examples").json()["examples"]}
    assert {"leaf-spine-perftest", "resiliency", "vela"} <= names
    answer = client.post("/api/jobs", json={"example": "no-such"}, headers=auth())
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "example"


def test_pages_render_from_the_store(client: TestClient) -> None:
    home = client.get("/?sort=seed&order=asc")
    assert home.status_code == 200 and "other-perftest" in home.text
    run = client.get("/runs/1")
    assert run.status_code == 200 and 'id="figure-timeline"' in run.text
    assert "Recommendation" in run.text
    assert client.get("/compare?runs=1,2").status_code == 200
    assert client.get("/runs/77").status_code == 404
    script = client.get("/vendor/plotly.min.js")
    assert script.status_code == 200 and b"plotly.js" in script.content[:200]


def test_an_nccl_tests_job_equals_the_cli(client: TestClient) -> None:
    request = {"kind": "nccl-tests", "example": "routing-strategies", "strategies": ["ecmp", "pinning"],
               "minbytes": "1M", "maxbytes": "16M", "stepfactor": 4}
    job = wait_job(client, client.post("/api/jobs", json=request, headers=auth()).json()["job_id"])
    assert job["state"] == "done", job["error"]
    cli = cloudtwin("nccl-tests", "examples/routing-strategies.yaml", "-b", "1M", "-e", "16M", "-f", "4",
                    "--strategies", "ecmp,pinning", "--json")
    assert cli.returncode == 0, cli.stderr
    assert job["result"] == json.loads(cli.stdout)
    assert [r["size_bytes"] for r in job["result"]["results"]["pinning"]] == [1 << 20, 4 << 20, 16 << 20]


def test_an_nccl_tests_job_needs_a_collective(client: TestClient) -> None:
    answer = client.post("/api/jobs", json={"kind": "nccl-tests", "scenario_yaml": SMALL.read_text()},
                         headers=auth())
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "workload.kind"


def test_pages_load_nothing_from_elsewhere(client: TestClient) -> None:
    for path in ("/", "/runs/1", "/compare?runs=1,2", "/logs", "/diagnosis"):
        page = client.get(path).text
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), path
    assert client.get("/docs").status_code == 404  # FastAPI's page would load a CDN


def test_extra_routers_are_mounted_and_share_the_token(db: Path, tmp_path: Path) -> None:
    from fastapi import APIRouter, Depends
    from tests.service.conftest import TOKEN

    from cloudtwin.service import ServiceSettings, create_app, require_token

    extra = APIRouter(prefix="/extra")

    @extra.post("/change", dependencies=[Depends(require_token)])
    def change() -> dict[str, bool]:
        return {"changed": True}

    settings = ServiceSettings(db=db, token=TOKEN, snapshot_dir=tmp_path)
    with TestClient(create_app(settings, extra_routers=[extra])) as client:
        assert client.post("/extra/change").status_code == 401
        assert client.post("/extra/change", headers=auth()).json() == {"changed": True}
        assert "/extra/change" in client.get("/openapi.json").json()["paths"]


def test_every_route_that_changes_something_refuses_without_the_token(client: TestClient, db: Path) -> None:
    """Not only the routes named above: every POST/PUT/PATCH/DELETE of the OpenAPI schema."""
    before = db.read_bytes()
    schema = client.get("/openapi.json").json()
    changing = [
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method not in ("get", "head", "options")
    ]
    assert {("POST", "/api/jobs"), ("POST", "/api/logs/ingest")} <= set(changing)
    for method, path in changing:
        url = re.sub(r"\{[^}]+\}", "1", path)
        answer = client.request(method, url, json={})
        assert answer.status_code == 401, (method, path, answer.text)
        assert answer.json()["error"]["field"] == "Authorization"
    assert client.get("/api/jobs").json()["jobs"] == []
    assert db.read_bytes() == before


def test_an_uploaded_vm_with_a_write_order_but_no_placement_answers_400(client: TestClient) -> None:
    text = (REPO / "examples" / "migration.yaml").read_text()
    vm = "resident: 6GiB, labels: [web]}"
    for bad, field in [
        (", write_order: ascending}", "mobility.vms.0.write_order"),
        (", working_set_at: '\"; rm -rf /'}", "mobility.vms.0.working_set_at"),
    ]:
        upload = {"scenario_yaml": text.replace(vm, vm[:-1] + bad)}
        answer = client.post("/api/jobs", json=upload, headers=auth())
        assert answer.status_code == 400
        assert answer.json()["error"]["field"] == field
    assert client.get("/api/jobs").json()["jobs"] == []

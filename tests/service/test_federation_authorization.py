"""Per-site authorization of the federation API served by `cloudtwin serve`: the admin token
(the service's) registers sites and may change any network; a site's token reads everything
and changes only its own segment, desired state and report; deleting a network that other
sites still consent to needs the admin. Every refusal leaves the state as it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.service.conftest import TOKEN

from cloudtwin.service import ServiceSettings, create_app

TOKENS = {
    "admin": TOKEN,
    "a": "site-a-token-0123456789",
    "b": "site-b-token-0123456789",
    "c": "site-c-token-0123456789",  # a site that is no member of the shared network
    "wrong": "nobodys-token-0123456789",
}


def _headers(who: str) -> dict[str, str]:
    return {} if who == "none" else {"Authorization": f"Bearer {TOKENS[who]}"}


def _segment(network: str, site: int) -> dict[str, object]:
    return {"network": network, "tenant": "red", "vni": 1000 + site, "address": f"10.{site}.0.10/24"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    """The service over a store with nothing in it (the federation needs none)."""
    settings = ServiceSettings(db=tmp_path / "empty.duckdb", token=TOKEN, snapshot_dir=tmp_path)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def fed(client: TestClient) -> Iterator[TestClient]:
    """Sites a, b, c; `shared` between a and b, both consenting; `idle` between a and b, nobody yet."""
    for site in "abc":
        body = {"name": site, "token": TOKENS[site]}
        assert client.post("/api/federation/sites", json=body, headers=_headers("admin")).status_code == 201
    for name in ("shared", "idle"):
        net = {"name": name, "tenant": "red", "mode": "l3-routed", "sites": ["a", "b"]}
        assert client.post("/api/federation/networks", json=net, headers=_headers("admin")).status_code == 201
    for k, site in enumerate("ab", start=1):
        made = client.post(
            f"/api/federation/sites/{site}/segments", json=_segment("shared", k), headers=_headers(site)
        )
        assert made.status_code == 201, made.text
    yield client


def _state(client: TestClient) -> tuple[object, ...]:
    read = [client.get(f"/api/federation/{what}").json() for what in ("sites", "networks", "status")]
    return tuple(repr(r) for r in read)


REPORT = {"generation": 1, "realised": []}
# (method, path, body, who -> expected status); "none" is no Authorization header at all
ROUTES = [
    ("POST", "/sites", {"name": "d", "token": "site-d-token-0123456789"},
     {"admin": 201, "a": 403, "b": 403, "c": 403, "wrong": 403, "none": 401}),
    ("POST", "/networks", {"name": "n2", "tenant": "red", "mode": "l3-routed", "sites": ["a", "b"]},
     {"admin": 201, "a": 201, "b": 201, "c": 403, "wrong": 403, "none": 401}),
    ("DELETE", "/networks/shared", None,
     {"admin": 204, "a": 403, "b": 403, "c": 403, "wrong": 403, "none": 401}),
    ("DELETE", "/networks/idle", None,
     {"admin": 204, "a": 204, "b": 204, "c": 403, "wrong": 403, "none": 401}),
    ("POST", "/sites/a/segments", _segment("idle", 3),
     {"admin": 403, "a": 201, "b": 403, "c": 403, "wrong": 403, "none": 401}),
    ("DELETE", "/sites/a/segments/shared", None,
     {"admin": 403, "a": 204, "b": 403, "c": 403, "wrong": 403, "none": 401}),
    ("GET", "/sites/a/desired", None,
     {"admin": 403, "a": 200, "b": 403, "c": 403, "wrong": 403, "none": 401}),
    ("PUT", "/sites/a/report", REPORT,
     {"admin": 403, "a": 204, "b": 403, "c": 403, "wrong": 403, "none": 401}),
    ("GET", "/sites", None, {"admin": 200, "a": 200, "b": 200, "c": 200, "wrong": 200, "none": 200}),
    ("GET", "/networks", None, {"admin": 200, "a": 200, "b": 200, "c": 200, "wrong": 200, "none": 200}),
    ("GET", "/status", None, {"admin": 200, "a": 200, "b": 200, "c": 200, "wrong": 200, "none": 200}),
]
CASES = [
    pytest.param(method, path, body, who, status, id=f"{method} {path} as {who}")
    for method, path, body, expected in ROUTES
    for who, status in expected.items()
]


@pytest.mark.parametrize(("method", "path", "body", "who", "status"), CASES)
def test_each_route_and_token(
    fed: TestClient, method: str, path: str, body: dict[str, object] | None, who: str, status: int
) -> None:
    before = _state(fed)
    answer = fed.request(method, "/api/federation" + path, json=body, headers=_headers(who))
    assert answer.status_code == status, answer.text
    if status >= 400:
        assert answer.json()["error"]["field"] in ("token", "Authorization")
        assert _state(fed) == before  # a refusal changes nothing


def test_a_site_cannot_take_away_the_consent_of_another(fed: TestClient) -> None:
    refused = fed.delete("/api/federation/networks/shared", headers=_headers("b"))
    assert refused.status_code == 403
    assert "'a' still consent" in refused.json()["error"]["message"]
    status = {n["name"]: n for n in fed.get("/api/federation/status").json()}
    assert status["shared"]["consented"] == ["a", "b"]


def test_a_site_deletes_a_shared_network_once_every_other_member_withdrew(fed: TestClient) -> None:
    assert fed.delete("/api/federation/sites/a/segments/shared", headers=_headers("a")).status_code == 204
    assert fed.delete("/api/federation/networks/shared", headers=_headers("a")).status_code == 403  # b's
    assert fed.delete("/api/federation/networks/shared", headers=_headers("b")).status_code == 204
    assert [n["name"] for n in fed.get("/api/federation/networks").json()] == ["idle"]

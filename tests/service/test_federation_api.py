"""`cloudtwin serve` serves the federation controller's endpoints under /api/federation, behind the
service's token rule: reads open to this machine, every change refused without a bearer token."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from tests.service.conftest import TOKEN, auth
from tests.service.server import running_server

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.adapters.openstack import OpenStackLikeAdapter
from cloudtwin.intercloud.agent import Agent
from cloudtwin.intercloud.client import FederationClient
from cloudtwin.service import ServiceSettings, create_app

EAST, WEST = "east-token-0123456789", "west-token-0123456789"
NETWORK = {"name": "red-net", "tenant": "red", "mode": "l3-routed", "sites": ["east", "west"]}


def _segment(site: int) -> dict[str, object]:
    return {"network": "red-net", "tenant": "red", "vni": 1000 + site, "address": f"10.{site}.0.10/24"}


def test_federation_reads_are_served_under_api(client: TestClient) -> None:
    assert client.get("/api/federation/sites").json() == []
    assert client.get("/api/federation/status").json() == []
    paths = client.get("/openapi.json").json()["paths"]
    assert "/api/federation/sites/{site}/segments" in paths
    assert not any(path.startswith("/federation") for path in paths)


def test_a_federation_write_without_the_token_is_refused_and_stores_nothing(client: TestClient) -> None:
    answer = client.post("/api/federation/sites", json={"name": "east", "token": EAST})
    assert answer.status_code == 401
    assert answer.json()["error"]["field"] == "Authorization"
    assert answer.headers["www-authenticate"] == "Bearer"
    assert client.delete("/api/federation/networks/red-net").status_code == 401
    assert client.get("/api/federation/sites").json() == []


def test_the_services_token_is_the_admins_and_a_site_consents_with_its_own(client: TestClient) -> None:
    for name, token in (("east", EAST), ("west", WEST)):
        answer = client.post("/api/federation/sites", json={"name": name, "token": token}, headers=auth())
        assert answer.status_code == 201, answer.text
    assert client.post("/api/federation/networks", json=NETWORK, headers=auth()).status_code == 201
    # the consent is the site's own: not the admin's to give, nor another site's
    west_by_admin = client.post("/api/federation/sites/west/segments", json=_segment(2), headers=auth())
    assert west_by_admin.status_code == 403
    west_by_east = client.post(
        "/api/federation/sites/west/segments", json=_segment(2), headers={"Authorization": f"Bearer {EAST}"}
    )
    assert west_by_east.status_code == 403
    agents = FederationClient("http://testserver/api", transport=client._transport)
    for site, token in (("east", EAST), ("west", WEST)):
        agents.post(f"/sites/{site}/segments", token, _segment(1 if site == "east" else 2))
    for _ in range(2):
        for site, token in (("east", EAST), ("west", WEST)):
            Agent(site, token, agents, OpenStackLikeAdapter()).reconcile()
    assert client.get("/api/federation/status").json()[0]["status"] == "ACTIVE"
    assert client.get("/api/federation/sites/east/desired").status_code == 401  # needs east's token


def test_serve_keeps_the_federation_beside_the_store_from_the_first_change(db: Path, tmp_path: Path) -> None:
    state = db.with_name(db.name + ".federation.json")
    with running_server(db, tmp_path) as server:
        assert httpx.get(server.url + "/api/federation/sites").json() == []
        assert not state.exists()  # nothing federated, nothing written
        refused = httpx.post(server.url + "/api/federation/sites", json={"name": "east", "token": EAST})
        assert refused.status_code == 401 and not state.exists()
        bearer = {"Authorization": f"Bearer {server.token}"}
        east = {"name": "east", "token": EAST}
        made = httpx.post(server.url + "/api/federation/sites", json=east, headers=bearer)
        assert made.status_code == 201, made.text
    assert sorted(json.loads(state.read_text())["sites"]) == ["east"]
    with running_server(db, tmp_path) as again:  # the same token file: the same controller
        assert [site["name"] for site in httpx.get(again.url + "/api/federation/sites").json()] == ["east"]


def test_a_state_made_with_another_token_is_refused_naming_the_file(db: Path, tmp_path: Path) -> None:
    state = tmp_path / "federation.json"
    first = ServiceSettings(db=db, token=TOKEN, snapshot_dir=tmp_path, federation_state=state)
    with TestClient(create_app(first)) as client:
        client.post("/api/federation/sites", json={"name": "east", "token": EAST}, headers=auth())
    other = ServiceSettings(
        db=db, token="another-token-0123456789", snapshot_dir=tmp_path, federation_state=state
    )
    with pytest.raises(FederationError, match=re.escape(str(state))):
        create_app(other)

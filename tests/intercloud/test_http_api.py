"""The controller's HTTP API: 4xx JSON naming the field on bad input with nothing stored, tokens,
an OpenAPI schema, agents over HTTP, and a controller process killed and restarted."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from cloudtwin.intercloud.adapters.openstack import OpenStackLikeAdapter
from cloudtwin.intercloud.agent import Agent
from cloudtwin.intercloud.api import federation_app
from cloudtwin.intercloud.client import FederationClient
from cloudtwin.intercloud.controller import FederationController, MemoryStore
from cloudtwin.store.federation import JsonFileStore

ADMIN = {"Authorization": "Bearer admin-token"}
EAST, WEST = "east-token-0123456789", "west-token-0123456789"


@pytest.fixture()
def api() -> tuple[TestClient, MemoryStore]:
    store = MemoryStore()
    client = TestClient(federation_app(FederationController(store, "admin-token")))
    for name, token in (("east", EAST), ("west", WEST)):
        assert (
            client.post("/federation/sites", json={"name": name, "token": token}, headers=ADMIN).status_code
            == 201
        )
    network = {"name": "red-net", "tenant": "red", "mode": "l3-routed", "sites": ["east", "west"]}
    assert client.post("/federation/networks", json=network, headers=ADMIN).status_code == 201
    segment = {"network": "red-net", "tenant": "red", "vni": 1001, "address": "10.1.0.10/24", "endpoints": 4}
    answer = client.post(
        "/federation/sites/east/segments", json=segment, headers={"Authorization": f"Bearer {EAST}"}
    )
    assert answer.status_code == 201
    return client, store


def _west(body: dict) -> dict:
    return {
        "network": "red-net",
        "tenant": "red",
        "vni": 2001,
        "address": "10.2.0.10/24",
        "endpoints": 2,
        **body,
    }


@pytest.mark.parametrize(
    ("path", "body", "headers", "status", "field"),
    [
        (
            "/federation/sites/west/segments",
            _west({"address": "10.1.0.128/25"}),
            {"Authorization": f"Bearer {WEST}"},
            422,
            "address",
        ),
        ("/federation/sites/mars/segments", _west({}), {"Authorization": f"Bearer {WEST}"}, 404, "site"),
        (
            "/federation/networks",
            {"name": "n2", "tenant": "red", "sites": ["east", "mars"]},
            ADMIN,
            422,
            "sites.1",
        ),
        (
            "/federation/networks",
            {"name": "n2", "tenant": "red", "sites": ["east"], "vni": 10000},
            ADMIN,
            409,
            "vni",
        ),
        ("/federation/sites/west/segments", _west({}), {}, 401, "token"),
        ("/federation/sites/west/segments", _west({}), {"Authorization": f"Bearer {EAST}"}, 403, "token"),
        (
            "/federation/sites/west/segments",
            _west({"vni": 0}),
            {"Authorization": f"Bearer {WEST}"},
            422,
            "vni",
        ),
        ("/federation/sites", {"name": "north"}, {"Authorization": f"Bearer {EAST}"}, 403, "token"),
    ],
)
def test_bad_input_answers_4xx_naming_the_field_and_stores_nothing(
    api: tuple[TestClient, MemoryStore], path: str, body: dict, headers: dict, status: int, field: str
) -> None:
    client, store = api
    before = json.dumps(store.state, sort_keys=True)
    answer = client.post(path, json=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["field"] == field and answer.json()["error"]["message"]
    assert json.dumps(store.state, sort_keys=True) == before


def test_overlap_message_names_both_prefixes(api: tuple[TestClient, MemoryStore]) -> None:
    client, _ = api
    answer = client.post(
        "/federation/sites/west/segments",
        json=_west({"address": "10.1.0.200/24"}),
        headers={"Authorization": f"Bearer {WEST}"},
    )
    assert "10.1.0.0/24 overlaps 10.1.0.0/24 at 'east'" in answer.json()["error"]["message"]


def test_openapi_schema_lists_the_endpoints(api: tuple[TestClient, MemoryStore]) -> None:
    client, _ = api
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/federation/sites",
        "/federation/networks",
        "/federation/sites/{site}/segments",
        "/federation/sites/{site}/desired",
        "/federation/status",
    } <= set(paths)


def test_agents_over_http_make_the_network_active(api: tuple[TestClient, MemoryStore]) -> None:
    client, _ = api
    client.post(
        "/federation/sites/west/segments", json=_west({}), headers={"Authorization": f"Bearer {WEST}"}
    )
    http = FederationClient("http://testserver", transport=client._transport)
    sites = {"east": (EAST, OpenStackLikeAdapter()), "west": (WEST, OpenStackLikeAdapter())}
    for _ in range(2):
        for site, (token, adapter) in sites.items():
            Agent(site, token, http, adapter).reconcile()
    assert client.get("/federation/status").json()[0]["status"] == "ACTIVE"
    assert client.get("/federation/sites/east/desired").status_code == 401


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(state: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CLOUDTWIN_FEDERATION_TOKEN": "admin-token"}
    cli = Path(sys.executable).with_name("cloudtwin")
    process = subprocess.Popen(
        [str(cli), "federate", "serve", "--state", str(state), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/federation/sites", timeout=1)
            return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("the controller did not start")


def test_controller_killed_and_restarted_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    state, port = tmp_path / "state.json", _free_port()
    server = _serve(state, port)
    acknowledged = []
    try:
        url = f"http://127.0.0.1:{port}/federation"
        for i in range(40):
            site = {"name": f"site{i}", "token": f"token-of-site-{i:04d}"}
            if i == 25:
                server.send_signal(signal.SIGKILL)
                server.wait()
                server = _serve(state, port)
                acknowledged.append(site["name"])  # a retry after the kill: must not duplicate
                httpx.post(
                    f"{url}/sites", json={"name": "site24", "token": "token-of-site-0024"}, headers=ADMIN
                )
            answer = httpx.post(f"{url}/sites", json=site, headers=ADMIN, timeout=5)
            assert answer.status_code == 201
            acknowledged.append(site["name"])
        server.send_signal(signal.SIGKILL)
        server.wait()
        saved = JsonFileStore(state).load()
        assert saved is not None
        assert sorted(saved["sites"]) == sorted(set(acknowledged))
        gateways = [s["gateway"] for s in saved["sites"].values()]
        assert len(gateways) == len(set(gateways)) == 40
        server = _serve(state, port)
        assert len(httpx.get(f"{url}/sites").json()) == 40
    finally:
        server.kill()
        server.wait()


def test_controller_killed_mid_request_keeps_every_acknowledged_change(tmp_path: Path) -> None:
    """Requests stream in while the controller is killed with SIGKILL: every acknowledged site
    survives the restart, and the retried unacknowledged ones are made once."""
    state, port = tmp_path / "state.json", _free_port()
    url = f"http://127.0.0.1:{port}/federation"
    server = _serve(state, port)
    acknowledged: list[str] = []
    unanswered: list[str] = []

    def register_until_the_controller_dies() -> None:
        for i in range(2_000):
            site = {"name": f"site{i}", "token": f"token-of-site-{i:04d}"}
            try:
                answer = httpx.post(f"{url}/sites", json=site, headers=ADMIN, timeout=5)
            except httpx.HTTPError:
                unanswered.append(site["name"])
                return
            assert answer.status_code == 201, answer.text
            acknowledged.append(site["name"])

    client = threading.Thread(target=register_until_the_controller_dies)
    try:
        client.start()
        deadline = time.monotonic() + 60
        while len(acknowledged) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.send_signal(signal.SIGKILL)  # with a request in flight, most likely
        server.wait()
        client.join(timeout=30)
        assert len(acknowledged) >= 20 and len(unanswered) == 1
        server = _serve(state, port)
        kept = {s["name"] for s in httpx.get(f"{url}/sites").json()}
        assert set(acknowledged) <= kept  # nothing acknowledged is lost
        assert kept <= set(acknowledged) | set(unanswered)  # nothing appears that was not asked for
        (name,) = unanswered
        number = int(name.removeprefix("site"))
        retry = httpx.post(
            f"{url}/sites", json={"name": name, "token": f"token-of-site-{number:04d}"}, headers=ADMIN
        )
        assert retry.status_code in (200, 201), retry.text
        sites = httpx.get(f"{url}/sites").json()
        assert sorted(s["name"] for s in sites) == sorted({*acknowledged, name})
        assert len({s["gateway"] for s in sites}) == len(sites)  # no address handed out twice
    finally:
        server.kill()
        server.wait()
        client.join(timeout=30)


def _site_file_counts(path: Path) -> dict[str, int]:
    try:
        saved = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {c: len(objects) for c, objects in saved["collections"].items()}


def test_agent_process_killed_mid_reconcile_converges_without_duplicates(tmp_path: Path) -> None:
    state, port = tmp_path / "state.json", _free_port()
    server = _serve(state, port)
    url = f"http://127.0.0.1:{port}"
    agent = None
    try:
        for name, token in (("east", EAST), ("west", WEST)):
            httpx.post(f"{url}/federation/sites", json={"name": name, "token": token}, headers=ADMIN)
        network = {"name": "red-net", "tenant": "red", "mode": "l3-routed", "sites": ["east", "west"]}
        httpx.post(f"{url}/federation/networks", json=network, headers=ADMIN)
        segment = {
            "network": "red-net",
            "tenant": "red",
            "vni": 1001,
            "address": "10.1.0.10/24",
            "endpoints": 6,
        }
        httpx.post(
            f"{url}/federation/sites/east/segments", json=segment, headers={"Authorization": f"Bearer {EAST}"}
        )
        httpx.post(
            f"{url}/federation/sites/west/segments",
            json=_west({}),
            headers={"Authorization": f"Bearer {WEST}"},
        )
        site_file = tmp_path / "east-site.json"
        program = Path(__file__).resolve().parents[2] / "examples" / "adapter_stdio.py"
        adapter = f"{sys.executable} {program} {site_file}"
        cli = str(Path(sys.executable).with_name("cloudtwin"))
        argv = [
            cli,
            "federate",
            "agent",
            "east",
            "--controller",
            url,
            "--adapter",
            "command",
            "--adapter-command",
            adapter,
            "--period",
            "0.2",
        ]
        env = {**os.environ, "CLOUDTWIN_SITE_TOKEN": EAST, "CLOUDTWIN_ADAPTER_DELAY_S": "0.3"}
        agent = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while sum(_site_file_counts(site_file).values()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        agent.send_signal(signal.SIGKILL)  # half-way: network, subnet and a port made, not the rest
        agent.wait()
        halfway = _site_file_counts(site_file)
        assert 3 <= sum(halfway.values()) < 9, halfway
        env["CLOUDTWIN_ADAPTER_DELAY_S"] = "0"
        agent = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        expected = {"networks": 1, "subnets": 1, "ports": 6, "interconnections": 1}
        deadline = time.monotonic() + 60
        while _site_file_counts(site_file) != expected and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a few more rounds change nothing
        assert _site_file_counts(site_file) == expected
    finally:
        for process in (agent, server):
            if process is not None:
                process.kill()
                process.wait()

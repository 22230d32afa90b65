"""The federation state has one writer: changes acknowledged by `cloudtwin serve` to many
clients at once are all in the state file after a restart."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from tests.service.server import running_server

WRITES = 100


def _post_site(url: str, bearer: dict[str, str], k: int) -> tuple[str, int]:
    # every request takes the next gateway address and bumps the generation: they all conflict
    name = f"site-{k:03d}"
    body = {"name": name, "token": f"site-token-{k:03d}-0123456789"}
    answer = httpx.post(url + "/api/federation/sites", json=body, headers=bearer, timeout=60)
    return name, answer.status_code


def test_every_acknowledged_concurrent_write_survives_a_restart(db: Path, tmp_path: Path) -> None:
    state = db.with_name(db.name + ".federation.json")
    with running_server(db, tmp_path) as server:
        bearer = {"Authorization": f"Bearer {server.token}"}
        with ThreadPoolExecutor(max_workers=WRITES) as pool:
            answers = list(pool.map(lambda k: _post_site(server.url, bearer, k), range(WRITES)))
    acknowledged = sorted(name for name, status in answers if status == 201)
    assert len(acknowledged) == WRITES, answers
    saved = json.loads(state.read_text())
    assert sorted(saved["sites"]) == acknowledged
    gateways = [site["gateway"] for site in saved["sites"].values()]
    assert len(set(gateways)) == WRITES  # no two sites were given the same address
    assert saved["generation"] == WRITES
    with running_server(db, tmp_path) as again:
        listed = httpx.get(again.url + "/api/federation/sites", timeout=30).json()
    assert sorted(site["name"] for site in listed) == acknowledged

"""Insularity audit: nothing a site receives from the controller or from another site's gateway holds
the other site's host names, underlay addresses or site-local VNIs beyond what was consented."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cloudtwin.diagnosis.emit import node_address
from cloudtwin.intercloud.adapters.openstack import OpenStackLikeAdapter
from cloudtwin.intercloud.agent import Agent
from cloudtwin.intercloud.api import federation_app
from cloudtwin.intercloud.client import FederationClient
from cloudtwin.intercloud.controller import FederationController, MemoryStore
from cloudtwin.intercloud.dataplane import WanMessage, reachability
from cloudtwin.intercloud.federate import apply_plan
from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.scenario.federation import load_federation
from cloudtwin.topology import build_topology

REPO = Path(__file__).resolve().parents[2]
MODES = ["l2-stretch", "l3-routed", "global-nat"]


def _plan(mode: str):  # noqa: ANN202
    overrides = [f"networks.{n}.mode={mode}" for n in range(2)]
    if mode == "l3-routed":  # l3-routed needs unique prefixes per site
        overrides += [
            "sites.1.tenants.0.address=10.1.0.21/24",
            "sites.1.tenants.1.address=10.1.0.21/24",
            "sites.2.tenants.0.address=10.2.0.31/24",
        ]
    return plan_federation(
        load_federation((REPO / "examples/intercloud.yaml").read_text(), overrides=overrides)
    )


def _values(message: Any) -> list[Any]:
    if isinstance(message, dict):
        return [v for value in message.values() for v in _values(value)]
    if isinstance(message, list):
        return [v for value in message for v in _values(value)]
    return [message]


def _secrets(plan, site: int) -> tuple[set[str], set[int]]:  # noqa: ANN001
    """Text and numbers private to a site: host and switch names, underlay addresses, local VNIs."""
    spec = plan.scenario.sites[site]
    topology = build_topology(spec.scenario())
    words = {topology.node_name(n) for n in range(topology.node_count)}
    words |= {node_address(n) for n in range(topology.node_count)}
    words |= {plan.endpoint_name(e) for e in range(plan.endpoint_count) if plan.ep_site[e] == site}
    return words, {t.vni for t in spec.tenants}


@pytest.mark.parametrize("mode", MODES)
def test_no_message_to_a_site_holds_another_sites_private_data(mode: str) -> None:
    plan = _plan(mode)
    controller = FederationController(MemoryStore(), "admin")
    tokens = {s.name: f"token-{s.name}-0123456789" for s in plan.scenario.sites}
    apply_plan(controller, plan, "admin", tokens)
    client = TestClient(federation_app(controller))
    received: dict[str, list[Any]] = {}
    for _ in range(2):
        for site in plan.site_names:
            http = FederationClient("http://testserver", transport=client._transport)
            Agent(site, tokens[site], http, OpenStackLikeAdapter()).reconcile()
            received.setdefault(site, []).extend(
                m["body"] for m in http.messages if m["direction"] == "received"
            )
    wan: list[WanMessage] = []
    reachability(plan, wan)
    assert wan, "the walk sent nothing between gateways"
    for b, receiver in enumerate(plan.site_names):
        own_vnis = {t.vni for t in plan.scenario.sites[b].tenants}
        for a, sender in enumerate(plan.site_names):
            if a == b:
                continue
            words, vnis = _secrets(plan, a)
            for value in _values(received[receiver]):
                text = json.dumps(value)
                assert not any(w in text for w in words if len(w) > 3), (receiver, value)
                if isinstance(value, int) and not isinstance(value, bool):
                    assert value not in vnis - own_vnis, (receiver, sender, value)
            for message in (m for m in wan if m.src_site == sender and m.dst_site == receiver):
                assert message.vni in set(plan.network_vni.tolist())
                if mode == "global-nat":
                    local = [
                        plan.seg_lo[s] <= message.inner_src <= plan.seg_hi[s]
                        for s in range(plan.segment_count)
                        if plan.seg_site[s] == a
                    ]
                    assert not any(local), ipaddress.IPv4Address(message.inner_src)

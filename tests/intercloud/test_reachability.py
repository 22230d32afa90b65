"""Reachability in the twin: exactly the endpoints of one segment or one federated network reach
each other, whatever the overlap of ranges and the address modes (walked through gateway tables)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.dataplane import reachability
from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.scenario.federation import FederationScenario, load_federation

REPO = Path(__file__).resolve().parents[2]
PREFIXES = ["10.0.0.0/24", "10.0.0.0/25", "10.0.1.0/24", "192.168.0.0/24"]
TENANTS = ["red", "blue", "green"]
MODES = ["l2-stretch", "l3-routed", "global-nat"]


def declared_pairs(data: dict) -> set[tuple[str, str]]:
    """From the scenario alone: two endpoints of one tenant at one site, or of one tenant at two
    sites that its federated network joins."""
    members = {n["tenant"]: set(n["sites"]) for n in data["networks"]}
    endpoints = []
    for site in data["sites"]:
        for tenant in site["tenants"]:
            lo, hi = (int(h) for h in tenant["hosts"].split("-"))
            endpoints += [(site["name"], tenant["name"], h) for h in range(lo, hi + 1)]
    return {
        (f"{sa}/{ta}/host{ha}", f"{sb}/{tb}/host{hb}")
        for sa, ta, ha in endpoints
        for sb, tb, hb in endpoints
        if (sa, ha) != (sb, hb) and ta == tb and (sa == sb or {sa, sb} <= members.get(ta, set()))
    }


def conflicting_networks(data: dict) -> set[int]:
    """Networks the address modes must refuse, from the scenario alone: overlapping prefixes in
    l3-routed; two subnets, or one address used twice, in l2-stretch."""
    bad = set()
    for n, spec in enumerate(data["networks"]):
        held = []
        for site in data["sites"]:
            if site["name"] in spec["sites"]:
                tenant = next(t for t in site["tenants"] if t["name"] == spec["tenant"])
                first = ipaddress.IPv4Interface(tenant["address"])
                lo, hi = (int(h) for h in tenant["hosts"].split("-"))
                used = range(int(first.ip), int(first.ip) + hi - lo + 1)
                held.append((first.network, used))
        for i, (net_a, used_a) in enumerate(held):
            for net_b, used_b in held[i + 1 :]:
                if spec["mode"] == "l3-routed" and net_a.overlaps(net_b):
                    bad.add(n)
                if spec["mode"] == "l2-stretch" and (net_a != net_b or set(used_a) & set(used_b)):
                    bad.add(n)
    return bad


@st.composite
def federations(draw) -> dict:
    n_sites = draw(st.integers(1, 5))
    # A tenant keeps one prefix at every site, or draws one per site: both give overlaps.
    shared = {name: draw(st.sampled_from(PREFIXES)) if draw(st.booleans()) else None for name in TENANTS}
    sites = []
    for i in range(n_sites):
        names = draw(st.lists(st.sampled_from(TENANTS), min_size=1, max_size=3, unique=True))
        tenants, host = [], 0
        for k, name in enumerate(names):
            count = draw(st.integers(1, 3))
            net = ipaddress.IPv4Network(shared[name] or draw(st.sampled_from(PREFIXES)))
            first = net.network_address + draw(st.integers(1, 40))
            tenants.append(
                {
                    "name": name,
                    "vni": 100 + k,
                    "hosts": f"{host}-{host + count - 1}",
                    "address": f"{first}/{net.prefixlen}",
                }
            )
            host += count
        sites.append(
            {
                "name": f"s{i}",
                "fabric": {"kind": "leaf-spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 12},
                "tenants": tenants,
            }
        )
    networks = []
    for name in TENANTS:
        holders = [s["name"] for s in sites if any(t["name"] == name for t in s["tenants"])]
        if holders and draw(st.integers(0, 3)):
            chosen = draw(st.lists(st.sampled_from(holders), min_size=min(2, len(holders)), unique=True))
            networks.append(
                {"name": f"{name}-net", "tenant": name, "mode": draw(st.sampled_from(MODES)), "sites": chosen}
            )
    return {"name": "random", "sites": sites, "networks": networks}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(federations())
def test_exactly_the_federated_pairs_are_reachable(data: dict) -> None:
    scenario = FederationScenario.model_validate(data)
    conflicts = conflicting_networks(data)
    try:
        plan = plan_federation(scenario)
    except FederationError as err:
        assert conflicts, f"refused without a conflict: {err}"
        assert err.field in {f"networks.{n}.sites" for n in conflicts}, str(err)
        assert any(w in err.reason for w in ("overlaps", "duplicate addresses", "one subnet"))
        event("refused")
        return
    assert not conflicts, f"planned although networks {sorted(conflicts)} conflict"
    matrix = reachability(plan)
    names = plan.endpoint_names
    reached = {(names[a], names[b]) for a, b in zip(*np.nonzero(matrix), strict=True)}
    assert reached == declared_pairs(data)
    across = any(a.split("/")[0] != b.split("/")[0] for a, b in reached)
    event("planned, pairs across sites" if across else "planned")


def test_three_site_example_matrix() -> None:
    plan = plan_federation(load_federation((REPO / "examples/intercloud.yaml").read_text()))
    matrix = reachability(plan)
    names = plan.endpoint_names
    reach = {(names[a], names[b]) for a, b in zip(*np.nonzero(matrix), strict=True)}
    assert ("east/red/host0", "lab/red/host1") in reach
    assert ("west/blue/host3", "east/blue/host2") in reach
    # lab/blue/host2 has 10.0.0.11, the same address as east/blue/host2, but is not federated.
    assert not any(("lab/blue" in a) != ("lab/blue" in b) for a, b in reach)
    assert not any(a.split("/")[1] != b.split("/")[1] for a, b in reach)
    assert matrix.sum() == 5 * 6 + 3 * 4 + 2


def test_l3_overlap_names_both_prefixes() -> None:
    text = (REPO / "examples/intercloud.yaml").read_text()
    with pytest.raises(FederationError) as err:
        plan_federation(load_federation(text, overrides=["networks.0.mode=l3-routed"]))
    assert err.value.field == "networks.0.sites"
    assert "10.0.0.0/24 at 'east' overlaps 10.0.0.0/24 at 'west'" in str(err.value)


def test_global_nat_allows_overlap_and_translates() -> None:
    text = (REPO / "examples/intercloud.yaml").read_text()
    plan = plan_federation(load_federation(text, overrides=["networks.0.mode=global-nat"]))
    red = plan.network_segments(0)
    blocks = sorted((int(plan.seg_global[s]), int(plan.seg_count[s])) for s in red)
    # 2 endpoints per site: three aligned blocks of 2 from 100.64.0.0.
    first = int(ipaddress.IPv4Address("100.64.0.0"))
    assert blocks == [(first, 2), (first + 2, 2), (first + 4, 2)]
    data = yaml.safe_load(text)
    data["networks"][0]["mode"] = "global-nat"
    names = plan.endpoint_names
    reached = {(names[a], names[b]) for a, b in zip(*np.nonzero(reachability(plan)), strict=True)}
    assert reached == declared_pairs(data)


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        ("networks.0.sites.1=mars", "networks.0.sites.1", "unknown site 'mars'"),
        ("networks.1.vni=5", None, None),
        ("sites.1.tenants.1.vni=7001", "sites.1.tenants.1.vni", "VNI 7001 is already used by tenant 'red'"),
        ("networks.1.tenant=green", "networks.1.tenant", "site 'east' has no tenant 'green'"),
        ("wan.0.between.1=pluto", "wan.0.between.1", "unknown site 'pluto'"),
        # the same WAN link twice, in the same order and in the other: one is refused
        ("wan.1.between.1=west", "wan.1.between", "'east' and 'west' are joined already by wan.0"),
        ("wan.2.between.1=east", "wan.2.between", "'west' and 'east' are joined already by wan.0"),
        ("sites.0.tenants.0.address=10.0.0.254/24", "sites.0.tenants.0.address", "do not fit"),
    ],
)
def test_bad_federations_name_the_field(override: str, field: str | None, words: str | None) -> None:
    text = (REPO / "examples/intercloud.yaml").read_text()
    scenario = load_federation(text, overrides=[override])
    if field is None:
        assert plan_federation(scenario).network_vni[1] == 5
        return
    with pytest.raises(FederationError) as err:
        plan_federation(scenario)
    assert err.value.field == field and words in err.value.reason


def test_conflicting_federated_vnis() -> None:
    text = (REPO / "examples/intercloud.yaml").read_text()
    scenario = load_federation(text, overrides=["networks.0.vni=77", "networks.1.vni=77"])
    with pytest.raises(
        FederationError, match="networks.1.vni: VNI 77 is already used by federated network 'red-net'"
    ):
        plan_federation(scenario)


def test_global_nat_subnet_inside_the_pool_is_refused() -> None:
    text = (REPO / "examples/intercloud.yaml").read_text()
    scenario = load_federation(text, overrides=["networks.0.mode=global-nat", "global_pool=10.0.0.0/16"])
    with pytest.raises(FederationError, match="10.0.0.0/24 at 'east' overlaps the global pool 10.0.0.0/16"):
        plan_federation(scenario)


def test_nat_port_accounting() -> None:
    from cloudtwin.intercloud.addressing import EPHEMERAL_PORTS, nat_port_usage

    # Three sources toward one destination: 10, 64,512 and 70,000 concurrent flows.
    used, refused = nat_port_usage(np.array([10, EPHEMERAL_PORTS, 70_000]), addresses=4)
    assert EPHEMERAL_PORTS == 64_512
    assert (used, refused) == (10 + 64_512 + 64_512, 70_000 - 64_512)
    with pytest.raises(FederationError, match="3 sources share 2 global addresses"):
        nat_port_usage(np.array([1, 1, 1]), addresses=2)

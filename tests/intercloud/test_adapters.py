"""One contract every adapter passes, and agents killed mid-reconcile that converge when restarted."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.intercloud.netns_helpers import leftover

from cloudtwin.intercloud.adapters.base import Adapter, AdapterError, Crash, FaultInjector
from cloudtwin.intercloud.adapters.dove import DoveLikeAdapter, dove_like_cloud
from cloudtwin.intercloud.adapters.openstack import OpenStackLikeAdapter, openstack_like_cloud
from cloudtwin.intercloud.adapters.process import ProcessAdapter
from cloudtwin.intercloud.agent import Agent
from cloudtwin.intercloud.controller import FederationController, MemoryStore
from cloudtwin.intercloud.federate import apply_plan, run_agents
from cloudtwin.intercloud.netns import remove_namespaces
from cloudtwin.intercloud.objects import DesiredSegment, Peer
from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.scenario.federation import load_federation

REPO = Path(__file__).resolve().parents[2]

RED = DesiredSegment(
    network="red-net",
    mode="l2-stretch",
    federated_vni=10000,
    tenant="red",
    vni=1001,
    address="10.1.0.11/24",
    endpoints=3,
    peers=(Peer(site="west", gateway="198.18.0.2"),),
)
BLUE = DesiredSegment(
    network="blue-net",
    mode="l2-stretch",
    federated_vni=10001,
    tenant="blue",
    vni=1002,
    address="10.0.0.11/24",
    endpoints=2,
    peers=(Peer(site="lab", gateway="198.18.0.3"), Peer(site="west", gateway="198.18.0.2")),
)


def _process(tmp_path: Path) -> Adapter:
    return ProcessAdapter(
        [sys.executable, str(REPO / "examples" / "adapter_stdio.py"), str(tmp_path / "site.json")]
    )


def _linux(tmp_path: Path) -> Adapter:
    from tests.intercloud.netns_helpers import linux_adapter_or_skip

    return linux_adapter_or_skip(tmp_path)


FACTORIES: dict[str, Callable[[Path], Adapter]] = {
    "openstack-like": lambda _: OpenStackLikeAdapter(),
    "dove-like": lambda _: DoveLikeAdapter(),
    "subprocess": _process,
    "linux": _linux,
}


@pytest.fixture(params=sorted(FACTORIES))
def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Adapter]:
    made = FACTORIES[request.param](tmp_path)
    try:
        yield made
    finally:
        for segment in made.segments():
            made.delete(segment.network)
        made.close()
        prefix = getattr(made, "prefix", None)
        if prefix:
            remove_namespaces(prefix)
            assert leftover(prefix) == []


def test_contract_apply_reads_back(adapter: Adapter) -> None:
    assert adapter.segments() == []
    adapter.apply(RED)
    assert adapter.segments() == [RED]


def test_contract_apply_twice_duplicates_nothing(adapter: Adapter) -> None:
    adapter.apply(RED)
    adapter.apply(BLUE)
    adapter.apply(RED)
    assert sorted(adapter.segments(), key=lambda s: s.network) == [BLUE, RED]


def test_contract_apply_changes_in_place(adapter: Adapter) -> None:
    adapter.apply(RED)
    changed = RED.model_copy(update={"endpoints": 2, "peers": ()})
    adapter.apply(changed)
    assert adapter.segments() == [changed]


def test_contract_delete_is_idempotent(adapter: Adapter) -> None:
    adapter.apply(RED)
    adapter.apply(BLUE)
    adapter.delete("red-net")
    adapter.delete("red-net")
    adapter.delete("never-made")
    assert adapter.segments() == [BLUE]


def test_subprocess_adapter_reports_errors_and_survives_a_kill(tmp_path: Path) -> None:
    made = ProcessAdapter(
        [sys.executable, str(REPO / "examples" / "adapter_stdio.py"), str(tmp_path / "s.json")]
    )
    try:
        made.apply(RED)
        assert made.process is not None
        made.process.kill()
        made.process.wait()
        made.apply(BLUE)  # started again; the site kept its state
        assert sorted(made.segments(), key=lambda s: s.network) == [BLUE, RED]
        with pytest.raises(AdapterError, match="unknown op"):
            made._call({"op": "dance"})
    finally:
        made.close()
    missing = ProcessAdapter(["/nonexistent/adapter"])
    with pytest.raises(AdapterError, match="cannot start adapter"):
        missing.segments()


def _federation() -> tuple[FederationController, dict[str, str], object]:
    plan = plan_federation(load_federation((REPO / "examples/intercloud.yaml").read_text()))
    controller = FederationController(MemoryStore(), "admin")
    tokens = {s.name: f"token-{s.name}" for s in plan.scenario.sites}
    apply_plan(controller, plan, "admin", tokens)
    return controller, tokens, plan


def _reference(flavour: str, controller: FederationController, token: str, site: str) -> dict[str, int]:
    cloud = dove_like_cloud() if flavour == "dove-like" else openstack_like_cloud()
    adapter = DoveLikeAdapter(cloud) if flavour == "dove-like" else OpenStackLikeAdapter(cloud)
    Agent(site, token, controller, adapter).reconcile()
    return cloud.count()


@pytest.mark.parametrize(("flavour", "site"), [("openstack-like", "east"), ("dove-like", "west")])
def test_agent_killed_at_every_step_converges_without_duplicates(flavour: str, site: str) -> None:
    controller, tokens, _ = _federation()
    expected = _reference(flavour, controller, tokens[site], site)
    total = sum(expected.values())
    for kill_after in range(total):
        cloud = dove_like_cloud() if flavour == "dove-like" else openstack_like_cloud()
        cloud.faults = FaultInjector(after=kill_after)
        adapter = DoveLikeAdapter(cloud) if flavour == "dove-like" else OpenStackLikeAdapter(cloud)
        with pytest.raises(Crash):
            Agent(site, tokens[site], controller, adapter).reconcile()
        cloud.faults = FaultInjector()
        restarted = DoveLikeAdapter(cloud) if flavour == "dove-like" else OpenStackLikeAdapter(cloud)
        Agent(site, tokens[site], controller, restarted).reconcile()
        assert cloud.count() == expected, f"killed after {kill_after} changes"
        assert Agent(site, tokens[site], controller, restarted).reconcile().applied == []


def test_withdrawn_consent_takes_the_peer_out_of_active_within_one_round() -> None:
    controller, tokens, plan = _federation()
    adapters = {s.name: OpenStackLikeAdapter() for s in plan.scenario.sites}
    agents = {name: (tokens[name], a) for name, a in adapters.items()}
    run_agents(controller, agents)
    assert {s.name: s.status for s in controller.status()} == {"blue-net": "ACTIVE", "red-net": "ACTIVE"}
    controller.delete_segment(tokens["west"], "west", "red-net")
    red = next(s for s in controller.status() if s.name == "red-net")
    assert red.status == "PENDING" and red.interconnections["east<->west"] == "PENDING"
    assert red.interconnections["east<->lab"] == "ACTIVE"
    run_agents(controller, agents, rounds=1)
    east = {s.network: s for s in adapters["east"].segments()}
    assert [p.site for p in east["red-net"].peers] == ["lab"]
    assert "red-net" not in {s.network for s in adapters["west"].segments()}

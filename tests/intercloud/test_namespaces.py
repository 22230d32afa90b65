"""The three-site example realised in real namespaces: the pings give the twin's matrix; the tunnel's
goodput follows the overhead formula; nothing is left behind, even when a test fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests.intercloud.netns_helpers import leftover, netns_capability, unique_prefix

from cloudtwin.intercloud.adapters.linux import LinuxAdapter
from cloudtwin.intercloud.dataplane import reachability
from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.intercloud.realise import Realisation, live_reachability, realise, unrealise
from cloudtwin.scenario.federation import load_federation

REPO = Path(__file__).resolve().parents[2]
REASON = netns_capability()
pytestmark = [
    pytest.mark.slow,  # real namespaces and pings, four times
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]


@pytest.fixture(scope="module")
def example() -> Iterator[tuple[object, Realisation]]:
    plan = plan_federation(load_federation((REPO / "examples/intercloud.yaml").read_text()))
    prefix = unique_prefix()
    try:
        yield plan, realise(plan, prefix)
    finally:
        unrealise(prefix)
        assert leftover(prefix) == []


def test_pings_give_the_twin_matrix(example: tuple[object, Realisation]) -> None:
    plan, built = example
    live = live_reachability(built)
    twin = reachability(plan)
    names = plan.endpoint_names
    differ = [(names[a], names[b]) for a, b in zip(*np.nonzero(live != twin), strict=True)]
    assert differ == []
    assert live.sum() == 44


def test_a_failed_build_removes_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_federation(load_federation((REPO / "examples/intercloud.yaml").read_text()))
    prefix = unique_prefix()
    calls = []
    original = LinuxAdapter.apply

    def dies_on_the_third_segment(self: LinuxAdapter, segment: object) -> None:
        calls.append(segment)
        if len(calls) == 3:
            raise RuntimeError("killed half-way")
        original(self, segment)

    monkeypatch.setattr(LinuxAdapter, "apply", dies_on_the_third_segment)
    with pytest.raises(RuntimeError, match="killed half-way"):
        realise(plan, prefix)
    assert leftover(prefix) == []


TWO_SITES = """
name: goodput
sites:
  - {name: a, flavour: linux, fabric: {leaves: 1, spines: 1, hosts_per_leaf: 1},
     tenants: [{name: t, vni: 11, hosts: "0", address: 10.9.0.1/24}]}
  - {name: b, flavour: linux, fabric: {leaves: 1, spines: 1, hosts_per_leaf: 1},
     tenants: [{name: t, vni: 12, hosts: "0", address: 10.9.0.2/24}]}
wan: [{between: [a, b], bandwidth: 20Mbps, latency: 1ms}]
networks: [{name: tnet, tenant: t, mode: l2-stretch, sites: [a, b]}]
"""

SERVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5201)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); total = 0; first = None
while True:
    data = c.recv(1 << 16)
    if not data: break
    if first is None: first = time.monotonic(); total = 0; continue
    total += len(data); last = time.monotonic()
print(total * 8 / (last - first))
"""

CLIENT = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], 5201)); chunk = b"x" * 65536; end = time.monotonic() + 4
while time.monotonic() < end: c.sendall(chunk)
c.close()
"""


def test_goodput_over_the_tunnel_follows_the_overhead_formula() -> None:
    import subprocess
    import sys

    from cloudtwin.intercloud.encapsulation import goodput_fraction

    plan = plan_federation(load_federation(TWO_SITES))
    prefix = unique_prefix()
    try:
        built = realise(plan, prefix)
        assert built.shaped == ("a->b", "b->a")
        server = subprocess.Popen(
            ["ip", "netns", "exec", built.endpoint_ns[1], sys.executable, "-c", SERVER],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        subprocess.run(
            ["ip", "netns", "exec", built.endpoint_ns[0], sys.executable, "-c", CLIENT, "10.9.0.2"],
            check=True,
            timeout=60,
        )
        measured_bps = float(server.communicate(timeout=60)[0])
        expected_bps = 20e6 * goodput_fraction("vxlan", 1500)
        print(f"goodput {measured_bps / 1e6:.2f} Mbit/s, formula {expected_bps / 1e6:.2f} Mbit/s")
        assert measured_bps == pytest.approx(expected_bps, rel=0.06), (measured_bps, expected_bps)
        # Without the tunnel's 50 bytes the same link would carry more: the difference is visible.
        assert measured_bps < 20e6 * goodput_fraction(None, 1500)
    finally:
        unrealise(prefix)
        assert leftover(prefix) == []


ROUTED = {
    "l3-routed": [
        "networks.0.mode=l3-routed",
        "networks.1.mode=l3-routed",
        "sites.1.tenants.0.address=10.1.0.21/24",
        "sites.1.tenants.1.address=10.1.0.21/24",
        "sites.2.tenants.0.address=10.2.0.31/24",
    ],
    "global-nat": ["networks.0.mode=global-nat", "networks.1.mode=global-nat"],
}


@pytest.mark.parametrize("mode", sorted(ROUTED))
def test_routed_modes_ping_like_the_twin(mode: str) -> None:
    import shutil

    if mode == "global-nat" and shutil.which("nft") is None:
        pytest.skip("global-nat in namespaces needs nft (Debian package nftables)")
    plan = plan_federation(
        load_federation((REPO / "examples/intercloud.yaml").read_text(), overrides=ROUTED[mode])
    )
    prefix = unique_prefix()
    try:
        live = live_reachability(realise(plan, prefix))
        twin = reachability(plan)
        names = plan.endpoint_names
        assert [(names[a], names[b]) for a, b in zip(*np.nonzero(live != twin), strict=True)] == []
        assert live.sum() == 44
    finally:
        unrealise(prefix)
        assert leftover(prefix) == []


@pytest.mark.parametrize(
    ("scenario", "endpoints"), [("examples/intercloud.yaml", 12), ("examples/one-cloud.yaml", 15)]
)
def test_cli_up_live_reachability_down(scenario: str, endpoints: int) -> None:
    """`federate up` realises a multi-site scenario's federation, or a one-cloud file's."""
    import json

    from tests.cli.cli_helpers import cloudtwin

    prefix = unique_prefix()
    try:
        up = cloudtwin("federate", "up", scenario, "--prefix", prefix, "--json")
        assert up.returncode == 0, up.stderr
        assert json.loads(up.stdout)["endpoints"] == endpoints
        live = cloudtwin(
            "federate", "reachability", scenario, "--live", "--prefix", prefix, "--json"
        )
        twin = cloudtwin("federate", "reachability", scenario, "--json")
        assert live.returncode == 0, live.stderr
        assert json.loads(live.stdout) == json.loads(twin.stdout)
        down = cloudtwin("federate", "down", scenario, "--prefix", prefix, "--json")
        assert down.returncode == 0 and len(json.loads(down.stdout)["removed"]) == len(
            json.loads(up.stdout)["namespaces"]
        )
    finally:
        unrealise(prefix)
        assert leftover(prefix) == []

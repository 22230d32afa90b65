"""Fault specs become fabric states: targets, flapping, degradation, random draws, errors."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.errors import ScenarioError
from cloudtwin.faults import expand_faults, resolve_target
from cloudtwin.scenario.faults import Fault
from cloudtwin.topology import build_topology


@pytest.fixture
def topology(make_scenario):
    return build_topology(make_scenario("fabric.leaves=4", "fabric.spines=2", "fabric.hosts_per_leaf=2"))


def test_targets_name_cables_switches_and_nics(topology) -> None:
    cable = resolve_target(topology, "link", "leaf1-spine0")
    assert sorted(topology.link_name(int(i)) for i in cable) == ["leaf1->spine0", "spine0->leaf1"]
    assert resolve_target(topology, "switch", "spine1").size == 2 * 4  # 4 cables, both ways
    assert resolve_target(topology, "nic", "host3/nic0").size == 2
    assert resolve_target(topology, "nic", "host3").size == 2


@pytest.mark.parametrize(
    ("kind", "target", "message"),
    [
        ("link", "leaf9-spine0", "no switch 'leaf9'"),
        ("link", "leaf0+spine0", "not a cable"),
        ("link", "leaf0-leaf1", "no cable"),
        ("switch", "router1", "not a switch name"),
        ("nic", "host99", "no host 99"),
        ("nic", "host1/nic3", "has no nic3"),
    ],
)
def test_bad_targets_name_the_key(topology, kind: str, target: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message) as info:
        expand_faults([Fault(kind=kind, target=target)], topology, 1)
    assert str(info.value).startswith("faults.0.")


def test_flapping_goes_down_and_up_count_times(topology) -> None:
    fault = Fault(kind="link", target="leaf0-spine1", at="10ms", flap={"period": "20ms", "count": 3})
    states = expand_faults([fault], topology, 1)
    assert [s.time_s for s in states] == pytest.approx([0.01, 0.02, 0.03, 0.04, 0.05, 0.06])
    assert [s.went_down for s in states] == [True, False] * 3
    assert all(s.status_changed for s in states)


def test_degradation_keeps_the_link_up_and_overlaps_take_the_lowest(topology) -> None:
    faults = [
        Fault(kind="link", target="leaf0-spine1", at="0s", until="10ms", capacity="40%"),
        Fault(kind="switch", target="spine1", at="5ms", until="8ms"),
    ]
    states = expand_faults(faults, topology, 1)
    link = int(resolve_target(topology, "link", "leaf0-spine1")[0])
    assert [s.time_s for s in states] == pytest.approx([0.0, 0.005, 0.008, 0.01])
    assert [s.capacity_bps[link] / 1e9 for s in states] == pytest.approx([40, 0, 40, 100])
    assert not states[0].status_changed and states[1].went_down and not states[3].went_down


def test_random_failures_come_from_the_seed(topology) -> None:
    fault = Fault(kind="random", count=3, at="1ms", until="2ms")
    first = expand_faults([fault], topology, 7)
    again = expand_faults([fault], topology, 7)
    np.testing.assert_array_equal(first[0].changed, again[0].changed)
    assert first[0].changed.size == 6  # three cables, both directions, between switches
    kinds = topology.node_kind[topology.link_src[first[0].changed]]
    assert np.all(kinds != 0)
    with pytest.raises(ScenarioError, match="faults.0.count"):
        expand_faults([Fault(kind="random", count=99)], topology, 1)

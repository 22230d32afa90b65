"""The scenario's `nic:` section: numbers that would make the NIC's cost vanish, and placements
that one entry would silently override, are refused naming the key."""

from __future__ import annotations

import pytest

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario import load_scenario

SMALL = """name: s
fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 4}
nic:
  profile: janus-100g
"""


@pytest.mark.parametrize(
    ("nic", "message"),
    [
        (
            "  packet_mix: [[64, .nan], [1500, 1]]\n",
            r":5: nic\.packet_mix\.0\.1: Input should be a finite number",
        ),
        ("  new_flows_per_s: .inf\n", r":5: nic\.new_flows_per_s: Input should be a finite number"),
        ("  storm: {new_flows_per_s: .inf}\n", r":5: nic\.storm\.new_flows_per_s: Input should be a finite"),
        (
            "  groups: [{hosts: '0-3', profile: basic}, {hosts: '3-5', profile: bmv2-like}]\n",
            r"nic\.groups\.1\.hosts: host 3 is also in nic\.groups\.0",
        ),
        (
            "  functions: [{name: overlay}, {name: conntrack}, {name: overlay}]\n",
            r"nic\.functions\.2\.name: overlay is placed twice \(also nic\.functions\.0\)",
        ),
        (
            "  groups: [{hosts: '1', functions: [{name: conntrack}, {name: conntrack}]}]\n",
            r"nic\.groups\.0\.functions\.1\.name: conntrack is placed twice",
        ),
    ],
)
def test_vanishing_numbers_and_overlapping_placements_are_refused(nic: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message) as info:
        load_scenario(SMALL + nic, "s.yaml")
    assert "\n" not in str(info.value)


def test_disjoint_groups_and_distinct_functions_are_accepted() -> None:
    nic = "  groups: [{hosts: '0-3', profile: basic}, {hosts: '4-7', functions: [{name: overlay}]}]\n"
    assert len(load_scenario(SMALL + nic, "s.yaml").nic.groups) == 2

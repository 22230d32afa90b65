"""`faults:`, `reaction:` and `workloads:` in scenarios: what they accept and how they fail."""

from __future__ import annotations

import pytest

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario import load_scenario

BASE = "name: t\ntenants: [{name: a, vni: 5, hosts: '0-63'}, {name: b, vni: 6, hosts: '64-127'}]\n"


def test_faults_jobs_and_timings_parse() -> None:
    scenario = load_scenario(
        BASE
        + "workloads:\n  - {name: j1, tenants: a, pattern: permutation, start: 10ms}\n"
        + "  - {pattern: shift, tenants: [b], size: 1MiB}\n"
        + "faults:\n  - {kind: link, target: leaf0-spine1, at: 5ms, until: 20ms}\n"
        + "  - {kind: random, count: 2, at: 1ms, of: switch}\n"
        + "  - {kind: link, target: leaf1-spine1, capacity: 40Gbps}\n"
        + "  - {kind: nic, target: host3, at: 1ms, flap: {period: 4ms, count: 2}}\n"
        + "reaction: {rule_install: 2ms, pinning_repair: all}\n"
    )
    first, second = scenario.workloads
    assert (first.name, first.tenants, first.start) == ("j1", ("a",), 0.01)
    assert (second.name, second.tenants, second.size) == (None, ("b",), 1 << 20)
    assert scenario.faults[0].until == pytest.approx(0.02)
    assert scenario.faults[1].count == 2 and scenario.faults[1].of == "switch"
    assert scenario.faults[2].capacity == pytest.approx(40e9)
    assert scenario.faults[3].flap is not None and scenario.faults[3].flap.down_s == pytest.approx(0.002)
    assert scenario.reaction.rule_install == pytest.approx(0.002)
    assert scenario.reaction.bfd_detect == pytest.approx(0.15)  # the default


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("workloads:\n  - {tenants: c}\n", "workloads.0.tenants: no tenant named 'c'"),
        ("workloads:\n  - {name: x}\n  - {name: x}\n", "workloads.1.name: duplicate job name 'x'"),
        ("workloads:\n  - {pattern: nope}\n", "workloads.0.pattern"),
        ("workload: {pattern: shift}\nworkloads: [{pattern: shift}]\n", "give either workload or workloads"),
        ("faults:\n  - {kind: link}\n", "a link fault needs a target"),
        ("faults:\n  - {kind: cable, target: x}\n", "faults.0.kind"),
        ("faults:\n  - {kind: link, target: x, at: 5ms, until: 1ms}\n", "until: must be after at"),
        ("faults:\n  - {kind: random}\n", "a random fault needs count"),
        ("faults:\n  - {kind: random, count: 1, target: spine0}\n", "drop target"),
        ("faults:\n  - {kind: link, target: x, capacity: fast}\n", "faults.0.capacity"),
        ("faults:\n  - {kind: link, target: x, until: 2ms, flap: {period: 1ms, count: 2}}\n", "no until"),
        ("faults:\n  - {kind: link, target: x, flap: {period: 1ms, count: 2, down: 3ms}}\n", "flap.down"),
        ("faults:\n  - {kind: link, target: x, when: 3ms}\n", "faults.0.when: unknown key"),
        ("reaction: {bfd_detect: 3 parsecs}\n", "reaction.bfd_detect"),
        ("reaction: {pinning_repair: some}\n", "reaction.pinning_repair"),
    ],
)
def test_bad_keys_are_named(extra: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(")) as info:
        load_scenario(BASE + extra, "f.yaml")
    assert str(info.value).startswith("f.yaml")
    assert "\n" not in str(info.value)

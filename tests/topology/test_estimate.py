"""Memory estimates of a scenario, checked against the arrays the builders make."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudtwin.cli.app import main
from cloudtwin.errors import LimitError, ScenarioError
from cloudtwin.scenario import load_scenario
from cloudtwin.topology.builders import build_topology
from cloudtwin.topology.estimate import estimate_flows, estimate_memory

SMALL = "name: t\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"


def test_a_small_fabric_estimate_matches_its_arrays() -> None:
    scenario = load_scenario(SMALL, "s.yaml")
    parts = estimate_memory(scenario).parts
    topology = build_topology(scenario)
    # 4 NICs + 2 leaves + 2 spines; 4 NIC cables + 4 uplinks, two directions each
    assert (topology.node_count, topology.link_count) == (8, 16)
    assert parts["out-link table"] == topology.out_links.nbytes
    assert parts["hop table"] == topology.hops_to_edge.size * (8 + 2 + 2)
    assert parts["flows"] == 4 * 8 * 12  # a permutation of 4 hosts, one QP each


@pytest.mark.parametrize(
    "overrides",
    [
        ["fabric.leaves=16", "fabric.hosts_per_leaf=62500"],  # a million hosts: 9 GiB before
        ["fabric.kind=fat-tree", "fabric.k=180"],  # asked for 181 GiB before
        ["fabric.uplinks_per_spine=100000"],  # 7.4 GiB in 3 s before
    ],
)
def test_a_fabric_too_large_for_memory_is_refused_before_it_is_built(
    overrides: list[str],
) -> None:
    text = "name: t\nfabric: {kind: leaf-spine}\n"
    if "fabric.kind=fat-tree" in overrides:
        text = "name: t\nfabric: {kind: fat-tree}\n"
        overrides = overrides[1:]
    scenario = load_scenario(text, "s.yaml", [*overrides, "limits.flows=100000000"])
    with pytest.raises(LimitError, match=r"needs about .* above limits.memory = 4.0GiB") as err:
        build_topology(scenario)
    assert err.value.limit == "limits.memory"


def test_the_limit_can_be_raised_and_the_cli_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario(SMALL, "s.yaml", ["limits.memory=1KiB"])
    with pytest.raises(LimitError):
        build_topology(scenario)
    assert build_topology(load_scenario(SMALL, "s.yaml", ["limits.memory=1GiB"])).link_count == 16
    path = tmp_path / "ft.yaml"
    path.write_text("name: ft\nfabric: {kind: fat-tree, k: 180}\nlimits: {flows: 100000000}\n")
    code = main(["run", str(path)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1 and "limits.memory" in err


def test_limits_memory_raised_past_the_machine_is_refused_with_the_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # limits.memory=1000TiB on a machine of a few GiB ended in a raw MemoryError
    import cloudtwin.topology.estimate as estimate

    monkeypatch.setattr(estimate, "machine_memory_bytes", lambda: 1 << 10)
    scenario = load_scenario(SMALL, "s.yaml", ["limits.memory=1000TiB"])
    needed = estimate_memory(scenario).total_bytes
    assert needed > 1 << 10
    with pytest.raises(LimitError, match=r"more than this machine.s 1.0KiB; raising limits.memory") as err:
        build_topology(scenario)
    assert err.value.limit == "limits.memory"


def test_a_memory_error_is_one_line_at_the_cli(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import cloudtwin.cli.run as run_commands

    def exhausted(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(run_commands, "_one_fabric", exhausted)  # where `run` reads its scenario
    scenario = tmp_path / "s.yaml"
    scenario.write_text("fabric: {kind: leaf-spine}\n")  # a file there: the missing one is refused first
    code = main(["run", str(scenario)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1 and "out of memory" in err


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ("fabric.host_link=1e-300Gbps", "at least 1bps"),
        ("fabric.uplink=1e400Gbps", "finite"),
        ("workload.size=1e400GiB", "more than 1EiB"),
        ("fabric.latency=1e400s", "finite"),
    ],
)
def test_absurd_quantities_are_scenario_errors(override: str, reason: str) -> None:
    with pytest.raises(ScenarioError, match=reason):
        load_scenario(SMALL, "s.yaml", [override])


A2A = "name: a2a\nhosts: {gpus: 8}\nworkload: {kind: collective, op: alltoall}\n"


@pytest.mark.parametrize(
    ("fabric", "flows"),
    [
        ("fabric: {kind: leaf-spine, leaves: 8, spines: 8, hosts_per_leaf: 16}\n", 1024 * 1023),
        ("fabric: {kind: fat-tree, k: 8}\n", 1024 * 1023),
    ],
)
def test_an_alltoall_too_large_to_finish_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fabric: str, flows: int
) -> None:
    # 1,024 ranks printed nothing for 400 s; a k=8 fat-tree ran past 200 s
    path = tmp_path / "a2a.yaml"
    path.write_text(A2A + fabric)
    code = main(["nccl-tests", str(path), "-b", "1M", "-e", "16M"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"makes {flows:,} flows" in err and "limits.flows = 300,000" in err
    raised = load_scenario(A2A + fabric, "s.yaml", [f"limits.flows={flows}"])
    assert estimate_flows(raised) == flows


def test_an_alltoall_per_tenant_counts_each_jobs_pairs() -> None:
    text = A2A + (
        "fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
        "tenants: [{name: a, vni: 1, hosts: '0-1'}, {name: b, vni: 2, hosts: '2-3'}]\n"
    )
    assert estimate_flows(load_scenario(text, "s.yaml")) == 2 * 16 * 15


THREE_SITES = "sites: [{name: a}, {name: b}, {name: c}]\n"


def test_a_federation_above_limits_sites_is_refused_with_its_wan_estimate() -> None:
    from cloudtwin.scenario.federation import load_federation
    from cloudtwin.topology.estimate import check_federation

    federation = load_federation(THREE_SITES, "f.yaml", ["limits.sites=2"])
    with pytest.raises(LimitError) as err:
        check_federation(federation)
    assert err.value.field == "limits.sites"
    # three sites and no wan: list, so a default link joins each of the 3 pairs
    assert "3 sites joined by 3 WAN links" in str(err.value)
    assert "raise limits.sites" in str(err.value)


def test_a_federation_whose_default_wan_is_too_large_for_memory_is_refused() -> None:
    from cloudtwin.scenario.federation import load_federation
    from cloudtwin.topology.estimate import check_federation

    federation = load_federation(THREE_SITES, "f.yaml", ["limits.memory=4KiB"])
    with pytest.raises(LimitError) as err:
        check_federation(federation)
    assert err.value.field == "limits.memory"
    assert "WAN links 6.7KiB" in str(err.value)  # 3 pairs x 2,300 bytes
    assert "flows" not in str(err.value)  # a site runs no traffic of its own in a federation

"""Composition on the one run (twin/run.py): a part alone equals the same part inside a
composition when it shares no link with the rest; under sharing no link is ever above
capacity and every byte arrives; the NIC tiers and collectives hold beside migrations."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.cli.cli_helpers import REPO
from tests.conftest import scenario_from

from cloudtwin.topology import build_topology
from cloudtwin.twin import Run, run_migrations, run_scenario_jobs

# Two leaves of four hosts, one spine: cloud a is leaf 0, cloud b leaf 1. The tenant's
# traffic stays on leaf 0 (hosts 0-2 to each other), the migration leaves host 3 for
# cloud b: the two share no link.
APART = """
name: apart
seed: 3
fabric: {kind: leaf-spine, leaves: 2, spines: 1, hosts_per_leaf: 4, host_link: 10Gbps, uplink: 40Gbps}
tenants:
  - {name: t, vni: 10, hosts: "0-2"}
workload: {kind: perftest, pattern: all-to-all, size: SIZE}
mobility:
  wan: {bandwidth: 5Gbps, latency: 2ms}
  clouds:
    - {name: a, hosts: "0-3", gateway: 3}
    - {name: b, hosts: "4-7", gateway: 4}
  vms:
    - {name: vm0, cloud: a, host: 3, memory: MEMORY, working_set: 256MiB, dirty_rate: DIRTY}
  migrations:
    - {vm: vm0, to: b, start: START}
"""


def _apart(size: int, memory: int, dirty: int, start: float, tenants: bool = True):
    text = (
        APART.replace("SIZE", str(size))
        .replace("MEMORY", str(memory))
        .replace("DIRTY", f"{dirty}MiB/s")
        .replace("START", f"{start}s")
    )
    if not tenants:
        text = "\n".join(line for line in text.splitlines() if not line.startswith("workload:"))
    return scenario_from(text=text)


@settings(max_examples=12, deadline=None)
@given(
    size=st.integers(1 << 20, 1 << 30),
    memory=st.sampled_from([1 << 30, 2 << 30, 3 << 30]),
    dirty=st.integers(1, 200),
    start=st.floats(0.0, 2.0, allow_nan=False),
)
def test_a_part_alone_equals_the_part_in_the_composition_bit_for_bit(size, memory, dirty, start) -> None:
    scenario = _apart(size, memory, dirty, start)
    composed = run_migrations(scenario)
    # the tenants' job alone (as `run` runs it) ...
    np.testing.assert_array_equal(composed.tenant_finish_s, run_scenario_jobs(scenario).result.finish_s)
    # ... and the migration alone (no tenant job): the same rounds, bit for bit
    only = run_migrations(_apart(size, memory, dirty, start, tenants=False))
    assert only.tenant_flows == 0
    rounds = [(r.start_s, r.end_s, r.bytes) for r in composed.migrations[0].timeline]
    assert rounds == [(r.start_s, r.end_s, r.bytes) for r in only.migrations[0].timeline]


class LoadWatch:
    """A driver with no links of its own: at every `step_s` it checks that no link carries
    more than its capacity now."""

    def __init__(self, until_s: float, step_s: float) -> None:
        self.links_bps = np.empty(0)
        self.times = np.arange(0.0, until_s, step_s)
        self.worst = 0.0
        self.checks = 0

    def attach(self, run: Run, first_link: int) -> None:
        self.run = run
        for at in self.times:
            run.schedule(float(at), self._check)

    def _check(self, now: float) -> None:
        capacity = self.run.link_capacity_bps
        load = self.run.link_load_bps
        used = capacity > 0
        self.worst = max(self.worst, float(np.max(load[used] / capacity[used], initial=0.0)))
        assert np.all(load[~used] <= 1e-6)
        self.checks += 1


SHARED = """
name: shared
seed: SEED
fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 4, host_link: 10Gbps, uplink: 10Gbps}
tenants:
  - {name: t, vni: 10, hosts: "0-7"}
workload: {kind: perftest, pattern: all-to-all, size: 256MiB}
faults:
  - {kind: link, target: leaf0-spine0, at: 0.2s, until: 0.9s}
mobility:
  wan: {bandwidth: 10Gbps, latency: 1ms}
  clouds:
    - {name: a, hosts: "0-3", gateway: 3}
    - {name: b, hosts: "4-7", gateway: 4}
  vms:
    - {name: vm0, cloud: a, host: 1, memory: 2GiB, working_set: 512MiB, dirty_rate: 100MiB/s}
    - {name: vm1, cloud: b, host: 6, memory: 1GiB, working_set: 128MiB, dirty_rate: 50MiB/s}
  migrations:
    - {vm: vm0, to: b}
    - {vm: vm1, to: a, start: 0.3s}
"""


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), strategy=st.sampled_from(["ecmp", "adaptive", "pinning"]))
def test_under_sharing_no_link_is_above_capacity_and_every_byte_arrives(seed, strategy) -> None:
    scenario = scenario_from(f"routing.strategy={strategy}", text=SHARED.replace("SEED", str(seed)))
    watch = LoadWatch(until_s=8.0, step_s=0.01)
    run = run_migrations(scenario, drivers=[watch])
    assert watch.checks == watch.times.size
    assert watch.worst <= 1 + 1e-9
    assert np.all(np.isfinite(run.tenant_finish_s))
    for m in run.migrations:
        assert m.converged
        assert m.bytes == pytest.approx(sum(r.bytes for r in m.timeline), rel=1e-12)


class Ledger:
    """Every flow added to a run (its id, path and size as the engine got them), and the run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.flows: list[tuple[int, list[int], float]] = []
        self.runs: list[Run] = []
        add = Run.add_flows

        def recorded(run: Run, paths, size_bytes, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            ids = add(run, paths, size_bytes, *args, **kwargs)
            if run not in self.runs:
                self.runs.append(run)
            sizes = np.asarray(size_bytes, dtype=float)
            for k, flow in enumerate(np.asarray(ids).tolist()):
                links = paths.link_ids[paths.indptr[k] : paths.indptr[k + 1]].tolist()
                self.flows.append((int(flow), links, float(sizes[k])))
            return ids

        monkeypatch.setattr(Run, "add_flows", recorded)


def test_every_migration_byte_is_delivered_by_the_engine_on_a_pinned_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SHARED without its fault: vm0 (host 1, cloud a, gateway 3) to cloud b (gateway 4);
    # vm1 (host 6, cloud b) to cloud a. Hosts 0-3 hang off leaf0, 4-7 off leaf1. The
    # destination cloud picks the host (by seed): the gateway host itself or another one.
    crossed = {("a", "b"): 0, ("b", "a"): 0}  # streams that crossed the destination's fabric
    for seed in (1, 2):
        scenario = scenario_from("faults=[]", text=SHARED.replace("SEED", str(seed)))
        topology = build_topology(scenario)
        ledger = Ledger(monkeypatch)
        run = run_migrations(scenario)
        engine = ledger.runs[0]  # the run itself (the tenants' run alone comes after)
        base = topology.link_count
        wan = {("a", "b"): base, ("b", "a"): base + 1}  # one WAN link per ordered pair, after the fabric
        assert engine.capacity_bps[base] == engine.capacity_bps[base + 1] == 10e9  # the scenario's WAN
        remaining = engine.remaining_bytes
        for m, pair in zip(run.migrations, wan, strict=True):
            streams = [(f, links, size) for f, links, size in ledger.flows[: engine.flow_count]
                       if wan[pair] in links]
            # the engine delivered every byte of every stream, and they are the rounds' bytes
            assert all(remaining[f] == 0.0 for f, _, _ in streams)
            sent = sum(size for _, _, size in streams)
            assert sent == pytest.approx(sum(r.bytes for r in m.timeline), rel=1e-12)
            assert len(streams) == len([r for r in m.timeline if r.bytes > 0])
            for _, links, _ in streams:
                crossed[pair] += _pinned(topology, links, wan[pair], pair)
    # cloud b puts vm0 on its gateway host; cloud a puts vm1 behind its leaf
    assert crossed == {("a", "b"): 0, ("b", "a"): crossed[("b", "a")]} and crossed[("b", "a")] > 0


def _pinned(topology, links: list[int], wan: int, pair: tuple[str, str]) -> bool:  # noqa: ANN001
    """A stream's path, link by link: host -> its leaf -> gateway, the WAN, then gateway ->
    its leaf -> the destination host unless the VM lands on the gateway host. Whether it
    crossed the destination's fabric."""
    names = [topology.link_name(k) if k != wan else "wan" for k in links]
    if pair == ("a", "b"):
        head, tail, hosts = ["host1/nic0->leaf0", "leaf0->host3/nic0", "wan"], "host4/nic0->leaf1", "[5-7]"
        leaf = "leaf1"
    else:
        head, tail, hosts = ["host6/nic0->leaf1", "leaf1->host4/nic0", "wan"], "host3/nic0->leaf0", "[0-2]"
        leaf = "leaf0"
    assert names[:3] == head, names
    if len(names) == 3:
        return False
    assert len(names) == 5 and names[3] == tail, names
    assert re.fullmatch(rf"{leaf}->host{hosts}/nic0", names[4]), names
    return True


def test_migrate_run_and_run_give_the_tenants_the_same_finish_times_without_the_migration() -> None:
    scenario = scenario_from("faults=[]", text=SHARED.replace("SEED", "1"))
    run = run_migrations(scenario)
    alone = run_scenario_jobs(scenario).result
    assert run.tenant_completion_alone_s == alone.completion_s
    assert np.any(run.tenant_finish_s > alone.finish_s)  # the migrations share links with them


SOFTWARE_DATAPATH = """
nic:
  profile: software-vswitch
  functions:
    - {name: overlay}
    - {name: security-groups}
    - {name: conntrack}
  packet_size: 256B
"""


def test_the_nic_tiers_slow_the_tenants_beside_a_migration_as_they_slow_run() -> None:
    # examples/migration.yaml (25 Gbps hosts) with a software datapath slower than that
    text = (REPO / "examples" / "migration.yaml").read_text()
    plain = scenario_from("faults=[]", text=text)
    slow = scenario_from("faults=[]", text=text + SOFTWARE_DATAPATH)
    fast_run, slow_run = run_migrations(plain), run_migrations(slow)
    assert slow_run.tenant_completion_alone_s == run_scenario_jobs(slow).result.completion_s
    assert slow_run.tenant_completion_alone_s > 1.5 * fast_run.tenant_completion_alone_s
    assert slow_run.tenant_completion_s > 1.5 * fast_run.tenant_completion_s
    # the migration streams cross the same host tiers
    assert slow_run.migrations[0].total_time_s > fast_run.migrations[0].total_time_s


COLLECTIVE = """
name: ring
seed: 2
fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 4, host_link: 100Gbps, uplink: 100Gbps}
hosts: {gpus: 2}
workload: {kind: collective, op: allreduce, size: 256MiB, algorithm: ring, channels: 2}
mobility:
  wan: {bandwidth: 10Gbps, latency: 1ms}
  clouds:
    - {name: a, hosts: "0-3", gateway: 3}
    - {name: b, hosts: "4-7", gateway: 4}
  vms:
    - {name: vm0, cloud: a, host: 0, memory: 4GiB, working_set: 1GiB, dirty_rate: 200MiB/s}
  migrations:
    - {vm: vm0, to: b}
"""


def test_a_collective_runs_beside_a_migration() -> None:
    scenario = scenario_from(text=COLLECTIVE)
    run = run_migrations(scenario)
    (m,) = run.migrations
    assert m.converged
    assert run.tenant_flows == run_scenario_jobs(scenario).result.finish_s.size
    assert np.all(np.isfinite(run.tenant_finish_s))
    assert run.tenant_completion_alone_s == run_scenario_jobs(scenario).result.completion_s
    assert run.tenant_completion_s >= run.tenant_completion_alone_s


def test_evaluate_runs_a_collective_beside_migrations_per_strategy() -> None:
    from cloudtwin.evaluation.evaluate import evaluate

    scenario = scenario_from(text=COLLECTIVE)
    evaluation = evaluate(scenario, ["ecmp", "pinning"])
    for outcome in evaluation.outcomes:
        assert outcome.migrations is not None
        (vm,) = outcome.migrations.values()
        alone = run_migrations(scenario, outcome.name).migrations[0]
        assert vm.converged and vm.total_time_s == alone.total_time_s
        assert outcome.performance.busbw is not None


def test_diagnose_simulates_the_faulted_run_that_evaluate_reports() -> None:
    # the migrations run beside the jobs in both, so the jobs' finish times are the same
    from cloudtwin.evaluation.evaluate import evaluate
    from cloudtwin.twin import simulate_faulted

    scenario = scenario_from(text=(REPO / "examples" / "migration.yaml").read_text())
    (outcome,) = evaluate(scenario, [scenario.routing.strategy]).outcomes
    faulted = simulate_faulted(scenario)
    np.testing.assert_array_equal(faulted.result.finish_s, outcome.faulted.finish_s)
    alone = simulate_faulted(scenario, drivers=[])  # without the migrations the jobs differ
    assert not np.array_equal(alone.result.finish_s, outcome.faulted.finish_s)

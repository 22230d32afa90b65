"""A migration's timeout holds inside a round, `abort_at` comes after `start`, gateway
failures that overlap are all applied, a flapping gateway stalls a migration once per flap,
and a migration reports only the faults it lived through."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin
from tests.conftest import scenario_from
from tests.twin.test_migration import TWO_CLOUDS

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.cloud import load_cloud
from cloudtwin.twin import run_migrations
from cloudtwin.twin.cloud import run_cloud

ONE_CLOUD = (REPO / "examples" / "one-cloud.yaml").read_text()


@pytest.mark.parametrize(
    "override",
    [
        "mobility.wan.bandwidth=1bps",  # the first pass alone would take 1e11 s
        "mobility.wan.latency=1000000s",  # the first pass arrives after 1e6 s
        "mobility.migrations.0.timeout=2s",  # 4 GiB at 10 Gbps need about 3.4 s
    ],
)
def test_the_timeout_holds_inside_a_round(override: str) -> None:
    run = run_migrations(scenario_from(override, text=TWO_CLOUDS))
    [m] = run.migrations
    timeout = 2.0 if "timeout" in override else 3600.0
    assert m.result.outcome == "aborted"
    assert m.total_time_s == timeout
    assert m.result.reason == f"no convergence within the timeout ({timeout:g} s)"


def test_a_migration_within_its_timeout_is_untouched() -> None:
    [m] = run_migrations(scenario_from("mobility.migrations.0.timeout=4s", text=TWO_CLOUDS)).migrations
    assert m.result.outcome == "completed" and m.total_time_s < 4.0


@pytest.mark.parametrize(("start", "abort_at"), [("1s", "0s"), ("1s", "1s"), ("0s", "0s")])
def test_abort_at_not_after_start_is_refused_naming_the_key(start: str, abort_at: str) -> None:
    overrides = (f"mobility.migrations.0.start={start}", f"mobility.migrations.0.abort_at={abort_at}")
    with pytest.raises(ScenarioError, match=r"mobility\.migrations\.0\.abort_at: .* is not after start"):
        scenario_from(*overrides, text=TWO_CLOUDS)


def test_migrate_run_refuses_abort_at_before_start_in_one_line(tmp_path: Path) -> None:
    done = cloudtwin(
        "migrate", "run", "examples/migration.yaml", "--set", "mobility.migrations.0.start=2s",
        "--set", "mobility.migrations.0.abort_at=1s", "--db", str(tmp_path / "s.duckdb"),
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "mobility.migrations.0.abort_at" in line and done.stdout == ""
    assert not (tmp_path / "s.duckdb").exists()  # nothing stored


def _cloud_run(*overrides: str):  # noqa: ANN202 - a CloudRun
    return run_cloud(load_cloud(ONE_CLOUD, "one-cloud.yaml", overrides))


def test_a_second_gateway_failure_during_the_first_failover_is_applied() -> None:
    alone = _cloud_run()
    both = _cloud_run("federation.gateway_faults=[{site: east, at: 1.5s}, {site: west, at: 2s}]")
    east, west = both.failovers
    assert both.migrations is not None and alone.migrations is not None
    for m, m_alone in zip(both.migrations.migrations, alone.migrations.migrations, strict=True):
        # the stream through both sites waits for the later failover to end, then moves
        events = [(e["time_s"], e["event"]) for e in m.path_events]
        assert events == [
            (max(1.5, m.start_s), "stalled: gateway of east failed"),
            (west.at_s + west.total_s, "re-routed"),
        ]
        delay = (west.at_s + west.total_s) - (east.at_s + east.total_s)
        assert m.total_time_s == pytest.approx(m_alone.total_time_s + delay, rel=1e-9)


def test_a_gateway_failure_while_stalled_keeps_the_stream_waiting_for_its_failover() -> None:
    run = _cloud_run("federation.gateway_faults=[{site: east, at: 1.5s}, {site: west, at: 5s}]")
    west = run.failovers[1]
    assert run.migrations is not None
    for m in run.migrations.migrations:
        assert m.path_events[-1] == {"time_s": west.at_s + west.total_s, "event": "re-routed", "links": 7}


def test_a_flapping_gateway_stalls_the_migration_for_each_failover() -> None:
    # east's failover: 50 ms detection + 30 ms election + no tunnel set-up (VXLAN) + 20 ms routes
    run = _cloud_run(
        "federation.sites.0.gateway.detection=50ms",
        "federation.sites.0.gateway.election=30ms",
        "federation.sites.0.gateway.route_propagation=20ms",
        "mobility.migrations=[{vm: shop, to: west}]",
        "federation.gateway_faults=[{site: east, at: 1.5s, flap: {period: 1s, count: 3}}]",
    )
    assert [f.at_s for f in run.failovers] == [1.5, 2.5, 3.5]
    assert [f.total_s for f in run.failovers] == pytest.approx([0.1, 0.1, 0.1])
    assert run.migrations is not None
    [m] = run.migrations.migrations
    assert [e["event"] for e in m.path_events] == ["stalled: gateway of east failed", "re-routed"] * 3
    assert [e["time_s"] for e in m.path_events] == pytest.approx([1.5, 1.6, 2.5, 2.6, 3.5, 3.6])


def test_a_migration_reports_only_the_faults_it_lives_through() -> None:
    late = _cloud_run("mobility.migrations=[{vm: shop, to: west, start: 1000000000s}]")
    assert late.migrations is not None
    [m] = late.migrations.migrations
    assert m.path_events == () and m.result.outcome == "completed"
    assert all(not r.path_events for r in m.timeline)
    during = _cloud_run("mobility.migrations=[{vm: shop, to: west, start: 3s}]")
    assert during.migrations is not None
    [m] = during.migrations.migrations
    [east] = during.failovers
    assert [(e["time_s"], e["event"]) for e in m.path_events] == [
        (3.0, "stalled: gateway of east failed"), (east.at_s + east.total_s, "re-routed"),
    ]


def test_a_plan_stops_at_its_timeout_with_what_arrived_by_then() -> None:
    from cloudtwin.mobility.memory import VmMemory
    from cloudtwin.mobility.options import MigrationOptions
    from cloudtwin.mobility.precopy import plan_migration

    # 8 GiB over 1 kbit/s: the first pass would take 7e7 s; at the 3,600 s timeout,
    # 1e3 * 3600 / 8 = 450,000 bytes of it have arrived
    plan = plan_migration(VmMemory(8 << 30, 8 << 30, 0.0), MigrationOptions(bandwidth_bps=1e3))
    assert plan.outcome == "aborted" and plan.total_time_s == 3600.0
    [first] = plan.timeline
    assert (first.start_s, first.end_s) == (0.0, 3600.0)
    assert plan.bytes == first.bytes == pytest.approx(450_000, rel=1e-9)


def test_a_stream_cut_at_its_timeout_leaves_the_path_to_the_others() -> None:
    # vm0's 4 GiB need about 3.4 s at 10 Gbps; it times out at 2 s. vm1, from 2.5 s, then has
    # the gateway's link to itself: it takes as long as it would alone
    text = TWO_CLOUDS.replace(
        "    - {name: vm0, cloud: a, host: 0, memory: 4GiB}",
        "    - {name: vm0, cloud: a, host: 0, memory: 4GiB}\n"
        "    - {name: vm1, cloud: a, host: 1, memory: 1GiB}",
    ).replace(
        "    - {vm: vm0, to: b, protected: false}",
        "    - {vm: vm0, to: b, protected: false, timeout: 2s}\n"
        "    - {vm: vm1, to: b, protected: false, start: 2.5s}",
    )
    first, second = run_migrations(scenario_from(text=text)).migrations
    assert first.result.outcome == "aborted" and first.total_time_s == 2.0
    alone = text.replace("    - {vm: vm0, to: b, protected: false, timeout: 2s}\n", "")
    [by_itself] = run_migrations(scenario_from(text=alone)).migrations
    assert second.converged and second.total_time_s == pytest.approx(by_itself.total_time_s, rel=1e-12)

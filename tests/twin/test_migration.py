"""Migrations on the engine (twin/migration.py): contention, faults, consent, logs, aborts."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.cli.cli_helpers import cloudtwin
from tests.conftest import scenario_from

from cloudtwin.errors import ScenarioError
from cloudtwin.twin import run_migrations

GIB = 1 << 30
F = 4104 / 4096

TWO_CLOUDS = """
name: t
fabric: {kind: leaf-spine, leaves: 2, spines: 1, hosts_per_leaf: 4, host_link: 10Gbps, uplink: 40Gbps}
mobility:
  wan: {bandwidth: 100Gbps, latency: 1ms}
  clouds:
    - {name: a, hosts: "0-3", gateway: 3}
    - {name: b, hosts: "4-7", gateway: 4}
  vms:
    - {name: vm0, cloud: a, host: 0, memory: 4GiB}
  migrations:
    - {vm: vm0, to: b, protected: false}
"""


def _scenario(text: str = TWO_CLOUDS, *overrides: str):
    return scenario_from(*overrides, text=text)


def test_alone_the_migration_runs_at_the_nic_rate() -> None:
    run = run_migrations(_scenario())
    (m,) = run.migrations
    bulk = m.timeline[0]
    assert m.converged and m.rounds == 1
    assert bulk.end_s - bulk.start_s == pytest.approx(bulk.bytes * 8 / 10e9 + 0.001, rel=1e-9)


def test_tenant_all_to_all_takes_its_share_of_the_source_nic() -> None:
    text = TWO_CLOUDS.replace(
        "name: t\n",
        'name: t\ntenants: [{name: t1, vni: 7, hosts: "0-2"}]\n'
        "workload: {kind: perftest, pattern: all-to-all, size: 100GiB}\n",
    )
    run = run_migrations(_scenario(text))
    (m,) = run.migrations
    bulk = m.timeline[0]
    # host 0's NIC carries two tenant flows (to hosts 1 and 2) and the migration: a third each
    assert bulk.end_s - bulk.start_s == pytest.approx(bulk.bytes * 8 / (10e9 / 3) + 0.001, rel=1e-9)
    assert m.slowdown == pytest.approx(3.0, rel=0.01)
    assert run.tenant_completion_s > run.tenant_completion_alone_s


FAULTED = """
name: f
fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: 10Gbps, uplink: 10Gbps}
faults: [FAULTS]
mobility:
  wan: {bandwidth: 100Gbps, latency: 1ms}
  clouds:
    - {name: a, hosts: "0-2", gateway: 2}
    - {name: b, hosts: "3", gateway: 3}
  vms:
    - {name: vm0, cloud: a, host: 0, memory: 4GiB}
  migrations:
    - {vm: vm0, to: b, protected: false}
"""


def test_a_cut_leaf_stalls_the_migration_for_the_outage() -> None:
    alone = run_migrations(_scenario(FAULTED.replace("faults: [FAULTS]\n", "")))
    cut = FAULTED.replace(
        "FAULTS",
        "{kind: link, target: leaf0-spine0, at: 1s, until: 3s}, "
        "{kind: link, target: leaf0-spine1, at: 1s, until: 3s}",
    )
    run = run_migrations(_scenario(cut))
    base, hit = alone.migrations[0], run.migrations[0]
    assert hit.converged
    # exactly the outage longer: the threshold follows the stream's rate at the end of the
    # stalled round (QEMU's last 100 ms), not its average with the stall
    assert hit.total_time_s == pytest.approx(base.total_time_s + 2.0, rel=1e-9)
    assert [e.phase for e in hit.timeline] == ["bulk", "stop-and-copy"]
    # the timeline shows it: the bulk round (0 s to its end) stalls at 1 s and resumes at 3 s
    bulk = hit.timeline[0]
    assert bulk.phase == "bulk"
    assert [(e["time_s"], e["event"].split(":")[0]) for e in bulk.path_events] == [
        (1.0, "stalled"),
        (3.0, "resumed"),
    ]
    assert bulk.end_s - bulk.start_s == pytest.approx(
        base.timeline[0].end_s - base.timeline[0].start_s + 2.0, rel=1e-9
    )
    assert all(e.path_events == () for e in hit.timeline[1:])


def test_a_failed_spine_link_reroutes_the_stream() -> None:
    outcomes = []
    for spine in (0, 1):
        text = FAULTED.replace("FAULTS", f"{{kind: link, target: leaf0-spine{spine}, at: 1s}}")
        outcomes.append(run_migrations(_scenario(text)).migrations[0])
    rerouted = [m for m in outcomes if any(e["event"] == "re-routed" for e in m.path_events)]
    assert len(rerouted) == 1  # the spine its path used; the other cut does not touch it
    untouched = next(m for m in outcomes if m is not rerouted[0])
    assert rerouted[0].converged
    assert rerouted[0].total_time_s > untouched.total_time_s
    # visible in the timeline: the round in flight at 1 s carries the re-route, after the
    # fabric's reaction delay; the untouched migration's rounds carry nothing
    (event,) = [e for r in rerouted[0].timeline for e in r.path_events]
    assert event["event"] == "re-routed" and 1.0 < event["time_s"] < 2.0
    round_of = next(r for r in rerouted[0].timeline if event in r.path_events)
    assert round_of.start_s <= event["time_s"] < round_of.end_s
    assert all(r.path_events == () for r in untouched.timeline)


def test_refused_admission_never_starts_a_transfer() -> None:
    text = TWO_CLOUDS.replace(
        '{name: b, hosts: "4-7", gateway: 4}',
        '{name: b, hosts: "4-7", gateway: 4, admission: {allowed_labels: [gold]}}',
    )
    text = text.replace("memory: 4GiB}", "memory: 4GiB, labels: [pci]}")
    run = run_migrations(_scenario(text))
    (m,) = run.migrations
    assert not m.converged and m.bytes == 0 and m.timeline == []
    assert m.running_copies == 1 and m.ticket is None
    assert [r["event"] for r in run.logs["b"]] == ["admission-refused"]


CLOUDS_FOR_LOGS = """
name: logs
seed: SEED
fabric: {kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 4, host_link: 25Gbps}
mobility:
  clouds:
    - {name: east, hosts: "0-7", gateway: GWA}
    - {name: west, hosts: "8-15", gateway: GWB}
  vms: [VMS]
  migrations: [MIGRATIONS]
"""


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 1000),
    gateways=st.tuples(st.integers(0, 7), st.integers(8, 15)),
    hosts=st.lists(st.integers(0, 7), min_size=1, max_size=4),
    abort_share=st.floats(0.001, 1.2),  # abort_at comes after start (0 s)
)
def test_insularity_of_logs_and_one_running_copy(
    seed: int, gateways: tuple[int, int], hosts: list[int], abort_share: float
) -> None:
    vms = ", ".join(
        f"{{name: v{i}, cloud: east, host: {h}, memory: 2GiB, working_set: 256MiB, dirty_rate: 50MiB/s}}"
        for i, h in enumerate(hosts)
    )
    migrations = ", ".join(
        f"{{vm: v{i}, to: west, abort_at: {abort_share * (1 + i)}s}}" for i in range(len(hosts))
    )
    text = (
        CLOUDS_FOR_LOGS.replace("SEED", str(seed))
        .replace("GWA", str(gateways[0]))
        .replace("GWB", str(gateways[1]))
        .replace("VMS", vms)
        .replace("MIGRATIONS", migrations)
    )
    run = run_migrations(_scenario(text))
    for m in run.migrations:
        assert m.running_copies == 1
        assert m.phase in ("committed", "aborted")
        assert (m.phase == "committed") == m.converged
    west_private = [f"west-h{h}" for h in range(8, 16)] + [f"10.1.0.{h}" for h in range(8, 16)]
    east_private = [f"east-h{h}" for h in range(8)] + [f"10.0.0.{h}" for h in range(8)]
    # anywhere in a record, values and free text alike (what the store keeps is `event k=v ...`)
    east_log = json.dumps(run.logs["east"])
    west_log = json.dumps(run.logs["west"])

    def holds(text: str, names: list[str]) -> list[str]:
        return [n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.])", text)]

    assert holds(east_log, west_private) == []
    assert holds(west_log, east_private) == []
    # each cloud's log does hold its own private names, so the search above can find them
    assert f"east-h{hosts[0]}" in holds(east_log, east_private)
    admitted = [r for r in run.logs["west"] if r["event"] == "admitted"]  # the destination logs its side
    assert admitted and admitted[0]["host"] in holds(west_log, west_private)


def test_forged_token_is_refused() -> None:
    from cloudtwin.mobility.insularity import Cloud, ConsentError, Token, VmProfile

    east = Cloud("east", ["east-h0"], {"east-h0": "10.0.0.0"})
    west = Cloud("west", ["west-h0"], {"west-h0": "10.1.0.0"})
    mallory = Cloud("east", ["x"], {"x": "1.1.1.1"}, seed=99)  # claims to be east with another key
    profile = VmProfile("vm", 1 << 30, 2, (), "52:54:00:00:00:01", "192.168.0.2")
    forged = Token.issue(mallory.key, "east", "west", "migrate-request", "m0", 0.0)
    with pytest.raises(ConsentError, match="signature"):
        west.admit(profile, "east", forged, east.public_key, "m0", 0.0)
    assert not west.reserved


def test_migrate_run_cli_json_and_store(tmp_path) -> None:
    db = tmp_path / "runs.duckdb"
    done = cloudtwin(
        "migrate",
        "run",
        "examples/migration.yaml",
        "--json",
        "--db",
        str(db),
        "--plot",
        str(tmp_path / "rounds.png"),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for m in result["migrations"]:
        assert {"converged", "total_time_s", "downtime_s", "bytes", "rounds", "timeline"} <= set(m)
    assert (tmp_path / "rounds.png").stat().st_size > 0
    wrote = [f"wrote run {result['run_id']} to {db}", f"wrote {tmp_path / 'rounds.png'}"]
    assert done.stderr.splitlines() == wrote
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM mig_migrations").fetchone()[0] == len(result["migrations"])
        sources = {r[0] for r in con.execute("SELECT source FROM ops_sources").fetchall()}
    assert sources == {f"mobility/{result['run_id']}/east", f"mobility/{result['run_id']}/west"}
    listed = cloudtwin("migrate", "list", "--db", str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["vm"] for r in json.loads(listed.stdout)) == sorted(m["vm"] for m in result["migrations"])


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("mobility.migrations.0.vm=ghost", "mobility.migrations.0.vm"),
        ("mobility.migrations.0.to=mars", "mobility.migrations.0.to"),
        ("mobility.vms.0.dirty_rate=-1MiB/s", "mobility.vms.0.dirty_rate"),
        ("mobility.vms.0.working_set=64GiB", "mobility.vms.0.working_set: "),
        ("mobility.migrations.0.downtime_limit=0ms", "mobility.migrations.0.downtime_limit"),
    ],
)
def test_bad_scenario_is_one_line_exit_2(override: str, field: str) -> None:
    done = cloudtwin("migrate", "run", "examples/migration.yaml", "--set", override)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], done.stderr


def test_scenario_without_migrations_is_an_error() -> None:
    with pytest.raises(Exception, match="mobility.migrations"):
        run_migrations(_scenario("name: x\n"))
    assert ScenarioError


def test_clients_keep_talking_to_the_vm_across_the_switchover() -> None:
    with_clients = TWO_CLOUDS.replace("memory: 4GiB}", 'memory: 4GiB, clients: "1", client_bytes: 20GiB}')
    run = run_migrations(_scenario(with_clients))
    (m,) = run.migrations
    assert m.converged
    assert any(e["event"] == "clients re-pointed" for e in m.path_events)
    # the client's 20 GiB go to host 0 at 10 Gbps (the migration leaves by host 0's uplink,
    # the client arrives by its downlink); from the pause until the overlay re-points the
    # VM nothing moves; then it goes on at 10 Gbps across the WAN to the new host
    alone = 20 * GIB * 8 / 10e9
    (finish,) = m.client_finish_s
    assert finish == pytest.approx(alone + m.connectivity_downtime_s, rel=1e-9)


def test_more_migrations_than_the_limit_are_refused_before_anything_runs() -> None:
    done = cloudtwin("migrate", "run", "examples/migration.yaml", "--set", "limits.migrations=1", "--json")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "cloudtwin: error: the scenario has 2 live migrations, above limits.migrations = 1 (larger runs "
        "can take many minutes); migrate fewer VMs at once, or raise limits.migrations"
    ]
    evaluated = cloudtwin("evaluate", "examples/migration.yaml", "--set", "limits.migrations=1", "--no-store")
    assert evaluated.returncode == 2 and len(evaluated.stderr.splitlines()) == 1
    assert "limits.migrations" in evaluated.stderr

"""A cloud's operations data covers every site, and `diagnose` finds faults anywhere in it,
causes above the components they took down, with today's component names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from tests.cli.cli_helpers import REPO, cloudtwin

from cloudtwin.diagnosis.cloud import emit_cloud
from cloudtwin.diagnosis.rank import _flow_samples, diagnose
from cloudtwin.engine.maxmin import max_min_rates
from cloudtwin.scenario.cloud import load_cloud
from cloudtwin.store.database import Store
from cloudtwin.store.twin_tables import TWIN_SCHEMA_VERSION, ensure_twin_schema, read_meta
from cloudtwin.twin.cloud import CloudRun, run_cloud

EXAMPLE = (REPO / "examples" / "one-cloud.yaml").read_text()
#: Three faults in two sites beside the example's own gateway fault and failed boot.
THREE = [
    "federation.sites.1.faults=[{kind: link, target: leaf1-spine0, at: 200ms, until: 900ms}]",
    "federation.sites.0.faults=[{kind: switch, target: spine1, at: 1s, until: 1.6s}]",
]


def _emit(tmp_path: Path, overrides: list[str]) -> tuple[Store, CloudRun]:
    cloud = load_cloud(EXAMPLE, overrides=overrides)
    hit = run_cloud(cloud)
    store = Store(tmp_path / "cloud.duckdb")
    emit_cloud(store, run_cloud(cloud, faults=False), hit)
    return store, hit


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, CloudRun]]:
    """The store of the three faults (each test opens it again: one process at a time holds
    the file) and the faulted run."""
    store, hit = _emit(tmp_path_factory.mktemp("cloud"), THREE)
    store.close()
    with Store(store.path, read_only=True) as reader:
        yield reader, hit


@pytest.fixture()
def closed(incident: tuple[Store, CloudRun]) -> Iterator[Path]:
    """The incident's store file, with nothing holding it for the length of one test."""
    store, _ = incident
    store.connection.close()
    yield Path(store.path)
    store.connection = Store(store.path, read_only=True).connection


def test_every_site_writes_its_jobs_flows_and_its_switches_logs(incident: tuple[Store, CloudRun]) -> None:
    store, _ = incident
    sources = {r[0] for r in store.query("SELECT DISTINCT src FROM twin_flow_samples")[1]}
    assert any(s.startswith("east.host") for s in sources)  # the training rings
    assert any(s.startswith("west.host") for s in sources)  # west's all-to-all
    lines = [r[0] for r in store.query("SELECT content FROM ops_lines WHERE level = 'err'")[1]]
    assert any("(west.leaf1->west.spine0), changed state to down" in line for line in lines)
    assert any("(east.leaf0->east.spine1), changed state to down" in line for line in lines)
    assert not any("(east.spine1->" in line for line in lines)  # a dead switch logs nothing


def test_the_three_faults_and_the_failed_boot_rank_first_with_their_time_windows(
    incident: tuple[Store, CloudRun],
) -> None:
    store, _ = incident
    suspects = diagnose(store)
    top = [s.component for s in suspects[:4]]
    assert set(top) == {"west.host7/nic0", "west.leaf1-west.spine0", "east.gw0", "east.spine1"}
    rank = {s.component: s.rank for s in suspects}
    # the switch above the cables it took down, the gateway above its cables and WAN edge
    assert rank["east.spine1"] < min(rank["east.leaf0-east.spine1"], rank["east.leaf1-east.spine1"])
    assert rank["east.gw0"] < min(rank["east.leaf1-east.gw0"], rank["east.gw0-east.wan"], rank["east.wan"])
    link = next(s for s in suspects if s.component == "west.leaf1-west.spine0")
    start = read_meta(store).start + timedelta(seconds=1.0)  # the run starts 1 s into the log
    assert link.since == start + timedelta(seconds=0.2)  # its ports went down at 200 ms
    assert link.until is not None and start + timedelta(seconds=0.35) <= link.until <= start + timedelta(
        seconds=1.9
    )


def test_rows_stored_on_change_are_the_engines_rates_at_every_instant(
    incident: tuple[Store, CloudRun],
) -> None:
    store, hit = incident
    meta = read_meta(store)
    sample, flow, rate, _, _, times = _flow_samples(store, meta)
    stored = {(int(i), int(f)): r for i, f, r in zip(sample, flow, rate, strict=True)}
    history = hit.history
    assert history is not None
    rows = store.query("SELECT count(*) FROM twin_flow_samples")[1][0][0]
    assert rows < len(stored) / 2  # on change: fewer rows than flow-instants (4x on this run)
    # recompute a few instants from scratch: max-min over the fabric as changed by then
    for i in (3, 40, 90, 200):
        t = times[i] - 1.0  # run time
        capacity = hit.capacity_bps.astype(float).copy()
        paths = history.paths
        for change in sorted(history.changes, key=lambda c: c.time_s):
            if change.time_s > t:
                break
            capacity[change.link_ids] = change.capacity_bps
            if change.paths is not None:
                paths = paths.replace(np.asarray(change.flows), change.paths)
        active = np.flatnonzero((hit.start_s <= t) & (t < hit.finish_s - history.latency_s))
        sub = paths.take(active)
        expected = max_min_rates(
            sub.indptr, sub.link_ids, capacity, history.rate_cap_bps[active], sub.weights
        )
        got = {f: stored[(i, f)] for f in active.tolist() if (i, f) in stored}
        assert got, f"no flow sampled at instant {i}"
        for f, r in got.items():
            assert r == pytest.approx(float(expected[active.tolist().index(f)]), rel=1e-9)


def test_todays_component_names_and_fault_keys_keep_working(tmp_path: Path) -> None:
    store, _ = _emit(
        tmp_path,
        [
            "federation.sites.1.faults=[{kind: nic, target: host3/nic0, at: 100ms, until: 400ms}, "
            "{kind: switch, target: spine1, at: 5s, until: 5.5s}]",
            "federation.wan_faults=[{between: [east, west], at: 8s, until: 8.5s}]",
        ],
    )
    names = {s.component: s.kind for s in diagnose(store)[:8]}
    assert names.get("west.host3/nic0") == "nic"
    assert names.get("west.spine1") == "switch"
    assert names.get("east.gw0") == "gateway"
    assert names.get("east.wan-west.wan") == "wan-link"
    assert names.get("west.host7/nic0") == "nic"


def test_a_flapping_gateway_is_named_each_time_it_fails(tmp_path: Path) -> None:
    # east's gateways fail in turn at 1.5 s (gw0), 11.5 s (gw1, which took over), 21.5 s (gw0)
    store, hit = _emit(
        tmp_path, ["federation.gateway_faults=[{site: east, at: 1.5s, flap: {period: 10s, count: 3}}]"]
    )
    assert [f.at_s for f in hit.failovers] == [1.5, 11.5, 21.5]
    suspects = diagnose(store)
    found = {s.component: s for s in suspects[:8]}
    assert found["east.gw0"].kind == found["east.gw1"].kind == "gateway"
    start = read_meta(store).start + timedelta(seconds=1.0)  # the run starts 1 s into the log
    assert found["east.gw0"].since == start + timedelta(seconds=1.5)
    assert found["east.gw1"].since == start + timedelta(seconds=11.5)
    rank = {s.component: s.rank for s in suspects}
    for gw in ("east.gw0", "east.gw1"):  # each gateway above the cables it took down
        assert rank[gw] < min(rank[f"east.leaf1-{gw}"], rank[f"{gw}-east.wan"])


def test_the_same_cloud_and_seed_give_the_same_operations_data(tmp_path: Path) -> None:
    first, _ = _emit(tmp_path / "a", THREE) if (tmp_path / "a").mkdir() is None else (None, None)
    second, _ = _emit(tmp_path / "b", THREE) if (tmp_path / "b").mkdir() is None else (None, None)
    assert first is not None and second is not None
    query = "SELECT * FROM twin_flow_samples ORDER BY ts, flow"
    assert first.query(query)[1] == second.query(query)[1]
    lines = "SELECT ts, content FROM ops_lines ORDER BY ts, content"
    assert first.query(lines)[1] == second.query(lines)[1]


def test_a_version_1_store_is_upgraded_in_place(tmp_path: Path) -> None:
    with Store(tmp_path / "old.duckdb") as store:
        store.ensure_schema(
            "twin",
            1,
            [
                "CREATE TABLE twin_runs (run VARCHAR PRIMARY KEY, strategy VARCHAR, start_ts TIMESTAMP, "
                "end_ts TIMESTAMP, sample_s DOUBLE, log_prefix VARCHAR)",
                "CREATE TABLE twin_flow_samples (run VARCHAR, ts TIMESTAMP, flow INTEGER, src VARCHAR, "
                "dst VARCHAR, rate_bps DOUBLE, cap_bps DOUBLE, path INTEGER[])",
                "CREATE TABLE twin_nic_counters (run VARCHAR, ts TIMESTAMP, nic VARCHAR, "
                "pfc_pause_rx BIGINT, "
                "ecn_marked BIGINT, cnp_sent BIGINT, ack_timeouts BIGINT)",
            ],
        )
        ensure_twin_schema(store)
        assert store.schema_version("twin") == TWIN_SCHEMA_VERSION
        columns = [r[0] for r in store.query("DESCRIBE twin_flow_samples")[1]]
        assert columns[-1] == "until_ts"


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("federation.wan_faults=[{between: [east, west], at: 1s}]", "federation.wan_faults.0"),
        (
            "federation.wan_faults=[{between: [east, mars], at: 1s, until: 2s}]",
            "federation.wan_faults.0.between.1",
        ),
        ("federation.gateway_faults.0.until=1s", "federation.gateway_faults.0.until"),
        (
            "federation.gateway_faults=[{site: east, at: 1s, until: 2s, flap: {period: 1s, count: 2}}]",
            "federation.gateway_faults.0.flap",
        ),
        (
            "federation.gateway_faults=[{site: east, flap: {period: 1s, count: 2, down: 2s}}]",
            "federation.gateway_faults.0.flap",
        ),
        (
            "federation.gateway_faults=[{site: east, flap: {period: 1s, count: 0}}]",
            "federation.gateway_faults.0.flap.count",
        ),
        ("telemetry.sample=0", "telemetry.sample"),
    ],
)
def test_bad_new_fault_keys_are_one_line_naming_the_field(tmp_path: Path, override: str, field: str) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    done = cloudtwin("evaluate", "examples/one-cloud.yaml", "--no-store", "--set", override, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip()
    assert field in message and "\n" not in message and "Traceback" not in message


def test_diagnose_json_gives_each_suspects_time_window(closed: Path) -> None:
    done = cloudtwin("diagnose", "--db", str(closed), "--top", "3", "--json")
    assert done.returncode == 0, done.stderr
    suspects = json.loads(done.stdout)["suspects"]
    assert all("since" in s and "until" in s for s in suspects)


def test_the_diagnosis_page_draws_the_sites_side_by_side(incident: tuple[Store, CloudRun]) -> None:
    from cloudtwin.service.fabric import read_fabric

    store, _ = incident
    fabric = read_fabric(store)
    east = [n for n in fabric.nodes if n.name.startswith("east.")]
    west = [n for n in fabric.nodes if n.name.startswith("west.")]
    assert east and west and max(n.x for n in east) < min(n.x for n in west)
    tiers = {n.name: n.y for n in fabric.nodes}
    assert tiers["east.leaf0"] < tiers["east.spine0"] < tiers["east.gw0"] < tiers["east.wan"]
    assert ("east.wan", "west.wan") in {tuple(c) for c in fabric.cables}

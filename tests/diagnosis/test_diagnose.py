"""`cloudtwin diagnose` on the shipped fault example, on other fault locations, and on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from tests.cli.cli_helpers import REPO, cloudtwin

from cloudtwin.cli.app import main
from cloudtwin.diagnosis import EmitConfig, emit_run, sample_rates
from cloudtwin.diagnosis.emit import run_records
from cloudtwin.scenario.loader import load_scenario
from cloudtwin.store import Store
from cloudtwin.twin import simulate_faulted

EXAMPLE = REPO / "examples" / "diagnose.yaml"


def ranked(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    code = main(["diagnose", *args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)["suspects"]  # type: ignore[no-any-return]


def test_shipped_example_ranks_the_injected_cable_first(tmp_path: Path) -> None:
    injected = yaml.safe_load(EXAMPLE.read_text())["faults"][0]["target"]
    done = cloudtwin("diagnose", str(EXAMPLE), "--db", str(tmp_path / "d.duckdb"), "--json")
    assert done.returncode == 0, done.stderr
    suspects = json.loads(done.stdout)["suspects"]
    assert suspects[0]["component"] == injected == "leaf1-spine2"
    assert suspects[0]["kind"] == "link"
    # both kinds of evidence point at it, and it clearly leads
    assert suspects[0]["tomography"] == 1.0 and suspects[0]["logs"] == 1.0
    assert suspects[0]["score"] > suspects[1]["score"] + 0.25
    # the table form, from the same store without simulating again
    table = cloudtwin("diagnose", "--db", str(tmp_path / "d.duckdb"), "--top", "3")
    assert table.returncode == 0 and "leaf1-spine2" in table.stdout.splitlines()[4]


@pytest.mark.parametrize(
    ("overrides", "expected", "kind"),
    [
        (["seed=7", "faults.0.target=leaf3-spine0"], "leaf3-spine0", "link"),
        (["seed=11", "faults.0.target=spine1-leaf2", "faults.0.at=200ms"], "leaf2-spine1", "link"),
        (["faults.0.kind=nic", "faults.0.target=host6/nic0"], "host6/nic0", "nic"),
        (["faults.0.kind=switch", "faults.0.target=spine1"], "spine1", "switch"),
        (["routing.strategy=pinning", "seed=5", "faults.0.target=leaf2-spine3"], "leaf2-spine3", "link"),
        (["routing.strategy=pinning", "reaction.pinning_install=source-port"], "leaf1-spine2", "link"),
    ],
)
def test_other_faults_and_seeds_are_found_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: list[str], expected: str, kind: str
) -> None:
    sets = [a for o in overrides for a in ("--set", o)]
    suspects = ranked(capsys, str(EXAMPLE), "--db", str(tmp_path / "d.duckdb"), *sets)
    assert (suspects[0]["component"], suspects[0]["kind"]) == (expected, kind)


def test_the_reported_link_takes_the_votes_of_the_flows_it_stalled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suspects = ranked(capsys, str(EXAMPLE), "--db", str(tmp_path / "d.duckdb"), "--top", "30")
    by_tomography = [s["component"] for s in suspects if s["kind"] == "link" and s["tomography"] > 0]
    # every stalled flow went leaf0 -> spine2 -> leaf1: leaf1-spine2's ports and sessions went
    # down, so it explains them, and leaf0-spine2 beside it on their paths gets no vote
    assert by_tomography == ["leaf1-spine2"]
    decoys = [s for s in suspects if "TRANSCEIVER-4-DDM_WARN" in s["evidence"]]
    assert decoys and all(s["tomography"] == 0.0 for s in decoys)


def test_emitting_is_deterministic_and_idempotent(tmp_path: Path) -> None:
    scenario = load_scenario(EXAMPLE.read_text())
    run = simulate_faulted(scenario)
    end = float(run.result.finish_s.max())
    assert run_records(run, EmitConfig(), end) == run_records(simulate_faulted(scenario), EmitConfig(), end)
    with Store(tmp_path / "d.duckdb") as store:
        emit_run(store, run)
        sql = "SELECT (SELECT count(*) FROM ops_lines), (SELECT count(*) FROM twin_flow_samples)"
        counts = store.query(sql)
        emit_run(store, run)
        assert store.query(sql) == counts
        stalled = store.query("SELECT sum(ack_timeouts), sum(ecn_marked) FROM twin_nic_counters")[1][0]
        assert stalled[0] > 0 and stalled[1] > 0


def test_missing_or_empty_store_and_bad_scenario_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagnose", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no store there" in capsys.readouterr().err
    with Store(tmp_path / "empty.duckdb"):
        pass
    assert main(["diagnose", "--db", str(tmp_path / "empty.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no twin run" in err
    assert main(["diagnose", str(tmp_path / "missing.yaml"), "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "no such scenario file" in capsys.readouterr().err
    bad = ["--set", "faults.0.target=leaf9-spine0"]
    assert main(["diagnose", str(EXAMPLE), "--db", str(tmp_path / "x.duckdb"), *bad]) == 2
    assert "leaf9" in capsys.readouterr().err


def test_overlapping_faults_all_rank_in_the_top_six_as_the_doc_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = str(REPO / "examples" / "resiliency.yaml")
    top = [s["component"] for s in ranked(capsys, example, "--db", str(tmp_path / "r.duckdb"), "--top", "6")]
    # the spine, the failed and the flapping cable, and the optic degraded from the start
    # (invisible to tomography, but both its ends log FEC errors)
    assert {"spine3", "leaf0-spine1", "leaf5-spine2", "leaf2-spine0"} <= set(top)
    assert top[0] == "spine3"  # above the cables it took down
    assert "leaf0" not in top  # it lost two uplinks, but reported both itself: it is alive


def test_sampled_rates_are_the_engines_they_add_up_to_each_flows_bytes() -> None:
    run = simulate_faulted(load_scenario(EXAMPLE.read_text()))
    samples = sample_rates(run, 1e-3)
    sent_bits = np.nansum(samples.rate_bps, axis=0) * samples.interval_s
    size_bits = run.bench.size_bytes[samples.flows] * 8
    assert np.abs(sent_bits / size_bits - 1).max() < 0.01  # left-point sums of a step function


COLLECTIVE = """
name: collective-fault
seed: 2
fabric: {kind: leaf-spine, leaves: 4, spines: 4, hosts_per_leaf: 2, host_link: 100Gbps, uplink: 100Gbps}
workloads:
  - {name: ar, kind: collective, op: allreduce, size: 256MiB}
faults:
  - {kind: link, target: leaf2-spine1, at: 5ms, until: 300ms}
"""


def test_a_collective_reports_per_qp_and_is_diagnosed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "collective.yaml"
    scenario.write_text(COLLECTIVE)
    suspects = ranked(capsys, str(scenario), "--db", str(tmp_path / "c.duckdb"), "--top", "3")
    assert suspects[0]["component"] == "leaf2-spine1"
    assert suspects[0]["degraded_samples"] > 0  # the QPs' rounds add up to one telemetry series

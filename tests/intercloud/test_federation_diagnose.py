"""A failed gateway in the operations data of a federation run: `diagnose` ranks it first."""

from __future__ import annotations

from pathlib import Path

from cloudtwin.diagnosis import diagnose
from cloudtwin.diagnosis.emit import EmitConfig
from cloudtwin.diagnosis.federation import emit_federation, federation_records
from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.scenario.federation import load_federation
from cloudtwin.store.database import Store
from cloudtwin.twin.federation import simulate_federation

REPO = Path(__file__).resolve().parents[2]


def _run(*overrides: str):  # noqa: ANN202
    text = (REPO / "examples" / "intercloud-failover.yaml").read_text()
    return simulate_federation(
        plan_federation(load_federation(text, overrides=["traffic.0.size=256MiB", *overrides]))
    )


def test_diagnose_ranks_the_failed_gateway_first(tmp_path: Path) -> None:
    with Store(tmp_path / "ops.duckdb") as store:
        emit_federation(store, _run())
        suspects = diagnose(store)
    assert (suspects[0].component, suspects[0].kind) == ("east.gw0", "gateway")
    assert suspects[0].degraded_samples > 0


def test_the_standby_and_the_peers_log_the_failover_at_the_model_times() -> None:
    run = _run()
    config = EmitConfig(noise_per_switch_s=0.0)
    records = federation_records(run, config, 10.0)
    (info,) = run.failovers
    lines = {
        r.content.split(":")[0]: (r.source, (r.timestamp - config.start).total_seconds() - config.history_s)
        for r in records
    }
    assert lines["%VRRP-6-STATECHANGE"][0] == "east.gw1"
    assert abs(lines["%VRRP-6-STATECHANGE"][1] - (info.at_s + info.detection_s + info.election_s)) < 1e-6
    assert lines["%TUNNEL-5-UPDOWN"][0] == "west.gw0"
    assert {r.source for r in records if "IF_DOWN" in r.content} == {"east.leaf0", "east.wan"}


def test_same_seed_same_operations_data() -> None:
    config = EmitConfig(noise_per_switch_s=2.0)
    first = federation_records(_run(), config, 5.0)
    again = federation_records(_run(), config, 5.0)
    assert first == again and len(first) > 50

"""A stored evaluation with live migrations shows their table on its run page."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from tests.service.conftest import TOKEN

from cloudtwin.evaluation import usecases
from cloudtwin.scenario.loader import load_scenario
from cloudtwin.service import ServiceSettings, create_app
from cloudtwin.service.examples import default_examples_dir
from cloudtwin.store.database import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "migration.yaml"


def test_the_run_page_lists_each_migration_per_strategy(db: Path, tmp_path: Path) -> None:
    with Store(db) as store:
        stored = usecases.evaluate(load_scenario(EXAMPLE.read_text()), ["ecmp", "pinning"], store=store)
    document = stored.results.to_json()
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    settings = ServiceSettings(
        db=db, token=TOKEN, examples_dir=default_examples_dir(), snapshot_dir=snapshots
    )
    with TestClient(create_app(settings)) as client:
        page = client.get(f"/runs/{stored.run_id}")
        plain = client.get("/runs/1")
    assert page.status_code == 200 and 'id="migrations"' in page.text
    for strategy in ("ecmp", "pinning"):
        web1 = document["strategies"][strategy]["migrations"]["web1"]
        assert f"<td>{strategy}</td><td>web1</td><td>{web1['total_time_s']:.3f}</td>" in page.text
    assert plain.status_code == 200 and 'id="migrations"' not in plain.text

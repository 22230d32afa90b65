"""One cloud in the store: `evaluate --db` keeps the cloud run beside single-fabric runs,
`results list/show` read it; `diagnose` run twice ranks the same with the same evidence,
and every message it cites is found by `logs search`; background lines are never cited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin

CLOUD = str(REPO / "examples" / "one-cloud.yaml")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cloud-store")
    db = folder / "s.duckdb"
    done = cloudtwin(
        "evaluate", CLOUD, "--strategies", "ecmp,pinning", "--db", str(db), "--out", "rep", cwd=folder
    )
    assert done.returncode == 0, done.stderr
    assert "stored as run 1" in done.stdout
    return db


def test_results_list_and_show_read_the_cloud_run(store: Path, tmp_path: Path) -> None:
    runs = json.loads(cloudtwin("results", "list", "--db", str(store), "--json").stdout)
    assert [(r["run_id"], r["scenario"], r["strategies"]) for r in runs] == [(1, "one-cloud", "ecmp,pinning")]
    assert runs[0]["recommendation"].startswith("ecmp: ")
    text = cloudtwin("results", "show", "1", "--db", str(store), "--json").stdout
    shown = json.loads(text)
    written = (store.parent / "rep" / "results.json").read_text()
    report = json.loads(written)
    assert shown["kind"] == "cloud" and shown["strategies"] == report["strategies"]
    # read back through its type, the run is what was written: every key, in order, each
    # number as written; the store's bookkeeping comes first
    assert list(shown)[:3] == ["run_id", "created_at", "flow_rows"]
    results = {k: v for k, v in shown.items() if k not in ("run_id", "created_at", "flow_rows")}
    assert json.dumps(results, indent=2) + "\n" == written
    table = cloudtwin("results", "show", "1", "--db", str(store)).stdout
    assert "Strategies compared" in table and "Live migrations" in table and "Recommendation: ecmp" in table


def test_a_single_fabric_run_is_stored_beside_it(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "both.duckdb"
    copy.write_bytes(store.read_bytes())
    done = cloudtwin(
        "evaluate",
        "examples/leaf-spine-perftest.yaml",
        "--strategies",
        "ecmp",
        "--db",
        str(copy),
        "--out",
        str(tmp_path / "r"),
    )
    assert done.returncode == 0, done.stderr
    runs = json.loads(cloudtwin("results", "list", "--db", str(copy), "--json").stdout)
    assert [r["scenario"] for r in runs] == ["leaf-spine-perftest", "one-cloud"]


def test_a_run_stored_in_another_form_is_refused_in_one_line(store: Path, tmp_path: Path) -> None:
    """A stored run whose results this cloudtwin does not read (another version's form) is
    refused naming the run and the field, exit 2; the store and its other rows stay."""
    from cloudtwin.store.database import Store

    copy = tmp_path / "other.duckdb"
    copy.write_bytes(store.read_bytes())
    with Store(copy) as db:
        document = json.loads(db.query("SELECT document FROM eval_runs WHERE run_id = 1")[1][0][0])
        del document["strategies"]["ecmp"]["sites"]
        db.query("UPDATE eval_runs SET document = ? WHERE run_id = 1", [json.dumps(document)])
    for extra in ([], ["--json"]):
        done = cloudtwin("results", "show", "1", "--db", str(copy), *extra)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert "run 1: its stored results do not read" in done.stderr
        assert "strategies.ecmp.sites: field required" in done.stderr
    listed = json.loads(cloudtwin("results", "list", "--db", str(copy), "--json").stdout)
    assert [r["run_id"] for r in listed] == [1]


def _diagnosis(db: Path) -> list[dict[str, object]]:
    done = cloudtwin("diagnose", CLOUD, "--db", str(db), "--top", "5", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["suspects"]


def test_diagnose_twice_gives_the_same_ranking_and_evidence(tmp_path: Path) -> None:
    db = tmp_path / "d.duckdb"
    first, second = _diagnosis(db), _diagnosis(db)
    assert first == second
    assert first[0]["component"] == "west.host7/nic0"
    assert list(first[0]["messages"].values()) == [1]  # the failed boot, cited once however often it ran


def test_every_cited_message_is_found_by_logs_search(tmp_path: Path) -> None:
    db = tmp_path / "d.duckdb"
    suspects = _diagnosis(db)
    cited = {label for s in suspects for label in s["messages"] if label != "cables implicated"}
    assert cited
    for label in cited:
        word = str(label).split()[0]
        found = json.loads(cloudtwin("logs", "search", word, "--db", str(db), "--json").stdout)
        assert found, label  # one JSON object per stored line that holds it
    # background lines (clock sync, temperature) weigh in the score but are never evidence
    assert not any("NTP-6" in str(label) or "TEMP" in str(label) for label in cited)

"""One cloud in the store: `evaluate --db` keeps the cloud run beside single-fabric runs,
`results list/show` read it; `diagnose` run twice ranks the same with the same evidence,
a single-fabric diagnosis shares the store with the cloud's (each run by its name), and
every message it cites is found by `logs search`; background lines are never cited."""

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


def _diagnosis(db: Path, *args: str) -> list[dict[str, object]]:
    done = cloudtwin("diagnose", *(args or (CLOUD,)), "--db", str(db), "--top", "5", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["suspects"]


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    """A store the cloud was diagnosed into once, and that diagnosis."""
    db = tmp_path_factory.mktemp("diagnosed") / "d.duckdb"
    return db, _diagnosis(db)


def _copy(db: Path, tmp_path: Path) -> Path:
    copy = tmp_path / db.name
    copy.write_bytes(db.read_bytes())
    return copy


def test_diagnose_twice_gives_the_same_ranking_and_evidence(
    diagnosed: tuple[Path, list[dict[str, object]]], tmp_path: Path
) -> None:
    db, first = diagnosed
    second = _diagnosis(_copy(db, tmp_path))
    assert first == second
    assert first[0]["component"] == "west.host7/nic0"
    assert list(first[0]["messages"].values()) == [1]  # the failed boot, cited once however often it ran


def test_cloud_and_single_fabric_diagnoses_share_a_store(
    diagnosed: tuple[Path, list[dict[str, object]]], tmp_path: Path
) -> None:
    cloud_db, cloud = diagnosed
    single = ("examples/diagnose.yaml",)
    alone = _diagnosis(tmp_path / "alone.duckdb", *single)
    db = _copy(cloud_db, tmp_path)
    beside = _diagnosis(db, *single)
    assert _same(beside, alone)  # beside the cloud, as in a store of its own
    assert _diagnosis(db, "--run", "one-cloud") == cloud  # and the cloud's run is still there
    latest = json.loads(cloudtwin("diagnose", "--db", str(db), "--top", "5", "--json").stdout)
    assert (latest["run"], latest["suspects"]) == ("diagnose", beside)  # the latest written by default
    assert _diagnosis(db) == cloud  # the cloud again: nothing piles up in either run
    assert _diagnosis(db, "--run", "diagnose") == beside
    table = cloudtwin("diagnose", "--db", str(db), "--top", "3").stdout
    assert "Likely root causes in run one-cloud" in table and "west.host7/nic0" in table
    assert "also holds the twin run diagnose" in table
    # each run's evidence is found under its own name, and only there
    def found(run: str) -> int:
        done = cloudtwin("logs", "search", "ATTESTATION", "--run", run, "--db", str(db), "--json")
        assert done.returncode == 0, done.stderr
        return len(json.loads(done.stdout))

    assert (found("one-cloud"), found("diagnose")) == (1, 0)
    down = cloudtwin("logs", "search", "state to down", "--run", "diagnose", "--db", str(db), "--json")
    sources = [r["source"] for r in json.loads(down.stdout)]
    assert sources and all(s.startswith("twin/diagnose/") for s in sources)


def _same(got: list[dict[str, object]], want: list[dict[str, object]]) -> bool:
    """The same ranking with the same evidence; scores within 5 %: the runs of a store share
    its template miner, and another run's lines can generalise a template that a line of
    background noise falls into (docs/diagnose.md, Limits)."""
    def exact(suspects: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in s.items() if k not in ("score", "tomography", "logs")} for s in suspects]

    scores = [(float(g["score"]), float(w["score"])) for g, w in zip(got, want, strict=True)]  # type: ignore[arg-type]
    return exact(got) == exact(want) and all(g == pytest.approx(w, rel=0.05) for g, w in scores)


@pytest.mark.parametrize("command", [("diagnose",), ("logs", "search", "down")])
def test_an_unknown_run_is_one_line_naming_the_runs_held(
    diagnosed: tuple[Path, list[dict[str, object]]], command: tuple[str, ...]
) -> None:
    db, _ = diagnosed
    done = cloudtwin(*command, "--run", "bogus", "--db", str(db))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert "--run bogus" in done.stderr and "one-cloud" in done.stderr


def test_a_scenario_and_another_run_name_are_refused(tmp_path: Path) -> None:
    done = cloudtwin("diagnose", CLOUD, "--run", "diagnose", "--db", str(tmp_path / "x.duckdb"))
    assert done.returncode == 2 and "ranks its own run 'one-cloud'" in done.stderr
    assert not (tmp_path / "x.duckdb").exists()


def test_every_cited_message_is_found_by_logs_search(diagnosed: tuple[Path, list[dict[str, object]]]) -> None:
    db, suspects = diagnosed
    cited = {label for s in suspects for label in s["messages"] if label != "cables implicated"}
    assert cited
    for label in cited:
        word = str(label).split()[0]
        found = json.loads(cloudtwin("logs", "search", word, "--db", str(db), "--json").stdout)
        assert found, label  # one JSON object per stored line that holds it
    # background lines (clock sync, temperature) weigh in the score but are never evidence
    assert not any("NTP-6" in str(label) or "TEMP" in str(label) for label in cited)


def test_a_store_from_before_runs_were_kept_apart_is_read_and_upgraded(
    diagnosed: tuple[Path, list[dict[str, object]]], tmp_path: Path
) -> None:
    """A store written when it held one twin run (no `seq` in `twin_runs`, no `run` in
    `ops_attestation`) ranks as it did, and a re-run upgrades it without piling up."""
    from cloudtwin.store.database import Store

    db, cloud = diagnosed
    old = _copy(db, tmp_path)
    with Store(old) as store, store.transaction() as con:
        con.execute("ALTER TABLE twin_runs DROP COLUMN seq")
        con.execute("ALTER TABLE ops_attestation DROP COLUMN run")
        con.execute("UPDATE schema_version SET version = 2 WHERE component = 'twin'")
        con.execute("UPDATE schema_version SET version = 1 WHERE component = 'attestation'")
    read = cloudtwin("diagnose", "--db", str(old), "--top", "5", "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["suspects"] == cloud
    assert _diagnosis(old) == cloud  # written to: upgraded in place, the failed boot still cited once
    with Store(old, read_only=True) as store:
        assert store.schema_version("twin") == 3 and store.schema_version("attestation") == 2

"""`cloudtwin sweep` as a user runs it: summaries, bad input, and a sweep killed half way."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import socket
import subprocess
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from tests.cli.cli_helpers import CLOUDTWIN, REPO, cloudtwin

from cloudtwin.cli.app import main
from cloudtwin.store.database import Store

SMALL = """name: small
fabric: {kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 2}
workload: {kind: perftest, pattern: permutation, size: 1MiB}
"""


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path


def in_process(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `cloudtwin ARGS` run in this process (what the
    console script calls), to keep the many short cases fast."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def count_points(db: Path) -> int:
    with Store(db, read_only=True) as store:
        return int(store.query("SELECT count(*) FROM sweep_points")[1][0][0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_summary_is_the_mean_and_t_interval_of_the_runs(small: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    done = cloudtwin("sweep", str(small), "--vary", "seed=1..3", "--vary", "routing.strategy=ecmp,pinning",
                     "--db", str(db), "--json", "--plot", str(tmp_path / "plot.png"), "--workers", "2")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["run"]["executed"] == 6 and document["summary"]["keys"] == ["routing.strategy"]
    groups = {g["values"]["routing.strategy"]: g for g in document["summary"]["groups"]}
    for strategy, group in groups.items():
        values = []
        for seed in (1, 2, 3):
            sets = ["--set", f"seed={seed}", "--set", f"routing.strategy={strategy}"]
            code, out, _ = in_process("run", str(small), *sets, "--json")
            values.append(json.loads(out)["aggregate_gbps"])
        mean = sum(values) / 3
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
        half = 4.302652729911275 * sd / math.sqrt(3)  # t(0.975, 2 degrees of freedom)
        assert group["n"] == 3
        assert group["mean"] == pytest.approx(mean, rel=1e-12)
        assert group["ci95_low"] == pytest.approx(mean - half, rel=1e-9, abs=1e-9)
        assert group["ci95_high"] == pytest.approx(mean + half, rel=1e-9, abs=1e-9)
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"
    assert count_points(db) == 6


def test_table_output_names_groups_and_the_store(small: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    varies = ["--vary", "seed=1,2", "--vary", "fabric.spines=1,2"]
    code, out, err = in_process("sweep", str(small), *varies, "--db", str(db), "--executor", "serial")
    assert code == 0, err
    assert "fabric.spines" in out and "aggregate_gbps (run) over seed, fabric.spines" in out
    assert "4 points: 0 already stored, 4 run" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vary", "fabric.spinez=4,8"], "vary fabric.spinez: not a key of the scenario"),
        (["--vary", "seed=1..x"], "vary seed: '1..x' is not a range"),
        (["--vary", "seed=9..1"], "vary seed: range '9..1' runs backwards"),
        (["--vary", "fabric.spines=2,0"], "vary fabric.spines=0"),
        (["--vary", "seed=1,2", "--command", "train"], "workload.kind"),
        (["--vary", "seed=1,2", "--command", "compare", "--strategies", "ecmp,nosuch"], "nosuch"),
        (["--vary", "seed=1,2", "--x", "fabric.leaves"], "x: fabric.leaves is not a varied key"),
        (["--vary", "seed=1,2", "--address", "nonsense"], "address 'nonsense': expected auto or HOST:PORT"),
        (["--vary", "seed=1,2", "--workers", "0"], "workers: at least 1"),
        (["--vary", "seed=1,2", "--plot", "."], "--plot .: the file name must end in"),
    ],
)
def test_bad_input_is_one_line_exit_2_before_any_point(
    small: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    db = tmp_path / "s.duckdb"
    code, _, err = in_process("sweep", str(small), *args, "--db", str(db))
    assert code == 2, err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not db.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # leaves=8: 8 x 2 NICs, 8 leaves and 2 spines (26 nodes), 64 links and 16 permutation
        # flows. Bytes: links 64 x 73 = 4,672; nodes 26 x 33 = 858; out-links 26 x 8 x 8 = 1,664;
        # hop table 26 x 8 x 12 = 2,496; flows 16 x 96 = 1,536; paths 16 x 5 x 24 = 1,920;
        # candidates 16 x 8 x 16 = 2,048: 15,194 B = 14.8 KiB. leaves=4 needs 6,158 B.
        (["--set", "limits.memory=10KiB", "--vary", "seed=1,2", "--vary", "fabric.leaves=4,8"],
         "vary seed=1 fabric.leaves=8: the scenario needs about 14.8KiB of memory "),
        # 3,600 points; only leaves x hosts_per_leaf above 20 hosts (= permutation flows) is
        # refused, and none of those pairs a key's i-th values with the others' i-th.
        (["--set", "limits.flows=20", "--vary", "seed=1..400", "--vary", "fabric.leaves=8,4,6",
          "--vary", "fabric.hosts_per_leaf=2,4,3"],
         "vary seed=1 fabric.leaves=8 fabric.hosts_per_leaf=4: the scenario makes 32 flows in one "
         "simulation, above limits.flows = 20"),
    ],
)
def test_a_point_over_the_limits_is_refused_before_any_point_runs(
    small: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    db = tmp_path / "s.duckdb"
    done = cloudtwin("sweep", str(small), *args, "--db", str(db))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"cloudtwin: error: {message}"), done.stderr
    assert "limits." in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == "" and not db.exists()


def test_a_million_points_with_checks_above_the_limit_are_refused_before_anything_runs(
    small: Path, tmp_path: Path
) -> None:
    # 1,000 x 1,000 points: too many to check one by one, so the range ends and the largest
    # point are checked (4 checks of well over a microsecond each), which the limit refuses.
    # The timeout only turns a sweep that goes on to run its points into a failure (and
    # kills its session, workers included).
    db = tmp_path / "s.duckdb"
    args = ["sweep", str(small), "--vary", "fabric.spines=1..1000", "--vary", "fabric.leaves=1..1000",
            "--check-limit", "0.000001", "--db", str(db)]
    with subprocess.Popen([str(CLOUDTWIN), *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as child:
        try:
            out, err = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            pytest.fail("the sweep was not refused: it was still running after 60 s")
    done = subprocess.CompletedProcess(args, child.returncode, out, err)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        "cloudtwin: error: checks: checking the sweep (4 checks, one per varied value, instead of "
        "1,000,000 point by point; about "
    ), done.stderr
    assert "more than the 1e-06 s limit; --check-limit " in done.stderr and " lifts it" in done.stderr
    assert " would take about 0 s" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == "" and not db.exists()


PICKY = """from cloudtwin.routing.strategy import load_strategy


class Picky:
    name = "picky"

    def route(self, context):
        if context.topology.link_count < 30:
            raise ValueError(f"only {context.topology.link_count} links")
        return load_strategy("ecmp").route(context)
"""


def test_points_failing_while_running_are_listed_stored_and_exit_2(small: Path, tmp_path: Path) -> None:
    # 4 leaves x 2 NICs: 2 x (8 + 4 x spines) links: 24 with one spine, 32 with two.
    (tmp_path / "picky.py").write_text(PICKY)
    db = tmp_path / "s.duckdb"
    args = ["sweep", str(small), "--set", "routing.strategy=picky:Picky", "--vary", "seed=1,2",
            "--vary", "fabric.spines=1,2", "--db", str(db), "--executor", "serial"]
    reason = "routing.strategy: picky:Picky: route() failed: ValueError: only 24 links"
    first = f"seed=1 fabric.spines=1: {reason}"
    done = cloudtwin(*args, "--json", env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"cloudtwin: error: 2 of 4 points failed (stored with their errors); first: {first}"
    )
    document = json.loads(done.stdout)
    assert document["failed"] == [
        {"overrides": ["seed=1", "fabric.spines=1"], "status": "error", "error": reason},
        {"overrides": ["seed=2", "fabric.spines=1"], "status": "error", "error": reason},
    ]
    groups = {g["values"]["fabric.spines"]: (g["n"], g["failed"]) for g in document["summary"]["groups"]}
    assert groups == {"1": (0, 2), "2": (2, 0)}
    assert count_points(db) == 4
    again = cloudtwin(*args, env={"PYTHONPATH": str(tmp_path)})  # nothing runs; same answer
    assert again.returncode == 2 and "4 points: 4 already stored, 0 run" in again.stdout
    assert f"failed: {first}\n" in again.stdout and "failed: seed=2 fabric.spines=1: " in again.stdout


def test_a_point_that_crashes_is_listed_and_exits_1(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cloudtwin.sweep import task as sweep_task

    real = sweep_task._RUNNERS["run"]

    def buggy(task: sweep_task.Task, scenario: Any) -> dict[str, Any]:
        if scenario.seed == 2:
            raise ZeroDivisionError("a bug")
        return real(task, scenario)

    monkeypatch.setitem(sweep_task._RUNNERS, "run", buggy)
    db = tmp_path / "s.duckdb"
    code, out, err = in_process("sweep", str(small), "--vary", "seed=1..3", "--db", str(db),
                                "--executor", "serial", "--json")
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        "cloudtwin: sweep: 1 of 3 points crashed (not stored; the same command runs them again); "
        "first: seed=2: ZeroDivisionError: a bug"
    )
    assert json.loads(out)["failed"] == [
        {"overrides": ["seed=2"], "status": "crash", "error": "ZeroDivisionError: a bug"}
    ]
    assert count_points(db) == 2


def test_an_unreachable_ray_address_is_refused_at_once(small: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    done = cloudtwin("sweep", str(small), "--vary", "seed=1,2", "--address", f"127.0.0.1:{free_port()}",
                     "--db", str(db))
    assert done.returncode == 2
    assert "no Ray cluster answers there" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not db.exists()


def test_an_unknown_metric_names_some_that_exist_and_keeps_the_results(small: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    code, _, err = in_process(
        "sweep", str(small), "--vary", "seed=1,2", "--metric", "nope", "--db", str(db), "--executor", "serial"
    )
    assert code == 2
    assert "metric nope: no such number in the results" in err and "aggregate_gbps" in err
    assert count_points(db) == 2


def sweep_40(db: Path) -> list[str]:
    return [
        str(CLOUDTWIN), "sweep", "examples/routing-strategies.yaml", "--command", "nccl-tests",
        "--set", "workload.rounds=8", "--vary", "seed=1..40", "--workers", "2", "--db", str(db), "--json",
    ]


@pytest.mark.slow
def test_a_sweep_killed_half_way_ends_with_exactly_its_points(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    env = {**os.environ, "COLUMNS": "200"}
    driver = subprocess.Popen(sweep_40(db), cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        done_before_kill = 0
        assert driver.stderr is not None
        for line in driver.stderr:
            if "/40 points" in line:
                done_before_kill = int(line.rsplit(": ", 1)[1].split("/")[0])
                if done_before_kill >= 15:
                    break
        assert 15 <= done_before_kill < 40, "the sweep finished before it could be killed"
        os.kill(driver.pid, signal.SIGKILL)  # the driver only: its workers must go by themselves
        driver.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _group_alive(driver.pid):
            time.sleep(0.2)
        assert not _group_alive(driver.pid), "workers outlived their killed driver"
    finally:
        if _group_alive(driver.pid):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    # what was stored survives the kill; only results of its last flush window (0.1 s) are
    # lost, and the next run computes exactly those again
    stored = count_points(db)
    assert 0 < stored <= done_before_kill
    second = subprocess.run(sweep_40(db), cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    run = json.loads(second.stdout)["run"]
    assert (run["skipped"], run["executed"]) == (stored, 40 - stored)
    assert count_points(db) == 40
    third = subprocess.run(sweep_40(db), cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    last = json.loads(third.stdout)["run"]
    assert (last["executed"], last["skipped"]) == (0, 40)
    assert count_points(db) == 40


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_a_terminated_sweep_stores_what_finished_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    env = {**os.environ, "COLUMNS": "200"}
    driver = subprocess.Popen(sweep_40(db), cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert driver.stderr is not None
        done = 0
        for line in driver.stderr:
            if "/40 points" in line:
                done = int(line.rsplit(": ", 1)[1].split("/")[0])
                if done >= 5:
                    break
        assert 5 <= done < 40
        driver.send_signal(signal.SIGTERM)
        rest = driver.stderr.read()
        assert driver.wait(timeout=60) == 130
    finally:
        if _group_alive(driver.pid):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    assert "sweep: interrupted after" in rest and "Traceback" not in rest
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _group_alive(driver.pid):
        time.sleep(0.2)
    assert not _group_alive(driver.pid)
    assert count_points(db) >= done


def test_a_plot_of_the_seed_alone_has_the_seed_on_its_x_axis(small: Path, tmp_path: Path) -> None:
    plot = tmp_path / "seeds.png"
    code, out, err = in_process("sweep", str(small), "--vary", "seed=1..3", "--executor", "serial",
                                "--db", str(tmp_path / "s.duckdb"), "--plot", str(plot))
    assert code == 0, err
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert err.strip().splitlines()[-1] == f"wrote {plot}"


def test_the_seed_summary_for_a_plot_has_one_group_per_seed(small: Path) -> None:
    from cloudtwin.store.sweeps import PointRecord
    from cloudtwin.sweep import Plan, Task, parse_vary, summarize
    from cloudtwin.sweep.plot import plot_summary

    task, plan = Task(SMALL, "small.yaml"), Plan((parse_vary("seed=1..3"), parse_vary("fabric.spines=1,2")))
    points = plan.points(task.digest)
    documents = {p.key: json.dumps({"aggregate_gbps": p.position}) for p in points}
    records = {p.key: PointRecord(p.key, p.overrides, "ok", documents[p.key], None, 0.0) for p in points}
    summary = summarize(plan, points, records, "aggregate_gbps", by_seed=True)
    assert [(g.values, g.n, g.mean) for g in summary.groups[:2]] == [
        ({"seed": "1", "fabric.spines": "1"}, 1, 0.0), ({"seed": "1", "fabric.spines": "2"}, 1, 1.0)
    ]
    figure = plot_summary(summary, "seed", ["fabric.spines"], "t")
    legend = figure.axes[0].get_legend()
    assert [text.get_text() for text in legend.get_texts()] == ["fabric.spines=1", "fabric.spines=2"]
    assert figure.axes[0].get_xlabel() == "seed"

"""A test that needs a shared dataset skips without it, naming it; where CI requires the
datasets (CLOUDTWIN_REQUIRE_DATASETS=1, set in .ci/run) the same test fails instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REQUIRE_DATASETS

REPO = Path(__file__).resolve().parents[1]
ONE_TEST = "tests/p4/test_stf.py::test_runner_priorities_drop_and_differences"


def _pytest(tmp_path: Path, require: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLOUDTWIN_TEST_DATASETS": str(tmp_path / "nowhere")}
    env.pop(REQUIRE_DATASETS, None)
    if require:
        env[REQUIRE_DATASETS] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", ONE_TEST, "-rs"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )


def test_a_missing_dataset_skips_unless_ci_requires_it(tmp_path: Path) -> None:
    skipped = _pytest(tmp_path, require=False)
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout
    assert "shared/datasets/p4c-stf" in skipped.stdout
    failed = _pytest(tmp_path, require=True)
    assert failed.returncode == 1 and "1 failed" in failed.stdout, failed.stdout
    assert f"{REQUIRE_DATASETS}=1 and a dataset is missing" in failed.stdout


def _ci(tmp_path: Path, failing: str) -> tuple[int, list[str]]:
    """.ci/run with a stand-in `make` first on PATH that records each call (its target and
    whether the datasets are required) and fails for the target `failing`."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    calls = tmp_path / f"calls-{failing or 'none'}"
    make = bin_ / "make"
    make.write_text(
        "#!/bin/sh\n"
        f'echo "$1 ${{{REQUIRE_DATASETS}:-unset}}" >> {calls}\n'
        f'[ "$1" != "{failing}" ]\n'
    )
    make.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}
    env.pop(REQUIRE_DATASETS, None)
    done = subprocess.run([str(REPO / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    return done.returncode, calls.read_text().splitlines()


def test_ci_runs_lint_and_tests_with_the_datasets_required(tmp_path: Path) -> None:
    code, calls = _ci(tmp_path, failing="")
    assert (code, calls) == (0, ["lint 1", "test 1"])
    # a lint error fails CI but the tests still run (one report shows both)
    assert _ci(tmp_path, failing="lint") == (1, ["lint 1", "test 1"])
    assert _ci(tmp_path, failing="test") == (1, ["lint 1", "test 1"])

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


def test_ci_requires_the_datasets_and_runs_make_test() -> None:
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert f"export {REQUIRE_DATASETS}=1" in lines
    assert lines.index(f"export {REQUIRE_DATASETS}=1") < lines.index("make test")

"""A test run stopped with SIGTERM (as `timeout` and CI runners stop it) still runs its clean-up when
the tests use the `sigterm_cleans_up` fixture (tests/conftest.py), as the namespace and QEMU tests do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

VICTIM = """
import time
from pathlib import Path

import pytest

MARKER = Path({marker!r})


@pytest.mark.usefixtures({fixtures})
def test_holds_a_resource():
    MARKER.write_text("made")
    try:
        time.sleep(120)
    finally:
        MARKER.unlink()
"""


@pytest.mark.parametrize(("fixture", "removed"), [(True, True), (False, False)])
def test_sigterm_runs_the_finally_blocks_only_with_the_fixture(
    tmp_path: Path, fixture: bool, removed: bool
) -> None:
    marker = tmp_path / "resource"
    victim = tmp_path / "test_victim.py"
    fixtures = '"sigterm_cleans_up"' if fixture else ""
    victim.write_text(VICTIM.format(marker=str(marker), fixtures=fixtures))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest", str(victim)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), run.communicate(timeout=10)[0] if run.poll() is not None else "not started"
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert marker.exists() != removed

"""`cloudtwin run` shows its progress on stderr when stderr is no terminal (a log, CI): a line
at most once a second, as `sweep` does, and nothing for a run over within its first second."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import count

import pytest
from tests.cli.cli_helpers import REPO

from cloudtwin.cli import output
from cloudtwin.cli.app import main

SCENARIO = str(REPO / "examples" / "leaf-spine-perftest.yaml")
ALL_TO_ALL = ("workload.pattern=all-to-all", "workload.size=1MiB")  # 2 tenants x 64 x 63 = 8,064 flows


@pytest.fixture
def ticking(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A clock that moves one second each time the progress lines read it."""
    seconds = count()
    monkeypatch.setattr(output.time, "monotonic", lambda: float(next(seconds)))
    yield


def _run(capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, object], list[str]]:
    args = ["run", SCENARIO, "--json"]
    for override in ALL_TO_ALL:
        args += ["--set", override]
    assert main(args) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err.splitlines()


def test_a_long_run_prints_its_progress_on_stderr(ticking: None, capsys: pytest.CaptureFixture[str]) -> None:
    _, lines = _run(capsys)
    assert lines, "no progress line"
    pattern = re.compile(r"^leaf-spine-perftest: simulating: ([\d,]+)/8,064 flows finished$")
    done = [int(pattern.fullmatch(line).group(1).replace(",", "")) for line in lines]  # type: ignore[union-attr]
    assert done == sorted(done) and done[-1] == 8_064 and len(done) > 10
    assert len(set(done)) == len(done)  # no line repeated


def test_a_short_run_prints_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    line = output.progress_lines("quick", "flows")
    line(1, 2)
    line(2, 2)  # within the first second: nothing
    assert capsys.readouterr().err == ""

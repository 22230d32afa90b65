"""Reading a flow file: bounded by the file, rows counted before any row is parsed."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from cloudtwin.cli.flowfiles import read_flow_file
from cloudtwin.errors import WorkloadError
from cloudtwin.scenario import load_scenario


def _scenario(tmp_path: Path, file: str, flows: int = 10) -> tuple[object, Path]:
    text = (
        "name: f\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
        f"workload: {{kind: flows, file: {file}}}\nlimits: {{flows: {flows}}}\n"
    )
    path = tmp_path / "f.yaml"
    path.write_text(text)
    return load_scenario(text, str(path)), path


def test_rows_over_the_limit_are_refused_before_any_is_parsed(tmp_path: Path) -> None:
    # 11 short rows over limits.flows = 10, the last one garbage: the count answers first
    (tmp_path / "f.csv").write_bytes(b"source,destination,bytes\n" + b"0,1,9\n" * 10 + b"x,y,z\n")
    scenario, path = _scenario(tmp_path, "f.csv")
    with pytest.raises(WorkloadError, match="11 rows, more than the 10 flows limits.flows allows"):
        read_flow_file(scenario, path)  # type: ignore[arg-type]


def test_a_high_limit_allocates_what_the_file_holds(tmp_path: Path) -> None:
    # limits.flows = 20,000,000 once made the reader ask for 10 GB before reading 40 bytes
    (tmp_path / "f.csv").write_bytes(b"source,destination,bytes\n0,1,9\n")
    scenario, path = _scenario(tmp_path, "f.csv", flows=20_000_000)
    tracemalloc.start()
    try:
        read_flow_file(scenario, path)  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def _loop(tmp_path: Path) -> str:
    (tmp_path / "a.csv").symlink_to(tmp_path / "b.csv")
    (tmp_path / "b.csv").symlink_to(tmp_path / "a.csv")
    return "a.csv"


def _fifo(tmp_path: Path) -> str:
    os.mkfifo(tmp_path / "p.csv")
    return "p.csv"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (_loop, "the flow file path is a symlink loop"),  # was an OSError's traceback
        (_fifo, "the flow file is a FIFO, not a regular file"),  # blocked forever
        (lambda tmp: "/dev/urandom", "the flow file is a character device"),
        (lambda tmp: "missing.csv", "missing.csv: no such flow file"),
    ],
)
def test_what_is_not_a_flow_file_is_named_in_one_line(tmp_path: Path, make: object, reason: str) -> None:
    scenario, path = _scenario(tmp_path, make(tmp_path))  # type: ignore[operator]
    with pytest.raises(WorkloadError) as caught:
        read_flow_file(scenario, path)  # type: ignore[arg-type]
    assert reason in str(caught.value) and "file file" not in str(caught.value)
    assert str(caught.value).startswith("workload.file: ") and caught.value.field == "workload.file"

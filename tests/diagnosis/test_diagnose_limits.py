"""`cloudtwin diagnose` without a fault, and with a window too small for memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO

from cloudtwin.cli.app import main

EXAMPLE = REPO / "examples" / "diagnose.yaml"


def _scenario(tmp_path: Path, with_faults: bool) -> Path:
    text = EXAMPLE.read_text().replace("size: 4GiB", "size: 512MiB")
    if not with_faults:
        text = text[: text.index("\nfaults:") + 1]
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_a_fault_free_run_says_no_fault_was_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Scores are relative: a run without faults used to name its strongest background
    # line (a transceiver warning) as the top suspect with score 1.000.
    db = str(tmp_path / "d.duckdb")
    code = main(["diagnose", str(_scenario(tmp_path, False)), "--db", db, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out) == {"run": "diagnose", "fault_found": False, "suspects": []}
    assert main(["diagnose", "--db", db]) == 0
    assert "No fault found" in capsys.readouterr().out


def test_a_window_too_small_is_refused_naming_the_flag_and_a_fault_is_still_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "d.duckdb")
    assert main(["diagnose", str(_scenario(tmp_path, True)), "--db", db, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["fault_found"] and found["suspects"][0]["component"] == "leaf1-spine2"
    code = main(["diagnose", "--db", db, "--window-ms", "0.001"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "(max_cells)" in err and "--max-cells" in err

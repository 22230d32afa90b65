"""docs/hpl-validation.md and benchmarks/hpl_top500.py: the data file is sourced and
consistent, the doc's table is the benchmark's fresh output, the fitted constant is the
shipped one, and every command on the page runs."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.cli.cli_helpers import REPO, run_documented
from tests.test_docs import console_commands

from cloudtwin.cluster.profiles import NODE_PROFILES
from cloudtwin.workloads.hpl import WORKSPACE_BYTES

DOC = REPO / "docs" / "hpl-validation.md"
SMS_PER_A100 = 108


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hpl_top500", REPO / "benchmarks" / "hpl_top500.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _benchmark()
SYSTEMS: list[dict[str, Any]] = bench.load_systems()


@functools.cache
def fresh_rows() -> tuple[Any, ...]:
    return tuple(bench.predict(s) for s in SYSTEMS)


def doc_table() -> str:
    found = re.search(r"<!-- table:top500 -->\n(.*?)\n?<!-- /table -->", DOC.read_text(), re.S)
    assert found
    return found.group(1).strip()


@pytest.mark.parametrize("system", SYSTEMS, ids=[s["name"] for s in SYSTEMS])
def test_every_row_is_sourced_and_consistent(system: dict[str, Any]) -> None:
    assert system["role"] in {"fit", "validation"}
    sources = system["sources"]
    assert sources and all(s["url"].startswith("https://") and s["quote"] for s in sources)
    assert system["gpus"] == system["nodes"] * system["gpus_per_node"]
    assert system["node"] in NODE_PROFILES
    assert NODE_PROFILES[system["node"]].gpus == system["gpus_per_node"]
    if system.get("cores") is not None:  # TOP500 counts CPU cores and GPU multiprocessors
        per_node = system["cpu_cores_per_node"] + SMS_PER_A100 * system["gpus_per_node"]
        assert system["cores"] == system["nodes"] * per_node


def test_exactly_one_row_is_fitted_on() -> None:
    assert [s["name"] for s in SYSTEMS if s["role"] == "fit"] == ["selene-2020-06"]


def test_grid_holds_whole_nodes_in_a_process_column() -> None:
    assert bench.grid(2240, 8) == (40, 56)
    assert bench.grid(64, 8) == (8, 8)
    assert bench.grid(3744, 4) == (52, 72)
    with pytest.raises(ValueError, match="whole nodes"):
        bench.grid(12, 8)


def test_largest_n_fills_the_free_memory() -> None:
    # 2 x 2 GPUs of 80 GB, 3 GB of workspace: 8 N^2 <= 4 x 77e9 -> N <= 196,214; NB 384.
    n = bench.largest_n(80e9, 2, 2)
    assert n == 196_214 // 384 * 384
    assert 8.0 * n * n / 4 <= 80e9 - WORKSPACE_BYTES < 8.0 * (n + 384) ** 2 / 4


def test_doc_table_matches_fresh_output() -> None:
    assert doc_table() == bench.table(list(fresh_rows()))


def test_fit_reproduces_the_shipped_constant() -> None:
    fitted = bench.fit(SYSTEMS)
    assert round(fitted, 3) == NODE_PROFILES["a100-80g-8"].dgemm_efficiency_max
    (fit_row,) = [r for r in fresh_rows() if r.role == "fit"]
    assert abs(fit_row.error) < 0.005


def test_json_lists_every_system(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in document["systems"]] == [s["name"] for s in SYSTEMS]
    assert {r["name"]: r["predicted_tflops_per_gpu"] for r in document["systems"]} == {
        r.name: r.predicted_tflops_per_gpu for r in fresh_rows()
    }


def test_doc_commands_run(tmp_path: Path) -> None:
    commands = console_commands(DOC)
    assert any(c.startswith("cloudtwin hpl") for c in commands)
    for command in commands:
        if command.startswith("cloudtwin"):
            done = run_documented(command, tmp_path)
        else:
            words = shlex.split(command)
            assert words[:2] == ["python", "benchmarks/hpl_top500.py"], command
            done = subprocess.run(
                [sys.executable, str(REPO / words[1]), *words[2:]], cwd=tmp_path,
                capture_output=True, text=True, timeout=600,
            )
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert done.stdout.strip(), command
    assert (tmp_path / "hpl-scenarios" / "voyager-eus2-2021-11.yaml").exists()


if __name__ == "__main__":  # print the table for the doc
    print(bench.table(list(fresh_rows())))

"""docs/sweeps.md: its commands run; and the fabric-size table of
docs/reproducing-routing-strategies.md is what the two sweeps shown there produce."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin, run_documented
from tests.sweep.ray_cluster import ray_head

DOC = REPO / "docs" / "sweeps.md"
ROUTING_DOC = REPO / "docs" / "reproducing-routing-strategies.md"
SIZES = """--vary fabric.leaves=4,8,16 --vary tenants.0.hosts=0-7,0-15,0-31 \
--vary tenants.1.hosts=8-15,16-31,32-63 --zip --vary seed=1..10"""
PERFTEST = "--set 'workload={kind: perftest, pattern: permutation, size: 1GiB, qps: 1}'"
ROCE = (f"cloudtwin sweep examples/routing-strategies.yaml --command compare --strategies ecmp,pinning "
        f"{PERFTEST} {SIZES} --db sweeps.duckdb --json")
ALLREDUCE = (f"cloudtwin sweep examples/routing-strategies.yaml --command nccl-tests "
             f"--strategies ecmp,pinning {SIZES} --db sweeps.duckdb --json")
RAY_ADDRESS = "127.0.0.1:6379"

pytestmark = pytest.mark.slow


def console_commands(path: Path) -> list[str]:
    """Lines starting with `$ ` inside ```console blocks (a trailing backslash continues)."""
    commands, inside, pending = [], False, ""
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```console"
            continue
        if inside and (line.startswith("$ ") or pending):
            text = pending + (line[2:] if line.startswith("$ ") and not pending else line.strip())
            if text.endswith("\\"):
                pending = text[:-1].rstrip() + " "
                continue
            commands.append(text)
            pending = ""
    return commands


def _ratio(group: dict[str, Any]) -> str:
    return (f"{group['mean']:.2f}x ({group['ci95_low']:.2f}-{group['ci95_high']:.2f}), "
            f"{group['min']:.2f}x-{group['max']:.2f}x")


def sizes_table(roce: dict[str, Any], allreduce: dict[str, Any]) -> list[str]:
    rows = [
        "| leaves | nodes (GPUs) | RoCE test traffic: pinning vs ecmp | AllReduce 1 GiB: pinning vs ecmp |",
        "|---|---|---|---|",
    ]
    for a, b in zip(roce["summary"]["groups"], allreduce["summary"]["groups"], strict=True):
        leaves = int(a["values"]["fabric.leaves"])
        assert b["values"] == a["values"] and a["n"] == b["n"] == 10
        rows.append(f"| {leaves} | {leaves * 4} ({leaves * 32}) | {_ratio(a)} | {_ratio(b)} |")
    return rows


def doc_table(name: str) -> list[str]:
    match = re.search(rf"<!-- table:{name} -->\n(.*?)\n<!-- /table -->", ROUTING_DOC.read_text(), re.S)
    assert match, f"table {name} is missing from {ROUTING_DOC.name}"
    return match.group(1).strip().splitlines()


def _run(command: str, cwd: Path) -> dict[str, Any]:
    done = run_documented(command, cwd)
    assert done.returncode == 0, f"{command}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_both_docs_show_the_sweeps_the_table_comes_from() -> None:
    for doc in (DOC, ROUTING_DOC):
        commands = console_commands(doc)
        assert ROCE in commands and ALLREDUCE in commands, doc.name


def test_fabric_size_table_matches_fresh_sweeps(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    roce, allreduce = _run(ROCE, tmp_path), _run(ALLREDUCE, tmp_path)
    assert doc_table("sizes") == sizes_table(roce, allreduce)


def test_every_other_command_of_the_sweeps_doc_runs(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    commands = [c for c in console_commands(DOC) if c not in (ROCE, ALLREDUCE)]
    assert len(commands) >= 4
    local = [c for c in commands if RAY_ADDRESS not in c]
    for command in local:
        done = run_documented(command, tmp_path)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert done.stdout.strip()
    on_ray = [c for c in commands if RAY_ADDRESS in c]
    assert on_ray, "the doc shows a sweep on a Ray cluster"
    with ray_head() as (address, env):
        for command in on_ray:
            words = shlex.split(command.replace(RAY_ADDRESS, address))
            assert words[0] == "cloudtwin"
            done = cloudtwin(*words[1:], cwd=tmp_path, env=env)
            assert done.returncode == 0, f"{command}\n{done.stderr}"


if __name__ == "__main__":  # print the table, to paste into the doc
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "examples").symlink_to(REPO / "examples")
        results = []
        for command in (ROCE, ALLREDUCE):
            words = shlex.split(command)
            out = subprocess.run([str(Path(sys.executable).with_name("cloudtwin")), *words[1:]], cwd=tmp,
                                 capture_output=True, text=True, check=True).stdout
            results.append(json.loads(out))
        print("<!-- table:sizes -->\n" + "\n".join(sizes_table(*results)) + "\n<!-- /table -->")

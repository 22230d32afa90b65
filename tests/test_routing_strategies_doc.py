"""docs/reproducing-routing-strategies.md: its commands run, and its tables match fresh output.

Commands run in-process (`cloudtwin.cli.app.main`, what the console script calls) to
keep the suite fast. Each table sits between `<!-- table:NAME -->` and `<!-- /table -->`
and is rebuilt here from the commands shown in the doc.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from cloudtwin.cli.app import main

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "reproducing-routing-strategies.md"
EXAMPLE = "examples/routing-strategies.yaml"
STRATEGIES = "ecmp,ecmp-qp,adaptive,spray,pinning"
PERFTEST = "--set 'workload={kind: perftest, pattern: permutation, size: 1GiB, qps: 1}'"
COMPARE = f"cloudtwin compare {EXAMPLE} {PERFTEST} --strategies {STRATEGIES} --json"
NCCL = f"cloudtwin nccl-tests {EXAMPLE} -b 2M -e 2G -f 8 --strategies {STRATEGIES} --json"
SEEDS = range(1, 11)
SEED_COMPARE = f"cloudtwin compare {EXAMPLE} {PERFTEST} --strategies ecmp,pinning --set seed=SEED --json"
SEED_NCCL = f"cloudtwin nccl-tests {EXAMPLE} -b 1G -e 1G --strategies ecmp,pinning --set seed=SEED --json"


def run_json(command: str) -> Any:
    words = shlex.split(command)
    assert words[0] == "cloudtwin"
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(words[1:])
    assert code == 0, command
    return json.loads(out.getvalue())


def perftest_table() -> list[str]:
    result = run_json(COMPARE)
    rows = ["| strategy | utilization | aggregate Gbps | min per-flow Gbps | completion ms | vs ecmp |"]
    rows.append("|---|---|---|---|---|---|")
    for name, r in result["results"].items():
        rows.append(
            f"| {name} | {r['utilization']:.3f} | {r['aggregate_gbps']:.1f} | "
            f"{r['per_flow_gbps']['min']:.2f} | {r['completion_s'] * 1e3:.3f} | "
            f"{result['ratios'][name]:.2f}x |"
        )
    return rows


def allreduce_table() -> list[str]:
    results = run_json(NCCL)["results"]
    names = list(results)
    rows = ["| size | " + " | ".join(f"{n} busbw GB/s" for n in names) + " | pinning vs ecmp |"]
    rows.append("|---" * (len(names) + 2) + "|")
    for i, base in enumerate(results["ecmp"]):
        cells = [f"{results[n][i]['busbw_GBps']:.2f}" for n in names]
        ratio = results["pinning"][i]["busbw_GBps"] / base["busbw_GBps"]
        rows.append(f"| {_size(base['size_bytes'])} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    return rows


def seeds_table() -> list[str]:
    rows = ["| seed | RoCE test traffic: pinning vs ecmp | AllReduce 1 GiB: pinning vs ecmp |"]
    rows.append("|---|---|---|")
    for seed in SEEDS:
        perftest = run_json(SEED_COMPARE.replace("SEED", str(seed)))["ratios"]["pinning"]
        r = run_json(SEED_NCCL.replace("SEED", str(seed)))["results"]
        allreduce = r["pinning"][0]["busbw_GBps"] / r["ecmp"][0]["busbw_GBps"]
        rows.append(f"| {seed} | {perftest:.2f}x | {allreduce:.2f}x |")
    return rows


def _size(size: int) -> str:
    for unit, power in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << power and size % (1 << power) == 0:
            return f"{size >> power} {unit}"
    return f"{size} B"


TABLES = {"perftest": perftest_table, "allreduce": allreduce_table, "seeds": seeds_table}


def doc_table(name: str) -> list[str]:
    match = re.search(rf"<!-- table:{name} -->\n(.*?)\n<!-- /table -->", DOC.read_text(), re.S)
    assert match, f"table {name} is missing from {DOC.name}"
    return match.group(1).strip().splitlines()


def test_doc_shows_the_commands_its_tables_come_from() -> None:
    text = DOC.read_text()
    for command in (COMPARE, NCCL, SEED_COMPARE.replace("SEED", "1"), SEED_NCCL.replace("SEED", "1")):
        assert f"$ {command}" in text, command


@pytest.mark.parametrize("name", list(TABLES))
def test_doc_table_matches_fresh_output(name: str) -> None:
    assert doc_table(name) == TABLES[name]()


if __name__ == "__main__":  # print the tables, to paste into the doc
    for table, build in TABLES.items():
        print(f"<!-- table:{table} -->\n" + "\n".join(build()) + "\n<!-- /table -->\n")

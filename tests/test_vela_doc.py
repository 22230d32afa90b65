"""docs/reproducing-vela.md: every command in it runs, and its tables match fresh output.

The commands run in-process (`cloudtwin.cli.app.main`), which is what the console
script calls, to keep the suite fast. Each table sits between `<!-- table:NAME -->` and
`<!-- /table -->` and is regenerated here from the commands shown above it.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

import pytest
from tests.test_docs import console_commands

from cloudtwin.cli.app import main

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "reproducing-vela.md"
SIZES = "32,256,768,1536"
TRAIN = f"cloudtwin train examples/vela.yaml --gpus {SIZES} --json"
HPL = "cloudtwin hpl examples/vela-hpl.yaml --json"
PINNING = "--set routing.strategy=pinning"
SENSITIVITY = [
    ("as shipped (ecmp)", ""),
    ("bare metal", "--set cluster.virtualization=bare-metal"),
    ("path pinning", PINNING),
    ("8 NCCL channels per ring", "--set workload.channels=8"),
    ("gradients reduced in bf16", "--set workload.grad_reduce_dtype=bf16"),
    ("no overlap of the gradient reduction", "--set workload.overlap_grad_reduce=false"),
    ("sharded optimizer", "--set workload.sharded_optimizer=true"),
    ("2 NICs per node", "--set hosts.nics=2 --set fabric.hosts_per_leaf=16 --set fabric.leaves=12"),
    ("2:1 oversubscribed (16 spines)", "--set fabric.spines=16"),
    ("2:1 oversubscribed, pinning", "--set fabric.spines=16 --set routing.strategy=pinning"),
    (
        "2:1 oversubscribed, pinning, layout tp-pp-dp",
        "--set fabric.spines=16 --set routing.strategy=pinning --set workload.layout=tp-pp-dp",
    ),
]


def sensitivity_command(sets: str) -> str:
    """The command behind one row of the sensitivity table."""
    return " ".join(["cloudtwin train examples/vela.yaml --gpus 1536", sets, "--json"]).replace("  ", " ")

VALIDATION = (
    "cloudtwin train examples/vela.yaml --gpus 512 --set workload.layers=48 "
    "--set workload.pipeline=2 --set cluster.virtualization=bare-metal "
    "--set fabric.host_link=200Gbps --set fabric.uplink=200Gbps "
    "--set routing.strategy=pinning --set workload.overlap_grad_reduce=false --json"
)


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run(command: str, cwd: Path = REPO) -> str:
    """Run a `cloudtwin ...` command line in-process; its stdout."""
    words = shlex.split(command)
    assert words[0] == "cloudtwin"
    out = io.StringIO()
    with _cwd(cwd), redirect_stdout(out):
        code = main(words[1:])
    assert code == 0, command
    return out.getvalue()


def run_json(command: str) -> object:
    return json.loads(run(command))


def _training_rows(strategy: str, results: list[dict[str, object]]) -> list[str]:
    rows = []
    for r in results:
        lay, br = r["layout"], r["breakdown_s"]
        rows.append(
            f"| {r['gpus']} | {strategy} | {lay['tensor']} x {lay['pipeline']} x {lay['data']} | "
            f"{r['iteration_s']:.3f} | {r['tokens_per_s']:,.0f} | {r['tflops_per_gpu']:.1f} | "
            f"{r['mfu']:.3f} | **{r['scaling_efficiency']:.3f}** | {br['compute']:.3f} | "
            f"{br['exposed_comm']:.3f} | {br['bubble']:.3f} |"
        )
    return rows


def training_table() -> str:
    head = [
        "| GPUs | routing | t x p x d | iteration s | tokens/s | TFLOPS/GPU | MFU | scaling eff. "
        "| compute s | exposed comm s | bubble s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ecmp = _training_rows("ecmp", run_json(TRAIN))  # type: ignore[arg-type]
    pinned = _training_rows("pinning", run_json(f"{TRAIN} {PINNING}"))  # type: ignore[arg-type]
    return "\n".join(head + ecmp + pinned)


def hpl_table() -> str:
    rows = [
        "| routing | N | P x Q | time s | TFLOPS | TFLOPS/GPU | single VM TFLOPS/GPU | per GPU vs one VM "
        "| row / column ring Gbps |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for strategy, command in (("ecmp", HPL), ("pinning", f"{HPL} {PINNING}")):
        r = run_json(command)
        assert isinstance(r, dict)
        rows.append(
            f"| {strategy} | {r['n']:,} | {r['p']} x {r['q']} | {r['time_s']:.0f} | {r['tflops']:,.0f} | "
            f"{r['tflops_per_gpu']:.2f} | {r['single_vm_tflops_per_gpu']:.2f} | "
            f"**{r['relative_to_single_vm']:.3f}** | {r['ring_gbps']['row']:.1f} / "
            f"{r['ring_gbps']['column']:.1f} |"
        )
    return "\n".join(rows)


def sensitivity_table() -> str:
    rows = [
        "| change (1,536 GPUs) | overrides | tokens/s | scaling eff. |",
        "|---|---|---|---|",
    ]
    for label, sets in SENSITIVITY:
        (r,) = run_json(sensitivity_command(sets))  # type: ignore[misc]
        shown = f"`{sets}`" if sets else "none"
        rows.append(f"| {label} | {shown} | {r['tokens_per_s']:,.0f} | {r['scaling_efficiency']:.3f} |")
    return "\n".join(rows)


def validation_table() -> str:
    (r,) = run_json(VALIDATION)  # type: ignore[misc]
    return "\n".join([
        "| | TFLOPS/GPU | MFU |",
        "|---|---|---|",
        "| measured (Narayanan et al. 2021, Table 1, 39.1B on 512 GPUs) | 138 | 0.44 |",
        f"| cloudtwin | {r['tflops_per_gpu']:.1f} | {r['mfu']:.3f} |",
    ])


TABLES = {
    "training": training_table,
    "hpl": hpl_table,
    "sensitivity": sensitivity_table,
    "validation": validation_table,
}


def doc_tables() -> dict[str, str]:
    text = DOC.read_text()
    found = re.findall(r"<!-- table:(\w+) -->\n(.*?)\n<!-- /table -->", text, re.S)
    return {name: body.strip() for name, body in found}


def test_doc_shows_the_commands_behind_its_tables() -> None:
    commands = console_commands(DOC)
    for needed in [TRAIN, f"{TRAIN} {PINNING}", HPL, f"{HPL} {PINNING}", VALIDATION]:
        assert needed in commands
    for _, sets in SENSITIVITY:
        assert sensitivity_command(sets) in commands


@pytest.mark.parametrize("name", list(TABLES))
def test_doc_table_matches_fresh_output(name: str) -> None:
    assert doc_tables()[name] == TABLES[name]()


def test_other_doc_commands_run(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    covered = {TRAIN, f"{TRAIN} {PINNING}", HPL, f"{HPL} {PINNING}", VALIDATION}
    covered |= {sensitivity_command(sets) for _, sets in SENSITIVITY}
    others = [c for c in console_commands(DOC) if c not in covered]
    assert others  # the plot command at least
    for command in others:
        assert run(command, tmp_path).strip(), command


if __name__ == "__main__":  # print the tables for the doc
    for table, render in TABLES.items():
        print(f"<!-- table:{table} -->\n{render()}\n<!-- /table -->\n")

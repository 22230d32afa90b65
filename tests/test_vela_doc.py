"""docs/reproducing-vela.md: every command in it runs, and its tables match fresh output.

The commands run in-process (`cloudtwin.cli.app.main`), which is what the console
script calls, to keep the suite fast. Each table sits between `<!-- table:NAME -->` and
`<!-- /table -->` and is regenerated here from the commands shown above it.
"""

from __future__ import annotations

import functools
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
FSDP = f"cloudtwin train examples/vela-fsdp.yaml --gpus {SIZES} --json"
PINNING = "--set routing.strategy=pinning"
NICS = {  # the fabric stays non-blocking: 32 NIC ports per leaf, 32 spines
    2: "",
    4: "--set cluster.node=a100-80g-8 --set hosts.nics=4 "
    "--set fabric.hosts_per_leaf=8 --set fabric.leaves=24",
    8: "--set cluster.node=hgx-8nic --set hosts.nics=8 "
    "--set fabric.hosts_per_leaf=4 --set fabric.leaves=48",
}
LAYOUTS = {
    "A: t 8, p 4, d 48 (shipped)": "",
    "B: t 8, p 16, d 12": "--set workload.pipeline=16",
}
OVERLAP = {"on": "", "off": "--set workload.overlap_grad_reduce=false"}
BF16 = "--set workload.grad_reduce_dtype=bf16"
P8 = f"{BF16} --set workload.pipeline=8"
P16 = "--set workload.pipeline=16"
V2 = "--set workload.virtual_stages=2"
MECHANISMS = [
    ("as shipped: t 8, p 4, d 48, m 32, fp32 gradients, overlapped", ""),
    ("gradient reduction not overlapped", OVERLAP["off"]),
    ("sharded optimizer (distributed optimizer, ZeRO-1)", "--set workload.sharded_optimizer=true"),
    ("gradients reduced in bf16", BF16),
    ("bf16, p 8 (d 24, m 64)", P8),
    ("bf16, p 8, interleaved v 2", f"{P8} {V2}"),
    ("bf16, p 8, global batch 3,072 (m 128)", f"{P8} --set workload.global_batch=3072"),
    ("fp32, p 16 (d 12, m 128): layout B", P16),
    ("fp32, p 16, interleaved v 2", f"{P16} {V2}"),
    ("bf16, p 16", f"{BF16} {P16}"),
    ("bf16, p 16, interleaved v 2", f"{BF16} {P16} {V2}"),
    ("bf16, t 4, p 16 (d 24, m 64)", f"{BF16} --set workload.tensor=4 {P16}"),
]


def band_rows() -> list[tuple[str, int, str, str]]:
    """(layout, NICs per node, overlap, overrides) of every row of the sensitivity band."""
    return [
        (layout, nics, overlap, " ".join(x for x in (sets, NICS[nics], OVERLAP[overlap]) if x))
        for layout, sets in LAYOUTS.items()
        for nics in NICS
        for overlap in OVERLAP
    ]


def sensitivity_command(sets: str) -> str:
    """The command behind one row of the band or mechanisms table."""
    return " ".join(["cloudtwin train examples/vela.yaml --gpus 1536", sets, "--json"]).replace("  ", " ")




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


@functools.cache
def run_json(command: str) -> object:
    """A command's JSON output, once per command line (tables share rows)."""
    return json.loads(run(command))


def _training_rows(strategy: str, results: list[dict[str, object]]) -> list[str]:
    rows = []
    for r in results:
        lay, br = r["layout"], r["breakdown_s"]
        rows.append(
            f"| {r['gpus']} | {strategy} | {lay['tensor']} x {lay['pipeline']} x {lay['data']} | "
            f"{r['iteration_s']:.3f} | {r['tokens_per_s']:,.0f} | {r['tflops_per_gpu']:.1f} | "
            f"{r['mfu']:.3f} | **{r['scaling_efficiency']:.3f}** | **{r['weak_scaling_efficiency']:.3f}** | "
            f"{br['compute']:.3f} | "
            f"{br['exposed_comm']:.3f} | {br['bubble']:.3f} |"
        )
    return rows


def training_table() -> str:
    head = [
        "| GPUs | routing | t x p x d | iteration s | tokens/s | TFLOPS/GPU | MFU | strong eff. "
        "| weak eff. | compute s | exposed comm s | bubble s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ecmp = _training_rows("ecmp", run_json(TRAIN))  # type: ignore[arg-type]
    pinned = _training_rows("pinning", run_json(f"{TRAIN} {PINNING}"))  # type: ignore[arg-type]
    return "\n".join(head + ecmp + pinned)


def fsdp_table() -> str:
    head = [
        "| GPUs | routing | t x p x d | iteration s | tokens/s | TFLOPS/GPU | MFU | strong eff. "
        "| weak eff. | compute s | exposed comm s | bubble s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(head + _training_rows("ecmp", run_json(FSDP)))  # type: ignore[arg-type]


def hpl_commands() -> list[tuple[int, str, str]]:
    """(NICs per node, routing, command) of each row of the HPL table."""
    return [
        (2, "ecmp", HPL),
        (2, "pinning", f"{HPL} {PINNING}"),
        (8, "ecmp", f"{HPL} {NICS[8]}"),
    ]


def hpl_table() -> str:
    rows = [
        "| NICs per node | routing | N | P x Q | time s | TFLOPS | TFLOPS/GPU | single VM TFLOPS/GPU "
        "| per GPU vs one VM | row / column ring Gbps |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for nics, strategy, command in hpl_commands():
        r = run_json(command)
        assert isinstance(r, dict)
        rows.append(
            f"| {nics} | {strategy} | {r['n']:,} | {r['p']} x {r['q']} | {r['time_s']:.0f} "
            f"| {r['tflops']:,.0f} | {r['tflops_per_gpu']:.2f} | {r['single_vm_tflops_per_gpu']:.2f} | "
            f"**{r['relative_to_single_vm']:.3f}** | {r['ring_gbps']['row']:.1f} / "
            f"{r['ring_gbps']['column']:.1f} |"
        )
    return "\n".join(rows)


def _train_1536(sets: str) -> dict[str, object]:
    (result,) = run_json(sensitivity_command(sets))  # type: ignore[misc]
    return result  # type: ignore[no-any-return]


def band_table() -> str:
    rows = [
        "| parallel layout | NICs per node | overlap | overrides | tokens/s | scaling eff. |",
        "|---|---|---|---|---|---|",
    ]
    for layout, nics, overlap, sets in band_rows():
        r = _train_1536(sets)
        shown = f"`{sets}`" if sets else "none"
        rows.append(
            f"| {layout} | {nics} | {overlap} | {shown} | {r['tokens_per_s']:,.0f} "
            f"| **{r['scaling_efficiency']:.3f}** |"
        )
    return "\n".join(rows)


def mechanisms_table() -> str:
    rows = [
        "| 2 NICs per node, ECMP | overrides | memory GB | bubble s | exposed comm s "
        "| tokens/s | scaling eff. |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, sets in MECHANISMS:
        r = _train_1536(sets)
        br = r["breakdown_s"]
        shown = f"`{sets}`" if sets else "none"
        rows.append(
            f"| {label} | {shown} | {r['memory_per_gpu_gb']:.1f} | {br['bubble']:.2f} "  # type: ignore[index]
            f"| {br['exposed_comm']:.2f} | {r['tokens_per_s']:,.0f} "  # type: ignore[index]
            f"| **{r['scaling_efficiency']:.3f}** |"
        )
    return "\n".join(rows)


TABLES = {
    "training": training_table,
    "hpl": hpl_table,
    "mechanisms": mechanisms_table,
    "band": band_table,
    "fsdp": fsdp_table,
}


def doc_tables() -> dict[str, str]:
    text = DOC.read_text()
    found = re.findall(r"<!-- table:(\w+) -->\n(.*?)\n<!-- /table -->", text, re.S)
    return {name: body.strip() for name, body in found}


def _row_overrides() -> list[str]:
    return [sets for _, sets in MECHANISMS] + [row[3] for row in band_rows()]


def test_doc_shows_the_commands_behind_its_tables() -> None:
    commands = console_commands(DOC)
    for needed in [TRAIN, f"{TRAIN} {PINNING}", FSDP, *(c for _, _, c in hpl_commands())]:
        assert needed in commands
    for sets in _row_overrides():
        assert sensitivity_command(sets) in commands


@pytest.mark.parametrize("name", list(TABLES))
def test_doc_table_matches_fresh_output(name: str) -> None:
    assert doc_tables()[name] == TABLES[name]()


def test_other_doc_commands_run(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    covered = {TRAIN, f"{TRAIN} {PINNING}", FSDP, *(c for _, _, c in hpl_commands())}
    covered |= {sensitivity_command(sets) for sets in _row_overrides()}
    # The published-runs benchmark is run, and its table checked, by tests/test_training_published.py.
    others = [
        c for c in console_commands(DOC)
        if c not in covered and not c.startswith("python benchmarks/training_published.py")
    ]
    assert others  # the plot command at least
    for command in others:
        assert run(command, tmp_path).strip(), command


if __name__ == "__main__":  # print the tables for the doc
    for table, render in TABLES.items():
        print(f"<!-- table:{table} -->\n{render()}\n<!-- /table -->\n")

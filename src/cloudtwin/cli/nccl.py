"""`cloudtwin nccl-tests`: an nccl-tests style sweep of a collective over message sizes, per strategy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cloudtwin.cli.checks import check_out_file, check_strategy_list, refuse_ignored_sections
from cloudtwin.cli.output import emit_json, progress_bar, read_scenario, stdout, write_json
from cloudtwin.errors import RoutingError, ScenarioError
from cloudtwin.topology.estimate import collective_ranks

if TYPE_CHECKING:
    from cloudtwin.evaluation.collective import CollectiveMeasurement
    from cloudtwin.scenario.model import CollectiveWorkload, Scenario

__all__ = ["nccl_tests", "parse_nccl_size", "sweep_sizes"]

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)\s*$", re.IGNORECASE)
_POWER = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "sendrecv")


def parse_nccl_size(text: str, option: str) -> int:
    """A size as nccl-tests reads it: a whole number with K, M, G (powers of 1024).

    >>> parse_nccl_size("8G", "-e"), parse_nccl_size("1M", "-b"), parse_nccl_size("512", "-b")
    (8589934592, 1048576, 512)
    """
    match = _SIZE.match(text)
    if match is None or int(match.group(1)) == 0:
        raise ScenarioError(f"{option}: {text!r} is not a size like 1M or 8G (K/M/G are powers of 1024)")
    return int(match.group(1)) << _POWER[match.group(2).upper()]


def sweep_sizes(begin: int, end: int, factor: int) -> list[int]:
    """begin, begin x factor, ... up to end, as nccl-tests steps.

    >>> sweep_sizes(1 << 20, 8 << 20, 2)
    [1048576, 2097152, 4194304, 8388608]
    """
    if end < begin:
        raise ScenarioError(f"-e: the largest size ({end}) is below the smallest ({begin})")
    if factor < 2:
        raise ScenarioError(f"-f: the step factor must be at least 2, got {factor}")
    sizes = [begin]
    while sizes[-1] * factor <= end:
        sizes.append(sizes[-1] * factor)
    return sizes


def _table(
    title: str, rows: list[CollectiveMeasurement], base: list[CollectiveMeasurement] | None, first: str
) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)"):
        table.add_column(column, justify="right", overflow="fold")  # never cut a number
    if base is not None:
        table.add_column(f"busbw vs {first}", justify="right", overflow="fold")
    for i, m in enumerate(rows):
        cells = [
            str(m.size_bytes),
            str(m.count),
            "float",
            f"{m.time_s * 1e6:.1f}",
            f"{m.algbw_GBps:.2f}",
            f"{m.busbw_GBps:.2f}",
        ]
        if base is not None:
            cells.append(f"{m.busbw_GBps / base[i].busbw_GBps:.2f}x")
        table.add_row(*cells)
    return table


def _check_smallest(scenario: Scenario, workload: CollectiveWorkload, size: int) -> None:
    """nccl-tests counts 4-byte floats (per rank for allgather, reducescatter, alltoall):
    a size that holds none is an empty test."""
    per_rank = workload.op in ("allgather", "reducescatter", "alltoall")
    ranks = max(collective_ranks(scenario, workload)) if per_rank else 1
    if size < 4 * ranks:
        unit = f"{4 * ranks} bytes (one float per rank, {ranks} ranks)" if per_rank else "4 bytes"
        raise ScenarioError(f"-b: {size} bytes gives a count of 0; {workload.op} needs at least {unit}")


SCENARIO = typer.Argument(..., help="Scenario YAML file.", show_default=False)
OP = typer.Option(None, "--op", help=f"Collective ({', '.join(OPS)}); default: the scenario's.")
BEGIN = typer.Option("1M", "-b", "--minbytes", help="Smallest size (K/M/G = powers of 1024).")
END = typer.Option("1G", "-e", "--maxbytes", help="Largest size.")
FACTOR = typer.Option(2, "-f", "--stepfactor", help="Multiply the size by this each step.")
STRATEGIES = typer.Option(
    None, "--strategies", help="Comma-separated strategies (default: the scenario's); ratios to the first.",
    callback=check_strategy_list,
)
SET = typer.Option(None, "--set", "-s", help="Override a key (repeatable).")
JSON = typer.Option(False, "--json", help="Print JSON on stdout and nothing else.")
OUT = typer.Option(
    None, "--out", "-o", help="Also write the JSON result to this file.", callback=check_out_file
)


def nccl_tests(
    scenario: Path = SCENARIO,
    op: str = OP,
    begin: str = BEGIN,
    end: str = END,
    factor: int = FACTOR,
    strategies: str = STRATEGIES,
    overrides: list[str] = SET,
    as_json: bool = JSON,
    out: Path = OUT,
) -> None:
    """Sweep a collective over message sizes, nccl-tests style, under each routing strategy.

    Prints size, count, type, time, algbw and busbw per strategy, with busbw as a
    ratio to the first strategy. algbw = size / time; busbw = algbw x the op's factor
    (AllReduce 2(n-1)/n, AllGather and ReduceScatter (n-1)/n, Broadcast and SendRecv 1).

    Example:  cloudtwin nccl-tests examples/routing-strategies.yaml -b 1M -e 1G -f 4 --strategies ecmp,pinning
    """
    from cloudtwin.evaluation.collective import collective_workload, simulate_collective
    from cloudtwin.routing.strategy import load_strategy
    from cloudtwin.topology.builders import build_topology

    sets = list(overrides or [])
    if op is not None:
        if op not in OPS:
            raise ScenarioError(f"--op: unknown collective {op!r} (known: {', '.join(OPS)})")
        sets.append(f"workload.op={op}")
    loaded = read_scenario(scenario, sets)
    refuse_ignored_sections(loaded, "nccl-tests")
    workload = collective_workload(loaded)
    sizes = sweep_sizes(parse_nccl_size(begin, "-b"), parse_nccl_size(end, "-e"), factor)
    _check_smallest(loaded, workload, sizes[0])
    names = [s.strip() for s in (strategies or loaded.routing.strategy).split(",") if s.strip()]
    if not names:
        raise RoutingError("--strategies: no strategy named")
    topology = build_topology(loaded)
    results: dict[str, list[CollectiveMeasurement]] = {}
    for name in names:
        strategy = load_strategy(name)
        rows = []
        with progress_bar(f"{loaded.name}: {name}", not as_json) as progress:
            for size in sizes:
                rows.append(simulate_collective(loaded, topology, strategy, size).measurement)
                if progress is not None:
                    progress(len(rows), len(sizes))
        results[strategy.name if strategy.name not in results else name] = rows
    keys = list(results)
    document = {
        "scenario": loaded.name,
        "op": workload.op,
        "results": {k: [m.to_json() for m in results[k]] for k in keys},
    }
    if out is not None:
        write_json(out, document)
    if as_json:
        emit_json(document)
        return
    head = results[keys[0]]
    for key in keys:
        title = (
            f"{loaded.name} ({key}): {workload.op}, {'/'.join(sorted(set(head[0].algorithms)))}, "
            f"{len(head[0].job_time_s)} job(s)"
        )
        base = head if key != keys[0] else None
        stdout.print(_table(title, results[key], base, keys[0]))

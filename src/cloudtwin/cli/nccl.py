"""`cloudtwin nccl-tests`: an nccl-tests style sweep of a collective over message sizes, per strategy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, get_args

import typer
from rich.table import Table

from cloudtwin.cli.checks import (
    check_out_file,
    check_scenario_file,
    check_strategy_list,
    refuse_ignored_sections,
)
from cloudtwin.cli.output import is_cloud_file, stage_progress, stdout
from cloudtwin.cli.sites import SITE, for_each_site, site_scenarios
from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.names import CollectiveOp

if TYPE_CHECKING:
    from cloudtwin.evaluation.collective import CollectiveMeasurement
    from cloudtwin.evaluation.usecases import NcclSweep
    from cloudtwin.scenario.model import CollectiveWorkload, Scenario

__all__ = ["nccl_tests"]

OPS: tuple[str, ...] = get_args(CollectiveOp)


def _table(
    title: str,
    rows: Sequence[CollectiveMeasurement],
    base: Sequence[CollectiveMeasurement] | None,
    first: str,
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
    from cloudtwin.topology.estimate import collective_ranks

    per_rank = workload.op in ("allgather", "reducescatter", "alltoall")
    ranks = max(collective_ranks(scenario, workload)) if per_rank else 1
    if size < 4 * ranks:
        unit = f"{4 * ranks} bytes (one float per rank, {ranks} ranks)" if per_rank else "4 bytes"
        raise ScenarioError(f"-b: {size} bytes gives a count of 0; {workload.op} needs at least {unit}")


SCENARIO = typer.Argument(
    ..., help="Scenario YAML file.", show_default=False, callback=check_scenario_file
)
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
    site: str = SITE,
) -> None:
    """Sweep a collective over message sizes, nccl-tests style, under each routing strategy.

    Prints size, count, type, time, algbw and busbw per strategy, with busbw as a
    ratio to the first strategy. algbw = size / time; busbw = algbw x the op's factor
    (AllReduce 2(n-1)/n, AllGather and ReduceScatter (n-1)/n, Broadcast and SendRecv 1).

    Example:  cloudtwin nccl-tests examples/routing-strategies.yaml -b 1M -e 1G -f 4 --strategies ecmp,pinning
    """
    from cloudtwin.evaluation import usecases
    from cloudtwin.evaluation.collective import collective_workload

    sets = list(overrides or [])
    if op is not None:
        if op not in OPS:
            raise ScenarioError(f"workload.op: unknown collective {op!r} (known: {', '.join(OPS)})")
        sets.append(f"workload.op={op}")
    sizes = usecases.nccl_sizes(begin, end, factor)

    cloud = is_cloud_file(scenario)  # --op then sets the chosen site's collective

    def one(loaded: Scenario) -> object:
        if cloud and op is not None:
            workload = collective_workload(loaded).model_copy(update={"op": op})
            loaded = loaded.model_copy(update={"workload": workload})
        refuse_ignored_sections(loaded, "nccl-tests")
        _check_smallest(loaded, collective_workload(loaded), sizes[0])
        names = usecases.parse_strategies(strategies, (loaded.routing.strategy,))
        with stage_progress(loaded.name, not as_json) as progress:
            sweep = usecases.nccl_tests(loaded, sizes, names, progress)
        if not as_json:
            _print_sweep(loaded, sweep)
        return sweep.to_json()

    targets = site_scenarios(scenario, overrides if cloud else sets, site, "nccl-tests", ("collective",))
    for_each_site(targets, one, as_json, out)


def _print_sweep(loaded: Scenario, sweep: NcclSweep) -> None:
    keys = list(sweep.measured)
    head = sweep.measured[keys[0]]
    for key in keys:
        title = (
            f"{loaded.name} ({key}): {sweep.op}, {'/'.join(sorted(set(head[0].algorithms)))}, "
            f"{len(head[0].job_time_s)} job(s)"
        )
        base = head if key != keys[0] else None
        stdout.print(_table(title, sweep.measured[key], base, keys[0]))

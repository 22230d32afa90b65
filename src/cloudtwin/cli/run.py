"""`cloudtwin run` and `cloudtwin compare`: simulate a scenario under one or several strategies."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cloudtwin.cli.checks import check_out_file, check_strategy_list, refuse_ignored_sections
from cloudtwin.cli.output import (
    BUILTIN_STRATEGIES,
    emit_json,
    progress_bar,
    read_scenario,
    stdout,
    write_json,
)
from cloudtwin.errors import RoutingError

if TYPE_CHECKING:
    from cloudtwin.evaluation.metrics import RunSummary

__all__ = ["compare", "run"]

SCENARIO = typer.Argument(..., help="Scenario YAML file.", show_default=False)
SET = typer.Option(None, "--set", "-s", help="Override a key: --set fabric.leaves=8 (repeatable).")
JSON = typer.Option(False, "--json", help="Print the result as JSON on stdout and nothing else.")
OUT = typer.Option(
    None, "--out", "-o", help="Also write the JSON result to this file.", callback=check_out_file
)

_ROWS: list[tuple[str, str, str]] = [
    ("flows", "flows", "{:.0f}"),
    ("aggregate (Gbps)", "aggregate_gbps", "{:.1f}"),
    ("per-flow min (Gbps)", "per_flow_gbps.min", "{:.2f}"),
    ("per-flow p50 (Gbps)", "per_flow_gbps.p50", "{:.2f}"),
    ("per-flow mean (Gbps)", "per_flow_gbps.mean", "{:.2f}"),
    ("per-flow max (Gbps)", "per_flow_gbps.max", "{:.2f}"),
    ("FCT p50 (ms)", "fct_s.p50", "ms"),
    ("FCT p99 (ms)", "fct_s.p99", "ms"),
    ("FCT max (ms)", "fct_s.max", "ms"),
    ("completion time (ms)", "completion_s", "ms"),
    ("utilization", "utilization", "{:.3f}"),
]


def _value(summary: dict[str, object], key: str) -> float:
    node: object = summary
    for part in key.split("."):
        node = node[part]  # type: ignore[index]
    return float(node)  # type: ignore[arg-type]


def _cell(value: float, fmt: str) -> str:
    return f"{value * 1e3:.3f}" if fmt == "ms" else fmt.format(value)


def _table(title: str, results: list[RunSummary], ratios: dict[str, float] | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for result in results:
        table.add_column(result.strategy, justify="right")
    documents = [r.to_json() for r in results]
    for label, key, fmt in _ROWS:
        table.add_row(label, *(_cell(_value(d, key), fmt) for d in documents))
    if ratios is not None:
        first = results[0].strategy
        table.add_row(f"aggregate vs {first}", *(f"{ratios[r.strategy]:.2f}x" for r in results))
    return table


def run(
    scenario: Path = SCENARIO,
    strategy: str = typer.Option(None, "--strategy", help="Routing strategy (default: the scenario's)."),
    overrides: list[str] = SET,
    as_json: bool = JSON,
    out: Path = OUT,
) -> None:
    """Simulate a scenario and print its performance summary.

    Per connection (as perftest reports each pair): throughput = bytes / FCT;
    utilization is the mean of throughput / line rate.

    Example:  cloudtwin run examples/leaf-spine-perftest.yaml --set routing.strategy=pinning
    """
    from cloudtwin.evaluation.run import run_scenario

    loaded = read_scenario(scenario, overrides)
    refuse_ignored_sections(loaded, "run")
    with progress_bar(f"{loaded.name}: simulating", not as_json) as progress:
        summary = run_scenario(loaded, strategy, progress).summary
    document = summary.to_json()
    if out is not None:
        write_json(out, document)
    if as_json:
        emit_json(document)
        return
    stdout.print(_table(f"{summary.scenario} ({summary.strategy})", [summary]))


def compare(
    scenario: Path = SCENARIO,
    strategies: str = typer.Option(
        BUILTIN_STRATEGIES,
        "--strategies",
        help="Comma-separated strategies; ratios are to the first. Names or package.module:Class.",
        callback=check_strategy_list,
    ),
    overrides: list[str] = SET,
    as_json: bool = JSON,
    out: Path = OUT,
) -> None:
    """Simulate a scenario under several routing strategies, side by side.

    Prints every metric per strategy and the aggregate throughput of each as a ratio to
    the first strategy.

    Example:  cloudtwin compare examples/leaf-spine-perftest.yaml --strategies ecmp,adaptive,pinning
    """
    from cloudtwin.evaluation.run import run_scenario
    from cloudtwin.routing.strategy import strategy_names

    names = [s.strip() for s in strategies.split(",") if s.strip()]
    if not names:
        raise RoutingError(f"--strategies: no strategy named (built-in: {', '.join(strategy_names())})")
    loaded = read_scenario(scenario, overrides)
    refuse_ignored_sections(loaded, "compare")
    results: list[RunSummary] = []
    for name in names:
        with progress_bar(f"{loaded.name}: {name}", not as_json) as progress:
            results.append(run_scenario(loaded, name, progress).summary)
    base = results[0].aggregate_gbps
    ratios = {r.strategy: (r.aggregate_gbps / base if base > 0 else float("nan")) for r in results}
    document = {
        "scenario": loaded.name,
        "results": {r.strategy: r.to_json() for r in results},
        "ratios": ratios,
    }
    if out is not None:
        write_json(out, document)
    if as_json:
        emit_json(document)
        return
    stdout.print(_table(f"{loaded.name}: routing strategies compared", results, ratios))

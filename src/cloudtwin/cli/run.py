"""`cloudtwin run` and `cloudtwin compare`: simulate a scenario under one or several strategies."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cloudtwin.cli.checks import (
    check_flows_out_file,
    check_out_file,
    check_scenario_file,
    check_strategy_list,
    refuse_ignored_sections,
)
from cloudtwin.cli.output import (
    BUILTIN_STRATEGIES,
    emit_json,
    is_cloud_file,
    progress_bar,
    stage_progress,
    stdout,
    write_json,
)
from cloudtwin.cli.sites import SITE
from cloudtwin.errors import ScenarioError

if TYPE_CHECKING:
    from cloudtwin.evaluation.metrics import RunSummary
    from cloudtwin.evaluation.results import CloudRunSummary
    from cloudtwin.scenario.model import Scenario

__all__ = ["compare", "run"]

SCENARIO = typer.Argument(
    ..., help="Scenario YAML file.", show_default=False, callback=check_scenario_file
)
SET = typer.Option(None, "--set", "-s", help="Override a key: --set fabric.spines=4 (repeatable).")
JSON = typer.Option(False, "--json", help="Print the result as JSON on stdout and nothing else.")
OUT = typer.Option(
    None, "--out", "-o", help="Also write the JSON result to this file.", callback=check_out_file
)
FLOWS_OUT = typer.Option(
    None,
    "--flows-out",
    help="Also write one row per flow (ids, source, destination, bytes, start, finish, FCT, "
    "mean rate, path) to this Parquet file; the result names it.",
    callback=check_flows_out_file,
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


def _value(summary: Mapping[str, object], key: str) -> float:
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
    flows_out: Path = FLOWS_OUT,
    site: str = SITE,
) -> None:
    """Simulate a scenario and print its performance summary.

    Per connection (as perftest reports each pair): throughput = bytes / FCT;
    utilization is the mean of throughput / line rate.

    A `flows` workload's file (CSV or Parquet) is read relative to the scenario file;
    --flows-out writes every flow's start, finish and path.

    Example:  cloudtwin run examples/leaf-spine-perftest.yaml --set routing.strategy=pinning
    """
    from cloudtwin.cli.flowfiles import read_flow_file, write_flows
    from cloudtwin.evaluation import usecases

    if site is None and is_cloud_file(scenario):  # the whole cloud, without its faults
        if flows_out is not None:
            raise ScenarioError("--flows-out: a cloud's run writes no flow file; name a site (--site NAME)")
        _run_cloud(scenario, overrides, [strategy] if strategy else None, as_json, out)
        return
    loaded = read_flow_file(_one_fabric(scenario, overrides, site, "run"), scenario)
    refuse_ignored_sections(loaded, "run", jobs_too=False)
    with progress_bar(f"{loaded.name}: simulating", not as_json, "flows finished") as progress:
        result = usecases.run(loaded, strategy, progress)
    document = result.to_json()
    rows = 0
    if flows_out is not None and result.detail is not None:
        rows = write_flows(flows_out, result.detail)
        document["flows_out"] = {"file": str(flows_out), "rows": rows}
    if out is not None:
        write_json(out, document)
    if as_json:
        emit_json(document)
        return
    summary = result.summary
    stdout.print(_table(f"{summary.scenario} ({summary.strategy})", [summary]))
    if flows_out is not None:
        stdout.print(f"{rows:,} flows written to {flows_out}")


def _cloud_rows(summary: CloudRunSummary) -> list[tuple[str, str]]:
    rows = [("work ends (s)", f"{summary.completion_s:.3f}"), ("moved Gbps", f"{summary.moved_gbps:.1f}")]
    for name, site in summary.sites.items():
        rows.append((f"{name}: completion (s)", f"{site.completion_s:.3f}"))
        if site.training_step_s is not None:
            rows.append((f"{name}: training step (s)", f"{site.training_step_s:.3f}"))
    if summary.traffic is not None:
        rows.append(("federated traffic: completion (s)", f"{summary.traffic.completion_s:.3f}"))
    for vm, m in summary.migrations.items():
        limit = ", OVER THE LIMIT" if m.over_limit else ""
        pause = f"{m.total_time_s:.3f} / {m.downtime_s * 1e3:.1f}{limit}"
        rows.append((f"{vm}: total (s) / downtime (ms)", pause))
    return rows


def _run_cloud(
    scenario: Path,
    overrides: list[str] | None,
    names: list[str] | None,
    as_json: bool,
    out: Path | None,
    compared: bool = False,
) -> None:
    """`run` and `compare` on a one-cloud file: the whole cloud (every site, the federated
    traffic, the migrations) on one engine run per strategy, without its faults."""
    from cloudtwin.cli.output import read_cloud
    from cloudtwin.evaluation.cloud import cloud_summary
    from cloudtwin.evaluation.results import CloudComparison

    cloud = read_cloud(scenario, overrides)
    summaries = [cloud_summary(cloud, name) for name in names] if names else [cloud_summary(cloud)]
    document = (
        CloudComparison(scenario=cloud.name, strategies={s.strategy: s for s in summaries})
        if compared
        else summaries[0]
    ).to_json()
    if out is not None:
        write_json(out, document)
    if as_json:
        emit_json(document)
        return
    title = f"{cloud.name}: the whole cloud without its faults (cloudtwin evaluate adds them)"
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    columns = [_cloud_rows(s) for s in summaries]
    for s in summaries:
        table.add_column(s.strategy, justify="right")
    for i, (label, _) in enumerate(columns[0]):
        table.add_row(label, *(c[i][1] for c in columns))
    stdout.print(table)


def _one_fabric(scenario: Path, overrides: list[str] | None, site: str | None, command: str) -> Scenario:
    """The scenario file, or the site of a one-cloud file that --site names (the whole cloud
    runs under `evaluate`)."""
    from cloudtwin.cli.sites import refuse_cloud, site_scenarios

    if site is None:
        refuse_cloud(scenario, command, f"`cloudtwin {command} {scenario} --site NAME` runs one site")
    return site_scenarios(scenario, overrides, site, command)[0].scenario


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
    site: str = SITE,
) -> None:
    """Simulate a scenario under several routing strategies, side by side.

    Prints every metric per strategy and the aggregate throughput of each as a ratio to
    the first strategy.

    Example:  cloudtwin compare examples/leaf-spine-perftest.yaml --strategies ecmp,adaptive,pinning
    """
    from cloudtwin.cli.flowfiles import read_flow_file
    from cloudtwin.evaluation import usecases

    names = usecases.parse_strategies(strategies)
    if site is None and is_cloud_file(scenario):  # the whole cloud under each strategy, without faults
        _run_cloud(scenario, overrides, names, as_json, out, compared=True)
        return
    loaded = read_flow_file(_one_fabric(scenario, overrides, site, "compare"), scenario)
    refuse_ignored_sections(loaded, "compare", jobs_too=False)
    with stage_progress(loaded.name, not as_json) as progress:
        comparison = usecases.compare(loaded, names, progress)
    document = comparison.to_json()
    if out is not None:
        write_json(out, document)
    if as_json:
        emit_json(document)
        return
    title = f"{loaded.name}: routing strategies compared"
    stdout.print(_table(title, list(comparison.summaries), comparison.ratios))

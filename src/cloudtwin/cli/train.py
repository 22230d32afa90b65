"""`cloudtwin train` and `cloudtwin hpl`: predicted LLM training and HPL performance on a cluster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cloudtwin.cli.checks import check_out_file, check_plot_file, check_scenario_file
from cloudtwin.cli.output import progress_bar, stdout, wrote
from cloudtwin.cli.sites import SITE, for_each_site, site_scenarios
from cloudtwin.errors import WorkloadError
from cloudtwin.scenario.units import parse_int

if TYPE_CHECKING:
    from cloudtwin.evaluation.hpl import HplResult
    from cloudtwin.evaluation.training import TrainingResult
    from cloudtwin.scenario.model import Scenario

__all__ = ["hpl", "parse_gpus", "train", "write_plot"]

SCENARIO = typer.Argument(
    ..., help="Scenario YAML file.", show_default=False, callback=check_scenario_file
)
SET = typer.Option(None, "--set", "-s", help="Override a key: --set workload.pipeline=8 (repeatable).")
HPL_SET = typer.Option(None, "--set", "-s", help="Override a key: --set workload.nb=256 (repeatable).")
JSON = typer.Option(False, "--json", help="Print the result as JSON on stdout and nothing else.")
OUT = typer.Option(
    None, "--out", "-o", help="Also write the JSON result to this file.", callback=check_out_file
)
PLOT = typer.Option(
    None, "--plot", help="Write the scaling plot (PNG, SVG, PDF) here.", callback=check_plot_file
)
STRATEGY = typer.Option(None, "--strategy", help="Routing strategy (default: the scenario's).")


def parse_gpus(text: str | None) -> list[int] | None:
    """`64,128,256` -> [64, 128, 256]; WorkloadError naming the gpus field on anything else.

    >>> parse_gpus("64, 128")
    [64, 128]
    """
    if text is None:
        return None
    try:
        sizes = [parse_int(part.strip()) for part in text.split(",") if part.strip()]
    except ValueError as err:
        raise WorkloadError(f"gpus: {text!r} is not a comma-separated list of GPU counts") from err
    if not sizes or min(sizes) < 1:
        raise WorkloadError(f"gpus: {text!r} is not a comma-separated list of GPU counts")
    return sizes


def _table(title: str, results: list[TrainingResult]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("GPUs")
    for r in results:
        table.add_column(str(r.gpus), justify="right")
    rows: list[tuple[str, Callable[[TrainingResult], str]]] = [
        ("tensor x pipeline x data", lambda r: f"{r.layout.tensor} x {r.layout.pipeline} x {r.layout.data}"),
        ("micro-batches per pipeline", lambda r: str(r.layout.micro_batches)),
        ("iteration (s)", lambda r: f"{r.iteration_s:.3f}"),
        ("tokens/s", lambda r: f"{r.tokens_per_s:,.0f}"),
        ("tokens/s per GPU", lambda r: f"{r.tokens_per_s / r.gpus:,.0f}"),
        ("TFLOPS per GPU (model)", lambda r: f"{r.tflops_per_gpu:.1f}"),
        ("TFLOPS per GPU (hardware)", lambda r: f"{r.hardware_tflops_per_gpu:.1f}"),
        ("MFU", lambda r: f"{r.mfu:.3f}"),
        ("strong scaling efficiency", lambda r: f"{r.scaling_efficiency:.3f} (vs {r.strong_base_gpus})"),
        ("weak scaling efficiency", lambda r: f"{r.weak_scaling_efficiency:.3f} (vs {r.weak_base_gpus})"),
        ("compute (s)", lambda r: f"{r.compute_s:.3f}"),
        ("exposed communication (s)", lambda r: f"{r.exposed_comm_s:.3f}"),
        ("pipeline bubble (s)", lambda r: f"{r.bubble_s:.3f}"),
        ("data-parallel reduction (s)", lambda r: f"{r.dp_reduction_s:.3f}"),
        ("memory per GPU (GB)", lambda r: f"{r.memory_gb:.1f}"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in results))
    return table


def _assumptions(loaded: Scenario) -> str:
    """One line: the node and model the prediction used, and which of them are defaults."""
    cluster, w = loaded.cluster, loaded.workload
    node = f"node {cluster.node}, {cluster.virtualization}" + (
        "" if "cluster" in loaded.model_fields_set else " (defaults: the scenario has no cluster:)"
    )
    model = (
        f"model {getattr(w, 'layers', '?')} layers, hidden {getattr(w, 'hidden', '?')}, "
        f"{getattr(w, 'heads', '?')} heads, sequence {getattr(w, 'sequence', '?')}"
    )
    unset = sorted({"layers", "hidden", "heads", "sequence"} - w.model_fields_set)
    return f"Used: {node}; {model}" + (f" ({', '.join(unset)}: defaults)" if unset else "") + "."


def write_plot(path: Path, title: str, results: list[TrainingResult]) -> None:
    """The scaling plot in the format its suffix names (PNG, SVG, PDF; PNG otherwise)."""
    from cloudtwin.evaluation.plots import PLOT_FORMATS, scaling_plot

    suffix = path.suffix.lower().lstrip(".")
    data = scaling_plot(results, title, suffix if suffix in PLOT_FORMATS else "png")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def train(
    scenario: Path = SCENARIO,
    gpus: str = typer.Option(
        None, "--gpus", help="Comma-separated GPU counts for a scaling curve, e.g. 64,128,256."
    ),
    plot: Path = PLOT,
    strategy: str = STRATEGY,
    overrides: list[str] = SET,
    as_json: bool = JSON,
    out: Path = OUT,
    site: str = SITE,
) -> None:
    """Predict an LLM training iteration (workload.kind: training) on the scenario's cluster.

    Prints iteration time, tokens/s (in all and per GPU), TFLOPS per GPU (model FLOPs, and
    hardware FLOPs with the recompute), MFU, the time breakdown (compute, exposed
    communication, pipeline bubble) and two scaling efficiencies: strong (the same global
    batch, against the smallest configuration that trains it) and weak (the same batch per
    GPU, against one node, or one model replica if larger). The data-parallel traffic
    (DDP/ZeRO reductions, FSDP/HSDP gathers and scatters) is simulated on the fabric with
    the routing strategy.

    On a one-cloud file, each site that trains (or the one --site names) is predicted on
    its own fabric and cluster.

    Example:  cloudtwin train examples/vela.yaml --gpus 32,256,768,1536 --plot scaling.png
    """
    from cloudtwin.evaluation import usecases

    sizes = parse_gpus(gpus)
    targets = site_scenarios(scenario, overrides, site, "train", ("training",))

    def one(loaded: Scenario) -> object:
        with progress_bar(f"{loaded.name}: predicting", not as_json) as progress:
            prediction = usecases.train(loaded, sizes, strategy, progress)
        results = list(prediction.results)
        if plot is not None:
            site = loaded.name.rsplit("/", 1)[-1]
            shown = plot if len(targets) == 1 else plot.with_stem(f"{plot.stem}-{site}")
            write_plot(shown, f"{loaded.name}: {prediction.strategy}", results)
            wrote(shown)
        if not as_json:
            stdout.print(_table(f"{loaded.name}: training ({prediction.strategy})", results))
            stdout.print(_assumptions(loaded), highlight=False, markup=False)
        return prediction.to_json()

    for_each_site(targets, one, as_json, out)
    if out is not None:
        wrote(out)


def hpl(
    scenario: Path = SCENARIO,
    strategy: str = STRATEGY,
    overrides: list[str] = HPL_SET,
    as_json: bool = JSON,
    out: Path = OUT,
    site: str = SITE,
) -> None:
    """Predict HPL (workload.kind: hpl) on the scenario's cluster.

    Prints the run time, TFLOPS in total and per GPU, and per-GPU FLOPS relative to
    HPL on a single VM (its GPUs, the same memory per GPU).

    Example:  cloudtwin hpl examples/vela-hpl.yaml --set routing.strategy=pinning
    """
    from cloudtwin.evaluation import usecases

    def one(loaded: Scenario) -> dict[str, object]:
        result = usecases.hpl(loaded, strategy)
        if not as_json:
            stdout.print(_hpl_table(loaded, strategy, result))
        return result.to_json()

    for_each_site(site_scenarios(scenario, overrides, site, "hpl", ("hpl",)), one, as_json, out)
    if out is not None:
        wrote(out)


def _hpl_table(loaded: Scenario, strategy: str | None, result: HplResult) -> Table:
    table = Table(title=f"{loaded.name}: HPL ({strategy or loaded.routing.strategy})", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("N / NB / P x Q", f"{result.n} / {result.nb} / {result.p} x {result.q}"),
        ("time (s)", f"{result.time_s:.1f}"),
        ("TFLOPS total", f"{result.tflops:,.1f}"),
        ("TFLOPS per GPU", f"{result.tflops_per_gpu:.2f}"),
        ("single VM TFLOPS per GPU", f"{result.single_vm_tflops_per_gpu:.2f}"),
        ("per GPU vs single VM", f"{result.relative_to_single_vm:.3f}"),
        ("row / column ring Gbps", f"{result.row_gbps:.1f} / {result.column_gbps:.1f}"),
        ("update / exposed panel / swap (s)",
         f"{result.update_s:.1f} / {result.exposed_panel_s:.1f} / {result.swap_s:.1f}"),
    ]
    for label, value in rows:
        table.add_row(label, value)
    return table

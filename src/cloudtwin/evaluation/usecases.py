"""What a user asks of cloudtwin, as functions: the CLI and the HTTP service both call these.

Each use case takes a validated `Scenario` (and plain values), runs the twin, and returns
a frozen result whose `to_json()` is the documented JSON form (what `--json` prints).
Nothing here opens a file or reads the environment: callers load scenarios and choose
where results go; a `Store` is passed in already open.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from pydantic import Field

from cloudtwin.engine.simulator import Progress
from cloudtwin.errors import RoutingError, ScenarioError, StoreError
from cloudtwin.evaluation.collective import CollectiveMeasurement
from cloudtwin.evaluation.evaluate import Evaluation
from cloudtwin.evaluation.frozen import Frozen, JsonObject
from cloudtwin.evaluation.hpl import HplResult
from cloudtwin.evaluation.metrics import RunSummary
from cloudtwin.evaluation.results import (
    CloudResults,
    RecordedResults,
    Results,
    StoredCloud,
    StoredEvaluation,
    read_stored,
)
from cloudtwin.evaluation.run import Run
from cloudtwin.evaluation.training import TrainingResult
from cloudtwin.scenario.model import CollectiveOp, Scenario
from cloudtwin.store.database import Store
from cloudtwin.store.run_pages import RunRow

__all__ = [
    "BASELINE_STRATEGIES",
    "BUILTIN_STRATEGIES",
    "COLLECTIVE_OPS",
    "Comparison",
    "EvaluationReport",
    "NcclRow",
    "NcclSweep",
    "RunResult",
    "StageProgress",
    "TrainingPrediction",
    "compare",
    "evaluate",
    "hpl",
    "list_results",
    "nccl_sizes",
    "nccl_tests",
    "parse_nccl_size",
    "check_strategies",
    "parse_strategies",
    "record_evaluation",
    "run",
    "show_result",
    "sweep_sizes",
    "train",
]

BUILTIN_STRATEGIES: tuple[str, ...] = ("ecmp", "ecmp-qp", "adaptive", "spray", "pinning")
"""The strategies compared by default, in the order tables show them (ECMP first: ratios are to it)."""

BASELINE_STRATEGIES: tuple[str, ...] = ("dmodk",)
"""Built-ins left out of the default comparison: deterministic single-path baselines (D-mod-k,
the routing SimGrid and HPC fabrics use) that a flow list names when it wants them."""

COLLECTIVE_OPS: tuple[str, ...] = get_args(CollectiveOp)

StageProgress = Callable[[str, int, int], None]
"""progress(stage, done, total): `stage` names what runs (e.g. a strategy); total may be 0."""

Report = Callable[[str], None]
"""report(message): one line saying which step of a long use case starts."""


def _stage(progress: StageProgress | None, label: str) -> Progress | None:
    """The engine's (done, total) progress of one stage, forwarded with its label."""
    if progress is None:
        return None
    return lambda done, total: progress(label, done, total)


# -- strategies -----------------------------------------------------------------------


def parse_strategies(
    text: str | Sequence[str] | None,
    default: Sequence[str] = BUILTIN_STRATEGIES,
    unique: bool = False,
) -> list[str]:
    """A strategy list: `"ecmp, pinning"` or a sequence of names; `default` when None.

    RoutingError (naming the `strategies` field) when the list is empty or, with
    `unique`, when a strategy is named twice.

    >>> parse_strategies("ecmp, pinning")
    ['ecmp', 'pinning']
    """
    if text is None:
        names = list(default)
    else:
        parts = text.split(",") if isinstance(text, str) else list(text)
        names = [s.strip() for s in parts if s.strip()]
    if not names:
        known = ", ".join(BUILTIN_STRATEGIES)
        raise RoutingError(f"strategies: no strategy named (built-in: {known})")
    twice = sorted({n for n in names if names.count(n) > 1})
    if unique and twice:
        raise RoutingError(f"strategies: {', '.join(twice)} named twice")
    return names


def check_strategies(names: Sequence[str]) -> None:
    """Load each strategy now, so that an unknown one is refused before any work starts
    (RoutingError naming the `strategies` field), not when its run begins."""
    from cloudtwin.routing.strategy import load_strategy

    for name in names:
        try:
            load_strategy(name)
        except RoutingError as err:
            reason = str(err).removeprefix("routing.strategy: ")
            raise RoutingError(f"strategies: {reason}", field="strategies") from None


# -- run and compare ------------------------------------------------------------------


@dataclass(frozen=True)
class RunResult:
    """One scenario simulated under one strategy (`cloudtwin run`)."""

    summary: RunSummary
    detail: Run | None = field(default=None, compare=False, repr=False)
    """The run itself (flows, paths, the engine's result), for per-flow output."""

    def to_json(self) -> JsonObject:
        """The run summary's JSON (`cloudtwin run --json`)."""
        return self.summary.to_json()


def run(scenario: Scenario, strategy: str | None = None, progress: Progress | None = None) -> RunResult:
    """Simulate the scenario under `strategy` (default: the scenario's own)."""
    from cloudtwin.evaluation.run import run_scenario

    done = run_scenario(scenario, strategy, progress)
    return RunResult(done.summary, done)


class Comparison(Frozen):
    """A scenario under several strategies, and each one's aggregate as a ratio to the first:
    `{"scenario", "results": {strategy: summary}, "ratios": {strategy: ratio}}` (`cloudtwin
    compare --json`, a compare job of the service)."""

    scenario: str
    results: dict[str, RunSummary]
    ratios: dict[str, float]

    @property
    def summaries(self) -> tuple[RunSummary, ...]:
        """Each strategy's run summary, in the order compared."""
        return tuple(self.results.values())


def compare(
    scenario: Scenario, strategies: Sequence[str], progress: StageProgress | None = None
) -> Comparison:
    """Simulate the scenario under each strategy; ratios are to the first one's aggregate."""
    names = parse_strategies(strategies)
    summaries = [run(scenario, name, _stage(progress, name)).summary for name in names]
    base = summaries[0].aggregate_gbps
    ratios = {r.strategy: (r.aggregate_gbps / base if base > 0 else float("nan")) for r in summaries}
    return Comparison(scenario=scenario.name, results={r.strategy: r for r in summaries}, ratios=ratios)


# -- nccl-tests -----------------------------------------------------------------------

_SIZE = re.compile(r"^\s*([0-9]+)\s*([KMGT]?)\s*$", re.IGNORECASE)
_POWER = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def parse_nccl_size(text: str, field: str) -> int:
    """A size as nccl-tests reads it: a whole number with K, M, G (powers of 1024).

    >>> parse_nccl_size("8G", "maxbytes"), parse_nccl_size("1M", "minbytes")
    (8589934592, 1048576)
    """
    match = _SIZE.match(text)
    if match is None or int(match.group(1)) == 0:
        raise ScenarioError(f"{field}: {text!r} is not a size like 1M or 8G (K/M/G are powers of 1024)")
    return int(match.group(1)) << _POWER[match.group(2).upper()]


def sweep_sizes(begin: int, end: int, factor: int) -> list[int]:
    """begin, begin x factor, ... up to end, as nccl-tests steps.

    >>> sweep_sizes(1 << 20, 8 << 20, 2)
    [1048576, 2097152, 4194304, 8388608]
    """
    if end < begin:
        raise ScenarioError(f"maxbytes: the largest size ({end}) is below the smallest ({begin})")
    if factor < 2:
        raise ScenarioError(f"stepfactor: the step factor must be at least 2, got {factor}")
    sizes = [begin]
    while sizes[-1] * factor <= end:
        sizes.append(sizes[-1] * factor)
    return sizes


def nccl_sizes(minbytes: str | int, maxbytes: str | int, stepfactor: int = 2) -> list[int]:
    """The sizes of a sweep from nccl-tests' `-b`, `-e`, `-f` (sizes as `1M` or bytes)."""
    begin = minbytes if isinstance(minbytes, int) else parse_nccl_size(minbytes, "minbytes")
    end = maxbytes if isinstance(maxbytes, int) else parse_nccl_size(maxbytes, "maxbytes")
    return sweep_sizes(begin, end, stepfactor)


class NcclRow(Frozen):
    """One row of an nccl-tests sweep as its JSON gives it: size, time (us), algbw and busbw."""

    size_bytes: int
    time_us: float
    algbw_GBps: float  # noqa: N815 (the JSON key, as nccl-tests names it)
    busbw_GBps: float  # noqa: N815

    @classmethod
    def of(cls, measurement: CollectiveMeasurement) -> NcclRow:
        """The row of a measured size."""
        return cls.model_validate(measurement.to_json())


class NcclSweep(Frozen):
    """An nccl-tests sweep, one row per size, per strategy (keys in the order asked):
    `{"scenario", "op", "results": {strategy: [row, ...]}}` (`cloudtwin nccl-tests --json`,
    an nccl-tests job of the service); `measured` keeps each row's measurement (jobs'
    times, algorithms) for the tables."""

    scenario: str
    op: str
    results: dict[str, list[NcclRow]]
    measured: dict[str, tuple[CollectiveMeasurement, ...]] = Field(default_factory=dict, exclude=True)

    @classmethod
    def of(cls, scenario: str, op: str, measured: dict[str, tuple[CollectiveMeasurement, ...]]) -> NcclSweep:
        """The sweep of these measurements."""
        rows = {k: [NcclRow.of(m) for m in ms] for k, ms in measured.items()}
        return cls(scenario=scenario, op=op, results=rows, measured=measured)


def nccl_tests(
    scenario: Scenario,
    sizes: Sequence[int],
    strategies: Sequence[str] | None = None,
    progress: StageProgress | None = None,
) -> NcclSweep:
    """Sweep the scenario's collective over `sizes` under each strategy (default: its own)."""
    from cloudtwin.evaluation.collective import collective_workload, simulate_collective
    from cloudtwin.routing.strategy import load_strategy
    from cloudtwin.topology.builders import build_topology

    workload = collective_workload(scenario)
    names = parse_strategies(strategies, (scenario.routing.strategy,))
    topology = build_topology(scenario)
    results: dict[str, tuple[CollectiveMeasurement, ...]] = {}
    for name in names:
        strategy = load_strategy(name)
        rows: list[CollectiveMeasurement] = []
        for size in sizes:
            rows.append(simulate_collective(scenario, topology, strategy, size).measurement)
            if progress is not None:
                progress(name, len(rows), len(sizes))
        results[strategy.name if strategy.name not in results else name] = tuple(rows)
    return NcclSweep.of(scenario.name, workload.op, results)


# -- evaluate -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EvaluationReport:
    """The three-fold evaluation: its results, the report files, the stored run id.

    `files` maps a file name (`results.json`, `report.md`, `report.html`) to its text;
    the caller decides where they go.
    """

    evaluation: Evaluation
    results: Results
    files: dict[str, str]
    run_id: int | None = None

    @property
    def recorded(self) -> RecordedResults:
        """The results with their run id (None: not stored)."""
        return RecordedResults(run_id=self.run_id, **dict(self.results))

    def to_json(self) -> JsonObject:
        """`{"run_id", **results.json}` (`cloudtwin evaluate --json`)."""
        return self.recorded.to_json()


def evaluate(
    scenario: Scenario,
    strategies: Sequence[str] = BUILTIN_STRATEGIES,
    report: Report | None = None,
    store: Store | None = None,
) -> EvaluationReport:
    """Every strategy on performance, resiliency and complexity; recorded in `store` if given."""
    import json

    from cloudtwin.evaluation.evaluate import evaluate as three_fold
    from cloudtwin.evaluation.report import render_html, render_markdown, results

    names = parse_strategies(strategies, unique=True)
    evaluation = three_fold(scenario, names, report)
    seen = [o.name for o in evaluation.outcomes]
    if len(set(seen)) != len(seen):
        raise RoutingError(f"strategies: a strategy is named twice ({', '.join(seen)})")
    typed = results(evaluation)
    files = {
        "results.json": json.dumps(typed.to_json(), indent=2) + "\n",
        "report.md": render_markdown(typed),
        "report.html": render_html(typed),
    }
    result = EvaluationReport(evaluation, typed, files)
    return result if store is None else record_evaluation(store, result)


def record_evaluation(store: Store, result: EvaluationReport) -> EvaluationReport:
    """Keep an evaluation in the store (its document, per-flow rows and timelines): the
    same report with its new `run_id`."""
    from cloudtwin.store.runs import save_run

    run_id = save_run(store, result.results, _flow_rows(result.evaluation))
    return replace(result, run_id=run_id)


def record_cloud(store: Store, results: CloudResults) -> int:
    """Keep a cloud evaluation (its results, `kind: cloud`) in the store beside single-fabric
    runs; its run id."""
    from cloudtwin.store.runs import save_run

    return save_run(store, results, [])


def _flow_rows(evaluation: Evaluation) -> list[Any]:
    from cloudtwin.store.runs import FlowRows
    from cloudtwin.twin import tenant_name

    flows = evaluation.bench.connections
    jobs = [evaluation.bench.jobs[int(j)].name for j in flows.job]
    tenants = [tenant_name(evaluation.scenario, int(t)) for t in flows.tenant]
    return [
        FlowRows(
            strategy=o.name,
            job=jobs,
            tenant=tenants,
            src=flows.src,
            dst=flows.dst,
            size_bytes=flows.size_bytes,
            start_s=o.connection_start_s,
            finish_s=o.connection_finish_s,
            baseline_finish_s=o.baseline_finish_s,
            stall_s=o.stall_s,
            affected=o.affected,
        )
        for o in evaluation.outcomes
    ]


# -- train and hpl --------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingPrediction:
    """Predicted training iterations; a scaling curve when GPU counts were asked for."""

    scenario: str
    strategy: str
    results: tuple[TrainingResult, ...]
    curve: bool

    def to_json(self) -> object:
        """A list of iterations for a curve, else the one iteration (`cloudtwin train --json`)."""
        documents = [r.to_json() for r in self.results]
        return documents if self.curve else documents[0]


def train(
    scenario: Scenario,
    gpus: Sequence[int] | None = None,
    strategy: str | None = None,
    progress: Progress | None = None,
) -> TrainingPrediction:
    """Predict a training iteration at each GPU count (default: `workload.gpus` or all)."""
    from cloudtwin.evaluation.training import predict_training

    results = predict_training(scenario, list(gpus) if gpus else None, strategy, progress)
    chosen = strategy or scenario.routing.strategy
    return TrainingPrediction(scenario.name, chosen, tuple(results), bool(gpus))


def hpl(scenario: Scenario, strategy: str | None = None) -> HplResult:
    """Predict HPL on the scenario's grid, and per-GPU FLOPS relative to one VM."""
    from cloudtwin.evaluation.hpl import predict_hpl

    return predict_hpl(scenario, strategy)


# -- stored results -------------------------------------------------------------------


def list_results(store: Store) -> list[RunRow]:
    """Stored evaluation runs, newest first (`cloudtwin results list --json`)."""
    from cloudtwin.store.runs import list_runs

    return list_runs(store)


def show_result(store: Store, run_id: int) -> StoredEvaluation | StoredCloud:
    """One stored evaluation run, read back as its type (`cloudtwin results show`).

    StoreError, in one line, when its results were stored in a form this cloudtwin does
    not read (the store's tables are versioned; the results inside them are the JSON of the
    types above, as this version writes them).
    """
    import json

    from cloudtwin.store.runs import load_run

    stored = load_run(store, run_id)
    try:
        return read_stored(stored.run_id, stored.created_at, stored.flow_rows, json.loads(stored.json))
    except ValueError as err:  # a pydantic ValidationError or a JSON error
        reason = f"run {run_id}: its stored results do not read as this cloudtwin's: {_first_error(err)}"
        raise StoreError(reason) from None


def _first_error(err: Exception) -> str:
    """The first problem of a failed read, in one line (the field and why)."""
    from pydantic import ValidationError

    if isinstance(err, ValidationError) and err.errors():
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "document"  # [0]: fabric or cloud
        return f"{where}: {first['msg'].lower()}"
    return str(err).splitlines()[0]

"""The work of one point: load the scenario with the point's overrides, run a command on it.

A `Task` is small and picklable: workers (local processes or Ray tasks) receive it once
and call it with each point's overrides. Scenarios are loaded through the same
`--set` code path as every other command (`scenario_from_data`), so a vary means
exactly what the same `--set` would.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

import yaml

from cloudtwin import __version__
from cloudtwin.errors import SweepError, WorkloadError
from cloudtwin.evaluation import usecases
from cloudtwin.evaluation.frozen import JsonObject
from cloudtwin.scenario.files import attach_files
from cloudtwin.scenario.loader import YamlMapping, apply_overrides, parse_yaml, scenario_from_data
from cloudtwin.scenario.model import Scenario

__all__ = ["COMMANDS", "Command", "Task", "default_metric"]

Command = Literal["run", "compare", "nccl-tests", "train", "evaluate"]
COMMANDS: tuple[str, ...] = get_args(Command)



def _strategy_list(task: Task, scenario: Scenario) -> list[str]:
    if task.strategies:
        return list(task.strategies)
    if task.command in ("compare", "evaluate"):
        return list(usecases.BUILTIN_STRATEGIES)
    return [scenario.routing.strategy]


def _run(task: Task, scenario: Scenario) -> JsonObject:
    return usecases.run(scenario).to_json()


def _compare(task: Task, scenario: Scenario) -> JsonObject:
    return usecases.compare(scenario, _strategy_list(task, scenario)).to_json()


def _nccl_tests(task: Task, scenario: Scenario) -> JsonObject:
    """nccl-tests at the scenario's own size, with busbw as a ratio to the first strategy."""
    from cloudtwin.evaluation.collective import collective_workload

    size = collective_workload(scenario).size
    sweep = usecases.nccl_tests(scenario, [size], _strategy_list(task, scenario))
    busbw = {name: rows[0].busbw_GBps for name, rows in sweep.results.items()}
    base = next(iter(busbw.values()))
    ratios: JsonObject = {name: (v / base if base > 0 else float("nan")) for name, v in busbw.items()}
    return {**sweep.to_json(), "busbw_GBps": base, "ratios": ratios}


def _train(task: Task, scenario: Scenario) -> JsonObject:
    strategy = task.strategies[0] if task.strategies else None
    document = usecases.train(scenario, None, strategy).to_json()
    assert isinstance(document, dict)
    return document


def _evaluate(task: Task, scenario: Scenario) -> JsonObject:
    return usecases.evaluate(scenario, _strategy_list(task, scenario)).results.to_json()


def _check(task: Task, scenario: Scenario) -> None:
    """What a command needs of a scenario, checked before a sweep starts: the workload
    the command simulates, its strategies, and the limits every run checks before it
    builds the fabric (LimitError naming `limits.memory` or `limits.flows`)."""
    from cloudtwin.routing.strategy import load_strategy
    from cloudtwin.topology.estimate import check_memory

    kind = scenario.workload.kind
    if task.command == "nccl-tests":
        from cloudtwin.evaluation.collective import collective_workload

        collective_workload(scenario)
    elif task.command == "train" and kind != "training":
        raise WorkloadError(f"workload.kind: {kind}; train predicts a training workload")
    elif task.command in ("run", "compare") and kind in ("training", "hpl"):
        raise WorkloadError(f"workload.kind: {kind} is not simulated by {task.command}")
    for name in _strategy_list(task, scenario):
        load_strategy(name)
    check_memory(scenario)


_RUNNERS: dict[str, Callable[[Task, Scenario], JsonObject]] = {
    "run": _run,
    "compare": _compare,
    "nccl-tests": _nccl_tests,
    "train": _train,
    "evaluate": _evaluate,
}

_PARSED: dict[str, tuple[YamlMapping, yaml.Node | None]] = {}
_FILES: dict[str, dict[str, object]] = {}


@dataclass(frozen=True)
class Task:
    """A command run on a scenario (its YAML text, plus `sets` applied to every point)."""

    scenario_text: str
    source: str
    command: str = "run"
    sets: tuple[str, ...] = ()
    strategies: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    """The profile files the points name (path as given -> its JSON text), read by the CLI."""
    digest: str = field(init=False, default="")

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise SweepError(f"command: unknown command {self.command!r} (known: {', '.join(COMMANDS)})")
        if self.command == "run" and self.strategies:
            raise SweepError("strategies: run simulates the scenario's routing.strategy; vary that key")
        data, _ = parse_yaml(self.scenario_text, self.source)
        content = json.dumps(apply_overrides(data, self.sets), sort_keys=True, default=str)
        what = json.dumps([__version__, self.command, list(self.strategies), content, list(self.files)])
        object.__setattr__(self, "digest", hashlib.sha256(what.encode()).hexdigest())

    def scenario(self, overrides: Sequence[str]) -> Scenario:
        """The scenario of a point: the file, the sets, then the point's overrides."""
        if self.digest not in _PARSED:
            _PARSED[self.digest] = parse_yaml(self.scenario_text, self.source)
        data, node = _PARSED[self.digest]
        scenario = scenario_from_data(data, node, self.source, [*self.sets, *overrides])
        if not self.files:
            return scenario
        if self.digest not in _FILES:
            _FILES[self.digest] = {name: json.loads(text) for name, text in self.files}
        return attach_files(scenario, _FILES[self.digest])

    def check(self, overrides: Sequence[str]) -> None:
        """Raise the error a point would fail with, without running it."""
        _check(self, self.scenario(overrides))

    def __call__(self, overrides: Sequence[str]) -> JsonObject:
        """The command's result document for one point."""
        return _RUNNERS[self.command](self, self.scenario(overrides))

    def default_metric(self) -> str:
        """The metric a summary shows unless told otherwise."""
        return default_metric(self.command, self.strategies)


def default_metric(command: str, strategies: Sequence[str]) -> str:
    """`aggregate_gbps` for run; the last strategy's ratio to the first for compare and
    nccl-tests (busbw with one strategy); tokens/s for train; the last strategy's
    aggregate throughput for evaluate.

    >>> default_metric("compare", ["ecmp", "pinning"])
    'ratios.pinning'
    """
    last = strategies[-1] if strategies else "pinning"
    if command == "nccl-tests" and len(strategies) < 2:
        return "busbw_GBps"
    return {
        "run": "aggregate_gbps",
        "compare": f"ratios.{last}",
        "nccl-tests": f"ratios.{last}",
        "train": "tokens_per_s",
        "evaluate": f"strategies.{last}.performance.aggregate_gbps",
    }[command]

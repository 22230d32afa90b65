"""The twin's own floors: the kernel (`run.py`) imports nothing of the twin, what prepares a
run sits above it, the drivers above that, the assemblies on top; no import goes down-up,
so no import cycle runs through the twin. And a run is prepared once per scenario and
strategy: `evaluate` plans the hosts' NICs once, whatever runs it makes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cloudtwin.twin.preparation as preparation
from cloudtwin.evaluation.evaluate import evaluate
from cloudtwin.scenario import load_scenario

TWIN = Path(__file__).resolve().parents[2] / "src" / "cloudtwin" / "twin"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "migration.yaml"

#: The twin's modules from the bottom floor up: a module imports only from its own floor
#: (without a cycle) and the floors below.
FLOORS: list[tuple[str, ...]] = [
    ("run",),
    ("registry", "routing", "timeline", "wan", "builders", "flowjob", "rings", "jobs", "preparation"),
    ("migration", "traffic", "migration_paths", "sites"),
    ("assembly", "faulted", "federation", "cloud"),
    ("__init__",),
]
FLOOR = {name: i for i, row in enumerate(FLOORS) for name in row}


def _twin_imports(path: Path) -> set[str]:
    """The twin modules `path` imports (in functions and TYPE_CHECKING blocks too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cloudtwin.twin."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("cloudtwin.twin.")}
    return found


def _graph() -> dict[str, set[str]]:
    return {path.stem: _twin_imports(path) for path in sorted(TWIN.glob("*.py"))}


def test_every_twin_module_has_a_floor() -> None:
    assert sorted(set(_graph()) - set(FLOOR)) == []


def test_the_kernel_imports_nothing_of_the_twin() -> None:
    assert _graph()["run"] == set()


def test_no_twin_import_goes_up_a_floor() -> None:
    up = [f"{m} imports {t}" for m, targets in _graph().items() for t in targets if FLOOR[t] > FLOOR[m]]
    assert up == []


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """Modules on an import cycle (depth-first search for a back edge)."""
    state: dict[str, int] = {}
    on_cycle: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                on_cycle.append(f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt)
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return on_cycle


def test_no_import_cycle_in_the_twin() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_check_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["c -> a"]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_evaluate_plans_the_nics_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two strategies, each run without and with faults, with migrations beside the jobs:
    one NIC plan for all of it (the prepared run carries it to every run and driver)."""
    calls = []
    plan = preparation.nic_plan

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return plan(*args, **kwargs)

    monkeypatch.setattr(preparation, "nic_plan", counted)
    evaluation = evaluate(load_scenario(EXAMPLE.read_text()), ["ecmp", "pinning"])
    assert len(evaluation.outcomes) == 2 and all(o.migrations for o in evaluation.outcomes)
    assert len(calls) == 1

"""The diagnose use case, shared by the CLI and the HTTP service: optionally simulate a
scenario's faulted run into the store, then rank likely root causes from the store alone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cloudtwin.diagnosis.emit import emit_run
from cloudtwin.diagnosis.rank import Suspect
from cloudtwin.diagnosis.rank import diagnose as rank
from cloudtwin.scenario.cloud import CloudScenario
from cloudtwin.scenario.model import Scenario
from cloudtwin.store.database import Store
from cloudtwin.store.ops_query import DEFAULT_MAX_CELLS
from cloudtwin.store.twin_tables import TwinMeta, run_names
from cloudtwin.twin import simulate_faulted

__all__ = ["DEFAULT_TOP", "Diagnosis", "diagnose", "diagnose_cloud"]

DEFAULT_TOP = 10
"""How many suspects a diagnosis keeps unless asked otherwise."""


@dataclass(frozen=True)
class Diagnosis:
    """The most likely root causes, best first, and the twin run they were ranked from
    (`run`: its name; `runs`: every twin run in the store, the latest first)."""

    suspects: tuple[Suspect, ...]
    emitted: TwinMeta | None = None
    run: str | None = None
    runs: tuple[str, ...] = ()

    @property
    def fault_found(self) -> bool:
        """Whether anything points to a fault (see `diagnosis.rank.diagnose`)."""
        return bool(self.suspects)

    def to_json(self) -> dict[str, object]:
        """`{"run": ..., "fault_found": ..., "suspects": [...]}` (`cloudtwin diagnose --json`)."""
        return {
            "run": self.run, "fault_found": self.fault_found, "suspects": [s.to_json() for s in self.suspects]
        }


def diagnose(
    store: Store,
    scenario: Scenario | None = None,
    top: int = DEFAULT_TOP,
    window: timedelta | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    run: str | None = None,
) -> Diagnosis:
    """Rank suspects of the twin run `run` in `store` (the latest written when None); with
    `scenario`, first simulate its faulted run (the one `evaluate` reports for the
    scenario's strategy), emit its operations data there and rank that run."""
    emitted = emit_run(store, simulate_faulted(scenario)) if scenario is not None else None
    return _ranked(store, emitted, emitted.run if emitted else run, top, window, max_cells)


def diagnose_cloud(
    store: Store,
    cloud: CloudScenario,
    top: int = DEFAULT_TOP,
    window: timedelta | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> Diagnosis:
    """Simulate the cloud without and with its faults under its own strategy (the runs
    `evaluate` reports for it), emit the faulted run's operations data, rank its suspects."""
    from cloudtwin.diagnosis.cloud import emit_cloud
    from cloudtwin.twin.cloud import run_cloud

    emitted = emit_cloud(store, run_cloud(cloud, faults=False), run_cloud(cloud, faults=True))
    return _ranked(store, emitted, emitted.run, top, window, max_cells)


def _ranked(
    store: Store,
    emitted: TwinMeta | None,
    run: str | None,
    top: int,
    window: timedelta | None,
    max_cells: int,
) -> Diagnosis:
    runs = tuple(run_names(store))
    run = run if run is not None else (runs[0] if runs else None)  # the latest written
    suspects = rank(store, window, max_cells=max_cells, run=run)[:top]
    return Diagnosis(tuple(suspects), emitted, run, runs)

"""The diagnose use case, shared by the CLI and the HTTP service: optionally simulate a
scenario's faulted run into the store, then rank likely root causes from the store alone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cloudtwin.diagnosis.emit import emit_run
from cloudtwin.diagnosis.rank import Suspect
from cloudtwin.diagnosis.rank import diagnose as rank
from cloudtwin.diagnosis.tables import TwinMeta
from cloudtwin.scenario.model import Scenario
from cloudtwin.store.database import Store
from cloudtwin.twin import simulate_faulted

__all__ = ["DEFAULT_TOP", "Diagnosis", "diagnose"]

DEFAULT_TOP = 10
"""How many suspects a diagnosis keeps unless asked otherwise."""


@dataclass(frozen=True)
class Diagnosis:
    """The most likely root causes, best first, and the twin run they were ranked from."""

    suspects: tuple[Suspect, ...]
    emitted: TwinMeta | None = None

    def to_json(self) -> dict[str, object]:
        """`{"suspects": [...]}` (`cloudtwin diagnose --json`)."""
        return {"suspects": [s.to_json() for s in self.suspects]}


def diagnose(
    store: Store,
    scenario: Scenario | None = None,
    top: int = DEFAULT_TOP,
    window: timedelta | None = None,
) -> Diagnosis:
    """Rank suspects from `store`; with `scenario`, first simulate its faulted run (the one
    `evaluate` reports for the scenario's strategy) and emit its operations data there."""
    emitted = emit_run(store, simulate_faulted(scenario)) if scenario is not None else None
    return Diagnosis(tuple(rank(store, window)[:top]), emitted)

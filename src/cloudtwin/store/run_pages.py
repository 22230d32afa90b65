"""Queries over stored evaluation runs for pages: a filtered, sorted page of runs; a run's
throughput timelines and flow completion times, summarised in the database."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from typing_extensions import TypedDict

from cloudtwin.store.database import Store

__all__ = ["RUN_SORT_KEYS", "RunFilter", "RunPage", "RunRow", "fct_quantiles", "page_runs", "run_timelines"]

RunSortKey = Literal["run_id", "created_at", "scenario", "seed", "strategies"]
RUN_SORT_KEYS: tuple[str, ...] = ("run_id", "created_at", "scenario", "seed", "strategies")
_COLUMNS = "run_id, created_at, scenario, seed, strategies, recommendation"


@dataclass(frozen=True)
class RunFilter:
    """Which runs to show: scenario name containing a text, a strategy among them, a seed."""

    scenario: str | None = None
    strategy: str | None = None
    seed: int | None = None

    def where(self) -> tuple[str, list[object]]:
        clauses: list[str] = ["TRUE"]
        params: list[object] = []
        if self.scenario:
            clauses.append("contains(lower(scenario), lower(?))")
            params.append(self.scenario)
        if self.strategy:
            clauses.append("list_contains(string_split(strategies, ','), ?)")
            params.append(self.strategy)
        if self.seed is not None:
            clauses.append("seed = ?")
            params.append(self.seed)
        return " AND ".join(clauses), params


class RunRow(TypedDict):
    """One stored run in a list: when, what, and the recommendation it made."""

    run_id: int
    created_at: str
    scenario: str
    seed: int
    strategies: str
    recommendation: str | None


@dataclass(frozen=True)
class RunPage:
    """One page of runs and how many match in all."""

    total: int
    runs: list[RunRow]


def page_runs(
    store: Store,
    where: RunFilter = RunFilter(),
    sort: RunSortKey = "run_id",
    descending: bool = True,
    limit: int = 50,
    offset: int = 0,
) -> RunPage:
    """The runs matching `where`, sorted, `limit` of them from `offset` (ties by run id)."""
    if store.schema_version("runs") is None:
        return RunPage(0, [])
    if sort not in RUN_SORT_KEYS:
        raise ValueError(f"sort: {sort!r} is not one of {', '.join(RUN_SORT_KEYS)}")
    clause, params = where.where()
    order = "DESC" if descending else "ASC"
    total = store.query(f"SELECT count(*) FROM eval_runs WHERE {clause}", params)[1][0][0]
    _, rows = store.query(
        f"SELECT {_COLUMNS} FROM eval_runs WHERE {clause} "
        f"ORDER BY {sort} {order}, run_id {order} LIMIT ? OFFSET ?",
        [*params, int(limit), int(offset)],
    )
    runs = [
        RunRow(run_id=r[0], created_at=str(r[1]), scenario=r[2], seed=r[3], strategies=r[4],
               recommendation=r[5])
        for r in rows
    ]
    return RunPage(int(total), runs)


def run_timelines(store: Store, run_id: int) -> dict[str, dict[str, list[float]]]:
    """Per strategy: time (s) and the aggregate throughput without and with faults (Gbps)."""
    rows = store.query(
        "SELECT strategy, list(t_s ORDER BY t_s), list(baseline_gbps ORDER BY t_s), "
        "list(faulted_gbps ORDER BY t_s) FROM eval_timelines WHERE run_id = ? GROUP BY strategy",
        [run_id],
    )[1]
    return {s: {"t_s": t, "baseline_gbps": b, "faulted_gbps": f} for s, t, b, f in rows}


def fct_quantiles(store: Store, run_id: int, points: int = 50) -> dict[str, dict[str, list[float]]]:
    """Per strategy: the flow completion time (s, with faults) at `points` evenly spaced
    quantiles, for a distribution plot that stays small however many flows a run has."""
    qs = [i / (points - 1) for i in range(points)]
    rows = store.query(
        "SELECT strategy, quantile_cont(finish_s - start_s, ?::DOUBLE[]) FROM eval_flows "
        "WHERE run_id = ? AND finish_s IS NOT NULL AND isfinite(finish_s) GROUP BY strategy",
        [qs, run_id],
    )[1]
    return {s: {"quantile": qs, "fct_s": list(v)} for s, v in rows}

"""The head of an evaluation's results document: the fields the store indexes and the pages
compare, read as typed objects (the rest of the document is kept and served as written).

Numbers are `int | float` so that a value read back keeps its JSON form (`3` stays `3`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from cloudtwin.store.documents import Document

__all__ = ["ComplexityHead", "PerformanceHead", "ResiliencyHead", "RunHead", "StrategyHead", "TimelineHead"]

Number = int | float


class _Head(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class PerformanceHead(_Head):
    """A strategy's aggregate throughput (Gbps) and its ratio to the first strategy's."""

    aggregate_gbps: Number
    ratio_to_first: Number | None = None


class TimelineHead(_Head):
    """Aggregate throughput over time (s, Gbps), without and with the faults."""

    t_s: list[float]
    baseline_gbps: list[float]
    faulted_gbps: list[float]


class ResiliencyHead(_Head):
    """Whether and how fast a strategy recovered from the faults, and what they cost."""

    recovered: bool
    time_to_recover_s: Number | None
    dip: Number
    bytes_delayed: Number
    timeline: TimelineHead


class ComplexityHead(_Head):
    """A strategy's complexity score."""

    score: Number


class StrategyHead(_Head):
    """One strategy's result: its performance, resiliency and complexity."""

    performance: PerformanceHead
    resiliency: ResiliencyHead
    complexity: ComplexityHead


class RunHead(_Head):
    """What a run is (scenario, seed), what it recommends, and each strategy's head."""

    scenario: str
    seed: int
    recommendation: str | None = None
    strategies: dict[str, StrategyHead]

    @classmethod
    def of(cls, document: Document) -> RunHead:
        """The head of a results document."""
        return cls.model_validate(document)

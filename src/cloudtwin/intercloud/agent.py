"""A site's agent: pull the desired state, reconcile it through the site's adapter, report.

The agent keeps no state of its own: it reads what the site holds back from the adapter
every time, so an agent killed half-way and started again simply finishes the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cloudtwin.intercloud.adapters.base import Adapter
from cloudtwin.intercloud.objects import DesiredSegment, RealisedSegment, SiteDesired, SiteReport

__all__ = ["Agent", "ControllerClient", "ReconcileResult"]


class ControllerClient(Protocol):
    """The two controller calls an agent makes (in-process or over HTTP)."""

    def desired(self, token: str | None, site: str) -> SiteDesired:
        """The site's desired state."""

    def report(self, token: str | None, site: str, report: SiteReport) -> None:
        """Report what the site holds."""


@dataclass
class ReconcileResult:
    """What one reconcile changed."""

    generation: int
    applied: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready summary."""
        return {
            "generation": self.generation,
            "applied": self.applied,
            "deleted": self.deleted,
            "unchanged": self.unchanged,
        }


class Agent:
    """Reconciles one site."""

    def __init__(self, site: str, token: str, controller: ControllerClient, adapter: Adapter) -> None:
        self.site = site
        self.token = token
        self.controller = controller
        self.adapter = adapter

    def reconcile(self) -> ReconcileResult:
        """One round: make the site hold exactly the desired segments, then report them."""
        desired = self.controller.desired(self.token, self.site)
        want = {s.network: s for s in desired.segments}
        have = {s.network: s for s in self.adapter.segments()}
        result = ReconcileResult(generation=desired.generation)
        for network in sorted(set(have) - set(want)):
            self.adapter.delete(network)
            result.deleted.append(network)
        for network, segment in sorted(want.items()):
            if have.get(network) == segment:
                result.unchanged.append(network)
                continue
            self.adapter.apply(segment)
            result.applied.append(network)
        self.controller.report(self.token, self.site, _report(desired.generation, self.adapter.segments()))
        return result


def _report(generation: int, held: list[DesiredSegment]) -> SiteReport:
    realised = tuple(
        RealisedSegment(network=s.network, peers=tuple(p.site for p in s.peers))
        for s in sorted(held, key=lambda s: s.network)
        if s.endpoints > 0
    )
    return SiteReport(generation=generation, realised=realised)

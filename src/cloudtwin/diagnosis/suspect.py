"""A suspect of a diagnosis: one ranked component, its score and the evidence behind it
(what the ranking infers from the store, and what failed measured boots attest)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["Suspect"]


@dataclass
class Suspect:
    """One ranked component: its score and the evidence behind it."""

    component: str
    kind: str
    score: float = 0.0
    tomography: float = 0.0
    logs: float = 0.0
    degraded_samples: int = 0
    healthy_samples: int = 0
    messages: dict[str, int] = field(default_factory=dict)
    rank: int = 0
    since: datetime | None = None
    until: datetime | None = None
    severe: bool = False  # an error line named it (a dead neighbour's cable, not a warning)
    explains: list[str] = field(default_factory=list)

    def widen(self, span: tuple[datetime, datetime] | None) -> None:
        """Stretch the suspect's time window over `span`."""
        if span is None:
            return
        self.since = span[0] if self.since is None else min(self.since, span[0])
        self.until = span[1] if self.until is None else max(self.until, span[1])

    @property
    def window(self) -> str:
        """When its evidence was: `12:00:02.815-12:00:03.769` (wall clock of the run)."""
        if self.since is None or self.until is None:
            return "-"
        return f"{self.since:%H:%M:%S.%f}"[:-3] + "-" + f"{self.until:%H:%M:%S.%f}"[:-3]

    @property
    def evidence(self) -> str:
        """One line: tomography, logs, and the messages that named it."""
        parts = []
        if self.degraded_samples:
            parts.append(
                f"{self.degraded_samples} degraded / {self.healthy_samples} healthy flow samples"
            )
        if self.messages:
            top = sorted(self.messages.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            parts.append("logs: " + ", ".join(f"{m} x{n}" for m, n in top))
        return "; ".join(parts) or "-"

    def to_json(self) -> dict[str, object]:
        """JSON form."""
        return {
            "rank": self.rank, "component": self.component, "kind": self.kind,
            "score": round(self.score, 4), "tomography": round(self.tomography, 4),
            "logs": round(self.logs, 4), "degraded_samples": self.degraded_samples,
            "healthy_samples": self.healthy_samples, "messages": self.messages,
            "evidence": self.evidence,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }

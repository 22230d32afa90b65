"""A structured operations record: what ingestion stores for one log line or emitted event."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["LogRecord"]


@dataclass(frozen=True)
class LogRecord:
    """One already-structured record, e.g. a switch syslog line emitted by a simulation.

    ``source`` names where it came from (a device, a run); ``content`` is the free text
    that template mining groups.
    """

    timestamp: datetime | None
    source: str
    level: str | None
    component: str | None
    content: str

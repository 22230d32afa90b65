"""The one error tree of cloudtwin: every error a user can cause is a CloudtwinError."""

from __future__ import annotations

__all__ = [
    "CloudtwinError",
    "EngineError",
    "LimitError",
    "LogFormatError",
    "OutputError",
    "RoutingError",
    "ScenarioError",
    "StoreError",
    "TopologyError",
    "WorkloadError",
]


class CloudtwinError(Exception):
    """Base of every error cloudtwin raises on bad input; the CLI maps it to exit code 2."""


class ScenarioError(CloudtwinError):
    """A scenario file or override is malformed; the message names the key and the reason."""


class TopologyError(CloudtwinError):
    """A fabric cannot be built as described (impossible sizes, unreachable hosts)."""


class RoutingError(CloudtwinError):
    """A routing strategy is unknown, cannot be loaded, or cannot route a flow."""


class WorkloadError(CloudtwinError):
    """A workload does not fit the fabric it is placed on."""


class EngineError(CloudtwinError):
    """The simulator was given inconsistent arrays (lengths, negative sizes, cycles)."""


class LogFormatError(CloudtwinError):
    """A log format string or log input cannot be understood."""


class OutputError(CloudtwinError):
    """An output file or folder cannot be written where it was asked for."""


class StoreError(CloudtwinError):
    """The results/operations store cannot be opened or queried."""


class LimitError(CloudtwinError):
    """A resource limit (memory, rows, time, size) would be passed; ``limit`` names it.

    The message gives the estimate and the limit; ``limit`` is the field that lifts it
    (a scenario key such as ``limits.memory``, or a parameter such as ``max_rows``),
    so each front end can say how to raise it in its own terms.
    """

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit

"""The one error tree of cloudtwin: every error a user can cause is a CloudtwinError."""

from __future__ import annotations

__all__ = [
    "CloudtwinError",
    "EngineError",
    "LogFormatError",
    "MobilityError",
    "NicError",
    "P4Error",
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


class StoreError(CloudtwinError):
    """The results/operations store cannot be opened or queried."""


class MobilityError(CloudtwinError):
    """A VM or live migration is described inconsistently (sizes, rates, unknown VM or site)."""


class NicError(CloudtwinError):
    """A NIC profile, function placement, table entry, control request or boot image is invalid."""


class P4Error(NicError):
    """A P4 program is outside the supported subset or inconsistent; the message starts with
    `file:line:column`."""

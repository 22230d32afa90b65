"""cloudtwin: a digital twin of a multi-tenant AI cloud."""

from cloudtwin.errors import (
    CloudtwinError,
    EngineError,
    LogFormatError,
    RoutingError,
    ScenarioError,
    StoreError,
    TopologyError,
    WorkloadError,
)

__version__ = "0.1.0"

__all__ = [
    "CloudtwinError",
    "EngineError",
    "LogFormatError",
    "RoutingError",
    "ScenarioError",
    "StoreError",
    "TopologyError",
    "WorkloadError",
    "__version__",
]

"""Scenarios: what a user describes in YAML, validated into frozen models."""

from typing import TYPE_CHECKING

from cloudtwin import lazy_exports

if TYPE_CHECKING:
    from cloudtwin.scenario.loader import apply_overrides, load_scenario, parse_yaml
    from cloudtwin.scenario.model import (
        CollectiveWorkload,
        FatTreeFabric,
        Hosts,
        LeafSpineFabric,
        PerftestWorkload,
        RailOptimizedFabric,
        Routing,
        Scenario,
        Tenant,
        parse_host_ranges,
    )
    from cloudtwin.scenario.units import (
        format_rate,
        format_size,
        format_time,
        parse_rate,
        parse_size,
        parse_time,
    )

__all__ = [
    "CollectiveWorkload",
    "FatTreeFabric",
    "Hosts",
    "LeafSpineFabric",
    "PerftestWorkload",
    "RailOptimizedFabric",
    "Routing",
    "Scenario",
    "Tenant",
    "apply_overrides",
    "format_rate",
    "format_size",
    "format_time",
    "load_scenario",
    "parse_host_ranges",
    "parse_rate",
    "parse_size",
    "parse_time",
    "parse_yaml",
]
__getattr__, __dir__ = lazy_exports(__name__)

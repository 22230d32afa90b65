"""Faults: what fails when (links, switches, NICs) and how each routing strategy repairs it."""

from cloudtwin.faults.events import FabricState, cable_links, expand_faults, resolve_target
from cloudtwin.faults.plan import RepairPlan, RouteFn, plan_repairs
from cloudtwin.faults.reaction import Phase, phases_for, rule_links

__all__ = [
    "FabricState",
    "Phase",
    "RepairPlan",
    "RouteFn",
    "cable_links",
    "expand_faults",
    "phases_for",
    "plan_repairs",
    "resolve_target",
    "rule_links",
]

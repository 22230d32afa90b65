"""Faults: what fails when (links, switches, NICs) and how each routing strategy repairs it."""

from cloudtwin.faults.events import FabricState, cable_links, expand_faults, resolve_target
from cloudtwin.faults.plan import RepairPlan, RouteFn, plan_repairs
from cloudtwin.faults.reaction import ReactionKind, phases_for, reaction_of, rule_links

__all__ = [
    "FabricState",
    "ReactionKind",
    "RepairPlan",
    "RouteFn",
    "cable_links",
    "expand_faults",
    "phases_for",
    "plan_repairs",
    "reaction_of",
    "resolve_target",
    "rule_links",
]

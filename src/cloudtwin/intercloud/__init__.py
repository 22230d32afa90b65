"""Inter-cloud networking: federations of independent sites, their controller, agents,
adapters, gateways, address modes and tunnels."""

from cloudtwin.intercloud.dataplane import GatewayTables, WanMessage, build_tables, reachability
from cloudtwin.intercloud.encapsulation import EncapsulationCost, encapsulation_cost, goodput_fraction
from cloudtwin.intercloud.plan import FederationPlan, plan_federation

__all__ = [
    "EncapsulationCost",
    "FederationPlan",
    "GatewayTables",
    "WanMessage",
    "build_tables",
    "encapsulation_cost",
    "goodput_fraction",
    "plan_federation",
    "reachability",
]

"""Routing strategies behind one protocol: ecmp, ecmp-qp, adaptive, spray, pinning, or your own."""

from cloudtwin.routing.builtin import Adaptive, Ecmp, EcmpQp, Pinning, Spray
from cloudtwin.routing.coloring import color_bipartite_edges
from cloudtwin.routing.strategy import (
    RoutingContext,
    Strategy,
    load_strategy,
    register,
    strategy_names,
)

__all__ = [
    "Adaptive",
    "Ecmp",
    "EcmpQp",
    "Pinning",
    "RoutingContext",
    "Spray",
    "Strategy",
    "color_bipartite_edges",
    "load_strategy",
    "register",
    "strategy_names",
]

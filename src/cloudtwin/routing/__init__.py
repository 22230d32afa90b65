"""Routing strategies behind one protocol: ecmp, ecmp-qp, adaptive, spray, pinning, or your own."""

from cloudtwin.routing.builtin import Adaptive, Ecmp, EcmpQp, Pinning, Spray
from cloudtwin.routing.coloring import color_bipartite_edges
from cloudtwin.routing.facts import (
    PLAIN_ECMP,
    USER_PROFILE,
    Profile,
    ReactionKind,
    profile_of,
    reaction_of,
)
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
    "PLAIN_ECMP",
    "Pinning",
    "Profile",
    "ReactionKind",
    "RoutingContext",
    "Spray",
    "Strategy",
    "USER_PROFILE",
    "color_bipartite_edges",
    "load_strategy",
    "profile_of",
    "reaction_of",
    "register",
    "strategy_names",
]

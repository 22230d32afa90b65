"""What a strategy declares about itself: how it reacts to a failure, and what it needs from
the cloud (its complexity profile). Each strategy states both in its own module, as class
attributes; a user strategy may too, importing only `cloudtwin.routing`:

    class MyStrategy:
        name = "mine"
        reaction = "controller"          # or "local-then-protocol", "protocol"
        profile = Profile(controller=True, host_cooperation=False, switch_features=("ECMP",),
                          flow_rules=True, flow_state=False, needs="a controller")

Reaction models (the repair phases are planned by `faults/`):

- `local-then-protocol`: after `local_detect` the switch next to the failure drops its
  dead port and the strategy's own choice covers the surviving next hops; after
  `bfd_detect + bgp_convergence` every switch knows the surviving fabric.
- `protocol` (a user strategy unless it says otherwise): only the routing-protocol phase.
- `controller`: a controller hears of the failure, recomputes and installs rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from cloudtwin.errors import RoutingError
from cloudtwin.routing.strategy import Strategy, load_strategy, strategy_names

__all__ = [
    "DEFAULT_REACTION",
    "PLAIN_ECMP",
    "USER_PROFILE",
    "Profile",
    "ReactionKind",
    "profile_of",
    "reaction_of",
]

ReactionKind = Literal["local-then-protocol", "protocol", "controller"]

DEFAULT_REACTION: ReactionKind = "protocol"
"""The reaction of a strategy that declares none: the routing protocol repairs it."""

PLAIN_ECMP = "ECMP"
"""The switch feature every fabric has."""


@dataclass(frozen=True)
class Profile:
    """What a strategy needs from the cloud beyond the fabric itself."""

    controller: bool
    host_cooperation: bool
    switch_features: tuple[str, ...]
    flow_rules: bool
    flow_state: bool
    needs: str
    host_steering: bool = False


#: A user strategy picks its own paths, so someone must install them: assume a controller
#: and per-flow rules unless the class declares `profile` (a Profile or a built-in's name).
USER_PROFILE = Profile(
    True, False, (PLAIN_ECMP, "per-flow policy rules"), True, False, "a controller and per-flow rules"
)


def reaction_of(strategy: Strategy) -> ReactionKind:
    """The reaction model a strategy declares (`reaction` attribute), or `protocol`."""
    declared = getattr(strategy, "reaction", None)
    if declared is None:
        return DEFAULT_REACTION
    if declared not in get_args(ReactionKind):
        raise RoutingError(
            f"routing.strategy: {strategy.name} declares reaction {declared!r}; "
            f"expected one of {', '.join(get_args(ReactionKind))}"
        )
    return declared


def profile_of(strategy: Strategy, pinning_install: str = "rules") -> Profile:
    """The complexity profile a strategy declares: its `source_port_profile` when its paths
    are installed through UDP source ports, else its `profile` (a Profile, or the name of a
    built-in strategy whose profile it shares), else `USER_PROFILE`."""
    if pinning_install == "source-port":
        steered = getattr(strategy, "source_port_profile", None)
        if isinstance(steered, Profile):
            return steered
    declared = getattr(strategy, "profile", None)
    if isinstance(declared, Profile):
        return declared
    if isinstance(declared, str) and declared in strategy_names():
        return profile_of(load_strategy(declared))
    return USER_PROFILE

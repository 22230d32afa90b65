"""Imports the built-in strategies so that they register themselves."""

from cloudtwin.routing.adaptive import Adaptive
from cloudtwin.routing.dmodk import DModK
from cloudtwin.routing.ecmp import Ecmp, EcmpQp
from cloudtwin.routing.pinning import Pinning
from cloudtwin.routing.spray import Spray

__all__ = ["Adaptive", "DModK", "Ecmp", "EcmpQp", "Pinning", "Spray"]

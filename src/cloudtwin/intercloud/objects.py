"""BEACON's object model: sites, federated networks and the segments that join a site's tenant
network to one, plus what a site's agent pulls (desired state) and reports (realised state)."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from cloudtwin.scenario.federation import AddressMode, Flavour

__all__ = [
    "DesiredSegment",
    "NetworkRequest",
    "NetworkStatus",
    "Peer",
    "RealisedSegment",
    "SegmentRequest",
    "SiteDesired",
    "SiteReport",
    "SiteRequest",
]

Status = Literal["ACTIVE", "PENDING", "DOWN"]
Name = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z][a-z0-9-]*$")]
NetworkName = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]


def _interface(value: object) -> str:
    try:
        return str(ipaddress.IPv4Interface(str(value)))
    except ValueError as err:
        raise ValueError(f"{value!r} is not an address with a prefix length like 10.0.0.10/24") from err


def _address(value: object) -> str:
    try:
        return str(ipaddress.IPv4Address(str(value)))
    except ValueError as err:
        raise ValueError(f"{value!r} is not an IPv4 address") from err


Interface = Annotated[str, BeforeValidator(_interface)]
Address = Annotated[str, BeforeValidator(_address)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SiteRequest(_Model):
    """A site joins the federation: its name, flavour and its gateway's WAN address."""

    name: Name
    flavour: Flavour = "openstack-like"
    gateway: Address | None = None


class NetworkRequest(_Model):
    """A federated network of one tenant over `sites`, in one address mode."""

    name: NetworkName
    tenant: Name
    mode: AddressMode = "l3-routed"
    sites: tuple[Name, ...] = Field(min_length=1)
    vni: int | None = Field(None, ge=1, le=(1 << 24) - 1)


class SegmentRequest(_Model):
    """A site's consent: its tenant network `tenant` (site-local VNI, subnet, endpoints) joins `network`."""

    network: NetworkName
    tenant: Name
    vni: int = Field(ge=1, le=(1 << 24) - 1)
    address: Interface
    endpoints: int = Field(1, ge=1, le=1 << 16)


class Peer(_Model):
    """What a site may know of a peer: its name, its gateway's WAN address and what it routes.

    `prefix` is the peer's subnet (l3-routed) or global block (global-nat); empty for
    l2-stretch, where the stretched subnet is the site's own.
    """

    site: str
    gateway: str
    prefix: str = ""


class DesiredSegment(_Model):
    """One segment as its site's agent is to realise it."""

    network: str
    mode: AddressMode
    federated_vni: int
    tenant: str
    vni: int
    address: str
    endpoints: int
    global_block: str = ""
    peers: tuple[Peer, ...] = ()

    @property
    def resource_id(self) -> str:
        """The name the adapter gives this segment's objects (stable across restarts)."""
        return f"fed-{self.network}"


class SiteDesired(_Model):
    """Everything a site's agent pulls: its gateway address and its segments."""

    site: str
    flavour: str
    gateway: str
    generation: int
    segments: tuple[DesiredSegment, ...] = ()


class RealisedSegment(_Model):
    """A segment that the site's adapter holds, with the peers it has tunnels to."""

    network: str
    peers: tuple[str, ...] = ()


class SiteReport(_Model):
    """What an agent reports after a reconcile."""

    generation: int = Field(ge=0)
    realised: tuple[RealisedSegment, ...] = ()


class NetworkStatus(_Model):
    """A federated network's state: one status per pair of sites that both consented."""

    name: str
    tenant: str
    mode: str
    federated_vni: int
    sites: tuple[str, ...]
    consented: tuple[str, ...]
    status: Status
    interconnections: dict[str, Status]

"""Pydantic models of a multi-site scenario: sites (each a fabric with tenants), gateways, WAN
links and the federated networks that join the sites' tenant networks.

A site tenant's `address` is the interface address of its first endpoint with the
prefix length of its subnet (`10.0.0.10/24`): host i of the tenant gets the i-th address
from there. A federated network joins the networks of one tenant at several sites in
one of three address modes (see `cloudtwin.intercloud.addressing`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Annotated, Literal, NamedTuple

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.faults import Flap, parse_capacity
from cloudtwin.scenario.limits import Limits
from cloudtwin.scenario.loader import (
    YamlMapping,
    apply_overrides,
    check_hosts,
    parse_yaml,
    validation_error,
)
from cloudtwin.scenario.model import Fabric, Hosts, LeafSpineFabric, Scenario, Tenant
from cloudtwin.scenario.units import parse_rate, parse_size, parse_time

__all__ = [
    "ADDRESS_MODES",
    "DEFAULT_DETECTION_S",
    "DEFAULT_ELECTION_S",
    "DEFAULT_GLOBAL_POOL",
    "DEFAULT_ROUTE_PROPAGATION_S",
    "DEFAULT_UNDERLAY_MTU",
    "AddressMode",
    "Encapsulation",
    "FederatedNetworkSpec",
    "FederatedTraffic",
    "FederationScenario",
    "Flavour",
    "GatewayFailure",
    "GatewayFault",
    "GatewaySpec",
    "Site",
    "SiteTenant",
    "WanFault",
    "WanLink",
    "load_federation",
]

AddressMode = Literal["l2-stretch", "l3-routed", "global-nat"]
ADDRESS_MODES: tuple[str, ...] = ("l2-stretch", "l3-routed", "global-nat")
Encapsulation = Literal["vxlan", "geneve", "wireguard", "ipsec-esp"]
Flavour = Literal["openstack-like", "dove-like", "linux"]

#: VRRP with a 1 s advertisement interval: the backup declares the master down after three
#: missed advertisements plus its skew time.
DEFAULT_DETECTION_S = 3.0
#: The backup with the highest priority takes over at once when the master-down timer fires;
#: what remains is sending the gratuitous ARP/ND and the first advertisement.
DEFAULT_ELECTION_S = 0.05
#: A BGP UPDATE for the moved next hop reaching the remote gateways (minimum route
#: advertisement interval of iBGP-style sessions, bounded to one interval).
DEFAULT_ROUTE_PROPAGATION_S = 1.0
#: Ethernet MTU of the WAN underlay.
DEFAULT_UNDERLAY_MTU = 1500
#: Carrier-grade NAT shared space (RFC 6598), the default pool of global-nat addresses.
DEFAULT_GLOBAL_POOL = "100.64.0.0/10"

Rate = Annotated[float, BeforeValidator(parse_rate), Field(gt=0)]
Duration = Annotated[float, BeforeValidator(parse_time), Field(ge=0)]
Size = Annotated[int, BeforeValidator(parse_size), Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _interface(value: object) -> str:
    try:
        iface = ipaddress.IPv4Interface(str(value))
    except ValueError as err:
        raise ValueError(f"{value!r} is not an IPv4 address with a prefix length like 10.0.0.10/24") from err
    return str(iface)


class SiteTenant(Tenant):
    """A tenant at one site: its hosts, its site-local VNI and its subnet.

    `address` is the first endpoint's address with the subnet's prefix length; host i of
    `hosts` (in order) gets the address i above it.
    """

    address: Annotated[str, BeforeValidator(_interface)] = "10.0.0.1/24"

    @property
    def network(self) -> ipaddress.IPv4Network:
        """The tenant's subnet at this site."""
        return ipaddress.IPv4Interface(self.address).network

    @property
    def first_address(self) -> int:
        """The first endpoint's address as an integer."""
        return int(ipaddress.IPv4Interface(self.address).ip)


class GatewaySpec(_Model):
    """A site's HA gateway pair: capacity of each gateway, crypto throughput, failover timings.

    `crypto` is the throughput of one gateway's encryption engine (None: no encryption
    limit); `crypto_latency` is added per packet. Failover time = detection + election +
    tunnel set-up (from the encapsulation and the WAN round trip) + route propagation.
    """

    capacity: Rate = 10e9
    crypto: Rate | None = None
    crypto_latency: Duration = 0.0
    border_leaf: int = Field(0, ge=0)
    detection: Duration = DEFAULT_DETECTION_S
    election: Duration = DEFAULT_ELECTION_S
    route_propagation: Duration = DEFAULT_ROUTE_PROPAGATION_S

    @property
    def rate_bps(self) -> float:
        """What one gateway forwards: its capacity or its crypto engine, whichever is lower."""
        return min(self.capacity, self.crypto) if self.crypto is not None else self.capacity


class Site(_Model):
    """One cloud: its fabric, hosts, tenants, network-virtualization flavour and gateway pair."""

    name: str = Field(min_length=1, pattern=r"^[a-z][a-z0-9-]{0,14}$")
    flavour: Flavour = "openstack-like"
    fabric: Fabric = Field(default_factory=lambda: LeafSpineFabric(leaves=2, spines=2, hosts_per_leaf=4))
    hosts: Hosts = Field(default_factory=Hosts)
    tenants: tuple[SiteTenant, ...] = ()
    gateway: GatewaySpec = Field(default_factory=GatewaySpec)

    def scenario(self) -> Scenario:
        """The single-fabric scenario of this site (its fabric, hosts and tenants)."""
        plain = tuple(Tenant(name=t.name, vni=t.vni, hosts=list(t.hosts)) for t in self.tenants)
        return Scenario(name=self.name, fabric=self.fabric, hosts=self.hosts, tenants=plain)


class WanLink(_Model):
    """A WAN link between the gateways of two sites (full duplex)."""

    between: tuple[str, str]
    bandwidth: Rate = 10e9
    latency: Duration = 10e-3

    @field_validator("between")
    @classmethod
    def _two_sites(cls, value: tuple[str, str]) -> tuple[str, str]:
        if value[0] == value[1]:
            raise ValueError(f"a WAN link joins two different sites, got {value[0]!r} twice")
        return value


class FederatedNetworkSpec(_Model):
    """A federated network: the networks of `tenant` at `sites`, joined in one address mode.

    `vni` is the federation-wide tunnel identifier between gateways (default: assigned).
    """

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    tenant: str = Field(min_length=1)
    mode: AddressMode = "l3-routed"
    sites: tuple[str, ...] = Field(min_length=1)
    vni: int | None = Field(None, ge=1, le=(1 << 24) - 1)


class GatewayFailure(NamedTuple):
    """One failure of a site's active gateway, at `at`, repaired at `until` (None: never)."""

    site: str
    at: float
    until: float | None


class GatewayFault(_Model):
    """The active gateway of `site` fails at `at` (the standby takes over after failover);
    with `until` it is repaired then and stays the standby (no pre-emption). `flap` repeats
    the failure and repair (`count` times, every `period`, `down` each time, default half the
    period); each failure takes the gateway active then, so every flap costs one failover."""

    site: str
    at: Duration = 0.0
    until: Duration | None = None
    flap: Flap | None = None

    @model_validator(mode="after")
    def _ordered(self) -> GatewayFault:
        if self.until is not None and self.until <= self.at:
            raise ValueError(f"until: must be after at ({self.at} s)")
        if self.flap is not None and self.until is not None:
            raise ValueError("flap: a flapping gateway has no until (each flap is repaired)")
        return self

    def failures(self) -> list[GatewayFailure]:
        """Each time the site's active gateway fails, and when it is repaired."""
        if self.flap is not None:
            period, down = self.flap.period, self.flap.down_s
            return [
                GatewayFailure(self.site, self.at + i * period, self.at + i * period + down)
                for i in range(self.flap.count)
            ]
        return [GatewayFailure(self.site, self.at, self.until)]


class WanFault(_Model):
    """The WAN link `between` two sites is cut (or, with `capacity`, degraded to a fraction
    like 0.3 or 30% or to a rate like 5Gbps) from `at` to `until`; `flap` repeats a cut
    (`count` times, every `period`, `down` each time, default half the period).

    A cut needs `until` or `flap`: the federation keeps one WAN path per pair of sites
    and does not route around a cut link.
    """

    between: tuple[str, str]
    at: Duration = 0.0
    until: Duration | None = None
    capacity: Annotated[float, BeforeValidator(parse_capacity), Field(gt=0)] | None = None
    flap: Flap | None = None

    _two_sites = field_validator("between")(WanLink._two_sites.__func__)  # type: ignore[attr-defined]

    @model_validator(mode="after")
    def _consistent(self) -> WanFault:
        if self.until is not None and self.until <= self.at:
            raise ValueError(f"until: must be after at ({self.at} s)")
        if self.flap is not None and self.until is not None:
            raise ValueError("flap: a flapping WAN link has no until (each flap comes back up)")
        if self.flap is not None and self.capacity is not None:
            raise ValueError("flap: a flap cuts the link; drop capacity")
        if self.capacity is None and self.until is None and self.flap is None:
            raise ValueError(
                "until: a cut WAN link needs until (or flap): the federation does not route around it"
            )
        return self

    def windows(self) -> list[tuple[float, float]]:
        """(from, to) of each time the link is cut or degraded (to may be inf)."""
        if self.flap is not None:
            period, down = self.flap.period, self.flap.down_s
            return [(self.at + i * period, self.at + i * period + down) for i in range(self.flap.count)]
        return [(self.at, float("inf") if self.until is None else self.until)]


class FederatedTraffic(_Model):
    """Traffic inside a federated network: every ordered pair of its endpoints (`all-pairs`) or
    each endpoint to the next one in site order (`ring`), `size` bytes each, from `start`."""

    network: str
    pattern: Literal["all-pairs", "ring"] = "all-pairs"
    size: Size = 1 << 30
    start: Duration = 0.0


class FederationScenario(_Model):
    """A whole multi-site scenario; `limits` bounds what `cloudtwin federate evaluate` runs."""

    name: str = Field("federation", min_length=1)
    seed: int = Field(1, ge=0)
    encapsulation: Encapsulation = "vxlan"
    underlay_mtu: int = Field(DEFAULT_UNDERLAY_MTU, ge=576, le=65535)
    mss_clamping: bool = True
    global_pool: str = DEFAULT_GLOBAL_POOL
    reconcile_period: Duration = 5.0
    sites: tuple[Site, ...] = Field(min_length=1)
    wan: tuple[WanLink, ...] = ()
    networks: tuple[FederatedNetworkSpec, ...] = ()
    gateway_faults: tuple[GatewayFault, ...] = ()
    wan_faults: tuple[WanFault, ...] = ()
    traffic: tuple[FederatedTraffic, ...] = ()
    limits: Limits = Field(default_factory=Limits)

    @field_validator("global_pool")
    @classmethod
    def _pool(cls, value: str) -> str:
        try:
            return str(ipaddress.IPv4Network(value))
        except ValueError as err:
            raise ValueError(f"{value!r} is not an IPv4 prefix like 100.64.0.0/10") from err

    def gateway_failures(self) -> list[GatewayFailure]:
        """Every gateway failure of `gateway_faults` (each flap its own), in time order."""
        return sorted((f for fault in self.gateway_faults for f in fault.failures()), key=lambda f: f.at)

    def site(self, name: str) -> Site:
        """The site called `name`."""
        for site in self.sites:
            if site.name == name:
                return site
        raise ScenarioError(f"no site named {name!r}")


def default_site_kinds(sites: object) -> None:
    """Give each site's fabric (and workload, where a site has one) its default kind."""
    for site in sites if isinstance(sites, list) else []:
        for section, kind in (("fabric", "leaf-spine"), ("workload", "perftest")):
            if isinstance(site, dict) and isinstance(site.get(section), dict):
                site[section].setdefault("kind", kind)


def load_federation(
    text: str, source: str = "<scenario>", overrides: Iterable[str] = ()
) -> FederationScenario:
    """Validate YAML `text` (with overrides) into a FederationScenario, or one-line ScenarioError.

    Cross-object checks (unknown sites, overlapping prefixes, conflicting VNIs) are made by
    `cloudtwin.intercloud.plan_federation`, which names the field as this loader does.
    """
    data, node = parse_yaml(text, source)
    data = apply_overrides(data, overrides)
    if "sites" not in data:
        raise ScenarioError(f"{source}: sites: a multi-site scenario needs a sites: list")
    check_hosts(data, source)
    default_site_kinds(data.get("sites"))
    try:
        return FederationScenario.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, data, node, source) from err


def federation_from_dict(data: YamlMapping, source: str = "<federation>") -> FederationScenario:
    """Validate an already parsed mapping (e.g. an HTTP request body)."""
    check_hosts(data, source)
    try:
        return FederationScenario.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, data, None, source) from err

"""An OpenStack-like site: networks (with a VXLAN segmentation id), subnets, ports and, for the
federation, interconnection objects naming a remote site's gateway (as neutron-interconnection
does), behind a modelled API with server-made ids."""

from __future__ import annotations

import ipaddress

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from cloudtwin.intercloud.adapters.base import SiteApi, read_resource
from cloudtwin.intercloud.objects import DesiredSegment, Peer
from cloudtwin.scenario.federation import AddressMode

__all__ = ["OPENSTACK_COLLECTIONS", "OpenStackLikeAdapter", "openstack_like_cloud"]

OPENSTACK_COLLECTIONS = ("networks", "subnets", "ports", "interconnections")


class _Tags(TypedDict):
    federated_network: str
    mode: AddressMode
    federated_vni: int
    global_block: str


class _Network(TypedDict):
    name: str
    segmentation_id: int
    tenant: str
    tags: _Tags


class _Subnet(TypedDict):
    network_id: str
    cidr: str


class _Port(TypedDict):
    network_id: str
    ip: str


class _Interconnection(TypedDict):
    network_id: str
    remote_site: str
    remote_gateway: str
    remote_prefix: str


_NETWORK = TypeAdapter(_Network)
_SUBNET = TypeAdapter(_Subnet)
_PORT = TypeAdapter(_Port)
_LINK = TypeAdapter(_Interconnection)


def openstack_like_cloud() -> SiteApi:
    """An empty OpenStack-like site."""
    return SiteApi(OPENSTACK_COLLECTIONS)


def _half_made(network: str) -> DesiredSegment:
    return DesiredSegment(
        network=network,
        mode="l3-routed",
        federated_vni=1,
        tenant="-",
        vni=1,
        address="0.0.0.0/32",
        endpoints=0,
    )


class OpenStackLikeAdapter:
    """A segment is a network `fed-NAME` tagged with the federation's data, a subnet, one port per
    endpoint and one interconnection per peer."""

    flavour = "openstack-like"

    def __init__(self, cloud: SiteApi | None = None) -> None:
        self.cloud = cloud if cloud is not None else openstack_like_cloud()

    @staticmethod
    def _network(segment: DesiredSegment) -> _Network:
        return {
            "name": segment.resource_id,
            "segmentation_id": segment.vni,
            "tenant": segment.tenant,
            "tags": {
                "federated_network": segment.network,
                "mode": segment.mode,
                "federated_vni": segment.federated_vni,
                "global_block": segment.global_block,
            },
        }

    def apply(self, segment: DesiredSegment) -> None:
        """Create what is missing, replace what differs, remove what is extra."""
        body = self._network(segment)
        for stale in [
            n
            for n in self.cloud.find("networks", name=segment.resource_id)
            if self.cloud.get("networks", n) != body
        ]:
            self._remove_network(stale)
        nets = self.cloud.find("networks", name=segment.resource_id)
        net = nets[0] if nets else self.cloud.create("networks", **body)
        for extra in nets[1:]:
            self._remove_network(extra)
        iface = ipaddress.IPv4Interface(segment.address)
        self.cloud.ensure("subnets", {"network_id": net}, [{"network_id": net, "cidr": str(iface.network)}])
        ips = [str(iface.ip + i) for i in range(segment.endpoints)]
        self.cloud.ensure("ports", {"network_id": net}, [{"network_id": net, "ip": ip} for ip in ips])
        peers: list[dict[str, object]] = [
            {"network_id": net, "remote_site": p.site, "remote_gateway": p.gateway, "remote_prefix": p.prefix}
            for p in segment.peers
        ]
        self.cloud.ensure("interconnections", {"network_id": net}, peers)

    def _remove_network(self, net: str) -> None:
        for collection in ("interconnections", "ports", "subnets"):
            for oid in self.cloud.find(collection, network_id=net):
                self.cloud.delete(collection, oid)
        self.cloud.delete("networks", net)

    def delete(self, network: str) -> None:
        """Remove `fed-NETWORK` and everything on it."""
        for net in self.cloud.find("networks", name=f"fed-{network}"):
            self._remove_network(net)

    def segments(self) -> list[DesiredSegment]:
        """Read the federated networks back from the site (half-made ones with no endpoints)."""
        found = []
        for net in self.cloud.find("networks"):
            name = self.cloud.get("networks", net).get("name")
            if not (isinstance(name, str) and name.startswith("fed-")):
                continue
            body = read_resource(_NETWORK, self.cloud.get("networks", net), f"networks.{net}")
            tags = body["tags"]
            subnets = [
                read_resource(_SUBNET, self.cloud.get("subnets", s), f"subnets.{s}")
                for s in self.cloud.find("subnets", network_id=net)
            ]
            ports = sorted(
                int(ipaddress.IPv4Address(port["ip"]))
                for port in (
                    read_resource(_PORT, self.cloud.get("ports", p), f"ports.{p}")
                    for p in self.cloud.find("ports", network_id=net)
                )
            )
            if len(subnets) != 1 or not ports:
                found.append(_half_made(tags["federated_network"]))
                continue
            prefix = ipaddress.IPv4Network(subnets[0]["cidr"]).prefixlen
            links = [
                read_resource(_LINK, self.cloud.get("interconnections", i), f"interconnections.{i}")
                for i in self.cloud.find("interconnections", network_id=net)
            ]
            peers = sorted(
                (
                    Peer(site=p["remote_site"], gateway=p["remote_gateway"], prefix=p["remote_prefix"])
                    for p in links
                ),
                key=lambda p: p.site,
            )
            found.append(
                DesiredSegment(
                    network=tags["federated_network"],
                    mode=tags["mode"],
                    federated_vni=tags["federated_vni"],
                    tenant=body["tenant"],
                    vni=body["segmentation_id"],
                    address=f"{ipaddress.IPv4Address(ports[0])}/{prefix}",
                    endpoints=len(ports),
                    global_block=tags["global_block"],
                    peers=tuple(peers),
                )
            )
        return found

    def close(self) -> None:
        """Nothing to release."""

"""A DOVE-like site (OpenDaylight Open DOVE): domains per tenant, virtual networks with a VNID
and a subnet, endpoints, and policies that allow traffic to a remote site's gateway, behind a
modelled API with server-made ids."""

from __future__ import annotations

import ipaddress

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from cloudtwin.intercloud.adapters.base import SiteApi, read_resource
from cloudtwin.intercloud.objects import DesiredSegment, Peer
from cloudtwin.scenario.federation import AddressMode

__all__ = ["DOVE_COLLECTIONS", "DoveLikeAdapter", "dove_like_cloud"]

DOVE_COLLECTIONS = ("domains", "vnets", "endpoints", "policies")


class _Description(TypedDict):
    federated_network: str
    mode: AddressMode
    federated_vni: int
    global_block: str


class _Vnet(TypedDict):
    name: str
    domain_id: str
    vnid: int
    subnet: str
    description: _Description


class _Domain(TypedDict):
    name: str


class _Endpoint(TypedDict):
    vnet_id: str
    ip: str


class _Policy(TypedDict):
    vnet_id: str
    action: str
    peer_site: str
    peer_gateway: str
    peer_prefix: str


_VNET = TypeAdapter(_Vnet)
_DOMAIN = TypeAdapter(_Domain)
_ENDPOINT = TypeAdapter(_Endpoint)
_POLICY = TypeAdapter(_Policy)


def dove_like_cloud() -> SiteApi:
    """An empty DOVE-like site."""
    return SiteApi(DOVE_COLLECTIONS)


class DoveLikeAdapter:
    """A segment is a virtual network `fed-NAME` in the tenant's domain, its endpoints, and one
    allow policy per peer; the federation's data rides in the virtual network's description."""

    flavour = "dove-like"

    def __init__(self, cloud: SiteApi | None = None) -> None:
        self.cloud = cloud if cloud is not None else dove_like_cloud()

    def _domain(self, tenant: str) -> str:
        found = self.cloud.find("domains", name=tenant)
        return found[0] if found else self.cloud.create("domains", name=tenant)

    def apply(self, segment: DesiredSegment) -> None:
        """Create what is missing, replace what differs, remove what is extra."""
        domain = self._domain(segment.tenant)
        iface = ipaddress.IPv4Interface(segment.address)
        body: _Vnet = {
            "name": segment.resource_id,
            "domain_id": domain,
            "vnid": segment.vni,
            "subnet": str(iface.network),
            "description": {
                "federated_network": segment.network,
                "mode": segment.mode,
                "federated_vni": segment.federated_vni,
                "global_block": segment.global_block,
            },
        }
        for stale in [
            v
            for v in self.cloud.find("vnets", name=segment.resource_id)
            if self.cloud.get("vnets", v) != body
        ]:
            self._remove_vnet(stale)
        vnets = self.cloud.find("vnets", name=segment.resource_id)
        vnet = vnets[0] if vnets else self.cloud.create("vnets", **body)
        for extra in vnets[1:]:
            self._remove_vnet(extra)
        ips = [str(iface.ip + i) for i in range(segment.endpoints)]
        self.cloud.ensure("endpoints", {"vnet_id": vnet}, [{"vnet_id": vnet, "ip": ip} for ip in ips])
        rules: list[dict[str, object]] = [
            {
                "vnet_id": vnet,
                "action": "allow",
                "peer_site": p.site,
                "peer_gateway": p.gateway,
                "peer_prefix": p.prefix,
            }
            for p in segment.peers
        ]
        self.cloud.ensure("policies", {"vnet_id": vnet}, rules)

    def _remove_vnet(self, vnet: str) -> None:
        for collection in ("policies", "endpoints"):
            for oid in self.cloud.find(collection, vnet_id=vnet):
                self.cloud.delete(collection, oid)
        self.cloud.delete("vnets", vnet)

    def delete(self, network: str) -> None:
        """Remove the virtual network `fed-NETWORK`, its endpoints and policies."""
        for vnet in self.cloud.find("vnets", name=f"fed-{network}"):
            self._remove_vnet(vnet)

    def segments(self) -> list[DesiredSegment]:
        """Read the federated virtual networks back from the site."""
        found = []
        for vnet in self.cloud.find("vnets"):
            name = self.cloud.get("vnets", vnet).get("name")
            if not (isinstance(name, str) and name.startswith("fed-")):
                continue
            body = read_resource(_VNET, self.cloud.get("vnets", vnet), f"vnets.{vnet}")
            meta = body["description"]
            endpoints = [
                read_resource(_ENDPOINT, self.cloud.get("endpoints", e), f"endpoints.{e}")
                for e in self.cloud.find("endpoints", vnet_id=vnet)
            ]
            ips = sorted(int(ipaddress.IPv4Address(e["ip"])) for e in endpoints)
            rules = [
                read_resource(_POLICY, self.cloud.get("policies", p), f"policies.{p}")
                for p in self.cloud.find("policies", vnet_id=vnet)
            ]
            prefix = ipaddress.IPv4Network(body["subnet"]).prefixlen
            first = f"{ipaddress.IPv4Address(ips[0])}/{prefix}" if ips else "0.0.0.0/32"
            found.append(
                DesiredSegment(
                    network=meta["federated_network"],
                    mode=meta["mode"],
                    federated_vni=meta["federated_vni"],
                    tenant=self._tenant(body["domain_id"]),
                    vni=body["vnid"],
                    address=first,
                    endpoints=len(ips),
                    global_block=meta["global_block"],
                    peers=tuple(
                        sorted(
                            (
                                Peer(site=r["peer_site"], gateway=r["peer_gateway"], prefix=r["peer_prefix"])
                                for r in rules
                            ),
                            key=lambda p: p.site,
                        )
                    ),
                )
            )
        return found

    def _tenant(self, domain: str) -> str:
        return read_resource(_DOMAIN, self.cloud.get("domains", domain), f"domains.{domain}")["name"]

    def close(self) -> None:
        """Nothing to release."""

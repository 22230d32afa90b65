"""The linux adapter: a site realised in network namespaces.

The site's gateway is a namespace `PREFIX-SITE-gw` holding a WAN interface `wan0` with the
gateway's address, and per segment a bridge (the site-local network) and a VXLAN device
whose VNI is the federated VNI, flooding to each peer gateway (head-end replication).
Each endpoint is a namespace `PREFIX-SITE-NETWORK-K` whose `eth0` is a veth into the
bridge, with the endpoint's address and an MTU that fits the tunnel. The segment's
federation data rides in the bridge's alias, the peers in the VXLAN device's alias, so
that the adapter reads the site back from the kernel alone.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.encapsulation import inner_mtu
from cloudtwin.intercloud.netns import IpRunner, namespaces
from cloudtwin.intercloud.objects import DesiredSegment, Peer

__all__ = ["VXLAN_PORT", "LinuxAdapter"]

VXLAN_PORT = 4789
_ALIAS_LIMIT = 255


def _short(network: str) -> str:
    return hashlib.sha1(network.encode()).hexdigest()[:8]


class LinuxAdapter:
    """A site's segments as namespaces, bridges, veths and VXLAN devices."""

    flavour = "linux"

    def __init__(
        self, site: str, prefix: str, gateway: str, gateway_prefix: int = 15, underlay_mtu: int = 1500
    ) -> None:
        self.site = site
        self.prefix = prefix
        self.gateway = gateway
        self.gateway_prefix = gateway_prefix
        self.underlay_mtu = underlay_mtu
        self.ip = IpRunner()

    @property
    def gw(self) -> str:
        """The gateway namespace."""
        return f"{self.prefix}-{self.site}-gw"

    def endpoint_ns(self, network: str, k: int) -> str:
        """The namespace of endpoint k of a segment."""
        return f"{self.prefix}-{self.site}-{network}-{k}"

    def ensure_gateway(self) -> None:
        """The gateway namespace, with its WAN interface `wan0` carrying the gateway address."""
        if self.gw not in namespaces(self.prefix):
            self.ip.run("ip", "netns", "add", self.gw)
        self.ip.ip(self.gw, "link", "set", "lo", "up")
        if not self.ip.json(self.gw, "link", "show", "wan0"):
            # No WAN wired in: a veth looped inside the namespace (this kernel has no dummy device).
            self.ip.ip(self.gw, "link", "add", "wan0", "type", "veth", "peer", "name", "wan0p")
            self.ip.ip(self.gw, "link", "set", "wan0p", "up")
        self.ip.ip(self.gw, "addr", "replace", f"{self.gateway}/{self.gateway_prefix}", "dev", "wan0")
        self.ip.ip(self.gw, "link", "set", "wan0", "up")

    # -- apply --------------------------------------------------------------------------
    def apply(self, segment: DesiredSegment) -> None:
        """Make the namespaces hold exactly `segment`."""
        if segment.mode != "l2-stretch" and segment.peers:
            raise FederationError(
                "mode",
                f"the linux adapter realises l2-stretch networks; {segment.network!r} is {segment.mode}",
            )
        self.ensure_gateway()
        tag = _short(segment.network)
        bridge, vxlan = f"b{tag}", f"v{tag}"
        meta = json.dumps(segment.model_dump(mode="json", exclude={"peers"}), separators=(",", ":"))
        if len(meta) > _ALIAS_LIMIT:
            raise FederationError("network", f"{segment.network!r}: names too long for the linux adapter")
        if not self.ip.json(self.gw, "link", "show", bridge):
            self.ip.ip(self.gw, "link", "add", bridge, "type", "bridge")
        self.ip.ip(self.gw, "link", "set", bridge, "alias", meta)
        self.ip.ip(self.gw, "link", "set", bridge, "up")
        self._tunnel(segment, bridge, vxlan)
        mtu = inner_mtu("vxlan", self.underlay_mtu) if segment.peers else self.underlay_mtu
        for k in range(segment.endpoints):
            self._endpoint(segment, k, bridge, tag, mtu)
        for name in self._endpoints_of(segment.network)[segment.endpoints :]:
            self.ip.run("ip", "netns", "del", name)

    def _tunnel(self, segment: DesiredSegment, bridge: str, vxlan: str) -> None:
        links = self.ip.json(self.gw, "-d", "link", "show", vxlan)
        current = links[0].get("linkinfo", {}).get("info_data", {}).get("id") if links else None
        if links and (current != segment.federated_vni or not segment.peers):
            self.ip.ip(self.gw, "link", "del", vxlan)
            links = []
        if not segment.peers:
            return
        if not links:
            self.ip.ip(
                self.gw,
                "link",
                "add",
                vxlan,
                "type",
                "vxlan",
                "id",
                str(segment.federated_vni),
                "local",
                self.gateway,
                "dstport",
                str(VXLAN_PORT),
                "dev",
                "wan0",
            )
        peers = json.dumps([[p.site, p.gateway, p.prefix] for p in segment.peers], separators=(",", ":"))
        if len(peers) > _ALIAS_LIMIT:
            raise FederationError(
                "peers", f"{segment.network!r}: too many peers for the linux adapter's alias"
            )
        self.ip.ip(self.gw, "link", "set", vxlan, "alias", peers, "master", bridge)
        self.ip.ip(self.gw, "link", "set", vxlan, "up")
        for entry in self.ip.json(self.gw, "fdb", "show", "dev", vxlan):
            if entry.get("mac") == "00:00:00:00:00:00" and "dst" in entry:
                self.ip.run(
                    "ip",
                    "netns",
                    "exec",
                    self.gw,
                    "bridge",
                    "fdb",
                    "del",
                    "00:00:00:00:00:00",
                    "dev",
                    vxlan,
                    "dst",
                    entry["dst"],
                    check=False,
                )
        for peer in segment.peers:
            self.ip.run(
                "ip",
                "netns",
                "exec",
                self.gw,
                "bridge",
                "fdb",
                "append",
                "00:00:00:00:00:00",
                "dev",
                vxlan,
                "dst",
                peer.gateway,
            )

    def _endpoint(self, segment: DesiredSegment, k: int, bridge: str, tag: str, mtu: int) -> None:
        name = self.endpoint_ns(segment.network, k)
        port = f"e{tag[:6]}{k}"
        if name not in namespaces(self.prefix):
            self.ip.run("ip", "netns", "add", name)
        if not self.ip.json(name, "link", "show", "eth0"):
            self.ip.ip(self.gw, "link", "del", port, check=False)
            self.ip.ip(self.gw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", name)
        iface = ipaddress.IPv4Interface(segment.address)
        address = f"{iface.ip + k}/{iface.network.prefixlen}"
        self.ip.ip(name, "addr", "flush", "dev", "eth0")
        self.ip.ip(name, "addr", "add", address, "dev", "eth0")
        self.ip.ip(name, "link", "set", "eth0", "mtu", str(mtu), "up")
        self.ip.ip(name, "link", "set", "lo", "up")
        self.ip.ip(self.gw, "link", "set", port, "master", bridge, "mtu", str(mtu), "up")

    def _endpoints_of(self, network: str) -> list[str]:
        stem = f"{self.prefix}-{self.site}-{network}-"
        found = [n for n in namespaces(self.prefix) if n.startswith(stem) and n[len(stem) :].isdigit()]
        return sorted(found, key=lambda n: int(n[len(stem) :]))

    # -- read back and delete -----------------------------------------------------------
    def segments(self) -> list[DesiredSegment]:
        """The segments the gateway namespace holds, read back from the kernel."""
        if self.gw not in namespaces(self.prefix):
            return []
        links = {link["ifname"]: link for link in self.ip.json(self.gw, "-d", "link", "show")}
        found = []
        for name, link in sorted(links.items()):
            if not (name.startswith("b") and link.get("ifalias", "").startswith("{")):
                continue
            meta = json.loads(link["ifalias"])
            vxlan = links.get(f"v{name[1:]}")
            peers = json.loads(vxlan["ifalias"]) if vxlan and vxlan.get("ifalias") else []
            meta["peers"] = [Peer(site=s, gateway=g, prefix=p) for s, g, p in peers]
            ports = sum(
                1 for link in links.values() if link.get("master") == name and link["ifname"].startswith("e")
            )
            if ports != meta["endpoints"] or len(self._endpoints_of(meta["network"])) != meta["endpoints"]:
                meta["endpoints"] = 0  # half-made: the next apply completes it
            found.append(DesiredSegment.model_validate(meta))
        return sorted(found, key=lambda s: s.network)

    def delete(self, network: str) -> None:
        """Remove a segment's endpoints, bridge and tunnel."""
        for name in self._endpoints_of(network):
            self.ip.run("ip", "netns", "del", name)
        if self.gw in namespaces(self.prefix):
            tag = _short(network)
            for device in (f"v{tag}", f"b{tag}"):
                self.ip.ip(self.gw, "link", "del", device, check=False)

    def close(self) -> None:
        """Nothing held open (the namespaces stay: they are the site)."""

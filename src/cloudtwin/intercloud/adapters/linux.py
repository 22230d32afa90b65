"""The linux adapter: a site realised in network namespaces.

The site's gateway is a namespace `PREFIX-SITE-gw` holding a WAN interface `wan0` with the
gateway's address, and per segment a bridge (the site-local network). Each endpoint is
a namespace `PREFIX-SITE-NETWORK-K` whose `eth0` is a veth into the bridge, with the
endpoint's address and an MTU that fits the tunnel.

- `l2-stretch`: a VXLAN device on the bridge, its VNI the federated VNI, flooding to each
  peer gateway (head-end replication).
- `l3-routed` and `global-nat`: a router namespace `PREFIX-SITE-NETWORK-r` per segment,
  on the bridge at the subnet's last usable address (the endpoints' default route), with
  the VXLAN device (made on `wan0`, then moved in) as a transit link to the peers'
  routers (169.254.x.y, from each gateway's address) and a route per peer prefix; for
  `global-nat` it translates each endpoint's address to its global one and back (nft).

The segment's federation data rides in the bridge's alias and the peers in the VXLAN
device's alias, so that the adapter reads the site back from the kernel alone.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import shutil
import subprocess

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.encapsulation import inner_mtu
from cloudtwin.intercloud.netns import IpRunner, namespaces
from cloudtwin.intercloud.objects import DesiredSegment, Peer

__all__ = ["VXLAN_PORT", "LinuxAdapter", "router_address", "transit_address"]

VXLAN_PORT = 4789
_ALIAS_LIMIT = 255
_ZERO_MAC = "00:00:00:00:00:00"


def _short(network: str) -> str:
    return hashlib.sha1(network.encode()).hexdigest()[:8]


def transit_address(gateway: str) -> str:
    """A site router's address on a routed network's transit link, from its gateway's address."""
    low = int(ipaddress.IPv4Address(gateway)) & 0xFFFF
    return str(ipaddress.IPv4Address(int(ipaddress.IPv4Address("169.254.0.0")) + low))


def router_address(address: str) -> str:
    """The router's address in a segment's subnet: the last usable one."""
    net = ipaddress.IPv4Interface(address).network
    return str(net.broadcast_address - 1)


class LinuxAdapter:
    """A site's segments as namespaces, bridges, veths, routers and VXLAN devices."""

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

    def router_ns(self, network: str) -> str:
        """The router namespace of a routed segment."""
        return f"{self.prefix}-{self.site}-{network}-r"

    def _exec(self, namespace: str, *argv: str, check: bool = True) -> str:
        return self.ip.run("ip", "netns", "exec", namespace, *argv, check=check)

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
        routed = segment.mode != "l2-stretch" and bool(segment.peers)
        if routed:
            self._check_routed(segment)
        self.ensure_gateway()
        tag = _short(segment.network)
        bridge = f"b{tag}"
        meta = json.dumps(segment.model_dump(mode="json", exclude={"peers"}), separators=(",", ":"))
        if len(meta) > _ALIAS_LIMIT:
            raise FederationError("network", f"{segment.network!r}: names too long for the linux adapter")
        if not self.ip.json(self.gw, "link", "show", bridge):
            self.ip.ip(self.gw, "link", "add", bridge, "type", "bridge")
        self.ip.ip(self.gw, "link", "set", bridge, "alias", meta)
        self.ip.ip(self.gw, "link", "set", bridge, "up")
        if routed:
            self._l2_tunnel(segment, bridge, tag, wanted=False)
            self._router(segment, bridge, tag)
        else:
            self._remove_router(segment.network, tag)
            self._l2_tunnel(segment, bridge, tag, wanted=bool(segment.peers))
        mtu = inner_mtu("vxlan", self.underlay_mtu) if segment.peers else self.underlay_mtu
        for k in range(segment.endpoints):
            self._endpoint(segment, k, bridge, tag, mtu, router_address(segment.address) if routed else None)
        for name in self._endpoints_of(segment.network)[segment.endpoints :]:
            self._remove_endpoint(name, tag)

    def _remove_endpoint(self, name: str, tag: str) -> None:
        """Delete the endpoint's veth first (at once), then its namespace (whose own cleanup the
        kernel finishes later)."""
        k = name.rsplit("-", 1)[1]
        self.ip.ip(self.gw, "link", "del", f"e{tag[:6]}{k}", check=False)
        self.ip.run("ip", "netns", "del", name)

    def _check_routed(self, segment: DesiredSegment) -> None:
        iface = ipaddress.IPv4Interface(segment.address)
        if int(iface.ip) + segment.endpoints - 1 >= int(iface.network.broadcast_address) - 1:
            raise FederationError(
                "address",
                f"{segment.network!r}: the router takes {router_address(segment.address)}, "
                f"the last usable address of {iface.network}; the endpoints reach it",
            )
        if segment.mode == "global-nat" and shutil.which("nft") is None:
            raise FederationError("mode", "global-nat in namespaces needs nft (Debian package nftables)")

    def _vxlan(self, namespace: str, name: str, vni: int) -> None:
        """A VXLAN device `name` with `vni` on the gateway's wan0, moved into `namespace`."""
        found = self.ip.json(namespace, "-d", "link", "show", name)
        current = found[0].get("linkinfo", {}).get("info_data", {}).get("id") if found else None
        if found and current == vni:
            return
        if found:
            self.ip.ip(namespace, "link", "del", name)
        self.ip.ip(
            self.gw,
            "link",
            "add",
            name,
            "type",
            "vxlan",
            "id",
            str(vni),
            "local",
            self.gateway,
            "dstport",
            str(VXLAN_PORT),
            "dev",
            "wan0",
        )
        if namespace != self.gw:
            self.ip.ip(self.gw, "link", "set", name, "netns", namespace)

    def _flood(self, namespace: str, vxlan: str, peers: tuple[Peer, ...]) -> None:
        """Head-end replication: exactly one all-zeros FDB entry per peer gateway."""
        text = json.dumps([[p.site, p.gateway, p.prefix] for p in peers], separators=(",", ":"))
        if len(text) > _ALIAS_LIMIT:
            raise FederationError("peers", "too many peers for the linux adapter's alias")
        self.ip.ip(namespace, "link", "set", vxlan, "alias", text)
        for entry in self.ip.json(namespace, "fdb", "show", "dev", vxlan):
            if entry.get("mac") == _ZERO_MAC and "dst" in entry:
                self._exec(
                    namespace,
                    "bridge",
                    "fdb",
                    "del",
                    _ZERO_MAC,
                    "dev",
                    vxlan,
                    "dst",
                    entry["dst"],
                    check=False,
                )
        for peer in peers:
            self._exec(namespace, "bridge", "fdb", "append", _ZERO_MAC, "dev", vxlan, "dst", peer.gateway)

    def _l2_tunnel(self, segment: DesiredSegment, bridge: str, tag: str, wanted: bool) -> None:
        vxlan = f"v{tag}"
        if not wanted:
            self.ip.ip(self.gw, "link", "del", vxlan, check=False)
            return
        self._vxlan(self.gw, vxlan, segment.federated_vni)
        self.ip.ip(self.gw, "link", "set", vxlan, "master", bridge)
        self.ip.ip(self.gw, "link", "set", vxlan, "up")
        self._flood(self.gw, vxlan, segment.peers)

    def _router(self, segment: DesiredSegment, bridge: str, tag: str) -> None:
        router, vxlan, port = self.router_ns(segment.network), f"v{tag}", f"r{tag}"
        if router not in namespaces(self.prefix):
            self.ip.run("ip", "netns", "add", router)
        self._exec(router, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")
        self.ip.ip(router, "link", "set", "lo", "up")
        if not self.ip.json(router, "link", "show", "lan"):
            self.ip.ip(self.gw, "link", "del", port, check=False)
            self.ip.ip(self.gw, "link", "add", port, "type", "veth", "peer", "name", "lan", "netns", router)
        prefix = ipaddress.IPv4Interface(segment.address).network.prefixlen
        self.ip.ip(router, "addr", "replace", f"{router_address(segment.address)}/{prefix}", "dev", "lan")
        self.ip.ip(router, "link", "set", "lan", "up")
        self.ip.ip(self.gw, "link", "set", port, "master", bridge, "up")
        self._vxlan(router, vxlan, segment.federated_vni)
        self.ip.ip(router, "addr", "replace", f"{transit_address(self.gateway)}/16", "dev", vxlan)
        self.ip.ip(router, "link", "set", vxlan, "up")
        self._flood(router, vxlan, segment.peers)
        self.ip.ip(router, "route", "flush", "proto", "static")
        for peer in segment.peers:
            self.ip.ip(
                router,
                "route",
                "replace",
                peer.prefix,
                "via",
                transit_address(peer.gateway),
                "dev",
                vxlan,
                "proto",
                "static",
            )
        if segment.mode == "global-nat":
            self._nat(router, vxlan, segment)

    def _nat(self, router: str, vxlan: str, segment: DesiredSegment) -> None:
        local = ipaddress.IPv4Interface(segment.address).ip
        block = ipaddress.IPv4Network(segment.global_block).network_address
        rules = [
            "flush ruleset",
            "table ip cloudtwin {",
            "  chain pre { type nat hook prerouting priority -100; }",
            "  chain post { type nat hook postrouting priority 100; }",
            "}",
        ]
        for k in range(segment.endpoints):
            rules.append(
                f'add rule ip cloudtwin post oifname "{vxlan}" ip saddr {local + k} snat to {block + k}'
            )
            rules.append(
                f'add rule ip cloudtwin pre iifname "{vxlan}" ip daddr {block + k} dnat to {local + k}'
            )
        done = subprocess.run(
            ["ip", "netns", "exec", router, "nft", "-f", "-"],
            input="\n".join(rules) + "\n",
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise FederationError("linux", f"nft in {router} failed: {done.stderr.strip().splitlines()[:1]}")

    def _remove_router(self, network: str, tag: str) -> None:
        self.ip.ip(self.gw, "link", "del", f"r{tag}", check=False)
        if self.router_ns(network) in namespaces(self.prefix):
            self.ip.run("ip", "netns", "del", self.router_ns(network))

    def _endpoint(
        self, segment: DesiredSegment, k: int, bridge: str, tag: str, mtu: int, via: str | None
    ) -> None:
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
        self.ip.ip(name, "route", "del", "default", check=False)
        if via is not None:
            self.ip.ip(name, "route", "add", "default", "via", via)
        self.ip.ip(self.gw, "link", "set", port, "master", bridge, "mtu", str(mtu), "up")

    def _endpoints_of(self, network: str) -> list[str]:
        stem = f"{self.prefix}-{self.site}-{network}-"
        found = [
            n
            for n in namespaces(self.prefix)
            if n.startswith(stem) and n[len(stem) :].isascii() and n[len(stem) :].isdigit()
        ]
        return sorted(found, key=lambda n: int(n[len(stem) :]))

    # -- read back and delete -----------------------------------------------------------
    def _peers(self, namespace: str, vxlan: str) -> list[Peer]:
        found = self.ip.json(namespace, "link", "show", vxlan) if namespace in namespaces(self.prefix) else []
        alias = found[0].get("ifalias", "") if found else ""
        return [Peer(site=s, gateway=g, prefix=p) for s, g, p in (json.loads(alias) if alias else [])]

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
            vxlan = f"v{name[1:]}"
            home = self.gw if vxlan in links else self.router_ns(meta["network"])
            meta["peers"] = self._peers(home, vxlan)
            ports = sum(
                1 for item in links.values() if item.get("master") == name and item["ifname"].startswith("e")
            )
            if ports != meta["endpoints"] or len(self._endpoints_of(meta["network"])) != meta["endpoints"]:
                meta["endpoints"] = 0  # half-made: the next apply completes it
            found.append(DesiredSegment.model_validate(meta))
        return sorted(found, key=lambda s: s.network)

    def delete(self, network: str) -> None:
        """Remove a segment's endpoints, router, bridge and tunnel."""
        for name in self._endpoints_of(network):
            self._remove_endpoint(name, _short(network))
        if self.router_ns(network) in namespaces(self.prefix):
            self.ip.run("ip", "netns", "del", self.router_ns(network))
        if self.gw in namespaces(self.prefix):
            tag = _short(network)
            for device in (f"r{tag}", f"v{tag}", f"b{tag}"):
                self.ip.ip(self.gw, "link", "del", device, check=False)

    def close(self) -> None:
        """Nothing held open (the namespaces stay: they are the site)."""

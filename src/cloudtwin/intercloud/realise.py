"""A whole federation realised in network namespaces (`cloudtwin federate up`), pinged for real.

A namespace `PREFIX-wan` holds the WAN: a bridge with one veth to each site's gateway
(`wan0` in the gateway namespace, with the address the controller would give it). Each
site is then built by the linux adapter, whatever its flavour: every tenant network of
the site becomes a bridge and its endpoints namespaces; federated ones get their VXLAN
tunnels to the peer gateways. Where the scenario gives WAN bandwidths, each gateway's
`wan0` is shaped per peer with an HTB class (this kernel has no netem: WAN latency is not
emulated, and WireGuard and Geneve devices are not available: tunnels are VXLAN).
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.adapters.linux import LinuxAdapter
from cloudtwin.intercloud.controller import DEFAULT_GATEWAY_POOL
from cloudtwin.intercloud.netns import IpRunner, namespaces, remove_namespaces
from cloudtwin.intercloud.objects import DesiredSegment, Peer
from cloudtwin.intercloud.plan import FederationPlan, ip_text

__all__ = ["Realisation", "gateway_address", "live_reachability", "realise", "unrealise"]


def gateway_address(site_index: int) -> str:
    """The WAN address of site i's gateway (the controller hands them out in the same order)."""
    return str(ipaddress.IPv4Network(DEFAULT_GATEWAY_POOL).network_address + site_index + 1)


@dataclass(frozen=True)
class Realisation:
    """What `realise` built: the namespace and address of every endpoint, in plan order."""

    prefix: str
    endpoint_ns: tuple[str, ...]
    endpoint_ip: tuple[str, ...]
    namespaces: tuple[str, ...]
    shaped: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """A JSON-ready summary."""
        return {
            "prefix": self.prefix,
            "namespaces": list(self.namespaces),
            "endpoints": len(self.endpoint_ns),
            "shaped": list(self.shaped),
            "not_available": ["WAN latency (no netem qdisc)", "WireGuard and Geneve devices"],
        }


def _segment(plan: FederationPlan, s: int) -> DesiredSegment:
    site = plan.scenario.sites[int(plan.seg_site[s])]
    tenant = site.tenants[int(plan.seg_tenant[s])]
    n = int(plan.seg_network[s])
    peers: tuple[Peer, ...] = ()
    if n >= 0:
        if plan.mode_of(n) != "l2-stretch":
            raise FederationError(
                f"networks.{n}.mode",
                f"namespaces realise l2-stretch networks; {plan.network_names[n]!r} is {plan.mode_of(n)}",
            )
        others = [int(r) for r in plan.network_segments(n) if r != s]
        peers = tuple(
            Peer(site=plan.site_names[int(plan.seg_site[r])], gateway=gateway_address(int(plan.seg_site[r])))
            for r in others
        )
    return DesiredSegment(
        network=plan.network_names[n] if n >= 0 else f"local-{tenant.name}",
        mode="l2-stretch",
        federated_vni=int(plan.network_vni[n]) if n >= 0 else 0,
        tenant=tenant.name,
        vni=tenant.vni,
        address=f"{ip_text(int(plan.seg_first[s]))}/{tenant.network.prefixlen}",
        endpoints=int(plan.seg_count[s]),
        peers=tuple(sorted(peers, key=lambda p: p.site)),
    )


def _wan(plan: FederationPlan, prefix: str, ip: IpRunner) -> list[str]:
    wan = f"{prefix}-wan"
    if wan not in namespaces(prefix):
        ip.run("ip", "netns", "add", wan)
        ip.ip(wan, "link", "add", "wan", "type", "bridge")
        ip.ip(wan, "link", "set", "wan", "up")
    for i, site in enumerate(plan.site_names):
        gw = f"{prefix}-{site}-gw"
        if gw not in namespaces(prefix):
            ip.run("ip", "netns", "add", gw)
        if not ip.json(gw, "link", "show", "wan0"):
            ip.ip(wan, "link", "add", f"g{i}", "type", "veth", "peer", "name", "wan0", "netns", gw)
            ip.ip(wan, "link", "set", f"g{i}", "master", "wan", "up")
    return _shape(plan, prefix, ip)


def _shape(plan: FederationPlan, prefix: str, ip: IpRunner) -> list[str]:
    """Per gateway, an HTB class per WAN peer at the link's bandwidth; the names of the shaped links."""
    shaped = []
    index = {name: i for i, name in enumerate(plan.site_names)}
    for site in plan.site_names:
        gw = f"{prefix}-{site}-gw"
        links = [
            (w, index[w.between[1] if w.between[0] == site else w.between[0]])
            for w in plan.scenario.wan
            if site in w.between
        ]
        if not links:
            continue
        ip.run(
            "ip",
            "netns",
            "exec",
            gw,
            "tc",
            "qdisc",
            "replace",
            "dev",
            "wan0",
            "root",
            "handle",
            "1:",
            "htb",
            "default",
            "1",
        )
        ip.run(
            "ip",
            "netns",
            "exec",
            gw,
            "tc",
            "class",
            "replace",
            "dev",
            "wan0",
            "parent",
            "1:",
            "classid",
            "1:1",
            "htb",
            "rate",
            "10gbit",
        )
        for k, (link, peer) in enumerate(links):
            classid = f"1:{10 + k}"
            rate = f"{int(link.bandwidth)}bit"
            ip.run(
                "ip",
                "netns",
                "exec",
                gw,
                "tc",
                "class",
                "replace",
                "dev",
                "wan0",
                "parent",
                "1:",
                "classid",
                classid,
                "htb",
                "rate",
                rate,
                "ceil",
                rate,
            )
            ip.run(
                "ip",
                "netns",
                "exec",
                gw,
                "tc",
                "filter",
                "replace",
                "dev",
                "wan0",
                "parent",
                "1:",
                "protocol",
                "ip",
                "prio",
                str(k + 1),
                "u32",
                "match",
                "ip",
                "dst",
                f"{gateway_address(peer)}/32",
                "flowid",
                classid,
            )
            shaped.append(f"{site}->{plan.site_names[peer]}")
    return shaped


def realise(plan: FederationPlan, prefix: str) -> Realisation:
    """Build the federation in namespaces (idempotent); on any failure everything made is removed."""
    ip = IpRunner()
    segments = [_segment(plan, s) for s in range(plan.segment_count)]
    try:
        shaped = _wan(plan, prefix, ip)
        for s, segment in enumerate(segments):
            site = int(plan.seg_site[s])
            LinuxAdapter(
                plan.site_names[site], prefix, gateway_address(site), underlay_mtu=plan.scenario.underlay_mtu
            ).apply(segment)
    except BaseException:
        remove_namespaces(prefix)
        raise
    names, addresses = [], []
    for e in range(plan.endpoint_count):
        s = int(plan.ep_segment[e])
        k = e - int(plan.seg_ep0[s])
        names.append(f"{prefix}-{plan.site_names[int(plan.seg_site[s])]}-{segments[s].network}-{k}")
        addresses.append(ip_text(int(plan.ep_ip[e])))
    return Realisation(prefix, tuple(names), tuple(addresses), tuple(namespaces(prefix)), tuple(shaped))


def unrealise(prefix: str) -> list[str]:
    """Remove every namespace (and so every device) of `prefix`; the names removed."""
    return remove_namespaces(prefix)


def live_reachability(realisation: Realisation) -> np.ndarray:
    """(endpoints, endpoints) matrix from real pings: src reaches dst when dst's address answers
    from src's namespace and the neighbour entry is dst's own MAC address."""
    ip = IpRunner()
    macs = [ip.json(ns, "link", "show", "eth0")[0]["address"] for ns in realisation.endpoint_ns]
    targets = sorted(set(realisation.endpoint_ip))
    runs = [
        subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "cloudtwin.intercloud.probe", *targets],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for ns in realisation.endpoint_ns
    ]
    n = len(runs)
    matrix = np.zeros((n, n), dtype=bool)
    for src, run in enumerate(runs):
        out, err = run.communicate(timeout=60)
        if run.returncode:
            raise FederationError(
                "linux", f"probe in {realisation.endpoint_ns[src]} failed: {err.strip().splitlines()[-1:]}"
            )
        answered = json.loads(out)
        for dst in range(n):
            if dst != src:
                matrix[src, dst] = answered.get(realisation.endpoint_ip[dst], "") == macs[dst]
    return matrix

"""A whole federation realised in network namespaces (`cloudtwin federate up`), pinged for real.

A namespace `PREFIX-wan` holds the WAN: a bridge with one veth to each site's gateway
(`wan0` in the gateway namespace, with the address the controller would give it). Each
site is then built by the linux adapter, whatever its flavour: every tenant network of
the site becomes a bridge and its endpoints namespaces; federated ones get their VXLAN
tunnels to the peer gateways (l2-stretch) or a router with a VXLAN transit link,
routes and, for global-nat, address translation (l3-routed, global-nat). Where the
scenario gives WAN bandwidths, each gateway's `wan0` is shaped per peer with an HTB
class (this kernel has no netem: WAN latency is not emulated, and WireGuard and Geneve
devices are not available: tunnels are VXLAN).
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import FederationError
from cloudtwin.intercloud import probe
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
    endpoint_global: tuple[str, ...] = ()
    endpoint_subnet: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """A JSON-ready summary."""
        return {
            "prefix": self.prefix,
            "namespaces": list(self.namespaces),
            "endpoints": len(self.endpoint_ns),
            "shaped": list(self.shaped),
            "not_available": ["WAN latency (no netem qdisc)", "WireGuard and Geneve devices"],
        }


def _block(plan: FederationPlan, s: int) -> str:
    if plan.seg_global[s] < 0:
        return ""
    size = 1 << max(int(plan.seg_count[s]) - 1, 0).bit_length()
    return f"{ip_text(int(plan.seg_global[s]))}/{32 - size.bit_length() + 1}"


def _peer_prefix(plan: FederationPlan, r: int, mode: str) -> str:
    if mode == "l3-routed":
        return (
            f"{ip_text(int(plan.seg_lo[r]))}/{32 - int(plan.seg_hi[r] - plan.seg_lo[r] + 1).bit_length() + 1}"
        )
    return _block(plan, r) if mode == "global-nat" else ""


def _segment(plan: FederationPlan, s: int) -> DesiredSegment:
    site = plan.scenario.sites[int(plan.seg_site[s])]
    tenant = site.tenants[int(plan.seg_tenant[s])]
    n = int(plan.seg_network[s])
    mode = plan.mode_of(n) if n >= 0 else "l2-stretch"
    peers: tuple[Peer, ...] = ()
    if n >= 0:
        others = [int(r) for r in plan.network_segments(n) if r != s]
        peers = tuple(
            Peer(
                site=plan.site_names[int(plan.seg_site[r])],
                gateway=gateway_address(int(plan.seg_site[r])),
                prefix=_peer_prefix(plan, r, mode),
            )
            for r in others
        )
    return DesiredSegment(
        network=plan.network_names[n] if n >= 0 else f"local-{tenant.name}",
        mode=mode,
        federated_vni=int(plan.network_vni[n]) if n >= 0 else 0,
        tenant=tenant.name,
        vni=tenant.vni,
        address=f"{ip_text(int(plan.seg_first[s]))}/{tenant.network.prefixlen}",
        endpoints=int(plan.seg_count[s]),
        global_block=_block(plan, s),
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

        def tc(*argv: str, check: bool = True, gw: str = gw) -> None:
            ip.run("ip", "netns", "exec", gw, "tc", *argv, check=check)

        links = [
            (w, index[w.between[1] if w.between[0] == site else w.between[0]])
            for w in plan.scenario.wan
            if site in w.between
        ]
        if not links:
            continue
        tc("qdisc", "del", "dev", "wan0", "root", check=False)  # built again from scratch
        tc("qdisc", "add", "dev", "wan0", "root", "handle", "1:", "htb", "default", "1")
        tc("class", "add", "dev", "wan0", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit")
        for k, (link, peer) in enumerate(links):
            classid, rate = f"1:{10 + k}", f"{int(link.bandwidth)}bit"
            tc(
                "class",
                "add",
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
            tc(
                "filter",
                "add",
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
    names, addresses, globals_, subnets = [], [], [], []
    for e in range(plan.endpoint_count):
        s = int(plan.ep_segment[e])
        k = e - int(plan.seg_ep0[s])
        names.append(f"{prefix}-{plan.site_names[int(plan.seg_site[s])]}-{segments[s].network}-{k}")
        addresses.append(ip_text(int(plan.ep_ip[e])))
        globals_.append(ip_text(int(plan.ep_global[e])) if plan.ep_global[e] >= 0 else "")
        subnets.append(str(ipaddress.IPv4Interface(segments[s].address).network))
    return Realisation(
        prefix,
        tuple(names),
        tuple(addresses),
        tuple(namespaces(prefix)),
        tuple(shaped),
        tuple(globals_),
        tuple(subnets),
    )


def unrealise(prefix: str) -> list[str]:
    """Remove every namespace (and so every device) of `prefix`; the names removed."""
    return remove_namespaces(prefix)


TTL_STEP = 4
"""Endpoint i answers with initial TTL 255 - 4i: an answer that crossed up to three routers
still names its sender."""
MAX_LIVE_ENDPOINTS = 255 // TTL_STEP


def live_reachability(realisation: Realisation) -> np.ndarray:
    """(endpoints, endpoints) matrix from real pings: src reaches dst when one of dst's addresses
    (its own, its global one) answers from src's namespace and the answer is dst's own: each
    endpoint answers with its own initial TTL (and, on src's subnet, from its MAC address)."""
    n = len(realisation.endpoint_ns)
    if n > MAX_LIVE_ENDPOINTS:
        raise FederationError(
            "sites", f"live reachability tells {MAX_LIVE_ENDPOINTS} endpoints apart, not {n:,}"
        )
    ip = IpRunner()
    macs = [ip.json(ns, "link", "show", "eth0")[0]["address"] for ns in realisation.endpoint_ns]
    for i, ns in enumerate(realisation.endpoint_ns):
        ip.in_ns(ns, ["sh", "-c", f"echo {255 - TTL_STEP * i} > /proc/sys/net/ipv4/ip_default_ttl"])
    globals_ = realisation.endpoint_global or ("",) * n
    subnets = [ipaddress.IPv4Network(s) for s in realisation.endpoint_subnet] or None
    targets = sorted({a for a in (*realisation.endpoint_ip, *globals_) if a})
    # the probe's file, run as a script: `-m cloudtwin.intercloud.probe` would first import the
    # package (about 1 s of CPU in each of the n processes) for a module that needs only the
    # standard library; -P keeps the package's folder off sys.path
    runs = [
        subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-P", probe.__file__, *targets],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for ns in realisation.endpoint_ns
    ]
    matrix = np.zeros((n, n), dtype=bool)
    for src, run in enumerate(runs):
        out, err = run.communicate(timeout=120)
        if run.returncode:
            raise FederationError(
                "linux", f"probe in {realisation.endpoint_ns[src]} failed: {err.strip()[-200:]}"
            )
        for address, (ttl, mac) in json.loads(out).items():
            sender = (255 - int(ttl)) // TTL_STEP
            if (
                sender == src
                or sender >= n
                or address not in (realisation.endpoint_ip[sender], globals_[sender])
            ):
                continue
            on_link = subnets is not None and ipaddress.IPv4Address(address) in subnets[src]
            if not on_link or mac == macs[sender]:
                matrix[src, sender] = True
    return matrix

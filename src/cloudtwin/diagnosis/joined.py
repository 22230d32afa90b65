"""What the devices of joined sites (a federation, a cloud) log alike: their port names, the
healthy periodic lines of every switch, gateway and WAN edge, which device logs for a
node, and the inventory of nodes and links. The federation's and the cloud's emitters
both write these, from one generator in the same order, so that one scenario gives the
same lines in either."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cloudtwin.diagnosis.emit import Log, node_address
from cloudtwin.topology.sites import SitesTopology

__all__ = ["device_of", "joined_inventory", "joined_ports", "switch_noise"]

_NOISE = (
    "%LLDP-6-NEIGHBOR_REFRESH: LLDP neighbor on {port} refreshed, ttl 120",
    "%NTP-6-SYNC: clock synchronized to 10.255.0.{a}, offset {b} us",
    "%PLATFORM-6-TEMP: sensor {a} at {c} C, within limits",
    "%SYSMGR-6-HEARTBEAT: service {svc} heartbeat ok",
)
_SERVICES = ("bgp", "bfd", "vrrp", "ike", "lldp")


def joined_ports(joined: SitesTopology) -> list[str]:
    """Per directed link of the joined sites, its port at the sending node."""
    names = [""] * joined.link_count
    count: dict[int, int] = {}
    for link in range(joined.link_count):
        node = int(joined.link_src[link])
        k = count.get(node, 0)
        count[node] = k + 1
        names[link] = f"eth{k}" if joined.node_kinds[node] == "nic" else f"Ethernet1/{k + 1}"
    return names


def joined_inventory(
    joined: SitesTopology, ports: list[str], capacity_bps: np.ndarray
) -> dict[str, dict[str, list]]:
    """Nodes and links of the joined sites as the operations store keeps them; each link's
    capacity as the run built it (`capacity_bps`, one per link and maybe more after)."""
    nodes = {
        "node": list(range(len(joined.node_names))),
        "name": list(joined.node_names),
        "kind": list(joined.node_kinds),
        "address": [node_address(n) for n in range(len(joined.node_names))],
    }
    links = {
        "link_id": list(range(joined.link_count)),
        "name": [joined.link_name(k) for k in range(joined.link_count)],
        "src": [joined.node_names[int(n)] for n in joined.link_src],
        "dst": [joined.node_names[int(n)] for n in joined.link_dst],
        "device": [device_of(joined.node_names[int(n)]) for n in joined.link_src],
        "interface": ports,
        "capacity_bps": capacity_bps[: joined.link_count].astype(float).tolist(),
    }
    return {"twin_nodes": nodes, "twin_links": links}


def device_of(name: str) -> str:
    """The device that logs for a node: a NIC's host, or the node itself."""
    return name.split("/")[0]


def switch_noise(
    log: Log,
    joined: SitesTopology,
    ports: list[str],
    end_s: float,
    rng: np.random.Generator,
    silent: Callable[[int, float], bool] | None = None,
) -> None:
    """Healthy periodic lines from every node that is not a NIC, from the start of the
    history to `end_s`, at the configured rate; a line is drawn and then left out where
    `silent(node, t)` says the node was dead (so the draws do not depend on it)."""
    config = log.config
    begin = -config.history_s
    for node, kind in enumerate(joined.node_kinds):
        if kind == "nic":
            continue
        own = np.flatnonzero(joined.link_src == node)
        count = int(rng.poisson(config.noise_per_switch_s * (end_s - begin)))
        for t in np.sort(rng.uniform(begin, end_s, count)).tolist():
            text = _NOISE[int(rng.integers(len(_NOISE)))].format(
                port=ports[int(rng.choice(own))],
                a=int(rng.integers(1, 9)),
                b=int(rng.integers(1, 400)),
                c=int(rng.integers(30, 60)),
                svc=_SERVICES[int(rng.integers(len(_SERVICES)))],
            )
            if silent is None or not silent(node, t):
                log.at(t, joined.node_names[node], "info", text.split("-")[0].lstrip("%").lower(), text)

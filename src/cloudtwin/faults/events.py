"""Fault specs turned into fabric states: the capacity of every link after each fault event.

Targets are named as in reports: a cable `leaf0-spine3` (both directions; `#1` picks the
second of parallel cables), a switch `spine3` (every cable that touches it), a NIC
`host5/nic0` or a whole host `host5` (its host links). Overlapping faults combine: a
link is down while any fault holds it down, and degradations multiply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.faults import Fault
from cloudtwin.topology.topology import NodeKind, Topology

__all__ = ["FabricState", "cable_links", "expand_faults", "resolve_target"]

_PREFIXES = {"leaf": NodeKind.LEAF, "spine": NodeKind.SPINE, "agg": NodeKind.AGG, "core": NodeKind.CORE}
_SWITCH = re.compile(r"^(leaf|spine|agg|core)([0-9]+)$")
_NIC = re.compile(r"^host([0-9]+)(?:/nic([0-9]+))?$")
_CABLE = re.compile(r"^([a-z]+[0-9]+)-([a-z]+[0-9]+)(?:#([0-9]+))?$")


@dataclass(frozen=True, eq=False)
class FabricState:
    """From `time_s` on, every link has `capacity_bps` (0: down); `changed` are the links
    whose capacity differs from the state before, `status_changed` those that went down or up."""

    time_s: float
    capacity_bps: np.ndarray
    changed: np.ndarray
    status_changed: bool
    went_down: bool


def _switch(topology: Topology, name: str, key: str) -> int:
    match = _SWITCH.match(name)
    if match is None:
        raise ScenarioError(f"{key}: {name!r} is not a switch name like leaf0 or spine3")
    hits = np.flatnonzero(
        (topology.node_kind == _PREFIXES[match.group(1)]) & (topology.node_index == int(match.group(2)))
    )
    if hits.size == 0:
        raise ScenarioError(f"{key}: the fabric has no switch {name!r}")
    return int(hits[0])


def cable_links(topology: Topology, a: int, b: int, which: int = 0) -> np.ndarray:
    """Both directed links of the `which`-th cable between nodes a and b."""
    forward = np.flatnonzero((topology.link_src == a) & (topology.link_dst == b))
    backward = np.flatnonzero((topology.link_src == b) & (topology.link_dst == a))
    if which >= min(forward.size, backward.size):
        raise ScenarioError(
            f"no cable #{which} between {topology.node_name(a)} and {topology.node_name(b)}"
        )
    return np.array([forward[which], backward[which]], dtype=np.int64)


def _touching(topology: Topology, node: int) -> np.ndarray:
    return np.flatnonzero((topology.link_src == node) | (topology.link_dst == node))


def resolve_target(topology: Topology, kind: str, target: str, key: str = "faults") -> np.ndarray:
    """The directed links a `link`, `switch` or `nic` fault on `target` takes down."""
    target = target.strip()
    if kind == "switch":
        return _touching(topology, _switch(topology, target, f"{key}.target"))
    if kind == "nic":
        match = _NIC.match(target)
        if match is None:
            raise ScenarioError(f"{key}.target: {target!r} is not a NIC like host5/nic0 or host5")
        host = int(match.group(1))
        if host >= topology.host_count:
            raise ScenarioError(f"{key}.target: the fabric has no host {host}")
        rails = range(topology.nics_per_host) if match.group(2) is None else [int(match.group(2))]
        if max(rails) >= topology.nics_per_host:
            raise ScenarioError(f"{key}.target: host {host} has no nic{max(rails)}")
        nics = [int(topology.host_nics[host, r]) for r in rails]
        return np.concatenate([_touching(topology, n) for n in nics])
    match = _CABLE.match(target)
    if match is None:
        raise ScenarioError(f"{key}.target: {target!r} is not a cable like leaf0-spine3")
    a = _switch(topology, match.group(1), f"{key}.target")
    b = _switch(topology, match.group(2), f"{key}.target")
    try:
        return cable_links(topology, a, b, int(match.group(3) or 0))
    except ScenarioError as err:
        raise ScenarioError(f"{key}.target: {err}") from err


def _random_targets(topology: Topology, fault: Fault, rng: np.random.Generator, key: str) -> list[np.ndarray]:
    kind = topology.node_kind
    if fault.of == "nic":
        pool = [
            _touching(topology, int(n)) for n in topology.host_nics.reshape(-1)
        ]
    elif fault.of == "switch":
        # edge switches hold hosts; failing one only cuts its hosts off, so draw from the rest
        core = np.flatnonzero((kind != NodeKind.NIC) & (topology.edge_slot < 0))
        pool = [_touching(topology, int(n)) for n in core]
    else:
        inner = np.flatnonzero(
            (kind[topology.link_src] != NodeKind.NIC)
            & (kind[topology.link_dst] != NodeKind.NIC)
            & (topology.link_src < topology.link_dst)
        )
        pool = [np.array([i, _reverse(topology, int(i))]) for i in inner]
    if fault.count is None or fault.count > len(pool):
        raise ScenarioError(
            f"{key}.count: {fault.count} random {fault.of} failures, but the fabric has {len(pool)}"
        )
    chosen = rng.choice(len(pool), size=fault.count, replace=False)
    return [pool[int(i)] for i in np.sort(chosen)]


def _reverse(topology: Topology, link: int) -> int:
    a, b = int(topology.link_src[link]), int(topology.link_dst[link])
    forward = np.flatnonzero((topology.link_src == a) & (topology.link_dst == b))
    backward = np.flatnonzero((topology.link_src == b) & (topology.link_dst == a))
    return int(backward[int(np.flatnonzero(forward == link)[0])])


def _intervals(
    fault: Fault, links: np.ndarray, topology: Topology
) -> list[tuple[float, float, np.ndarray, np.ndarray]]:
    """(start, end, links, capacity during the fault) for one target of one fault."""
    if fault.capacity is None:
        during = np.zeros(links.size)
    elif fault.capacity <= 1:  # a fraction (1: 100%, unchanged); rates are above 1 bit/s
        during = topology.capacity_bps[links] * fault.capacity
    else:
        during = np.minimum(topology.capacity_bps[links], fault.capacity)
    if fault.flap is not None:
        period, down = fault.flap.period, fault.flap.down_s
        return [
            (fault.at + i * period, fault.at + i * period + down, links, during)
            for i in range(fault.flap.count)
        ]
    end = np.inf if fault.until is None else fault.until
    return [(fault.at, end, links, during)]


def expand_faults(
    faults: Sequence[Fault], topology: Topology, seed: int | np.random.Generator
) -> list[FabricState]:
    """The fabric's states over time: one per instant at which some link's capacity changes."""
    rng = np.random.default_rng(seed)
    spans: list[tuple[float, float, np.ndarray, np.ndarray]] = []
    for i, fault in enumerate(faults):
        key = f"faults.{i}"
        if fault.kind == "random":
            if fault.of == "nic" and fault.until is None and fault.flap is None:
                raise ScenarioError(f"{key}.until: random NIC failures need until (or the flows never end)")
            targets = _random_targets(topology, fault, rng, key)
        else:
            assert fault.target is not None
            targets = [resolve_target(topology, fault.kind, fault.target, key)]
        for links in targets:
            spans.extend(_intervals(fault, links, topology))
    times = sorted({t for s in spans for t in (s[0], s[1]) if np.isfinite(t)})
    states: list[FabricState] = []
    previous = topology.capacity_bps.astype(float)
    for time in times:
        capacity = topology.capacity_bps.astype(float).copy()
        for start, end, links, during in spans:
            if start <= time < end:
                capacity[links] = np.minimum(capacity[links], during)
        changed = np.flatnonzero(capacity != previous)
        if changed.size == 0:
            continue
        was_up, is_up = previous[changed] > 0, capacity[changed] > 0
        states.append(
            FabricState(
                time_s=float(time),
                capacity_bps=capacity,
                changed=changed,
                status_changed=bool(np.any(was_up != is_up)),
                went_down=bool(np.any(was_up & ~is_up)),
            )
        )
        previous = capacity
    return states

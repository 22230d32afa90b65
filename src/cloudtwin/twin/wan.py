"""WAN faults as engine changes: a WAN link cut or degraded over its windows, back at `until`.

Both directions of the link change together. Overlapping windows on one link keep the
lowest capacity any of them gives; a link comes back to its capacity when the last
window over it ends.
"""

from __future__ import annotations

import numpy as np

from cloudtwin.engine.simulator import Change
from cloudtwin.scenario.federation import FederationScenario, WanFault
from cloudtwin.topology.sites import SitesTopology

__all__ = ["wan_fault_changes", "wan_fault_links"]


def wan_fault_links(scenario: FederationScenario, joined: SitesTopology, fault: WanFault) -> np.ndarray:
    """Both directed links of the WAN link a fault names."""
    index = {s.name: i for i, s in enumerate(scenario.sites)}
    a, b = index[fault.between[0]], index[fault.between[1]]
    return np.array([joined.wan_links[(a, b)], joined.wan_links[(b, a)]], dtype=np.int64)


def _during(fault: WanFault, base_bps: np.ndarray) -> np.ndarray:
    if fault.capacity is None:
        return np.zeros(base_bps.size)
    if fault.capacity <= 1:  # a fraction; a rate is above 1 bit/s
        return base_bps * fault.capacity
    return np.minimum(base_bps, fault.capacity)


def wan_fault_changes(
    scenario: FederationScenario, joined: SitesTopology, capacity_bps: np.ndarray
) -> list[Change]:
    """The scenario's `wan_faults` as capacity changes of the run's WAN links (`capacity_bps`:
    the run's links as built, the joined sites' first)."""
    spans: list[tuple[float, float, np.ndarray, np.ndarray]] = []
    for fault in scenario.wan_faults:
        links = wan_fault_links(scenario, joined, fault)
        during = _during(fault, capacity_bps[links])
        spans += [(start, end, links, during) for start, end in fault.windows()]
    instants = sorted({t for start, end, _, _ in spans for t in (start, end) if np.isfinite(t)})
    changes = []
    current = capacity_bps.astype(float).copy()
    for t in instants:
        now = capacity_bps.astype(float).copy()
        touched = [links for _, _, links, _ in spans]
        for start, end, links, during in spans:
            if start <= t < end:
                now[links] = np.minimum(now[links], during)
        ids = np.unique(np.concatenate(touched)) if touched else np.empty(0, dtype=np.int64)
        moved = ids[now[ids] != current[ids]]
        if moved.size:
            changes.append(Change(t, link_ids=moved, capacity_bps=now[moved]))
        current = now
    return changes

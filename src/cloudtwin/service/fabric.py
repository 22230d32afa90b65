"""The fabric of the store's twin run, laid out in tiers, for drawing a diagnosis on it."""

from __future__ import annotations

from cloudtwin.service.models import Fabric, FabricNode
from cloudtwin.store.database import Store

__all__ = ["Fabric", "read_fabric"]

#: Tier of each node kind, bottom (hosts) to top (core switches).
_TIER = {"host": 0, "nic": 1, "leaf": 2, "tor": 2, "agg": 3, "spine": 3, "core": 4}


def read_fabric(store: Store) -> Fabric:
    """The nodes and cables of the twin run in the store (empty when there is none)."""
    if store.schema_version("twin") is None:
        return Fabric(nodes=[], cables=[])
    nodes = store.query("SELECT name, kind FROM twin_nodes ORDER BY node")[1]
    pairs = store.query(
        "SELECT DISTINCT least(src, dst), greatest(src, dst) FROM twin_links ORDER BY 1, 2"
    )[1]
    tiers: dict[int, list[str]] = {}
    kinds = {}
    for name, kind in nodes:
        tiers.setdefault(_TIER.get(kind, 0), []).append(name)
        kinds[name] = kind
    widest = max((len(v) for v in tiers.values()), default=1)
    placed = []
    for tier, names in sorted(tiers.items()):
        step = widest / len(names)
        for i, name in enumerate(names):
            placed.append(FabricNode(name=name, kind=kinds[name], x=round((i + 0.5) * step, 3), y=tier))
    return Fabric(nodes=placed, cables=[(a, b) for a, b in pairs])

"""The fabric of the store's twin run, laid out in tiers, for drawing a diagnosis on it.

A cloud of several sites (site-qualified names, `west.leaf1`) is drawn site by site, side
by side, each site's gateways and WAN edge above its fabric, the WAN links between them.
"""

from __future__ import annotations

from cloudtwin.service.models import Fabric, FabricNode
from cloudtwin.store.database import Store
from cloudtwin.store.twin_tables import run_names

__all__ = ["Fabric", "read_fabric"]

#: Tier of each node kind, bottom (hosts) to top (core switches).
_TIER = {"host": 0, "nic": 1, "leaf": 2, "tor": 2, "agg": 3, "spine": 3, "core": 4, "gateway": 5, "wan": 6}
#: Empty columns between two sites.
_SITE_GAP = 1.0


def read_fabric(store: Store, run: str | None = None) -> Fabric:
    """The nodes and cables of the twin run `run` in the store (the latest written when
    None; empty when there is none)."""
    if store.schema_version("twin") is None:
        return Fabric(nodes=[], cables=[])
    names = run_names(store)
    if run is None:
        if not names:
            return Fabric(nodes=[], cables=[])
        run = names[0]
    nodes = store.query("SELECT name, kind FROM twin_nodes WHERE run = ? ORDER BY node", [run])[1]
    pairs = store.query(
        "SELECT DISTINCT least(src, dst), greatest(src, dst) FROM twin_links WHERE run = ? ORDER BY 1, 2",
        [run],
    )[1]
    sites: dict[str, dict[int, list[str]]] = {}
    kinds = {}
    for name, kind in nodes:
        site = name.split(".", 1)[0] if "." in name else ""
        sites.setdefault(site, {}).setdefault(_TIER.get(kind, 0), []).append(name)
        kinds[name] = kind
    placed = []
    left = 0.0
    for tiers in sites.values():
        widest = max((len(v) for v in tiers.values()), default=1)
        for tier, names in sorted(tiers.items()):
            step = widest / len(names)
            for i, name in enumerate(names):
                x = round(left + (i + 0.5) * step, 3)
                placed.append(FabricNode(name=name, kind=kinds[name], x=x, y=tier))
        left += widest + _SITE_GAP
    return Fabric(nodes=placed, cables=[(a, b) for a, b in pairs])

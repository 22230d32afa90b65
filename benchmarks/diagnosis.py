"""Diagnosis on labelled incidents: K simultaneous faults anywhere in a cloud, found or not.

Each incident is one of three clouds with K = 1 to 4 faults drawn at random places and
times (seeded): `one-cloud` (examples/one-cloud.yaml without its own faults), `tri` (a
fat-tree site and two leaf-spine sites, a global-nat network, WAN links in a chain so
that a migration crosses two WAN hops) and `pair` (two leaf-spine sites running
perftest jobs of two tenants, an l3-routed network). The fault kinds: a fabric link
down, degraded or flapping, a switch down, a NIC down or degraded (any site), a
gateway failure (repaired or not), a WAN link cut, degraded or flapping.

Every incident goes through what `cloudtwin evaluate SCENARIO --db` and `cloudtwin
diagnose --db` run (the cloud without and with its faults, the faulted run's operations
data into a fresh store, the ranking from the store alone); the ground truth is the
list of injected faults, from the scenario. Printed: top-1, top-K and top-(K+2) recall
(a fault found among the first 1, K, K+2 suspects), mean reciprocal rank and false
suspects (suspects that are no fault, ranked above the last fault found in the top K+2),
per fault kind and per K; every single-fault incident's check that the failed
component ranks above the components it took down (or that touch it); the time per
incident.

Run:  python benchmarks/diagnosis.py [--incidents 240] [--seed 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cloudtwin.diagnosis.cloud import emit_cloud
from cloudtwin.diagnosis.rank import cable_name, diagnose
from cloudtwin.evaluation.cloud import evaluate_cloud
from cloudtwin.scenario.cloud import CloudScenario, load_cloud
from cloudtwin.store.database import Store

REPO = Path(__file__).resolve().parents[1]
KINDS = (
    "link",
    "link-degraded",
    "link-flap",
    "switch",
    "nic",
    "nic-degraded",
    "gateway",
    "wan-cut",
    "wan-degraded",
)


def one_cloud() -> dict[str, Any]:
    """examples/one-cloud.yaml without its own faults (its gateway fault and failed boot)."""
    data = yaml.safe_load((REPO / "examples" / "one-cloud.yaml").read_text())
    data["federation"]["gateway_faults"] = []
    for site in data["federation"]["sites"]:
        site["nic"].pop("boot_faults", None)
    return data


def tri() -> dict[str, Any]:
    """Three sites: a fat-tree and two leaf-spines, a global-nat network over all three,
    WAN links a-b and b-c (a to c crosses two hops), a VM that moves from a to c."""
    perftest = {"kind": "perftest", "pattern": "all-to-all", "size": "2GiB"}
    return {
        "name": "tri",
        "seed": 1,
        "routing": {"strategy": "ecmp"},
        "federation": {
            "sites": [
                {
                    "name": "a",
                    "fabric": {"kind": "fat-tree", "k": 4, "host_link": "100Gbps", "link": "100Gbps"},
                    "tenants": [
                        {"name": "t1", "vni": 10, "hosts": "0-7", "address": "10.1.0.10/24"},
                        {"name": "g", "vni": 20, "hosts": "8-11", "address": "192.168.0.10/24"},
                    ],
                    "workload": perftest,
                    "gateway": {"capacity": "40Gbps", "border_leaf": 0},
                },
                {
                    "name": "b",
                    "fabric": {
                        "kind": "leaf-spine",
                        "leaves": 3,
                        "spines": 2,
                        "hosts_per_leaf": 4,
                        "host_link": "100Gbps",
                        "uplink": "100Gbps",
                    },
                    "tenants": [
                        {"name": "t2", "vni": 30, "hosts": "0-7", "address": "10.2.0.10/24"},
                        {"name": "g", "vni": 40, "hosts": "8-11", "address": "192.168.0.10/24"},
                    ],
                    "workload": {**perftest, "pattern": "permutation", "size": "4GiB"},
                    "gateway": {"capacity": "40Gbps", "border_leaf": 2},
                },
                {
                    "name": "c",
                    "fabric": {
                        "kind": "leaf-spine",
                        "leaves": 2,
                        "spines": 2,
                        "hosts_per_leaf": 4,
                        "host_link": "100Gbps",
                        "uplink": "200Gbps",
                    },
                    "tenants": [{"name": "g", "vni": 50, "hosts": "0-7", "address": "192.168.0.10/24"}],
                    "workload": {**perftest, "size": "1GiB"},
                    "gateway": {"capacity": "40Gbps", "border_leaf": 1},
                },
            ],
            "wan": [
                {"between": ["a", "b"], "bandwidth": "20Gbps", "latency": "4ms"},
                {"between": ["b", "c"], "bandwidth": "20Gbps", "latency": "6ms"},
            ],
            "networks": [{"name": "g", "tenant": "g", "mode": "global-nat", "sites": ["a", "b", "c"]}],
            "traffic": [{"network": "g", "pattern": "ring", "size": "8GiB"}],
        },
        "mobility": {
            "vms": [
                {
                    "name": "db",
                    "cloud": "a",
                    "host": 9,
                    "network": "g",
                    "memory": "4GiB",
                    "working_set": "512MiB",
                    "dirty_rate": "100MiB/s",
                }
            ],
            "migrations": [{"vm": "db", "to": "c", "start": "0.5s"}],
        },
    }


def pair() -> dict[str, Any]:
    """Two leaf-spine sites with perftest jobs of two tenants each, an l3-routed network."""

    def site(name: str, border: int, net: str) -> dict[str, Any]:
        return {
            "name": name,
            "fabric": {
                "kind": "leaf-spine",
                "leaves": 4,
                "spines": 2,
                "hosts_per_leaf": 4,
                "host_link": "100Gbps",
                "uplink": "100Gbps",
            },
            "tenants": [
                {"name": "red", "vni": 11, "hosts": "0-7", "address": f"10.{net}.1.10/24"},
                {"name": "blue", "vni": 12, "hosts": "8-15", "address": f"10.{net}.2.10/24"},
            ],
            "workloads": [
                {
                    "kind": "perftest",
                    "name": "red-a2a",
                    "tenants": ["red"],
                    "pattern": "all-to-all",
                    "size": "1GiB",
                },
                {
                    "kind": "perftest",
                    "name": "blue-perm",
                    "tenants": ["blue"],
                    "pattern": "permutation",
                    "size": "8GiB",
                    "qps": 2,
                },
            ],
            "gateway": {"capacity": "25Gbps", "border_leaf": border},
        }

    return {
        "name": "pair",
        "seed": 1,
        "routing": {"strategy": "ecmp"},
        "federation": {
            "sites": [site("north", 3, "1"), site("south", 0, "2")],
            "wan": [{"between": ["north", "south"], "bandwidth": "10Gbps", "latency": "8ms"}],
            "networks": [
                {"name": "blue", "tenant": "blue", "mode": "l3-routed", "sites": ["north", "south"]}
            ],
            "traffic": [{"network": "blue", "pattern": "all-pairs", "size": "1GiB"}],
        },
    }


CLOUDS = {"one-cloud": one_cloud, "tri": tri, "pair": pair}


@dataclass
class Fault:
    """One injected fault: its kind, the component a diagnosis should name, the components
    it takes down or that touch it (which must rank below it), and where it goes."""

    kind: str
    component: str
    below: tuple[str, ...]
    site: str | None
    spec: dict[str, Any]


@dataclass
class Incident:
    cloud: str
    seed: int
    faults: list[Fault] = field(default_factory=list)


def _load(data: dict[str, Any]) -> CloudScenario:
    """The cloud as `cloudtwin evaluate` reads it from a file."""
    return load_cloud(yaml.safe_dump(data, sort_keys=False))


def _pair(a: str, b: str) -> str:
    """A cable's name as the diagnosis writes it."""
    return cable_name(a, b)


class _Places:
    """The components of one cloud that faults may hit, from its topology."""

    def __init__(self, cloud: CloudScenario) -> None:
        from cloudtwin.topology.builders import build_topology
        from cloudtwin.topology.topology import NodeKind

        self.sites = {}
        for site in cloud.federation.sites:
            topo = build_topology(site.scenario())
            kind = topo.node_kind
            cables = sorted(
                {
                    tuple(sorted((topo.node_name(int(a)), topo.node_name(int(b)))))
                    for a, b in zip(topo.link_src, topo.link_dst, strict=True)
                    if kind[a] != NodeKind.NIC and kind[b] != NodeKind.NIC
                }
            )
            leaves = [topo.node_name(int(n)) for n in np.flatnonzero(kind == NodeKind.LEAF)]
            border = leaves[site.gateway.border_leaf]
            switches = [topo.node_name(int(n)) for n in np.flatnonzero(kind != NodeKind.NIC)]
            nics = {
                topo.node_name(int(n)): topo.node_name(int(topo.link_dst[topo.out_links[n, 0]]))
                for n in np.flatnonzero(kind == NodeKind.NIC)
            }
            self.sites[site.name] = {
                "cables": cables,
                "switches": [s for s in switches if s != border],
                "nics": nics,
                "border": border,
            }
        wan = cloud.federation.wan
        self.wan = [tuple(w.between) for w in wan] if wan else []


def _draw(
    rng: np.random.Generator, places: _Places, kind: str, span_s: float, used: set[str]
) -> Fault | None:
    """One fault of `kind` at a random place and time (None when the place is taken)."""
    site = str(rng.choice(sorted(places.sites)))
    at = round(float(rng.uniform(0.1, span_s)), 3)
    until = round(at + float(rng.uniform(0.1, 1.0)), 3)
    info = places.sites[site]
    q = f"{site}."
    if kind.startswith("link"):
        a, b = info["cables"][int(rng.integers(len(info["cables"])))]
        target = f"{a}-{b}"
        spec: dict[str, Any] = {"kind": "link", "target": target, "at": f"{at}s"}
        if kind == "link":
            spec["until"] = f"{until}s"
        elif kind == "link-degraded":
            spec |= {"until": f"{until}s", "capacity": f"{int(rng.integers(10, 40))}%"}
        else:
            spec["flap"] = {"period": f"{int(rng.integers(150, 400))}ms", "count": int(rng.integers(2, 5))}
        name = _pair(q + a, q + b)
        return Fault(kind, name, (q + a, q + b), site, spec) if name not in used else None
    if kind == "switch":
        switch = str(rng.choice(info["switches"]))
        cables = tuple(_pair(q + a, q + b) for a, b in info["cables"] if switch in (a, b))
        spec = {"kind": "switch", "target": switch, "at": f"{at}s", "until": f"{until}s"}
        return Fault(kind, q + switch, cables, site, spec) if q + switch not in used else None
    if kind.startswith("nic"):
        nic = str(rng.choice(sorted(info["nics"])))
        spec = {"kind": "nic", "target": nic, "at": f"{at}s", "until": f"{until}s"}
        if kind == "nic-degraded":
            spec["capacity"] = f"{int(rng.integers(10, 40))}%"
        return Fault(kind, q + nic, (q + info["nics"][nic],), site, spec) if q + nic not in used else None
    if kind == "gateway":
        if f"{site}.gw0" in used:
            return None
        spec = {"site": site, "at": f"{at}s"}
        if rng.random() < 0.5:
            spec["until"] = f"{round(at + float(rng.uniform(1.0, 6.0)), 3)}s"
        below = (f"{site}.gw0-{site}.wan", _pair(f"{site}.gw0", f"{site}.{info['border']}"), f"{site}.wan")
        return Fault(kind, f"{site}.gw0", below, None, spec)
    a, b = places.wan[int(rng.integers(len(places.wan)))]
    name = _pair(f"{a}.wan", f"{b}.wan")
    if name in used:
        return None
    spec = {"between": [a, b], "at": f"{at}s"}
    if kind == "wan-cut":
        spec["until"] = f"{until}s"
    else:
        spec |= {
            "until": f"{round(at + float(rng.uniform(0.5, 3.0)), 3)}s",
            "capacity": f"{int(rng.integers(10, 40))}%",
        }
    return Fault(kind, name, (f"{a}.wan", f"{b}.wan"), None, spec)


def _busy_s(data: dict[str, Any]) -> float:
    """Until when the cloud's faults are drawn: within its busiest stretch."""
    return {"one-cloud": 12.0, "tri": 3.0, "pair": 2.5}[data["name"]]


def incidents(count: int, seed: int) -> list[tuple[Incident, dict[str, Any]]]:
    """`count` incidents, K = 1 to 4 in turn, clouds in turn, kinds at random (seeded)."""
    rng = np.random.default_rng(seed)
    out = []
    bases = {name: make() for name, make in CLOUDS.items()}
    places = {name: _Places(_load(base)) for name, base in bases.items()}
    names = sorted(CLOUDS)
    for n in range(count):
        k = 1 + n % 4
        cloud_name = names[(n // 4) % len(names)]
        data = json.loads(json.dumps(bases[cloud_name]))
        data["seed"] = int(rng.integers(1, 2**31))
        incident = Incident(cloud_name, data["seed"])
        used: set[str] = set()
        while len(incident.faults) < k:
            kind = KINDS[int(rng.integers(len(KINDS)))]
            if kind.startswith("wan") and not places[cloud_name].wan:
                continue
            fault = _draw(rng, places[cloud_name], kind, _busy_s(data), used)
            if fault is None or used & {fault.component, *fault.below}:
                continue
            used |= {fault.component, *fault.below}
            incident.faults.append(fault)
            _inject(data, fault)
        out.append((incident, data))
    return out


def _inject(data: dict[str, Any], fault: Fault) -> None:
    federation = data["federation"]
    if fault.kind == "gateway":
        federation.setdefault("gateway_faults", []).append(fault.spec)
    elif fault.kind.startswith("wan"):
        federation.setdefault("wan_faults", []).append(fault.spec)
    else:
        site = next(s for s in federation["sites"] if s["name"] == fault.site)
        site.setdefault("faults", []).append(fault.spec)


def run_incident(data: dict[str, Any], top: int) -> tuple[list[str], float]:
    """What `evaluate --db` and `diagnose --db --top` give: the ranked components, and the time."""
    begin = time.perf_counter()
    cloud = _load(data)
    evaluation = evaluate_cloud(cloud, [cloud.routing.strategy])
    assert evaluation.runs is not None
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "incident.duckdb") as store:
        emit_cloud(store, *evaluation.runs)
        ranked = [s.component for s in diagnose(store)][:top]
    return ranked, time.perf_counter() - begin


@dataclass
class Tally:
    faults: int = 0
    top1: int = 0
    topk: int = 0
    topk2: int = 0
    rr: float = 0.0
    false: int = 0
    incidents: int = 0

    def add(self, ranks: list[int | None], k: int, false: int) -> None:
        self.incidents += 1
        self.false += false
        for r in ranks:
            self.faults += 1
            self.top1 += r is not None and r <= 1
            self.topk += r is not None and r <= k
            self.topk2 += r is not None and r <= k + 2
            self.rr += 0.0 if r is None else 1.0 / r

    def row(self) -> dict[str, float]:
        n = max(self.faults, 1)
        return {
            "faults": self.faults,
            "top1": self.top1 / n,
            "topK": self.topk / n,
            "topK+2": self.topk2 / n,
            "mrr": self.rr / n,
            "false_suspects": self.false / max(self.incidents, 1),
        }


def evaluate(count: int, seed: int, say: bool = True) -> dict[str, Any]:
    """Run `count` incidents; the tallies, the cause-above-symptom checks and the times."""
    by_k: dict[int, Tally] = defaultdict(Tally)
    by_kind: dict[str, Tally] = defaultdict(Tally)
    by_cloud: dict[str, Tally] = defaultdict(Tally)
    times, order_failures, details = [], [], []
    for n, (incident, data) in enumerate(incidents(count, seed)):
        k = len(incident.faults)
        ranked, seconds = run_incident(data, 10 * (k + 2))
        times.append(seconds)
        rank_of = {c: i + 1 for i, c in enumerate(ranked)}
        ranks = [rank_of.get(f.component) for f in incident.faults]
        found = [r for r in ranks if r is not None and r <= k + 2]
        truth = {f.component for f in incident.faults}
        false = sum(1 for c in ranked[: max(found, default=0)] if c not in truth)
        by_k[k].add(ranks, k, false)
        by_cloud[incident.cloud].add(ranks, k, false)
        for fault, r in zip(incident.faults, ranks, strict=True):
            by_kind[fault.kind].add([r], k, 0)
        if k == 1:
            fault = incident.faults[0]
            mine = rank_of.get(fault.component, 10**6)
            above = [b for b in fault.below if rank_of.get(b, 10**6) < mine]
            if above:
                order_failures.append({"incident": n, "fault": fault.component, "ranked_above": above})
        details.append(
            {
                "incident": n,
                "cloud": incident.cloud,
                "seed": incident.seed,
                "faults": [
                    {"kind": f.kind, "component": f.component, "rank": r, "spec": f.spec}
                    for f, r in zip(incident.faults, ranks, strict=True)
                ],
                "top": ranked[: k + 2],
                "seconds": round(seconds, 3),
            }
        )
        if say:
            marks = " ".join(
                f"{f.kind}:{f.component}@{r}" for f, r in zip(incident.faults, ranks, strict=True)
            )
            print(f"[{n + 1}/{count}] {incident.cloud} K={k} {seconds:.1f}s {marks}", file=sys.stderr)
    return {
        "incidents": count,
        "seed": seed,
        "by_k": {k: by_k[k].row() for k in sorted(by_k)},
        "by_kind": {kind: by_kind[kind].row() for kind in KINDS if kind in by_kind},
        "by_cloud": {name: by_cloud[name].row() for name in sorted(by_cloud)},
        "cause_above_symptom_failures": order_failures,
        "seconds_per_incident": {"mean": float(np.mean(times)), "max": float(np.max(times))},
        "details": details,
    }


def _table(title: str, rows: dict[Any, dict[str, float]]) -> str:
    lines = [
        f"| {title} | faults | top-1 | top-K | top-(K+2) | MRR | false suspects |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, r in rows.items():
        lines.append(
            f"| {key} | {r['faults']} | {r['top1']:.2f} | {r['topK']:.2f} | {r['topK+2']:.2f} | "
            f"{r['mrr']:.2f} | {r['false_suspects']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--incidents", type=int, default=240)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write every incident's result there")
    parser.add_argument("--quiet", action="store_true", help="no line per incident on stderr")
    args = parser.parse_args()
    result = evaluate(args.incidents, args.seed, say=not args.quiet)
    print(_table("K", {f"K={k}": row for k, row in result["by_k"].items()}))
    print()
    print(_table("fault kind", result["by_kind"]))
    print()
    print(_table("cloud", result["by_cloud"]))
    print()
    failures = result["cause_above_symptom_failures"]
    singles = sum(1 for d in result["details"] if len(d["faults"]) == 1)
    print(
        f"single-fault incidents where a component the fault took down ranks above it: "
        f"{len(failures)} of {singles}"
    )
    t = result["seconds_per_incident"]
    print(f"time per incident: mean {t['mean']:.2f} s, max {t['max']:.2f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()

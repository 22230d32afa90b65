"""HPL against the TOP500 list: measured Rmax per GPU of A100 systems vs `cloudtwin hpl`.

Each system of benchmarks/data/hpl_top500.yaml becomes a scenario: its node profile, NIC
count and rate, bare metal or VM, on a non-blocking two-level leaf-spine with 32 NIC
ports per leaf (the whole system, every node; the real fabrics are three-level fat
trees or DragonFly+), routed by ECMP as the stand-in for InfiniBand's static routing
(see docs/hpl-validation.md). The HPL run is the one TOP500 entries describe: one
process per GPU, the most square P x Q grid with P <= Q whose process columns hold whole
nodes, NB 384, and the largest N that fits in GPU memory. The scenario runs through the
code of `cloudtwin hpl` (`cloudtwin.evaluation.usecases.hpl`).

One row is marked `fit`: `dgemm_efficiency_max` of the A100 profiles is fitted on it
(`--fit` recomputes it by bisection); every other row is validation.

Usage:  python benchmarks/hpl_top500.py [--json] [--fit] [--scenarios DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parent / "data" / "hpl_top500.yaml"
NB = 384
PORTS_PER_LEAF = 32
SPINES = 32


@dataclass(frozen=True)
class Row:
    """One system: measured and predicted Rmax per GPU."""

    name: str
    role: str
    gpus: int
    p: int
    q: int
    n: int
    measured_tflops_per_gpu: float
    predicted_tflops_per_gpu: float
    assumptions: tuple[str, ...]

    @property
    def error(self) -> float:
        """Predicted over measured, minus one."""
        return self.predicted_tflops_per_gpu / self.measured_tflops_per_gpu - 1.0

    def to_json(self) -> dict[str, Any]:
        """The row as printed by --json."""
        return {
            "name": self.name, "role": self.role, "gpus": self.gpus, "p": self.p, "q": self.q,
            "n": self.n, "measured_tflops_per_gpu": self.measured_tflops_per_gpu,
            "predicted_tflops_per_gpu": self.predicted_tflops_per_gpu, "error": self.error,
            "assumptions": list(self.assumptions),
        }


def load_systems(path: Path = DATA) -> list[dict[str, Any]]:
    """The systems of the data file, in its order."""
    return list(yaml.safe_load(path.read_text())["systems"])


def grid(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """The most square P x Q = gpus with P <= Q and P a multiple of the GPUs of a node.

    >>> grid(2240, 8), grid(3744, 4), grid(2112, 8)
    ((40, 56), (52, 72), (32, 66))
    """
    candidates = [
        p for p in range(gpus_per_node, math.isqrt(gpus) + 1, gpus_per_node) if gpus % p == 0
    ]
    if not candidates:
        raise ValueError(f"no P x Q grid of {gpus} GPUs holds whole nodes of {gpus_per_node}")
    return candidates[-1], gpus // candidates[-1]


def largest_n(memory_bytes: float, p: int, q: int, nb: int = NB) -> int:
    """The largest N (a multiple of NB) whose matrix fits in the GPUs' free memory."""
    from cloudtwin.workloads.hpl import WORKSPACE_BYTES

    n = math.isqrt(int((memory_bytes - WORKSPACE_BYTES) * p * q / 8.0))
    return n // nb * nb


def scenario_text(system: dict[str, Any]) -> str:
    """The system as a cloudtwin scenario (YAML)."""
    from cloudtwin.cluster.profiles import NODE_PROFILES

    profile = NODE_PROFILES[system["node"]]
    nics = int(system["nics_per_node"])
    per_leaf = PORTS_PER_LEAF // nics
    leaves = -(-int(system["nodes"]) // per_leaf)
    p, q = grid(int(system["gpus"]), int(system["gpus_per_node"]))
    n = largest_n(profile.gpu_memory_bytes, p, q)
    return f"""# {system['system']}: {system['list']} (benchmarks/data/hpl_top500.yaml)
name: {system['name']}
seed: 1
fabric:
  kind: leaf-spine
  leaves: {leaves}
  spines: {SPINES}
  hosts_per_leaf: {per_leaf}
  host_link: {system['nic_rate']}
  uplink: {system['nic_rate']}
  latency: 1us
hosts:
  nics: {nics}
  gpus: {system['gpus_per_node']}
routing:
  strategy: ecmp
cluster:
  node: {system['node']}
  virtualization: {system['virtualization']}
workload:
  kind: hpl
  n: {n}
  nb: {NB}
  p: {p}
  q: {q}
limits:
  memory: 8GiB
"""


@contextmanager
def dgemm_efficiency(value: float | None) -> Iterator[None]:
    """Run with every A100 profile's `dgemm_efficiency_max` set to `value` (None: as shipped)."""
    from cloudtwin.cluster.profiles import NODE_PROFILES

    saved = dict(NODE_PROFILES)
    if value is not None:
        for name, profile in saved.items():
            NODE_PROFILES[name] = replace(profile, dgemm_efficiency_max=value)
    try:
        yield
    finally:
        NODE_PROFILES.clear()
        NODE_PROFILES.update(saved)


def predict(system: dict[str, Any], efficiency: float | None = None) -> Row:
    """Measured and predicted Rmax per GPU of one system."""
    from cloudtwin.evaluation import usecases
    from cloudtwin.scenario.loader import load_scenario

    with dgemm_efficiency(efficiency):
        result = usecases.hpl(load_scenario(scenario_text(system), system["name"]))
    return Row(
        name=system["name"], role=system["role"], gpus=result.p * result.q, p=result.p,
        q=result.q, n=result.n,
        measured_tflops_per_gpu=float(system["rmax_pflops"]) * 1e3 / int(system["gpus"]),
        predicted_tflops_per_gpu=result.tflops_per_gpu,
        assumptions=tuple(system.get("assumptions", ())),
    )


def fit(systems: list[dict[str, Any]], tolerance: float = 1e-4) -> float:
    """`dgemm_efficiency_max` at which the fit row's prediction equals its measurement."""
    (target,) = [s for s in systems if s["role"] == "fit"]
    low, high = 0.3, 1.0
    while high - low > tolerance:
        middle = (low + high) / 2
        if predict(target, middle).error > 0:
            high = middle
        else:
            low = middle
    return (low + high) / 2


def table(rows: list[Row]) -> str:
    """The rows as the Markdown table of docs/hpl-validation.md."""
    lines = [
        "| system | role | GPUs | P x Q | N | Rmax/GPU measured TFLOPS | predicted | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        note = " (assumes " + "; ".join(r.assumptions) + ")" if r.assumptions else ""
        lines.append(
            f"| {r.name}{note} | {r.role} | {r.gpus:,} | {r.p} x {r.q} | {r.n:,} "
            f"| {r.measured_tflops_per_gpu:.2f} | {r.predicted_tflops_per_gpu:.2f} "
            f"| {100 * r.error:+.1f}% |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument(
        "--fit", action="store_true", help="also refit dgemm_efficiency_max on the fit row"
    )
    parser.add_argument("--scenarios", type=Path, help="write each system's scenario here")
    args = parser.parse_args(argv)
    systems = load_systems()
    if args.scenarios is not None:
        args.scenarios.mkdir(parents=True, exist_ok=True)
        for system in systems:
            (args.scenarios / f"{system['name']}.yaml").write_text(scenario_text(system))
    rows = [predict(s) for s in systems]
    document: dict[str, Any] = {"systems": [r.to_json() for r in rows]}
    if args.fit:
        from cloudtwin.cluster.profiles import NODE_PROFILES

        document["fitted_dgemm_efficiency"] = fit(systems)
        document["shipped_dgemm_efficiency"] = NODE_PROFILES["a100-80g-8"].dgemm_efficiency_max
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    print(table(rows))
    validation = [r for r in rows if r.role == "validation"]
    print(
        f"\nvalidation rows: {len(validation)}; within 10%: "
        f"{sum(abs(r.error) <= 0.10 for r in validation)}; mean absolute error "
        f"{100 * sum(abs(r.error) for r in validation) / len(validation):.1f}%"
    )
    if args.fit:
        print(
            f"dgemm_efficiency_max fitted on the fit row: {document['fitted_dgemm_efficiency']:.4f} "
            f"(shipped: {document['shipped_dgemm_efficiency']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

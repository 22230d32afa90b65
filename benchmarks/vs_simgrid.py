"""cloudtwin against SimGrid 4.1 on SimGrid's own kind of workload, side by side.

The workload: a 128-host leaf-spine (8 leaves x 4 spines x 16 hosts; 100 Gb/s links of
1 us; 4:1 oversubscribed), K simultaneous 1 GB transfers between uniformly drawn host
pairs (source != destination), one D-mod-k path per pair (spine = destination mod 4).
The pairs are written to one CSV file that both simulators read. SimGrid runs its plain
max-min model (`network/model:CM02`, no correction factors, no TCP window bound, no
cross traffic) with `network/optim:Full` (and, with `--lazy`, its default `Lazy` too).

What is timed, for both: from the pairs in memory to every flow's finish time (building
the fabric, routing, simulating), each simulator in a fresh process of its own; the
interpreter's start and imports are not (cloudtwin's compiled kernels are loaded from
numba's cache before the clock starts). CPU time is printed next to wall time because
this machine is shared.

How latency is counted differs, and only there: SimGrid holds a flow for its path's
latency before it sends, cloudtwin adds the latency to the time its last bit is sent.
SimGrid also weighs a flow's share by its path latency (a 2-hop same-leaf flow would get
twice the share of a 4-hop one); to make it compute plain max-min, every same-leaf route
gets a 2 us pass-through link of unlimited capacity (a FATPIPE, one per destination), so
all routes have 4 us.
Cross-leaf flows (7/8 of them) then count latency the same way in both; a same-leaf
flow's finish differs by the 2 us pad.

SimGrid has no wheel: `make simgrid` compiles it into `.simgrid-venv/` (about 8 minutes).

Usage:  python benchmarks/vs_simgrid.py [--flows 1000,10000,100000] [--seed 1] [--lazy]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LEAVES, SPINES, HOSTS_PER_LEAF = 8, 4, 16
HOSTS = LEAVES * HOSTS_PER_LEAF
RATE_BPS = 100e9
LATENCY_S = 1e-6
SIZE_BYTES = 1e9
ROOT = Path(__file__).resolve().parent.parent
SCENARIO = f"""\
name: vs-simgrid
fabric: {{kind: leaf-spine, leaves: {LEAVES}, spines: {SPINES}, hosts_per_leaf: {HOSTS_PER_LEAF},
         host_link: 100Gbps, uplink: 100Gbps, latency: 1us}}
routing: {{strategy: dmodk}}
"""


def write_pairs(path: Path, flows: int, seed: int) -> None:
    """K transfers between uniform random host pairs, all starting at 0."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, HOSTS, flows)
    dst = (src + rng.integers(1, HOSTS, flows)) % HOSTS
    with path.open("w") as out:
        out.write("source,destination,bytes,start\n")
        for s, d in zip(src.tolist(), dst.tolist(), strict=True):
            out.write(f"{s},{d},{int(SIZE_BYTES)},0\n")


def read_pairs(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2]


def run_cloudtwin(pairs: Path, out: Path) -> dict[str, float]:
    """cloudtwin: build the fabric, route by D-mod-k, simulate; finish times to `out`."""
    from cloudtwin.engine import simulate
    from cloudtwin.evaluation import route_flows
    from cloudtwin.routing import load_strategy
    from cloudtwin.scenario import load_scenario
    from cloudtwin.topology import Paths, build_topology
    from cloudtwin.workloads import qp_flows

    # load the compiled kernels (numba's cache) before the clock starts
    simulate(
        Paths(np.array([0, 1, 2]), np.array([0, 0])), np.ones(1), np.ones(2), np.array([0.0, 0.5]), np.ones(2)
    )
    src, dst, size = read_pairs(pairs)
    wall, cpu = time.perf_counter(), time.process_time()
    scenario = load_scenario(SCENARIO)
    topology = build_topology(scenario)
    flows = qp_flows(
        topology,
        topology.host_nics[src, 0],
        topology.host_nics[dst, 0],
        size,
        1,
        np.random.default_rng(0),
    )
    paths = route_flows(scenario, topology, flows, load_strategy("dmodk"))
    result = simulate(
        paths,
        topology.capacity_bps,
        flows.size_bytes,
        flows.start_s,
        np.full(len(flows), topology.nic_rate_bps),
        latency_s=paths.latency_s(topology),
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # the benchmark's claim: D-mod-k took spine (destination mod 4) for every cross-leaf pair
    cross = (src // HOSTS_PER_LEAF) != (dst // HOSTS_PER_LEAF)
    second_hop = paths.link_ids[paths.indptr[:-1] + 1]
    spine = topology.node_index[topology.link_dst[second_hop]]
    if not np.array_equal(spine[cross], (dst % SPINES)[cross]):
        raise SystemExit("dmodk did not pick spine = destination mod 4")
    np.save(out, result.finish_s)
    return {"wall_s": wall, "cpu_s": cpu, "events": result.events, "solves": result.solves}


def run_simgrid(pairs: Path, out: Path, optim: str) -> dict[str, float]:
    """SimGrid (in its own virtual environment): the same fabric, routes and transfers."""
    import simgrid as sg

    engine = sg.Engine(
        [
            "vs_simgrid",
            "--cfg=network/model:CM02",
            f"--cfg=network/optim:{optim}",
            "--cfg=network/crosstraffic:0",
            "--cfg=network/TCP-gamma:0",
            "--cfg=network/weight-S:0",
            "--cfg=network/latency-factor:1",
            "--cfg=network/bandwidth-factor:1",
            "--log=root.thresh:warning",
        ]
    )
    src, dst, size = read_pairs(pairs)
    wall, cpu = time.perf_counter(), time.process_time()
    started = wall
    zone = engine.netzone_root.add_netzone_full("leafspine")
    bandwidth = RATE_BPS / 8  # bytes/s

    def link(name: str, latency: float = LATENCY_S) -> sg.Link:
        made = zone.add_link(name, bandwidth)
        made.set_latency(latency)
        return made

    hosts = [zone.add_host(f"host{h}", 1e9) for h in range(HOSTS)]
    up = [link(f"host{h}-up") for h in range(HOSTS)]
    down = [link(f"host{h}-down") for h in range(HOSTS)]
    to_spine = [[link(f"leaf{x}-spine{s}") for s in range(SPINES)] for x in range(LEAVES)]
    from_spine = [[link(f"spine{s}-leaf{x}") for s in range(SPINES)] for x in range(LEAVES)]
    pads = []  # per destination: 2 us of latency and no capacity limit (see the docstring)
    for h in range(HOSTS):
        pads.append(zone.add_link(f"host{h}-pad", 1e15))
        pads[-1].set_latency(2 * LATENCY_S)
        pads[-1].set_sharing_policy(sg.Link.SharingPolicy.FATPIPE, None)
    for s in range(HOSTS):
        for d in range(HOSTS):
            if s == d:
                continue
            ls, ld = s // HOSTS_PER_LEAF, d // HOSTS_PER_LEAF
            if ls == ld:
                route = [up[s], pads[d], down[d]]
            else:
                spine = d % SPINES
                route = [up[s], to_spine[ls][spine], from_spine[ld][spine], down[d]]
            zone.add_route(hosts[s], hosts[d], [sg.LinkInRoute(x) for x in route], False)
    zone.seal()
    built = time.perf_counter()
    comms: list[sg.Comm] = []

    def launch() -> None:
        pending = sg.ActivitySet()
        for s, d, b in zip(src.tolist(), dst.tolist(), size.tolist(), strict=True):
            comm = sg.Comm.sendto_async(hosts[s], hosts[d], int(b))
            comms.append(comm)
            pending.push(comm)
        pending.wait_all()

    hosts[0].add_actor("launcher", launch)
    engine.run()
    finish = np.array([c.finish_time for c in comms])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    np.save(out, finish)
    return {"wall_s": wall, "cpu_s": cpu, "platform_s": built - started}


def simgrid_python() -> tuple[str, dict[str, str]]:
    """The SimGrid venv's interpreter, with its shared library on the loader's path."""
    venv = Path(os.environ.get("SIMGRID_VENV", ROOT / ".simgrid-venv"))
    python = venv / "bin" / "python"
    site = sorted(venv.glob("lib/python3*/site-packages"))
    if not python.exists() or not site:
        raise SystemExit(f"SimGrid is not installed in {venv}: run `make simgrid` first")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(site[0]), env.get("LD_LIBRARY_PATH")]))
    return str(python), env


def in_process(python: str, env: dict[str, str] | None, role: str, *args: str, timeout: float) -> dict:
    """Run this script as `role` in a fresh process; its last line of output is JSON."""
    command = [python, __file__, "--worker", role, *args]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if done.returncode:
        raise SystemExit(f"{role} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(k: int, seed: int, workdir: Path, lazy: bool, timeout: float) -> None:
    pairs = workdir / f"pairs-{k}.csv"
    write_pairs(pairs, k, seed)
    src, dst, _ = read_pairs(pairs)
    cross = (src // HOSTS_PER_LEAF) != (dst // HOSTS_PER_LEAF)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    ours = in_process(sys.executable, env, "cloudtwin", str(pairs), str(workdir / "ct.npy"), timeout=timeout)
    python, sg_env = simgrid_python()
    modes = ["Full", "Lazy"] if lazy else ["Full"]
    theirs = {
        m: in_process(python, sg_env, "simgrid", str(pairs), str(workdir / f"sg-{m}.npy"), m, timeout=timeout)
        for m in modes
    }
    ct = np.load(workdir / "ct.npy")
    print(
        f"K = {k:,}: cloudtwin {ours['wall_s']:.3f} s wall, {ours['cpu_s']:.3f} s CPU "
        f"({ours['events']:,} events, {ours['solves']:,} full solves); makespan {ct.max():.9f} s"
    )
    for mode, run in theirs.items():
        if "timeout" in run:
            print(f"  SimGrid {mode}: did not finish in {run['timeout']:.0f} s")
            continue
        sg_finish = np.load(workdir / f"sg-{mode}.npy")
        rel = np.abs(sg_finish - ct) / sg_finish
        print(
            f"  SimGrid {mode}: {run['wall_s']:.3f} s wall "
            f"({run['platform_s']:.3f} s building the platform), "
            f"{run['cpu_s']:.3f} s CPU; "
            f"cloudtwin {run['wall_s'] / ours['wall_s']:.1f}x faster (wall), "
            f"{run['cpu_s'] / ours['cpu_s']:.1f}x (CPU); makespan {sg_finish.max():.9f} s "
            f"(relative difference {abs(sg_finish.max() - ct.max()) / sg_finish.max():.1e}); "
            f"largest per-flow relative difference {rel.max():.1e} "
            f"({rel[cross].max() if cross.any() else 0.0:.1e} over cross-leaf flows)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flows", default="1000,10000,100000", help="comma-separated K values")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lazy", action="store_true", help="also run SimGrid's default Lazy mode")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per simulator run")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        role, pairs, out, *rest = args.worker
        if role == "cloudtwin":
            result = run_cloudtwin(Path(pairs), Path(out))
        else:
            result = run_simgrid(Path(pairs), Path(out), rest[0])
        print(json.dumps(result))
        return
    print(
        f"leaf-spine {LEAVES} x {SPINES} x {HOSTS_PER_LEAF} (100G, 1 us, 4:1), K x 1 GB between random "
        f"host pairs, D-mod-k; seed {args.seed}"
    )
    with tempfile.TemporaryDirectory(prefix="vs-simgrid-") as tmp:
        for k in (int(x) for x in args.flows.split(",")):
            compare(k, args.seed, Path(tmp), args.lazy, args.timeout)


if __name__ == "__main__":
    main()

"""Benchmark of the smartNIC model: `cloudtwin nic run` end to end on the VXLAN gateway, and
offload accounting for the 1,536-GPU Vela scenario.

    python benchmarks/smartnic.py [--packets 2097152] [--repeat 3] [--no-cli] [--cli-repeat 3]
                                  [--all-cores] [--json]

The shipped captures are scaled up by repeating their records (timestamps moved on by
each repetition): `host-frames.pcap` (tenant frames, encapsulated) and
`network-frames.pcap` (VXLAN from the network, decapsulated), half the packets each, one
file each way. The whole path a user runs is measured on each file, on one core (or every
core with --all-cores, as a user runs it): reading
and indexing the capture, building batches, processing, making the output records and
writing the output file (a new file: the one a previous pass wrote is removed, and dirty
pages written back, before the clock starts). It is measured in this process, through the
function `nic run` calls (best of `--repeat` passes; the P4 program is parsed once per
file, outside the clock),
and as `cloudtwin nic run` commands, whole processes (start-up, imports and parsing
included; start-up is also measured alone, on the shipped 8-packet capture, once on a
user's first run, which builds the P4 parser's tables and checks the program, keeping
both in its cache folder, then as every later run starts, reading them back). Rates are
packets per CPU second (the process's own core time, which other work on a shared
machine does not take) and per wall-clock second, next to the target of 1,000,000 packets
per CPU second and bmv2's published ~80,000 packets/s. The peak memory (resident set) of
the `nic run` processes and the load average are printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from cloudtwin.cli.nic import run_file
from cloudtwin.evaluation.offload import nic_offload
from cloudtwin.p4 import index_pcap, load_datapath
from cloudtwin.p4.pcap import dense_rows, pcap_parts, spliced_block
from cloudtwin.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "p4"
CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")
BMV2_PPS = 80_000
TARGET_PPS = 1_000_000
SOURCES = (("host-frames.pcap", "host"), ("network-frames.pcap", "network"))
PHASES = ("read", "batch", "process", "output", "write")
WRITE_PACKETS = 1 << 16


def scaled_captures(folder: Path, packets: int) -> list[tuple[Path, str, int]]:
    """The shipped captures repeated to `packets` packets, half from each, as (file, --from,
    packets); each repetition 1 ms after the one before. Written 65,536 packets at a time."""
    files = []
    for i, (name, origin) in enumerate(SOURCES):
        shipped = index_pcap((EXAMPLES / name).read_bytes(), name)
        wanted = packets // 2 + (packets % 2 if i == 0 else 0)
        rows = dense_rows(shipped.buffer, shipped.offset, shipped.length)
        span_ns = np.uint64(int(shipped.timestamp_ns.max() - shipped.timestamp_ns.min()) + 1_000_000)
        path = folder / f"{origin}.pcap"
        with path.open("wb") as handle:
            handle.write(pcap_parts([])[0])
            for first in range(0, wanted, WRITE_PACKETS):
                index = np.arange(first, min(first + WRITE_PACKETS, wanted))
                kind, copy = index % len(rows), (index // len(rows)).astype(np.uint64)
                times = shipped.timestamp_ns[kind] + copy * span_ns
                handle.write(spliced_block(rows[kind], shipped.length[kind], times))
        files.append((path, origin, wanted))
    return files


def gateway() -> tuple[str, object]:
    entries = yaml.safe_load((EXAMPLES / "vxlan_gateway.entries.yaml").read_text())
    return (EXAMPLES / "vxlan_gateway.p4").read_text(), entries


def in_process(files: list[tuple[Path, str, int]], folder: Path) -> tuple[dict[str, float], float, float]:
    """One pass of `nic run`'s path (`run_file`, what the command calls) over every file in
    this process: CPU seconds per phase, and the CPU and wall seconds of the whole."""
    program, entries = gateway()
    phases = dict.fromkeys(PHASES, 0.0)
    cpu = wall = 0.0
    for path, origin, _ in files:
        datapath = load_datapath(program, "vxlan_gateway.p4", entries)
        direction = 1 if origin == "host" else 0
        out = folder / f"out-{path.name}"
        _settle(out)
        started, began = time.perf_counter(), time.process_time()
        report = run_file(datapath, path, out, direction, direction)
        cpu += time.process_time() - began
        wall += time.perf_counter() - started
        for name, seconds in report.phase_cpu_s.items():
            phases[name] += seconds
    return phases, cpu, wall


def _settle(out: Path) -> None:
    """Before a clock starts: remove the output a previous pass wrote and write back every
    dirty page (the captures just made, earlier outputs), so a pass is not charged for the
    kernel writing what came before it."""
    out.unlink(missing_ok=True)
    if hasattr(os, "sync"):
        os.sync()


def cli_runs(files: list[tuple[Path, str, int]], folder: Path) -> dict[str, float]:
    """`cloudtwin nic run` on every file, one process each: the children's user, kernel and
    wall seconds, the CPU seconds of one run on the shipped 8-packet capture (start-up), the
    largest resident set of any of them (MiB), and the start-up of a user's very first run
    (the parser's tables built and the program checked, not read back: their cache folder
    is new, in `folder`)."""
    cache = folder / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}

    def run(pcap: Path, origin: str) -> tuple[float, float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = folder / f"cli-{pcap.name}"
        _settle(out)
        started = time.perf_counter()
        command = [str(CLOUDTWIN), "nic", "run", str(EXAMPLES / "vxlan_gateway.p4")]
        command += ["--entries", str(EXAMPLES / "vxlan_gateway.entries.yaml"), "--pcap", str(pcap)]
        command += ["--from", origin, "--out", str(out), "--json"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter() - started
        return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall

    first = sum(run(EXAMPLES / "host-frames.pcap", "host")[:2])
    startup = sum(run(EXAMPLES / "host-frames.pcap", "host")[:2])
    user = system = wall = 0.0
    for path, origin, _ in files:
        u, k, w = run(path, origin)
        user, system, wall = user + u, system + k, wall + w
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB
    return {
        "user": user, "system": system, "wall": wall, "startup": startup, "peak_mib": peak_mib, "first": first
    }


def vela_accounting_s() -> tuple[float, float]:
    scenario = load_scenario(
        (REPO / "examples" / "vela.yaml").read_text(), "vela.yaml", ["nic.profile=janus-100g"]
    )
    started = time.perf_counter()
    report = nic_offload(scenario)
    return time.perf_counter() - started, report.report.totals()["host_cores_saved"]


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (how busy the machine was), where the OS says."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def verdict(pps: float) -> str:
    return "meets" if pps >= TARGET_PPS else "below"


def measure(args: argparse.Namespace) -> dict[str, object]:
    before = load_average()
    with tempfile.TemporaryDirectory(prefix="smartnic-bench-") as name:
        folder = Path(name)
        files = scaled_captures(folder, args.packets)
        packets = sum(count for _, _, count in files)
        passes = [in_process(files, folder) for _ in range(args.repeat)]
        phases, cpu, _ = min(passes, key=lambda p: p[1])
        wall = min(p[2] for p in passes)
        rounds = [cli_runs(files, folder) for _ in range(args.cli_repeat)] if args.cli else []
    cli = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]} if rounds else None
    cli_cpu = [r["user"] + r["system"] for r in rounds]
    seconds, saved = vela_accounting_s()
    return {
        "packets": packets,
        "files": len(files),
        "in_process_packets_per_cpu_second": packets / cpu,
        "in_process_packets_per_wall_second": packets / wall,
        "phase_share": {k: v / cpu for k, v in phases.items()},
        "cli_packets_per_cpu_second": packets / statistics.median(cli_cpu) if cli else None,
        "cli_packets_per_cpu_second_each": [packets / c for c in cli_cpu],
        "cli_packets_per_wall_second": packets / cli["wall"] if cli else None,
        "cli_user_s": cli["user"] if cli else None,
        "cli_system_s": cli["system"] if cli else None,
        "cli_startup_cpu_s": cli["startup"] if cli else None,
        "cli_peak_rss_mib": cli["peak_mib"] if cli else None,
        "cli_first_startup_cpu_s": cli["first"] if cli else None,
        "cores": "all" if args.all_cores else "one",
        "in_process_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "target_packets_per_cpu_second": TARGET_PPS,
        "bmv2_packets_per_second": BMV2_PPS,
        "vela_accounting_s": seconds,
        "vela_host_cores_saved": saved,
        "load_average_before": before,
        "load_average_after": load_average(),
    }


def report(figures: dict[str, object]) -> None:
    f = figures
    cpu, wall = float(f["in_process_packets_per_cpu_second"]), float(f["in_process_packets_per_wall_second"])
    print(
        f"nic run, VXLAN gateway, {f['packets']:,} packets (half encapsulated, half decapsulated; "
        f"one file each way), {'every core' if f['cores'] == 'all' else 'one core'}, read + process + write:"
    )
    print(
        f"  in process: {cpu:,.0f} packets per CPU second ({verdict(cpu)} the target of {TARGET_PPS:,}; "
        f"{cpu / BMV2_PPS:.1f}x bmv2's ~{BMV2_PPS:,}), {wall:,.0f} per wall-clock second"
    )
    shares = f["phase_share"]
    assert isinstance(shares, dict)
    print("  CPU share: " + ", ".join(f"{name} {share:.0%}" for name, share in shares.items()))
    if f["cli_packets_per_cpu_second"] is not None:
        each = f["cli_packets_per_cpu_second_each"]
        assert isinstance(each, list)
        print(
            f"  as `cloudtwin nic run` processes: {float(f['cli_packets_per_cpu_second']):,.0f} packets per "
            f"CPU second (median of {len(each)} rounds: " + ", ".join(f"{r:,.0f}" for r in each) + "), "
            f"{float(f['cli_packets_per_wall_second']):,.0f} per wall-clock second; of the CPU, "
            f"{float(f['cli_user_s']):.2f} s user and {float(f['cli_system_s']):.2f} s in the kernel; each "
            f"process spends {float(f['cli_startup_cpu_s']):.2f} CPU s starting (imports, program, entries; "
            f"{float(f['cli_first_startup_cpu_s']):.2f} s on a user's first run, which builds the parser's "
            f"tables and checks the program); peak memory {float(f['cli_peak_rss_mib']):,.0f} MiB per process"
        )
        startup = float(f["cli_startup_cpu_s"])
        rest = float(f["packets"]) / float(f["cli_packets_per_cpu_second"]) - int(f["files"]) * startup
        rate = float(f["packets"]) / rest
        print(f"  the same processes without their start-up: {rate:,.0f} packets per CPU second")
    print(
        f"offload accounting, Vela 1,536 GPUs (192 hosts): {float(f['vela_accounting_s']):.2f} s "
        f"({'under' if float(f['vela_accounting_s']) < 10 else 'over'} the 10 s bar); "
        f"{float(f['vela_host_cores_saved']):,.0f} host cores handed back"
    )
    print(f"load average (1, 5, 15 min): {f['load_average_before']} before, {f['load_average_after']} after")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=2_097_152, help="packets in all (half each way)")
    parser.add_argument("--repeat", type=int, default=3, help="in-process passes; the best is kept")
    parser.add_argument("--no-cli", dest="cli", action="store_false", help="skip the whole-process runs")
    parser.add_argument(
        "--cli-repeat", type=int, default=3, help="rounds of whole-process runs; the median is printed"
    )
    parser.add_argument(
        "--all-cores",
        action="store_true",
        help="run on every core, as a user does (default: one core, children too)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    if args.packets < 2 or args.repeat < 1 or args.cli_repeat < 1:
        parser.error("--packets must be at least 2, --repeat and --cli-repeat at least 1")
    if hasattr(os, "sched_setaffinity") and not args.all_cores:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core, children too
    figures = measure(args)
    if args.json:
        print(json.dumps(figures))
    else:
        report(figures)


if __name__ == "__main__":
    main()

"""Benchmark of the smartNIC model: `cloudtwin nic run` end to end on the VXLAN gateway, and
offload accounting for the 1,536-GPU Vela scenario.

    python benchmarks/smartnic.py [--packets 1048576] [--repeat 3] [--no-cli] [--json]

The shipped captures are scaled up by repeating their records (timestamps moved on by
each repetition): `host-frames.pcap` (tenant frames, encapsulated) and
`network-frames.pcap` (VXLAN from the network, decapsulated), half the packets each, in
files of at most the 64 MiB `nic run` reads. The whole path a user runs is measured on
each file, on one core: reading and indexing the capture, building batches, processing,
making the output records and writing the output file. It is measured in this process
(best of `--repeat` passes; the P4 program is parsed once per file, outside the clock)
and as `cloudtwin nic run` commands, whole processes (start-up, imports and parsing
included). Rates are packets per CPU second (the process's own core time, which other
work on a shared machine does not take) and per wall-clock second, next to the target of
1,000,000 packets per CPU second and bmv2's published ~80,000 packets/s. The load
average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from cloudtwin.cli.nic import PCAP_BYTES, _write_atomic
from cloudtwin.errors import NicError
from cloudtwin.evaluation.offload import nic_offload
from cloudtwin.files import read_bounded
from cloudtwin.scenario import load_scenario
from cloudtwin.smartnic.p4 import index_pcap, load_datapath, run_capture, write_pcap

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "p4"
CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")
BMV2_PPS = 80_000
TARGET_PPS = 1_000_000
SOURCES = (("host-frames.pcap", "host"), ("network-frames.pcap", "network"))
PHASES = ("read", "batch", "process", "output", "write")


def scaled_captures(folder: Path, packets: int) -> list[tuple[Path, str, int]]:
    """The shipped captures repeated to `packets` packets, half from each, as (file, --from,
    packets) in files of at most PCAP_BYTES; each repetition 1 ms after the one before."""
    files = []
    for i, (name, origin) in enumerate(SOURCES):
        shipped = index_pcap((EXAMPLES / name).read_bytes(), name)
        frames, wanted = shipped.packets(), packets // 2 + (packets % 2 if i == 0 else 0)
        span_ns = np.uint64(int(shipped.timestamp_ns.max() - shipped.timestamp_ns.min()) + 1_000_000)
        per_file = (PCAP_BYTES - 24) // int((shipped.length + 16).sum()) * len(frames)
        for part, first in enumerate(range(0, wanted, per_file)):
            count = min(per_file, wanted - first)
            index = np.arange(first, first + count)
            times = (
                shipped.timestamp_ns[index % len(frames)] + (index // len(frames)).astype(np.uint64) * span_ns
            )
            path = folder / f"{origin}-{part}.pcap"
            path.write_bytes(write_pcap([frames[k] for k in (index % len(frames)).tolist()], times))
            files.append((path, origin, count))
    return files


def gateway() -> tuple[str, object]:
    entries = yaml.safe_load((EXAMPLES / "vxlan_gateway.entries.yaml").read_text())
    return (EXAMPLES / "vxlan_gateway.p4").read_text(), entries


def in_process(files: list[tuple[Path, str, int]], folder: Path) -> tuple[dict[str, float], float, float]:
    """One pass of `nic run`'s path over every file in this process: CPU seconds per phase,
    and the CPU and wall seconds of the whole."""
    program, entries = gateway()
    phases = dict.fromkeys(PHASES, 0.0)
    cpu = wall = 0.0
    for path, origin, _ in files:
        datapath = load_datapath(program, "vxlan_gateway.p4", entries)
        direction = 1 if origin == "host" else 0
        started, began = time.perf_counter(), time.process_time()
        records = index_pcap(read_bounded(path, PCAP_BYTES, "pcap", NicError), str(path))
        read = time.process_time()
        report = run_capture(datapath, records, direction, direction)
        ran = time.process_time()
        _write_atomic(folder / f"out-{path.name}", report.pcap_parts)
        done = time.process_time()
        wall += time.perf_counter() - started
        cpu += done - began
        phases["read"] += read - began
        for name, seconds in report.phase_cpu_s.items():
            phases[name] += seconds
        phases["write"] += done - ran
    return phases, cpu, wall


def cli_runs(files: list[tuple[Path, str, int]], folder: Path) -> tuple[float, float, float]:
    """`cloudtwin nic run` on every file, one process each: the children's CPU and wall
    seconds, and the CPU seconds of one run on the shipped 8-packet capture (start-up)."""

    def run(pcap: Path, origin: str) -> tuple[float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        command = [str(CLOUDTWIN), "nic", "run", str(EXAMPLES / "vxlan_gateway.p4")]
        command += ["--entries", str(EXAMPLES / "vxlan_gateway.entries.yaml"), "--pcap", str(pcap)]
        command += ["--from", origin, "--out", str(folder / f"cli-{pcap.name}"), "--json"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return cpu, time.perf_counter() - started

    startup, _ = run(EXAMPLES / "host-frames.pcap", "host")
    cpu = wall = 0.0
    for path, origin, _ in files:
        seconds, elapsed = run(path, origin)
        cpu, wall = cpu + seconds, wall + elapsed
    return cpu, wall, startup


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
        cli = cli_runs(files, folder) if args.cli else None
    seconds, saved = vela_accounting_s()
    return {
        "packets": packets,
        "files": len(files),
        "in_process_packets_per_cpu_second": packets / cpu,
        "in_process_packets_per_wall_second": packets / wall,
        "phase_share": {k: v / cpu for k, v in phases.items()},
        "cli_packets_per_cpu_second": packets / cli[0] if cli else None,
        "cli_packets_per_wall_second": packets / cli[1] if cli else None,
        "cli_startup_cpu_s": cli[2] if cli else None,
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
        f"{f['files']} files), one core, read + process + write:"
    )
    print(
        f"  in process: {cpu:,.0f} packets per CPU second ({verdict(cpu)} the target of {TARGET_PPS:,}; "
        f"{cpu / BMV2_PPS:.1f}x bmv2's ~{BMV2_PPS:,}), {wall:,.0f} per wall-clock second"
    )
    shares = f["phase_share"]
    assert isinstance(shares, dict)
    print("  CPU share: " + ", ".join(f"{name} {share:.0%}" for name, share in shares.items()))
    if f["cli_packets_per_cpu_second"] is not None:
        print(
            f"  as `cloudtwin nic run` processes: {float(f['cli_packets_per_cpu_second']):,.0f} packets per "
            f"CPU second, {float(f['cli_packets_per_wall_second']):,.0f} per wall-clock second; each process "
            f"spends {float(f['cli_startup_cpu_s']):.2f} CPU s starting (imports, program, entries)"
        )
    print(
        f"offload accounting, Vela 1,536 GPUs (192 hosts): {float(f['vela_accounting_s']):.2f} s "
        f"({'under' if float(f['vela_accounting_s']) < 10 else 'over'} the 10 s bar); "
        f"{float(f['vela_host_cores_saved']):,.0f} host cores handed back"
    )
    print(f"load average (1, 5, 15 min): {f['load_average_before']} before, {f['load_average_after']} after")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=1_048_576, help="packets in all (half each way)")
    parser.add_argument("--repeat", type=int, default=3, help="in-process passes; the best is kept")
    parser.add_argument("--no-cli", dest="cli", action="store_false", help="skip the whole-process runs")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    if args.packets < 2 or args.repeat < 1:
        parser.error("--packets must be at least 2 and --repeat at least 1")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core, children too
    figures = measure(args)
    if args.json:
        print(json.dumps(figures))
    else:
        report(figures)


if __name__ == "__main__":
    main()

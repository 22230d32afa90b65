"""Measuring the host datapath of the real Linux kernel, function by function.

In network namespaces a sender and a receiver are joined through the functions of a
hypervisor's software datapath, added one at a time (`smartnic.calibration.STAGES`):

    veth        sender -> veth -> receiver (the floor every configuration shares)
    bridge      + a Linux bridge between them (overlay switching)
    sg N        + security groups: bridged IPv4 through netfilter (br_netfilter) and an
                  nftables forward chain of N rules that do not match, then accept
    conntrack   + connection tracking: `ct state` in the same chain
    htb         + a tc htb rate limiter on the bridge's egress port (rate far above the load)
    vxlan       + VXLAN: the bridge's egress port is a VXLAN device; the receiver decapsulates

Debian's netsniff-ng `trafgen` sends UDP frames from one core as fast as the path takes
them (no packet is built in Python); the receiver's interface counters give the packets
delivered, and /proc the CPU time the packets took (user + system time of trafgen's
processes, whose system time holds the softirq work done in their context, and of the
ksoftirqd threads, which do the rest), so each configuration gets cycles per delivered
packet, without the time of whatever else runs on the machine.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cloudtwin.smartnic.calibration import FIT_SIZES, STAGES

__all__ = ["HELD_OUT_SIZE", "MIX", "TOOLS", "Point", "machine", "missing", "run"]

PREFIX = f"ctdp{os.getpid()}"
"""Namespaces are named after this process: two measurements at once never tear down each
other's namespaces (they still share the CPUs, so their figures are the worse for it)."""
TX, MID, RX = f"{PREFIX}-tx", f"{PREFIX}-mid", f"{PREFIX}-rx"
RX_MAC = "02:00:00:00:00:02"
TX_MAC = "02:00:00:00:00:01"
HELD_OUT_SIZE = 512
MIX = ((64, 7), (576, 4), (1400, 1))
"""A simple IMIX by packet count (7 x 64 B, 4 x 576 B, 1 x 1400 B; the classic mix with its
largest frame kept under the VXLAN underlay's MTU)."""
TOOLS = {"ip": "iproute2", "nft": "nftables", "tc": "iproute2", "trafgen": "netsniff-ng",
         "taskset": "util-linux"}
"""The programs the measurement runs, and the Debian package of each."""


def missing() -> str | None:
    """What stops the measurement here (root, a program), with how to install it; None when nothing."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and nftables): run it with sudo"
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent:
        packages = " ".join(sorted({TOOLS[t] for t in absent}))
        return (f"{', '.join(absent)} not installed (apt-get install {packages}; "
                "make datapath-tools installs them)")
    return None


@dataclass(frozen=True)
class Stage:
    """One configuration of the path: how far along the chain it goes."""

    name: str
    bridge: bool = False
    rules: int = -1  # -1: no netfilter at all
    conntrack: bool = False
    htb: bool = False
    vxlan: bool = False


def stage(name: str, rules: int) -> Stage:
    order = STAGES.index(name)
    return Stage(
        name if name != "sg" else f"sg {rules}",
        bridge=order >= 1,
        rules=rules if order >= 2 else -1,
        conntrack=order >= 3,
        htb=order >= 4,
        vxlan=order >= 5,
    )


def sh(*argv: str, ns: str | None = None, check: bool = True) -> str:
    command = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def teardown() -> None:
    for ns in (TX, MID, RX):
        sh("ip", "netns", "del", ns, check=False)


def build(s: Stage) -> str:
    """Build the namespaces for `s`; the receiver's counted interface."""
    teardown()
    for ns in (TX, MID, RX):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
    if not s.bridge:
        sh("ip", "link", "add", "tx0", "netns", TX, "type", "veth", "peer", "rx0", "netns", RX)
    else:
        sh("ip", "link", "add", "tx0", "netns", TX, "type", "veth", "peer", "mtx", "netns", MID)
        sh("ip", "link", "add", "br0", "type", "bridge", ns=MID)
        sh("ip", "link", "set", "mtx", "master", "br0", "up", ns=MID)
        sh("ip", "link", "set", "br0", "up", ns=MID)
    sh("ip", "link", "set", "tx0", "address", TX_MAC, "up", ns=TX)
    sh("ip", "addr", "add", "10.9.0.1/24", "dev", "tx0", ns=TX)
    egress = "mrx"
    if s.bridge and not s.vxlan:
        sh("ip", "link", "add", "mrx", "netns", MID, "type", "veth", "peer", "rx0", "netns", RX)
        sh("ip", "link", "set", "mrx", "master", "br0", "up", ns=MID)
    if s.vxlan:
        # the bridge's egress port is a VXLAN device over an underlay veth to the receiver
        sh("ip", "link", "add", "mu0", "netns", MID, "type", "veth", "peer", "ru0", "netns", RX)
        sh("ip", "addr", "add", "192.168.9.1/30", "dev", "mu0", ns=MID)
        sh("ip", "link", "set", "mu0", "up", ns=MID)
        sh("ip", "addr", "add", "192.168.9.2/30", "dev", "ru0", ns=RX)
        sh("ip", "link", "set", "ru0", "up", ns=RX)
        sh("ip", "link", "add", "vx0", "type", "vxlan", "id", "42", "local", "192.168.9.1",
           "remote", "192.168.9.2", "dstport", "4789", ns=MID)
        sh("ip", "link", "set", "vx0", "master", "br0", "up", ns=MID)
        sh("ip", "link", "add", "rx0", "type", "vxlan", "id", "42", "local", "192.168.9.2",
           "remote", "192.168.9.1", "dstport", "4789", ns=RX)
        egress = "vx0"
    sh("ip", "link", "set", "rx0", "address", RX_MAC, "up", ns=RX)
    sh("ip", "addr", "add", "10.9.0.2/24", "dev", "rx0", ns=RX)
    if s.rules >= 0:
        sh("sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1", ns=MID)
        rules = [f"add rule inet sg ports ip saddr 10.66.{i // 250}.{i % 250 + 1} udp dport {1000 + i} drop"
                 for i in range(s.rules)]
        head = ["add table inet sg", "add chain inet sg ports { type filter hook forward priority 0; }"]
        if s.conntrack:
            head.append("add rule inet sg ports ct state established,related accept")
        script = "\n".join([*head, *rules, "add rule inet sg ports accept", ""])
        with tempfile.NamedTemporaryFile("w", suffix=".nft") as file:
            file.write(script)
            file.flush()
            sh("nft", "-f", file.name, ns=MID)
    if s.htb:
        sh("tc", "qdisc", "add", "dev", egress, "root", "handle", "1:", "htb", "default", "10", ns=MID)
        sh("tc", "class", "add", "dev", egress, "parent", "1:", "classid", "1:10", "htb",
           "rate", "40gbit", "ceil", "40gbit", ns=MID)
    return "rx0"


def frame(size: int, new_connections: bool) -> str:
    """A trafgen packet of `size` bytes on the wire (less the FCS): Ethernet, IPv4, UDP, fill."""
    payload = size - 14 - 20 - 8
    # a new connection per packet: a random source address and port (2^48 tuples)
    sport, saddr = ("drnd()", "drnd()") if new_connections else ("4000", "10.9.0.1")
    return (f"{{ eth(da={RX_MAC}, sa={TX_MAC}), ipv4(saddr={saddr}, daddr=10.9.0.2, ttl=64), "
            f"udp(sp={sport}, dp=9), fill(0x41, {payload}) }}")


def session_ticks(session: int) -> int:
    """User + system ticks so far of every process in `session` (trafgen and its worker)
    and of the kernel's softirq threads. Softirq work done in a task's context is charged
    to that task's system time, and the rest runs in ksoftirqd, so this is the packets' CPU
    time without the rest of the machine's."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended meanwhile
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[3]) == session or name.startswith("ksoftirqd/"):
            total += int(fields[11]) + int(fields[12])
    return total


def rx_packets(interface: str) -> int:
    return int(sh("cat", f"/sys/class/net/{interface}/statistics/rx_packets", ns=RX))


def sample(interface: str, packets: list[str], seconds: float, clock_hz: float) -> dict[str, object]:
    """Send `packets` (trafgen blocks, cycled) for `seconds` on one core: cycles per
    delivered packet, delivered packets per second, the load average when it ended."""
    hz = os.sysconf("SC_CLK_TCK")
    cpu = (os.cpu_count() or 1) - 1
    with tempfile.NamedTemporaryFile("w", suffix=".cfg") as config:
        config.write("\n".join(packets) + "\n")
        config.flush()
        before_rx, softirq_before = rx_packets(interface), session_ticks(-1)
        start = time.perf_counter()
        sender = subprocess.Popen(
            ["ip", "netns", "exec", TX, "taskset", "-c", str(cpu),
             "trafgen", "-o", "tx0", "-i", config.name, "--cpus", "1", "--no-sock-mem", "--notouch-irq"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(seconds)
        ticks = session_ticks(sender.pid) - softirq_before
        delivered = rx_packets(interface) - before_rx
        elapsed = time.perf_counter() - start
        os.killpg(sender.pid, signal.SIGINT)  # trafgen and the worker it forked
        try:
            _, err = sender.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(sender.pid, signal.SIGKILL)
            _, err = sender.communicate()
    if delivered <= 0:
        raise RuntimeError(f"no packet reached the receiver ({err.decode(errors='replace').strip()[:200]})")
    return {"cycles_per_packet": ticks / hz * clock_hz / delivered, "packets_per_s": delivered / elapsed,
            "load_average": list(os.getloadavg())}


def machine() -> dict[str, object]:
    """The measured machine: CPU model, clock (Hz), CPUs, kernel, date."""
    info = Path("/proc/cpuinfo").read_text().splitlines()
    names = [text.split(":", 1)[1].strip() for text in info if text.startswith("model name")]
    clocks = [float(text.split(":", 1)[1]) * 1e6 for text in info if text.startswith("cpu MHz")]
    return {"cpu": names[0] if names else platform.processor() or "unknown",
            "clock_hz": clocks[0] if clocks else 2.5e9, "cpus": os.cpu_count(),
            "kernel": platform.release(), "date": time.strftime("%Y-%m-%d")}


Point = dict[str, object]
"""One measured point: configuration, label, frames, whether it is held out, its samples
and their medians."""


def run(seconds: float, rounds: int, rules: tuple[int, int], clock_hz: float,
        say: Callable[[str], None]) -> list[Point]:
    """Every point: each configuration at the two fitted sizes (security groups at both
    rule counts), conntrack with a new connection per packet, then the whole chain at a
    frame size and a mix the fit never uses (held out). `rounds` samples of `seconds`
    each per point, in fresh namespaces (an empty connection table); the median is kept."""
    low, high = rules
    configs = [stage(n, low) for n in STAGES]
    configs.insert(3, stage("sg", high))
    plan: list[tuple[Stage, str, list[tuple[int, int]], bool, bool]] = [
        (s, f"{size} B", [(size, 1)], False, False) for s in configs for size in FIT_SIZES
    ]
    plan.append((configs[4], "new conns 64 B", [(64, 1)], True, False))
    plan.append((configs[-1], f"{HELD_OUT_SIZE} B", [(HELD_OUT_SIZE, 1)], False, True))
    plan.append((configs[-1], "mix", [tuple(m) for m in MIX], False, True))  # type: ignore[misc]
    points: list[Point] = []
    try:
        for s, label, frames, new_connections, held_out in plan:
            packets = [frame(size, new_connections) for size, count in frames for _ in range(count)]
            samples = [sample(build(s), packets, seconds, clock_hz) for _ in range(rounds)]
            cycles = statistics.median(float(x["cycles_per_packet"]) for x in samples)  # type: ignore[arg-type]
            pps = statistics.median(float(x["packets_per_s"]) for x in samples)  # type: ignore[arg-type]
            points.append({"configuration": s.name, "label": label, "frames": [list(f) for f in frames],
                           "held_out": held_out, "cycles_per_packet": cycles, "packets_per_s": pps,
                           "samples": samples})
            say(f"  {s.name:<10} {label:<14} {cycles:>9,.0f} cycles/packet {pps:>11,.0f} packets/s  "
                f"(load {os.getloadavg()[0]:.2f})")
    finally:
        teardown()
    return points

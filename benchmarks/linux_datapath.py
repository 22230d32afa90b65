"""Measure the host datapath of the real Linux kernel, function by function, and write the
`linux-kernel` NIC profile from it.

In network namespaces a sender and a receiver are joined through the functions of a
hypervisor's software datapath, added one at a time:

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
packet at each frame size, without the time of whatever else runs on the machine. A
function's cycles per packet and per byte are the difference to the configuration before
it, fitted on two frame sizes; conntrack's cost of a new connection comes from a run where
every packet has a new source address and port.

Then, with the profile fixed, the whole chain is measured at a frame size and a packet mix
the fit never saw, and measured packets per second of one core are printed beside the
profile's prediction.

    sudo python benchmarks/linux_datapath.py                 # ~5 minutes; writes the profile
    sudo python benchmarks/linux_datapath.py --seconds 1 --rounds 1 --out /tmp/p.json --json

Needs root, iproute2, nftables, tc and trafgen (`make datapath-tools` installs Debian's
netsniff-ng and nftables); without them it prints why it skipped and exits 0. Other load on
the machine adds to the CPU time: run it on an idle machine (it prints the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "src" / "cloudtwin" / "smartnic" / "data" / "linux-kernel.json"
PREFIX = "ctdp"
TX, MID, RX = f"{PREFIX}-tx", f"{PREFIX}-mid", f"{PREFIX}-rx"
RX_MAC = "02:00:00:00:00:02"
TX_MAC = "02:00:00:00:00:01"
FIT_SIZES = (64, 1400)
HELD_OUT_SIZE = 512
# A simple IMIX by packet count (7 x 64 B, 4 x 576 B, 1 x 1400 B; the classic mix with its
# largest frame kept under the VXLAN underlay's MTU).
MIX = ((64, 7), (576, 4), (1400, 1))
STAGES = ("veth", "bridge", "sg", "conntrack", "htb", "vxlan")
TOOLS = ("ip", "nft", "tc", "trafgen", "taskset")


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


def measure(interface: str, packets: list[str], seconds: float) -> tuple[float, float]:
    """Send `packets` (trafgen blocks, cycled) for `seconds` on one core; (cycles per
    delivered packet, delivered packets per second)."""
    hz = os.sysconf("SC_CLK_TCK")
    with tempfile.NamedTemporaryFile("w", suffix=".cfg") as config:
        config.write("\n".join(packets) + "\n")
        config.flush()
        before_rx, softirq_before = rx_packets(interface), session_ticks(-1)
        start = time.perf_counter()
        sender = subprocess.Popen(
            ["ip", "netns", "exec", TX, "taskset", "-c", str(os.cpu_count() - 1 if os.cpu_count() else 0),
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
    return ticks / hz * CLOCK_HZ / delivered, delivered / elapsed


def cpu_clock_hz() -> float:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            return float(line.split(":")[1]) * 1e6
    return 2.5e9


CLOCK_HZ = cpu_clock_hz()


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def run(args: argparse.Namespace) -> dict:
    rules_low, rules_high = args.rules
    configs = [stage(n, rules_low) for n in STAGES]
    configs.insert(3, stage("sg", rules_high))
    cycles: dict[str, dict[str, float]] = {}
    pps: dict[str, dict[str, float]] = {}

    def take(s: Stage, label: str, packets: list[str]) -> None:
        samples = []
        for _ in range(args.rounds):  # fresh namespaces each time: an empty connection table
            samples.append(measure(build(s), packets, args.seconds))
        cycles.setdefault(s.name, {})[label] = statistics.median(c for c, _ in samples)
        pps.setdefault(s.name, {})[label] = statistics.median(p for _, p in samples)
        print(f"  {s.name:<10} {label:<14} {cycles[s.name][label]:>9,.0f} cycles/packet "
              f"{pps[s.name][label]:>11,.0f} packets/s  (load {os.getloadavg()[0]:.2f})",
              file=sys.stderr, flush=True)

    try:
        for s in configs:
            for size in FIT_SIZES:
                take(s, f"{size} B", [frame(size, False)])
        take(configs[4], "new conns 64 B", [frame(64, True)])
        whole = configs[-1]
        take(whole, f"{HELD_OUT_SIZE} B", [frame(HELD_OUT_SIZE, False)])
        take(whole, "mix", [frame(size, False) for size, count in MIX for _ in range(count)])
    finally:
        teardown()
    return fit(cycles, pps, args.rules)


def line(points: dict[str, float]) -> tuple[float, float]:
    """Cycles per packet and per byte through the two fitted frame sizes."""
    (s1, c1), (s2, c2) = ((size, points[f"{size} B"]) for size in FIT_SIZES)
    per_byte = (c2 - c1) / (s2 - s1)
    return c1 - per_byte * s1, per_byte


def fit(cycles: dict[str, dict[str, float]], pps: dict[str, dict[str, float]],
        rules: tuple[int, int]) -> dict:
    low, high = rules
    fitted = {name: line(points) for name, points in cycles.items()}

    def diff(a: str, b: str) -> tuple[float, float]:
        return fitted[a][0] - fitted[b][0], fitted[a][1] - fitted[b][1]

    per_rule = (fitted[f"sg {high}"][0] - fitted[f"sg {low}"][0]) / (high - low)
    sg_packet, sg_byte = diff(f"sg {low}", "bridge")
    overlay = tuple(a + b for a, b in zip(diff("bridge", "veth"), diff("vxlan", "htb"), strict=True))
    conntrack = diff("conntrack", f"sg {low}")
    new_connection = cycles["conntrack"]["new conns 64 B"] - cycles["conntrack"]["64 B"]
    functions = {
        "overlay": {"cycles_per_packet": overlay[0], "cycles_per_byte": overlay[1]},
        "security-groups": {"cycles_per_packet": sg_packet - per_rule * low, "cycles_per_byte": sg_byte,
                            "cycles_per_rule": per_rule},
        "conntrack": {"cycles_per_packet": conntrack[0], "cycles_per_byte": conntrack[1],
                      "cycles_per_new_connection": new_connection},
        "rate-limiter": dict(zip(("cycles_per_packet", "cycles_per_byte"), diff("htb", "conntrack"),
                                 strict=True)),
    }
    base = dict(zip(("cycles_per_packet", "cycles_per_byte"), fitted["veth"], strict=True))
    held_out = []
    whole_packet, whole_byte = fitted["vxlan"]
    mix_bytes = sum(size * count for size, count in MIX) / sum(count for _, count in MIX)
    for label, size in ((f"{HELD_OUT_SIZE} B", HELD_OUT_SIZE), ("mix", mix_bytes)):
        predicted_cycles = whole_packet + whole_byte * size
        measured_cycles = cycles["vxlan"][label]
        held_out.append({
            "configuration": f"whole chain, {label}",
            "measured_pps_per_core": CLOCK_HZ / measured_cycles,
            "predicted_pps_per_core": CLOCK_HZ / predicted_cycles,
            "error": predicted_cycles / measured_cycles - 1,  # measured pps over predicted, less 1
        })
    return {
        "machine": {"cpu": cpu_model(), "clock_hz": CLOCK_HZ, "cpus": os.cpu_count(),
                    "kernel": platform.release(), "date": time.strftime("%Y-%m-%d")},
        "method": "benchmarks/linux_datapath.py: trafgen UDP from one core through network namespaces; "
                  "CPU time of trafgen's processes and ksoftirqd from /proc; differences between stages",
        "security_group_rules": list(rules),
        "base": base,
        "functions": functions,
        "cycles_per_packet_measured": cycles,
        "packets_per_s_measured": pps,
        "held_out": held_out,
    }


def report(result: dict) -> None:
    m = result["machine"]
    print(f"Linux kernel datapath on {m['cpu']} at {m['clock_hz'] / 1e9:.2f} GHz, kernel {m['kernel']}")
    print(f"{'function':<16} {'cycles/packet':>14} {'cycles/byte':>12}  other")
    for name, cost in result["functions"].items():
        other = ", ".join(f"{k.removeprefix('cycles_per_')} {v:,.0f} cycles" for k, v in cost.items()
                          if k not in ("cycles_per_packet", "cycles_per_byte"))
        print(f"{name:<16} {cost['cycles_per_packet']:>14,.0f} {cost['cycles_per_byte']:>12.2f}  {other}")
    print("\nheld out (not used by the fit): packets per second of one core")
    print(f"{'configuration':<24} {'measured':>10} {'predicted':>10} {'error':>7}")
    for row in result["held_out"]:
        print(f"{row['configuration']:<24} {row['measured_pps_per_core']:>10,.0f} "
              f"{row['predicted_pps_per_core']:>10,.0f} {row['error']:>+7.1%}")


def rule_counts(text: str) -> tuple[int, int]:
    """`--rules LOW,HIGH`: two rule counts, 0 <= LOW < HIGH <= 10,000."""
    parts = text.split(",")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give two rule counts, e.g. 10,200")
    low, high = int(parts[0]), int(parts[1])
    if not low < high <= 10_000:
        raise argparse.ArgumentTypeError(
            f"{text!r}: the first count must be below the second, at most 10,000")
    return low, high


def positive(kind: type) -> object:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not 0 < value <= 600:
            raise argparse.ArgumentTypeError(f"{text!r}: give a value above 0 and at most 600")
        return value
    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=positive(float), default=2.0,
                        help="sending time of one sample (2)")
    parser.add_argument("--rounds", type=positive(int), default=5,
                        help="samples per point; the median is kept (5)")
    parser.add_argument("--rules", type=rule_counts, default=(10, 200),
                        help="the two security-group rule counts of the fit (10,200)")
    parser.add_argument("--out", type=Path, default=PROFILE,
                        help=f"profile file to write ({PROFILE.relative_to(REPO)})")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if os.geteuid() != 0:
        print("skipped: needs root (network namespaces)")
        return
    if missing:
        print(f"skipped: {', '.join(missing)} missing (make datapath-tools installs them)")
        return
    print(f"measuring {len(STAGES) + 1} configurations x {len(FIT_SIZES)} sizes + 3 held-out points, "
          f"{args.rounds} x {args.seconds:g} s each (load {os.getloadavg()[0]:.2f})", file=sys.stderr)
    try:
        result = run(args)
    except RuntimeError as error:  # a step of the set-up or a run that delivered nothing
        sys.exit(f"linux_datapath: {error}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
    else:
        report(result)
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()

"""NIC profiles: each tier's cost model and each function's cost per tier, with sources.

Every number carries its source next to it. Where no published figure was at hand the
number is marked ASSUMPTION with the reasoning that fixes its order of magnitude, so a
platform team can replace it with a measurement of its own.

Costs are in cycles of the tier's cores: per packet, per byte, and per new flow (the
slow path that sets a flow up). A tier's packet rate at packet size S is
`cores x Hz / (cycles_per_packet + S x cycles_per_byte)`; the pipeline tier has a fixed
packet rate and bit rate instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cloudtwin.errors import NicError

__all__ = [
    "FUNCTIONS",
    "PROFILES",
    "FunctionCost",
    "NicProfile",
    "PipelineTier",
    "SoftwareTier",
    "line_rate_pps",
    "nic_profile_from_data",
]


def line_rate_pps(rate_bps: float, packet_bytes: float) -> float:
    """Ethernet packets per second at `rate_bps`: each frame also costs 20 B of preamble,
    start delimiter and inter-frame gap on the wire (IEEE 802.3)."""
    return rate_bps / ((packet_bytes + 20) * 8)


@dataclass(frozen=True)
class SoftwareTier:
    """Cores that run functions in software (the host's x86 or the NIC's embedded cores)."""

    cores: float
    clock_hz: float
    cycle_scale: float  # cycles this core needs for what a 2.5 GHz x86 core does in one
    latency_s: float  # added per packet when a function runs here
    source: str

    def packets_per_s(self, cycles_per_packet: float) -> float:
        """The tier's packet rate when every packet costs `cycles_per_packet` x86 cycles."""
        if cycles_per_packet <= 0:
            return float("inf")
        return self.cores * self.clock_hz / (cycles_per_packet * self.cycle_scale)


@dataclass(frozen=True)
class PipelineTier:
    """A match-action pipeline: packets and bits per second, tables and how fast they fill."""

    packets_per_s: float
    rate_bps: float
    latency_s: float
    table_entries: int
    insertions_per_s: float
    source: str
    swap_stall_s: float = 0.0


@dataclass(frozen=True)
class FunctionCost:
    """A function's cost in x86 cycles (scaled for other cores) and whether a pipeline can hold it."""

    cycles_per_packet: float
    cycles_per_byte: float
    setup_cycles_per_flow: float
    pipeline_ok: bool
    why_not_pipeline: str
    source: str


# A 2.5 GHz core does 2.5e9 cycles/s. ASSUMPTION: typical base clock of the dual-socket
# Xeon servers in cloud racks (2.1-3.0 GHz); only ratios matter for cores saved.
X86_HZ = 2.5e9

FUNCTIONS: dict[str, FunctionCost] = {
    # Per-packet costs of a kernel vswitch datapath. ASSUMPTION fixed by the common
    # figure that a kernel OVS datapath forwards on the order of 1 Mpps per core with
    # VXLAN and conntrack (2,500 cycles at 2.5 GHz for the whole chain), split by the
    # relative work of each stage (lookup + encap, ACL, connection table, token bucket).
    "overlay": FunctionCost(
        1000,
        0.25,
        0,
        True,
        "",
        "VXLAN encap/decap + switching; 0.25 cycles/B: a copy at ~10 GB/s per core (memcpy bandwidth)",
    ),
    "security-groups": FunctionCost(400, 0.0, 0, True, "", "stateless ACL lookup per packet"),
    "conntrack": FunctionCost(
        700,
        0.0,
        20_000,
        False,
        "it keeps per-connection TCP state across packets",
        "connection table update per packet; 20k cycles (8 us) to create an entry",
    ),
    "rate-limiter": FunctionCost(200, 0.0, 0, True, "", "token bucket per packet (a meter on a pipeline)"),
    "storage-initiator": FunctionCost(
        1500,
        0.5,
        0,
        False,
        "NVMe-oF is a stateful block-storage protocol (queues, retransmission)",
        "NVMe/TCP initiator: PDU framing per packet and a CRC32C data digest per byte",
    ),
    "attestation": FunctionCost(0, 0.0, 0, True, "", "runs at boot only (measured boot), no per-packet cost"),
}

# The slow path that sets up a flow on a miss of the flow cache (OVS upcall to
# ovs-vswitchd, AccelNet's first-packet exception path to VFP on the host).
# ASSUMPTION: ~40 us of a core per flow set-up (100k cycles), the order of an upcall
# round trip with a classifier lookup and a datapath flow install.
SLOW_PATH_CYCLES_PER_FLOW = 100_000
# A packet of a flow not yet in the cache also goes up to the slow path: ASSUMPTION ~4 us
# of a core per packet (an upcall's kernel/user round trip and classifier lookup), on top
# of the chain's own cost in host software.
SLOW_PATH_CYCLES_PER_PACKET = 10_000


@dataclass(frozen=True)
class NicProfile:
    """A NIC: its tiers and the tier each function runs on unless the scenario says otherwise."""

    name: str
    host: SoftwareTier
    nic_cores: SoftwareTier | None
    pipeline: PipelineTier | None
    default_tiers: dict[str, str] = field(default_factory=dict)
    modelled: bool = True
    functions: Mapping[str, FunctionCost] = field(default_factory=lambda: FUNCTIONS)
    host_base: FunctionCost | None = None
    """What the host's software datapath costs a packet before any function: sending it,
    the virtual port and the receiving stack (a measured profile's `base`). Every packet
    the host tier handles pays it; None where the functions' costs hold all of it."""

    def cost(self, function: str) -> FunctionCost:
        """What `function` costs this NIC's software tiers (the profile's own figures)."""
        return self.functions[function]

    def software_only(self) -> NicProfile:
        """The no-offload baseline: every function in the host's software datapath, at this
        profile's own host costs (the software vswitch's where it has none of its own)."""
        if self.functions is FUNCTIONS:
            return PROFILES["software-vswitch"]
        return replace(self, name=f"{self.name} (all on host)", nic_cores=None, pipeline=None,
                       default_tiers=_ALL_HOST)

    def tier_of(self, function: str, requested: str | None, where: str) -> str:
        """The tier `function` runs on; NicError when this NIC has no such tier or the
        pipeline cannot express the function."""
        tier = requested or self.default_tiers.get(function, "host")
        if tier == "nic-cores" and self.nic_cores is None:
            raise NicError(f"{where}.tier: profile {self.name} has no embedded cores for {function}")
        if tier == "pipeline":
            if self.pipeline is None:
                raise NicError(f"{where}.tier: profile {self.name} has no P4 pipeline for {function}")
            cost = self.cost(function)
            if not cost.pipeline_ok:
                raise NicError(
                    f"{where}.tier: {function} cannot run on the pipeline: {cost.why_not_pipeline}"
                )
        return tier


_HOST = SoftwareTier(
    cores=4,
    clock_hz=X86_HZ,
    cycle_scale=1.0,
    latency_s=5e-6,
    source=(
        "ASSUMPTION: 4 host cores set aside for the host SDN datapath (AccelNet, NSDI 2018, "
        "describes cores reserved for VFP as the cost offload removes); ~5 us per packet "
        "through a kernel vswitch"
    ),
)

_ALL_HOST = {name: "host" for name in FUNCTIONS}

PROFILES: dict[str, NicProfile] = {
    "basic": NicProfile("basic", _HOST, None, None, {}, modelled=False),
    "software-vswitch": NicProfile("software-vswitch", _HOST, None, None, _ALL_HOST),
    "janus-100g": NicProfile(
        "janus-100g",
        _HOST,
        SoftwareTier(
            cores=4,
            clock_hz=1.5e9,
            cycle_scale=2.0,
            latency_s=10e-6,
            source=(
                "ASSUMPTION: 4 Arm Cortex-A53 class cores at 1.5 GHz (the application processor "
                "of an FPGA SoC of the kind Janus builds on; the Janus abstract does not name "
                "the part); an in-order core needs ~2x the cycles of an x86 core"
            ),
        ),
        PipelineTier(
            packets_per_s=250e6,
            rate_bps=100e9,
            latency_s=1e-6,
            table_entries=65_536,
            insertions_per_s=100_000,
            source=(
                "100 Gbps line rate (Janus: a 100G smartNIC); one packet per clock at 250 MHz "
                "(ASSUMPTION: FPGA pipeline clock) covers 148.8 Mpps of 64 B frames; "
                "64k exact entries in on-chip memory and 100k insertions/s over PCIe "
                "(ASSUMPTIONS, order of hardware flow tables of 100G NICs); a pipeline swap "
                "stalls the NIC 50 ms (ASSUMPTION: partial reconfiguration of the P4 region)"
            ),
            swap_stall_s=0.05,
        ),
        {
            "overlay": "pipeline",
            "security-groups": "pipeline",
            "rate-limiter": "pipeline",
            "conntrack": "nic-cores",
            "storage-initiator": "nic-cores",
            "attestation": "nic-cores",
        },
    ),
    "bmv2-like": NicProfile(
        "bmv2-like",
        _HOST,
        None,
        PipelineTier(
            packets_per_s=80_000,
            rate_bps=100e9,
            latency_s=1 / 80_000,
            table_entries=1 << 20,
            insertions_per_s=5_000,
            source=(
                "bmv2, the P4 reference software switch, forwards about 80 kpps (its own "
                "performance page); insertion rate ASSUMPTION: thousands of P4Runtime writes/s; "
                "a pipeline swap stalls 1 s (ASSUMPTION: the switch process reloads its program)"
            ),
            swap_stall_s=1.0,
        ),
        {"overlay": "pipeline", "security-groups": "pipeline", "rate-limiter": "pipeline"},
    ),
}

#: The measured profile `cloudtwin calibrate datapath` writes (run as root on the machine
#: whose kernel it describes); the shipped one is this project's machine.
LINUX_KERNEL_PROFILE = Path(__file__).with_name("data") / "linux-kernel.json"

# ASSUMPTION: a port's security group holds 10 rules (OpenStack's default group has 4;
# tenants add a few per service). The profile's cycles per rule scale it.
SECURITY_GROUP_RULES = 10

MEASURED_FUNCTIONS = ("overlay", "security-groups", "conntrack", "rate-limiter")
"""The functions `cloudtwin calibrate datapath` measures in the kernel's datapath."""


def _finite(value: object, where: str) -> float:
    """A measured cost as a float; NicError naming `where` when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise NicError(f"{where}: must be a finite number (got {value!r})")
    return float(value)


def _section(data: Mapping[str, object], key: str, where: str) -> Mapping[str, object]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise NicError(f"{where}: {key}: missing (a profile written by cloudtwin calibrate datapath has it)")
    return value


def nic_profile_from_data(
    measured: Mapping[str, object], where: str, name: str = "linux-kernel"
) -> NicProfile:
    """A host datapath profile from the costs measured function by function on one machine
    (bridge + VXLAN, nftables through br_netfilter, conntrack, tc htb, and the bare veth
    path every packet takes: `base`), as `cloudtwin calibrate datapath` writes them.

    `where` names the file in errors. The storage initiator and attestation were not
    measured: they keep the assumptions of FUNCTIONS. A difference of two noisy
    measurements that came out below zero is no cost.
    """
    machine = _section(measured, "machine", where)
    clock_hz = _finite(machine.get("clock_hz"), f"{where}: machine.clock_hz")
    if clock_hz <= 0:
        raise NicError(f"{where}: machine.clock_hz: must be positive, got {clock_hz}")
    said = (f"{machine.get('cpu', 'unknown CPU')} at {clock_hz / 1e9:.2f} GHz, Linux "
            f"{machine.get('kernel', '?')}, {machine.get('date', '?')}")
    functions = dict(FUNCTIONS)
    measured_functions = _section(measured, "functions", where)
    for function in MEASURED_FUNCTIONS:
        cost = _section(measured_functions, function, f"{where}: functions")
        functions[function] = _measured_cost(cost, function, f"{where}: functions.{function}", said)
    base = _measured_cost(_section(measured, "base", where), "", f"{where}: base", said)
    host = SoftwareTier(
        cores=_HOST.cores,
        clock_hz=clock_hz,
        cycle_scale=1.0,
        latency_s=_HOST.latency_s,
        source=f"{_HOST.source}; clock of the measured machine ({said})",
    )
    return NicProfile(name, host, None, None, _ALL_HOST, functions=functions, host_base=base)


def _measured_cost(cost: Mapping[str, object], function: str, where: str, said: str) -> FunctionCost:
    """One function's measured cost (security groups at SECURITY_GROUP_RULES rules)."""
    per_rule = _finite(cost.get("cycles_per_rule", 0.0), f"{where}.cycles_per_rule")
    packet = _finite(cost.get("cycles_per_packet"), f"{where}.cycles_per_packet")
    per_byte = _finite(cost.get("cycles_per_byte"), f"{where}.cycles_per_byte")
    setup = _finite(cost.get("cycles_per_new_connection", 0.0), f"{where}.cycles_per_new_connection")
    values = (packet + per_rule * SECURITY_GROUP_RULES, per_byte, setup)
    packet, per_byte, setup = (max(v, 0.0) for v in values)
    assumed = FUNCTIONS.get(function)
    pipeline_ok, why_not = (assumed.pipeline_ok, assumed.why_not_pipeline) if assumed else (False, "")
    return FunctionCost(packet, per_byte, setup, pipeline_ok, why_not,
                        f"measured by cloudtwin calibrate datapath on {said}")


def linux_kernel_profile(path: Path = LINUX_KERNEL_PROFILE) -> NicProfile:
    """The host datapath of the real Linux kernel as measured on this project's machine
    (the profile file shipped with cloudtwin)."""
    return nic_profile_from_data(json.loads(path.read_text(encoding="utf-8")), str(path.name))


PROFILES["linux-kernel"] = linux_kernel_profile()

DEFAULT_CHAIN = ("overlay", "security-groups", "conntrack", "rate-limiter")
"""The functions every smartNIC host runs unless the scenario lists its own chain."""

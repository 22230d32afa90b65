"""How many bits per second each tier of a NIC moves for the scenario's packet-size mix."""

from __future__ import annotations

import numpy as np

from cloudtwin.smartnic.placement import HostNic, NicPlan

__all__ = ["TIERS", "tier_capacity_bps", "tier_latency_s", "tier_packets_per_s"]

TIERS = ("host", "nic-cores", "pipeline")


def tier_packets_per_s(nic: HostNic, tier: str, plan: NicPlan) -> float:
    """Packets per second `tier` sustains with its functions (inf when it runs none)."""
    load = nic.load(tier)
    if not load.functions:
        return float("inf")
    if tier == "pipeline":
        pipeline = nic.profile.pipeline
        assert pipeline is not None
        return min(pipeline.packets_per_s, pipeline.rate_bps / (8 * plan.mean_packet_bytes))
    cores = nic.profile.host if tier == "host" else nic.profile.nic_cores
    assert cores is not None
    cycles = float(plan.packet_share @ (load.cycles_per_packet + load.cycles_per_byte * plan.packet_bytes))
    return cores.packets_per_s(cycles)


def tier_capacity_bps(nic: HostNic, tier: str, plan: NicPlan) -> float:
    """Bits per second through `tier` at the plan's mean packet size (inf when it runs nothing)."""
    pps = tier_packets_per_s(nic, tier, plan)
    return pps * plan.mean_packet_bytes * 8 if np.isfinite(pps) else float("inf")


def tier_latency_s(nic: HostNic, tier: str) -> float:
    """Latency a packet gains on `tier` (0 when it runs no function)."""
    if not nic.load(tier).functions:
        return 0.0
    if tier == "pipeline":
        assert nic.profile.pipeline is not None
        return nic.profile.pipeline.latency_s
    cores = nic.profile.host if tier == "host" else nic.profile.nic_cores
    assert cores is not None
    return cores.latency_s

"""Which NIC each host has and where its functions run: a scenario's `nic:` section resolved."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import NicError
from cloudtwin.scenario.nic import Nic, NicFunction, is_profile_file
from cloudtwin.smartnic.profiles import DEFAULT_CHAIN, PROFILES, NicProfile, nic_profile_from_data

__all__ = ["HostNic", "NicPlan", "TierLoad", "plan_nics", "resolve_profile"]


@dataclass(frozen=True)
class TierLoad:
    """What one packet costs a tier: x86 cycles per packet and per byte, set-up per flow."""

    cycles_per_packet: float = 0.0
    cycles_per_byte: float = 0.0
    setup_cycles_per_flow: float = 0.0
    functions: tuple[str, ...] = ()

    def cycles(self, packet_bytes: float) -> float:
        return self.cycles_per_packet + self.cycles_per_byte * packet_bytes


@dataclass(frozen=True)
class HostNic:
    """A NIC model and its functions placed on tiers."""

    profile: NicProfile
    tiers: dict[str, str]

    def load(self, tier: str) -> TierLoad:
        """The summed cost of the functions placed on `tier`, and on the host the cost of
        its datapath itself (the profile's `host_base`) once any function runs there."""
        names = tuple(f for f, t in self.tiers.items() if t == tier)
        costs = [self.profile.cost(f) for f in names]
        if tier == "host" and names and self.profile.host_base is not None:
            costs.append(self.profile.host_base)
        return TierLoad(
            sum(c.cycles_per_packet for c in costs),
            sum(c.cycles_per_byte for c in costs),
            sum(c.setup_cycles_per_flow for c in costs),
            names,
        )

    def all_on_host(self) -> HostNic:
        """The same functions, all in the host's software datapath (the no-offload baseline):
        the software vswitch, with this profile's own host and costs where it has its own."""
        return HostNic(self.profile.software_only(), {f: "host" for f in self.tiers})


@dataclass(frozen=True)
class NicPlan:
    """Every host's NIC: `nic_of_host[h]` indexes `nics`; the packet-size mix of the traffic."""

    nics: tuple[HostNic, ...]
    nic_of_host: np.ndarray
    packet_bytes: np.ndarray
    packet_share: np.ndarray
    new_flows_per_s: float
    swaps: tuple[tuple[int, float, float], ...] = ()  # (host, at_s, stall_s)
    quarantined: tuple[tuple[int, str], ...] = ()  # (host, why) for NICs that failed measured boot

    @property
    def mean_packet_bytes(self) -> float:
        return float(self.packet_bytes @ self.packet_share)

    @property
    def modelled(self) -> bool:
        """False when every host has a `basic` NIC (no datapath cost anywhere)."""
        return any(n.profile.modelled for n in self.nics) or bool(self.swaps or self.quarantined)


def _chain(profile: NicProfile, functions: tuple[NicFunction, ...] | None, where: str) -> dict[str, str]:
    chosen = functions if functions is not None else tuple(NicFunction(name=f) for f in DEFAULT_CHAIN)
    tiers: dict[str, str] = {}
    for i, function in enumerate(chosen):
        tiers[function.name] = profile.tier_of(function.name, function.tier, f"{where}.{i}")
    return tiers


def resolve_profile(nic: Nic, name: str, where: str) -> NicProfile:
    """The profile `name` names: a built-in one, or a measured profile file the scenario's
    reader attached (`Nic.with_profile_data`); NicError naming `where` otherwise."""
    if not is_profile_file(name):
        return PROFILES[name]
    data = nic.profile_data(name)
    if data is None:
        raise NicError(f"{where}: profile file {name} was not read (profile files are read with the "
                       "scenario file by the cloudtwin commands)")
    if not isinstance(data, dict):
        raise NicError(f"{where}: {name}: not a profile (a JSON object written by cloudtwin "
                       "calibrate datapath)")
    return nic_profile_from_data(data, name, name)


def plan_nics(nic: Nic, host_count: int) -> NicPlan:
    """Resolve profiles and placements per host; NicError names an impossible placement."""
    default_profile = resolve_profile(nic, nic.profile, "nic.profile")
    nics = [HostNic(default_profile, _chain(default_profile, nic.functions, "nic.functions"))]
    nic_of_host = np.zeros(host_count, dtype=np.int64)
    for i, group in enumerate(nic.groups):
        profile = (resolve_profile(nic, group.profile, f"nic.groups.{i}.profile")
                   if group.profile is not None else default_profile)
        functions, where = group.functions, f"nic.groups.{i}.functions"
        if functions is None and nic.functions is not None:  # the same chain, on this profile's tiers
            functions = tuple(NicFunction(name=f.name) for f in nic.functions)
        nics.append(HostNic(profile, _chain(profile, functions, where)))
        nic_of_host[list(group.hosts)] = len(nics) - 1
    if nic.packet_mix:
        sizes = np.array([s for s, _ in nic.packet_mix], dtype=float)
        share = np.array([w for _, w in nic.packet_mix], dtype=float)
        if (share < 0).any() or share.sum() <= 0:
            raise NicError("nic.packet_mix: shares must be non-negative and not all zero")
        share = share / share.sum()
    else:
        sizes, share = np.array([float(nic.packet_size)]), np.array([1.0])
    swaps = []
    for i, swap in enumerate(nic.pipeline_swaps):
        for host in swap.hosts:
            pipeline = nics[nic_of_host[host]].profile.pipeline
            if pipeline is None:
                raise NicError(
                    f"nic.pipeline_swaps.{i}.hosts: host {host}'s NIC "
                    f"({nics[nic_of_host[host]].profile.name}) has no pipeline to swap"
                )
            swaps.append((host, swap.at, pipeline.swap_stall_s))
    return NicPlan(tuple(nics), nic_of_host, sizes, share, nic.new_flows_per_s, tuple(swaps))

"""The `nic:` section of a scenario: NIC profile, function chain on tiers, host groups, boot faults."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr

from cloudtwin.scenario.units import parse_size, parse_time

__all__ = [
    "BootFault",
    "FunctionName",
    "Nic",
    "NicFunction",
    "NicGroup",
    "PipelineSwap",
    "ProfileName",
    "ProfileRef",
    "is_profile_file",
    "Storm",
    "Tier",
    "check_placement",
]

ProfileName = Literal["basic", "janus-100g", "software-vswitch", "bmv2-like", "linux-kernel"]
BUILTIN_PROFILES: tuple[str, ...] = ProfileName.__args__  # type: ignore[attr-defined]


def is_profile_file(name: str) -> bool:
    """Whether a profile reference names a file (a measured profile, `*.json`) rather than
    a built-in profile."""
    return name.endswith(".json")


def _profile_ref(name: str) -> str:
    if name in BUILTIN_PROFILES or (is_profile_file(name) and name.strip() != ".json"):
        return name
    raise ValueError(
        f"unknown profile {name!r}; expected one of {', '.join(BUILTIN_PROFILES)} or a profile "
        "file written by cloudtwin calibrate datapath (a path ending in .json)"
    )


ProfileRef = Annotated[str, AfterValidator(_profile_ref)]
"""A built-in profile's name, or the path of a measured profile file (relative to the
scenario file; a path given with --set is relative to the current directory)."""
Tier = Literal["host", "nic-cores", "pipeline"]
FunctionName = Literal[
    "overlay", "security-groups", "conntrack", "rate-limiter", "storage-initiator", "attestation"
]
Stage = Literal["firmware", "nic-os", "pipeline"]

Size = Annotated[int, BeforeValidator(parse_size), Field(gt=0)]
Duration = Annotated[float, BeforeValidator(parse_time), Field(ge=0)]


def _host_set(spec: object) -> tuple[int, ...]:
    from cloudtwin.scenario.model import parse_host_ranges

    return parse_host_ranges(spec)  # type: ignore[arg-type]


HostSet = Annotated[tuple[int, ...], BeforeValidator(_host_set)]


class _Model(BaseModel):
    # a NaN share or an infinite rate would make the NIC's cost vanish: refused, naming the key
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class NicFunction(_Model):
    """One function of the chain and the tier it runs on (default: the profile's choice)."""

    name: FunctionName
    tier: Tier | None = None


class NicGroup(_Model):
    """Hosts whose NIC differs from the scenario's default profile or chain."""

    hosts: HostSet
    profile: ProfileRef | None = None
    functions: tuple[NicFunction, ...] | None = None


class BootFault(_Model):
    """A boot stage of some hosts' NICs that was altered after signing, or never signed."""

    hosts: HostSet
    stage: Stage = "nic-os"
    kind: Literal["tampered", "unsigned"] = "tampered"


class Storm(_Model):
    """A connection storm: new flows per second per host above the usual rate, for a while."""

    new_flows_per_s: float = Field(gt=0)
    duration: Duration = 1.0
    start: Duration = 0.1
    flow_lifetime: Duration = 0.01


class PipelineSwap(_Model):
    """The provider loads a new pipeline program into some hosts' NICs at `at`."""

    hosts: HostSet
    at: Duration = 0.0


class Nic(_Model):
    """Every host's NIC: `basic` (no datapath cost, the default) or a smartNIC profile."""

    profile: ProfileRef = "basic"
    functions: tuple[NicFunction, ...] | None = None
    packet_size: Size = 1500
    packet_mix: tuple[tuple[Size, float], ...] = ()
    new_flows_per_s: float = Field(0.0, ge=0)
    groups: tuple[NicGroup, ...] = ()
    boot_faults: tuple[BootFault, ...] = ()
    storm: Storm | None = None
    pipeline_swaps: tuple[PipelineSwap, ...] = ()
    _profile_files: dict[str, object] = PrivateAttr(default_factory=dict)

    def profile_files(self) -> tuple[str, ...]:
        """The profile files this section names (the default profile's and its groups')."""
        names = [self.profile, *(g.profile for g in self.groups if g.profile is not None)]
        return tuple(dict.fromkeys(n for n in names if is_profile_file(n)))

    def profile_data(self, name: str) -> object | None:
        """The parsed content of profile file `name` (set by whoever read it), else None."""
        return self._profile_files.get(name)

    def with_profile_data(self, files: dict[str, object]) -> Nic:
        """A copy holding the parsed content of its profile files, by the name the scenario gives."""
        copy = self.model_copy()
        copy._profile_files = dict(files)
        return copy


def check_placement(nic: Nic) -> None:
    """ValueError naming the key when a host is in two `groups` (the last would silently win)
    or a chain places one function twice."""
    owner: dict[int, int] = {}
    for i, group in enumerate(nic.groups):
        for host in group.hosts:
            first = owner.setdefault(host, i)
            if first != i:
                raise ValueError(
                    f"nic.groups.{i}.hosts: host {host} is also in nic.groups.{first}; a host is in one group"
                )
    chains = [("nic.functions", nic.functions)]
    chains += [(f"nic.groups.{i}.functions", g.functions) for i, g in enumerate(nic.groups)]
    for where, chain in chains:
        placed: dict[str, int] = {}
        for j, function in enumerate(chain or ()):
            first = placed.setdefault(function.name, j)
            if first != j:
                raise ValueError(f"{where}.{j}.name: {function.name} is placed twice (also {where}.{first})")

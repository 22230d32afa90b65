"""Pydantic models of a scenario: fabric, hosts, tenants, routing and workload, frozen and validated."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from cloudtwin.scenario.cluster import Cluster, HplWorkload, TrainingWorkload
from cloudtwin.scenario.faults import Fault, Reaction
from cloudtwin.scenario.limits import Limits
from cloudtwin.scenario.mobility import Mobility, check_mobility
from cloudtwin.scenario.names import CollectiveOp
from cloudtwin.scenario.nic import Nic, check_placement
from cloudtwin.scenario.units import parse_rate, parse_size, parse_time

__all__ = [
    "DEFAULT_LATENCY_S",
    "DEFAULT_NVLINK_BPS",
    "DEFAULT_RATE_BPS",
    "CollectiveWorkload",
    "FatTreeFabric",
    "Fabric",
    "FlowRow",
    "FlowsWorkload",
    "Hosts",
    "CollectiveJob",
    "Job",
    "PerftestJob",
    "LeafSpineFabric",
    "PerftestWorkload",
    "RailOptimizedFabric",
    "Routing",
    "Scenario",
    "Tenant",
    "Workload",
    "parse_host_ranges",
]

DEFAULT_RATE_BPS = 100e9
DEFAULT_LATENCY_S = 1e-6
DEFAULT_SIZE_BYTES = 1 << 30
DEFAULT_NVLINK_BPS = 300e9 * 8  # A100 NVSwitch: 300 GB/s per GPU per direction
DEFAULT_GPUS = 8
DEFAULT_NET_HOP_LATENCY_S = 14e-6  # NCCL tuning model, Simple protocol, network hop
DEFAULT_NVLINK_HOP_LATENCY_S = 3.4e-6  # NCCL tuning model, Simple protocol, NVLink ring hop
DEFAULT_CHUNK_BYTES = 1 << 19  # NCCL Simple-protocol pipeline chunk (512 KiB)


Rate = Annotated[float, BeforeValidator(parse_rate), Field(gt=0)]
Size = Annotated[int, BeforeValidator(parse_size), Field(gt=0)]
Duration = Annotated[float, BeforeValidator(parse_time), Field(ge=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LeafSpineFabric(_Model):
    """Two-level Clos: every leaf connects to every spine with `uplinks_per_spine` links."""

    kind: Literal["leaf-spine"] = "leaf-spine"
    leaves: int = Field(16, ge=1)
    spines: int = Field(8, ge=1)
    hosts_per_leaf: int = Field(8, ge=1)
    host_link: Rate = DEFAULT_RATE_BPS
    uplink: Rate = DEFAULT_RATE_BPS
    uplinks_per_spine: int = Field(1, ge=1)
    latency: Duration = DEFAULT_LATENCY_S


class RailOptimizedFabric(LeafSpineFabric):
    """Leaf-spine where NIC i of every host in a group of `hosts_per_leaf` hosts sits on leaf i
    of that group; `leaves` counts all rail leaves (groups x NICs per host)."""

    kind: Literal["rail-optimized"] = "rail-optimized"  # type: ignore[assignment]


class FatTreeFabric(_Model):
    """Three-tier k-ary fat-tree: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores."""

    kind: Literal["fat-tree"] = "fat-tree"
    k: int = Field(4, ge=2)
    host_link: Rate = DEFAULT_RATE_BPS
    link: Rate = DEFAULT_RATE_BPS
    latency: Duration = DEFAULT_LATENCY_S

    @field_validator("k")
    @classmethod
    def _even(cls, k: int) -> int:
        if k % 2:
            raise ValueError(f"k must be even, got {k}")
        return k


Fabric = Annotated[
    LeafSpineFabric | RailOptimizedFabric | FatTreeFabric, Field(discriminator="kind")
]


class Hosts(_Model):
    """What every host brings to the fabric."""

    nics: int = Field(1, ge=1, le=64)
    nic_rate: Rate | None = None
    udp_sport: Literal["per-qp", "fixed"] = "per-qp"
    gpus: int = Field(DEFAULT_GPUS, ge=1, le=64)
    nvlink: Rate = DEFAULT_NVLINK_BPS


_RANGE = re.compile(r"^\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?$")

#: Host indices one scenario may list in all its host sets (`"0-63"` counts 64): far more
#: hosts than any fabric within `limits.memory` has, and few enough that expanding them
#: takes well under a second. A range like `0-99999999` fails here, before it is expanded.
MAX_LISTED_HOSTS = 1 << 22


def count_hosts(spec: object) -> int:
    """How many indices a host set lists, without expanding its ranges (0 for a malformed
    part: the field's own validation names it).

    >>> count_hosts("0-63,80")
    65
    """
    if isinstance(spec, list):
        return len(spec)
    if not isinstance(spec, str):
        return 1
    total = 0
    for part in spec.split(","):
        match = _RANGE.match(part)
        if match is not None:
            low = int(match.group(1))
            total += max(int(match.group(2) or low) - low + 1, 0)
    return total


def check_listed_hosts(data: object, path: str = "") -> int:
    """Refuse a document whose `hosts:` sets (at any depth) list more than MAX_LISTED_HOSTS
    indices in all, naming the set that passes the bound; returns the count so far."""
    total = 0
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        where = f"{path}.{key}" if path else str(key)
        if key == "hosts" and isinstance(value, (str, list)):
            total += count_hosts(value)
        elif isinstance(value, (dict, list)):
            total += check_listed_hosts(value, where)
        if total > MAX_LISTED_HOSTS:
            raise ValueError(
                f"{where}: lists more than {MAX_LISTED_HOSTS:,} hosts in all (the largest fabric "
                "that fits in memory has far fewer)"
            )
    return total


def parse_host_ranges(spec: str | int | list[int]) -> tuple[int, ...]:
    """Host indices from `"0-63,80"`, a single int or a list.

    >>> parse_host_ranges("0-3,8")
    (0, 1, 2, 3, 8)
    """
    if isinstance(spec, bool):
        raise ValueError(f"{spec!r} is not a host range")
    if isinstance(spec, int):
        return (spec,)
    if isinstance(spec, list):
        return tuple(int(h) for h in spec)
    hosts: list[int] = []
    for part in str(spec).split(","):
        match = _RANGE.match(part)
        if match is None:
            raise ValueError(f"{part.strip()!r} is not a host range like 0-63")
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if high < low:
            raise ValueError(f"host range {part.strip()!r} runs backwards")
        hosts.extend(range(low, high + 1))
    return tuple(hosts)


HostSet = Annotated[tuple[int, ...], BeforeValidator(parse_host_ranges)]


class Tenant(_Model):
    """A tenant: a set of hosts and the VXLAN network identifier of its overlay."""

    name: str = Field(min_length=1)
    vni: int = Field(ge=1, le=(1 << 24) - 1)
    hosts: HostSet


class Routing(_Model):
    """How the fabric picks a path for each flow."""

    strategy: str = "ecmp"
    hash: Literal["mix", "xor"] = "mix"
    per_switch_seed: bool = True


Pattern = Literal["pairs", "permutation", "shift", "incast", "all-to-all"]


class PerftestWorkload(_Model):
    """ib_write_bw-style RoCE test traffic between the hosts of each tenant."""

    kind: Literal["perftest"] = "perftest"
    pattern: Pattern = "permutation"
    size: Size = DEFAULT_SIZE_BYTES
    qps: int = Field(1, ge=1, le=1024)
    shift: int | None = Field(None, ge=1)
    incast_senders: int | None = Field(None, ge=1)
    start: Duration = 0.0


Algorithm = Literal["ring", "tree", "auto"]
HostOrder = Literal["topology", "random"]


class CollectiveWorkload(_Model):
    """An NCCL collective (nccl-tests semantics) over GPUs; one job per tenant unless `ranks`.

    `ranks` lists global GPU indices (host x gpus + local GPU) in rank order; default:
    every GPU of each tenant, one job per tenant. `host_order: random` hands a job's
    hosts out in a seeded random order, as a cloud scheduler places VMs without regard
    to leaves (NCCL orders its rings by rank). `rounds` is how many pipelined rounds
    the model simulates per step sequence (default: as many as fit the flow budget).
    """

    kind: Literal["collective"] = "collective"
    op: CollectiveOp = "allreduce"
    algorithm: Algorithm = "ring"
    size: Size = DEFAULT_SIZE_BYTES
    ranks: HostSet | None = None
    channels: int = Field(8, ge=1, le=64)
    qps_per_connection: int = Field(1, ge=1, le=16)
    host_order: HostOrder = "topology"
    root: int = Field(0, ge=0)
    net_hop_latency: Duration = DEFAULT_NET_HOP_LATENCY_S
    nvlink_hop_latency: Duration = DEFAULT_NVLINK_HOP_LATENCY_S
    chunk: Size = DEFAULT_CHUNK_BYTES
    rounds: int | None = Field(None, ge=1, le=4096)


class FlowRow(_Model):
    """One inline flow of a `flows` workload (values are checked when the run is built)."""

    source: int | str
    destination: int | str
    bytes: int | float | str
    start: float | int | str | None = None
    tenant: str | None = None
    qps: int | None = None
    path: str | None = None


class FlowsWorkload(_Model):
    """Flows listed one by one: inline `rows`, or a CSV or Parquet `file` (relative to the
    scenario file) with columns source, destination, bytes and optionally start, tenant,
    qps, path (see `cloudtwin.workloads.flowlist`)."""

    kind: Literal["flows"] = "flows"
    rows: tuple[FlowRow, ...] = ()
    file: str | None = Field(None, min_length=1)
    qps: int = Field(1, ge=1, le=1024)
    _table: object = PrivateAttr(None)

    @model_validator(mode="after")
    def _one_source(self) -> FlowsWorkload:
        if bool(self.rows) == (self.file is not None):
            raise ValueError("workload: a flows workload takes either rows or a file")
        return self

    @property
    def table(self) -> object:
        """The rows read from `file` (set by whoever reads it), else None."""
        return self._table

    def with_table(self, table: object) -> FlowsWorkload:
        """A copy holding the rows read from `file`."""
        copy = self.model_copy()
        copy._table = table
        return copy


Workload = Annotated[
    PerftestWorkload | CollectiveWorkload | TrainingWorkload | HplWorkload | FlowsWorkload,
    Field(discriminator="kind"),
]


class _JobFields(_Model):
    """What a job in `workloads:` adds to its workload: a name and the tenants it runs in."""

    name: str | None = Field(None, min_length=1)
    tenants: tuple[str, ...] = ()

    @field_validator("tenants", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value


class PerftestJob(PerftestWorkload, _JobFields):
    """A perftest job in `workloads:` (its own start time, its tenants, a name)."""


class CollectiveJob(CollectiveWorkload, _JobFields):
    """A collective job in `workloads:` (one collective per tenant it runs in)."""

    start: Duration = 0.0


def _job_kind(value: object) -> str:
    """A job's kind; perftest when it names none."""
    kind = value.get("kind", "perftest") if isinstance(value, dict) else getattr(value, "kind", "perftest")
    return str(kind)


Job = Annotated[
    Annotated[PerftestJob, Tag("perftest")] | Annotated[CollectiveJob, Tag("collective")],
    Discriminator(_job_kind),
]


class Scenario(_Model):
    """A whole scenario: one fabric, its hosts and tenants, a routing strategy, a workload."""

    name: str = Field("scenario", min_length=1)
    seed: int = Field(1, ge=0, lt=2**63)
    fabric: Fabric = Field(default_factory=LeafSpineFabric)
    hosts: Hosts = Field(default_factory=Hosts)
    tenants: tuple[Tenant, ...] = ()
    routing: Routing = Field(default_factory=Routing)
    cluster: Cluster = Field(default_factory=Cluster)
    workload: Workload = Field(default_factory=PerftestWorkload)
    workloads: tuple[Job, ...] = ()
    faults: tuple[Fault, ...] = ()
    reaction: Reaction = Field(default_factory=Reaction)
    nic: Nic = Field(default_factory=Nic)
    mobility: Mobility = Field(default_factory=Mobility)
    limits: Limits = Field(default_factory=Limits)

    @property
    def host_count(self) -> int:
        """Number of hosts the fabric holds."""
        fabric = self.fabric
        if isinstance(fabric, FatTreeFabric):
            return fabric.k**3 // 4 // self.hosts.nics
        if isinstance(fabric, RailOptimizedFabric):
            return (fabric.leaves // self.hosts.nics) * fabric.hosts_per_leaf
        return fabric.leaves * fabric.hosts_per_leaf

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        fabric = self.fabric
        if isinstance(fabric, RailOptimizedFabric) and fabric.leaves % self.hosts.nics:
            raise ValueError(
                f"fabric.leaves: rail-optimized needs a multiple of hosts.nics "
                f"({self.hosts.nics}) leaves, got {fabric.leaves}"
            )
        self._check_tenants()
        self._check_jobs()
        self._check_ranks()
        self._check_nic()
        check_mobility(self.mobility, self.host_count)
        return self

    def _check_nic(self) -> None:
        check_placement(self.nic)
        groups = [(f"nic.groups.{i}.hosts", g.hosts) for i, g in enumerate(self.nic.groups)]
        groups += [(f"nic.boot_faults.{i}.hosts", f.hosts) for i, f in enumerate(self.nic.boot_faults)]
        groups += [(f"nic.pipeline_swaps.{i}.hosts", s.hosts) for i, s in enumerate(self.nic.pipeline_swaps)]
        for where, hosts in groups:
            for host in hosts:
                if not 0 <= host < self.host_count:
                    raise ValueError(f"{where}: host {host} is outside the fabric (0-{self.host_count - 1})")

    def _check_ranks(self) -> None:
        workload = self.workload
        if not isinstance(workload, CollectiveWorkload) or workload.ranks is None:
            return
        gpus = self.host_count * self.hosts.gpus
        for rank in workload.ranks:
            if not 0 <= rank < gpus:
                raise ValueError(f"workload.ranks: GPU {rank} is outside the cluster (0-{gpus - 1})")
        if len(set(workload.ranks)) != len(workload.ranks):
            raise ValueError("workload.ranks: a GPU is listed twice")

    def _check_jobs(self) -> None:
        if self.workloads and "workload" in self.model_fields_set:
            raise ValueError("workloads: give either workload or workloads, not both")
        tenants = {t.name for t in self.tenants}
        names: set[str] = set()
        for i, job in enumerate(self.workloads):
            for name in job.tenants:
                if name not in tenants:
                    raise ValueError(f"workloads.{i}.tenants: no tenant named {name!r}")
            label = job.name or f"job{i}"
            if label in names:
                raise ValueError(f"workloads.{i}.name: duplicate job name {label!r}")
            names.add(label)

    def _check_tenants(self) -> None:
        seen: dict[int, str] = {}
        names: set[str] = set()
        vnis: dict[int, str] = {}
        for i, tenant in enumerate(self.tenants):
            if tenant.name in names:
                raise ValueError(f"tenants.{i}.name: duplicate tenant name {tenant.name!r}")
            names.add(tenant.name)
            if tenant.vni in vnis:
                raise ValueError(
                    f"tenants.{i}.vni: VNI {tenant.vni} is already used by tenant {vnis[tenant.vni]!r}"
                )
            vnis[tenant.vni] = tenant.name
            for host in tenant.hosts:
                if not 0 <= host < self.host_count:
                    raise ValueError(
                        f"tenants.{i}.hosts: host {host} is outside the fabric "
                        f"(0-{self.host_count - 1})"
                    )
                if host in seen:
                    raise ValueError(
                        f"tenants.{i}.hosts: host {host} already belongs to tenant {seen[host]!r}"
                    )
                seen[host] = tenant.name

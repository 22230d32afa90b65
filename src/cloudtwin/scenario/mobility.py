"""Scenario models for live migration: clouds (with their admission policy), VMs and migrations.

A cloud is a set of hosts of the fabric with its own gateway and admission policy;
clouds are joined by a WAN link of their own (bandwidth, latency) that the migration
stream and any inter-cloud traffic cross: host -> gateway -> WAN -> gateway -> host.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, model_validator

from cloudtwin.scenario.units import parse_rate, parse_size, parse_time

__all__ = [
    "Admission",
    "Calibrated",
    "Cloud",
    "MigrationJob",
    "Mobility",
    "PlanRequest",
    "VmSpec",
    "Wan",
    "check_mobility",
]


def _rate_or_zero(value: object) -> float:
    """A rate that may be zero (a VM that dirties nothing); negative rates are refused."""
    if isinstance(value, str) and value.strip().startswith("-"):
        raise ValueError(f"must not be negative, got {value!r}")
    return parse_rate(value, allow_zero=True)  # type: ignore[arg-type]


def _positive_time(value: object) -> float:
    if isinstance(value, str) and value.strip().startswith("-"):
        raise ValueError(f"must be positive, got {value!r}")
    seconds = parse_time(value)  # type: ignore[arg-type]
    if seconds <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return seconds


def _size(value: object) -> int:
    if isinstance(value, str) and value.strip().startswith("-"):
        raise ValueError(f"must be positive, got {value!r}")
    return parse_size(value)  # type: ignore[arg-type]


def _size_or_zero(value: object) -> int:
    if isinstance(value, str) and value.strip().startswith("-"):
        raise ValueError(f"must not be negative, got {value!r}")
    return parse_size(value, allow_zero=True)  # type: ignore[arg-type]


def _rate(value: object) -> float:
    if isinstance(value, str) and value.strip().startswith("-"):
        raise ValueError(f"must be positive, got {value!r}")
    return parse_rate(value)  # type: ignore[arg-type]


Rate = Annotated[float, BeforeValidator(_rate)]
DirtyRate = Annotated[float, BeforeValidator(_rate_or_zero)]
Size = Annotated[int, BeforeValidator(_size)]
SizeOrZero = Annotated[int, BeforeValidator(_size_or_zero)]
PositiveTime = Annotated[float, BeforeValidator(_positive_time)]
Time = Annotated[float, BeforeValidator(parse_time), Field(ge=0)]
PolicyName = Literal["abort", "raise-downtime", "auto-converge", "postcopy"]
WorkingSetAt = Literal["spread", "first", "last"]
"""Where the working set sits in the order a migration scans memory: spread evenly over
the data, in the part scanned first (low addresses) or in the part scanned last."""
WriteOrder = Literal["random", "ascending", "descending"]
"""How the VM writes its working set: any page as likely as any, or in turn along the
scan's order (ascending) or against it (descending), cycling."""
Storage = Literal["shared", "block", "remote-then-local"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Admission(_Model):
    """What a destination cloud accepts: how many VMs and how much memory, which labels."""

    max_vms: int = Field(1000, ge=0)
    max_memory: SizeOrZero = 1 << 50
    host_memory: Size = 1 << 40
    allowed_labels: tuple[str, ...] | None = None


class Cloud(_Model):
    """An autonomous cloud: its hosts on the fabric, its gateway host, its admission policy."""

    name: str = Field(min_length=1)
    hosts: tuple[int, ...]
    gateway: int | None = None
    admission: Admission = Field(default_factory=Admission)

    @model_validator(mode="before")
    @classmethod
    def _ranges(cls, data: object) -> object:
        from cloudtwin.scenario.model import parse_host_ranges

        if isinstance(data, dict) and "hosts" in data:
            data = dict(data)
            data["hosts"] = parse_host_ranges(data["hosts"])
        return data

    @property
    def gateway_host(self) -> int:
        return self.hosts[0] if self.gateway is None else self.gateway


class Wan(_Model):
    """The WAN link between two clouds' gateways (one per direction)."""

    bandwidth: Rate = 10e9
    latency: Time = 0.005


class VmSpec(_Model):
    """A VM: where it runs, its memory and how it dirties it, its disk, labels and identity."""

    name: str = Field(min_length=1)
    cloud: str
    host: int = Field(ge=0)
    memory: Size
    vcpus: int = Field(2, ge=1)
    working_set: SizeOrZero = 0
    dirty_rate: DirtyRate = 0.0
    resident: SizeOrZero | None = None
    cold_set: SizeOrZero = 0
    cold_rate: DirtyRate = 0.0
    trace: tuple[DirtyRate, ...] = ()
    trace_interval: PositiveTime = 1.0
    working_set_at: WorkingSetAt = "spread"
    write_order: WriteOrder = "random"
    disk: SizeOrZero = 0
    disk_dirty_rate: DirtyRate = 0.0
    labels: tuple[str, ...] = ()
    mac: str | None = None
    ip: str | None = None
    clients: tuple[int, ...] = ()
    client_bytes: Size = 1 << 30

    @model_validator(mode="before")
    @classmethod
    def _client_ranges(cls, data: object) -> object:
        from cloudtwin.scenario.model import parse_host_ranges

        if isinstance(data, dict) and "clients" in data:
            data = dict(data)
            data["clients"] = parse_host_ranges(data["clients"])
        return data

    @model_validator(mode="after")
    def _fits(self) -> VmSpec:
        if self.working_set + self.cold_set > self.memory:
            raise ValueError(
                f"working_set: {self.working_set + self.cold_set} bytes is larger than memory "
                f"({self.memory} bytes)"
            )
        if self.resident is not None and self.resident > self.memory:
            raise ValueError(f"resident: {self.resident} bytes is larger than memory ({self.memory} bytes)")
        _check_placement(self.working_set_at, self.write_order)
        return self


Share = Annotated[float, Field(gt=0, le=1)]


class MigrationOptionsSpec(_Model):
    """The knobs of one migration (QEMU's defaults unless set; where a migration profile
    is loaded, its calibrated rates, buffer, resume, set-up and sync times unless set here)."""

    downtime_limit: PositiveTime = 0.3
    max_bandwidth: Rate | None = None
    final_bandwidth: Rate | None = None
    resent_bandwidth: Rate | None = None
    socket_buffer: SizeOrZero | None = None
    resume: Time | None = None
    setup_time: Time | None = None
    sync_time: Time | None = None
    overlay_update: Time = 0.050
    device_state: SizeOrZero = 0
    stall_rounds: int = Field(2, ge=1)
    max_downtime: PositiveTime | None = None
    downtime_step: PositiveTime | None = None
    throttle_initial: Share = 0.20
    throttle_increment: Share = 0.10
    throttle_max: Share = 0.99
    throttle_trigger: Share = 0.50
    xbzrle_cache: SizeOrZero = 64 << 20
    xbzrle_ratio: Share = 0.25
    stream_bandwidth: Rate = 8e9
    sync_period: PositiveTime = 0.100
    auto_converge: bool = False
    postcopy: bool = False
    xbzrle: bool = False
    multifd_channels: int = Field(1, ge=1, le=64)
    policy: PolicyName = "abort"
    storage: Storage = "shared"
    max_rounds: int = Field(30, ge=1)
    timeout: PositiveTime = 3600.0
    protected: bool = True
    syncs: Literal["qemu", "rounds"] = "qemu"


class MigrationJob(MigrationOptionsSpec):
    """Move VM `vm` to cloud `to` starting at `start`; `abort_at` withdraws consent then."""

    vm: str
    to: str
    start: Time = 0.0
    abort_at: Time | None = None

    @model_validator(mode="after")
    def _abort_after_start(self) -> MigrationJob:
        if self.abort_at is not None and self.abort_at <= self.start:
            raise ValueError(
                f"abort_at: {self.abort_at:g} s is not after start ({self.start:g} s); consent is "
                "withdrawn from a migration that has begun"
            )
        return self


class Calibrated(_Model):
    """A mobility section that may load a migration profile (`calibration`: its file,
    relative to the scenario file; a path given with --set is relative to the current
    directory), written by `cloudtwin calibrate migration`."""

    calibration: str | None = Field(None, min_length=1)
    _calibration: object = PrivateAttr(None)

    def calibration_data(self) -> object | None:
        """The parsed content of the `calibration` file (set by whoever read it), else None."""
        return self._calibration

    def with_calibration_data(self, data: object) -> Self:
        """A copy holding the parsed content of its `calibration` file."""
        copy = self.model_copy()
        copy._calibration = data
        return copy


class Mobility(Calibrated):
    """Clouds, their VMs, the WAN between them and the migrations to run."""

    clouds: tuple[Cloud, ...] = ()
    wan: Wan = Field(default_factory=Wan)
    vms: tuple[VmSpec, ...] = ()
    migrations: tuple[MigrationJob, ...] = ()


class PlanRequest(MigrationOptionsSpec):
    """A what-if migration from flags alone: one VM over a path of constant bandwidth."""

    memory: Size
    working_set: SizeOrZero = 0
    dirty_rate: DirtyRate = 0.0
    resident: SizeOrZero | None = None
    working_set_at: WorkingSetAt = "spread"
    write_order: WriteOrder = "random"
    bandwidth: Rate = 10e9
    disk: SizeOrZero = 0
    disk_dirty_rate: DirtyRate = 0.0
    rtt: Time = 0.001

    @model_validator(mode="after")
    def _fits(self) -> PlanRequest:
        if self.working_set > self.memory:
            raise ValueError(
                f"working_set: {self.working_set} bytes is larger than memory ({self.memory} bytes)"
            )
        if self.resident is not None and self.resident > self.memory:
            raise ValueError(f"resident: {self.resident} bytes is larger than memory ({self.memory} bytes)")
        _check_placement(self.working_set_at, self.write_order)
        return self


def _check_placement(at: str, order: str) -> None:
    if order != "random" and at == "spread":
        raise ValueError(
            f"write_order: {order} needs working_set_at first or last (a working set spread "
            "over the data has no order along the scan)"
        )


def check_mobility(mobility: Mobility, host_count: int) -> None:
    """Names are unique and known, hosts lie on the fabric and in their cloud (ValueError naming the key)."""
    clouds: dict[str, Cloud] = {}
    owner: dict[int, str] = {}
    for i, cloud in enumerate(mobility.clouds):
        if cloud.name in clouds:
            raise ValueError(f"mobility.clouds.{i}.name: duplicate cloud {cloud.name!r}")
        clouds[cloud.name] = cloud
        for host in cloud.hosts:
            if not 0 <= host < host_count:
                raise ValueError(
                    f"mobility.clouds.{i}.hosts: host {host} is outside the fabric (0-{host_count - 1})"
                )
            if host in owner:
                raise ValueError(
                    f"mobility.clouds.{i}.hosts: host {host} already belongs to cloud {owner[host]!r}"
                )
            owner[host] = cloud.name
        if cloud.gateway_host not in cloud.hosts:
            raise ValueError(
                f"mobility.clouds.{i}.gateway: host {cloud.gateway_host} is not one of the cloud's hosts"
            )
    vms: set[str] = set()
    for i, vm in enumerate(mobility.vms):
        if vm.name in vms:
            raise ValueError(f"mobility.vms.{i}.name: duplicate VM {vm.name!r}")
        vms.add(vm.name)
        if vm.cloud not in clouds:
            raise ValueError(f"mobility.vms.{i}.cloud: unknown site {vm.cloud!r}")
        if vm.host not in clouds[vm.cloud].hosts:
            raise ValueError(f"mobility.vms.{i}.host: host {vm.host} is not in cloud {vm.cloud!r}")
        for client in vm.clients:
            if not 0 <= client < host_count or client == vm.host:
                raise ValueError(
                    f"mobility.vms.{i}.clients: host {client} is not another host of the fabric "
                    f"(0-{host_count - 1})"
                )
    placed = {vm.name: vm.cloud for vm in mobility.vms}
    moved: dict[str, int] = {}
    for i, job in enumerate(mobility.migrations):
        if job.vm not in vms:
            raise ValueError(f"mobility.migrations.{i}.vm: unknown VM {job.vm!r}")
        if job.vm in moved:
            raise ValueError(
                f"mobility.migrations.{i}.vm: VM {job.vm!r} already migrates in "
                f"mobility.migrations.{moved[job.vm]} (one migration per VM)"
            )
        moved[job.vm] = i
        if job.to not in clouds:
            raise ValueError(f"mobility.migrations.{i}.to: unknown site {job.to!r}")
        if job.to == placed[job.vm]:
            raise ValueError(f"mobility.migrations.{i}.to: VM {job.vm!r} already runs in {job.to!r}")

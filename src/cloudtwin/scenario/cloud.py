"""One cloud: federated sites, each a fabric with its GPU cluster, NICs and tenant jobs, joined
by gateways and WAN links, with VMs that live-migrate between the sites.

The document joins a `federation:` (the sites, WAN, federated networks, gateway faults and
federated traffic of `cloudtwin federate`) and a `mobility:` (VMs and migrations). A site
carries what runs on it: `cluster`, `nic`, `workload` or `workloads`, and `faults` of its
own fabric, with host numbers local to the site. A VM lives on a site's host and belongs
to a federated network; it may move only to another site of that network, and what
happens to its address follows the network's mode (`l3-routed` renumbers it, which the
scenario must allow).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.cluster import Cluster
from cloudtwin.scenario.faults import Fault, Reaction
from cloudtwin.scenario.federation import FederationScenario, Site, default_site_kinds
from cloudtwin.scenario.limits import Limits
from cloudtwin.scenario.loader import apply_overrides, check_hosts, parse_yaml, validation_error
from cloudtwin.scenario.mobility import Admission, Calibrated, MigrationJob, VmSpec
from cloudtwin.scenario.model import Job, Routing, Scenario, Workload
from cloudtwin.scenario.nic import Nic
from cloudtwin.scenario.units import parse_time

__all__ = [
    "CloudFederation",
    "CloudMobility",
    "CloudScenario",
    "CloudSite",
    "CloudVm",
    "DEFAULT_TELEMETRY_SAMPLE_S",
    "Telemetry",
    "is_cloud",
    "load_cloud",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CloudSite(Site):
    """A site and what runs on it: its GPU cluster, NICs, tenant jobs and fabric faults."""

    cluster: Cluster = Field(default_factory=Cluster)
    nic: Nic = Field(default_factory=Nic)
    workload: Workload | None = None
    workloads: tuple[Job, ...] = ()
    faults: tuple[Fault, ...] = ()

    def site_scenario(self, seed: int, routing: Routing, reaction: Reaction, limits: Limits) -> Scenario:
        """The single-fabric scenario of this site with its jobs (ScenarioError naming the site)."""
        # the input of Scenario.model_validate: models and plain values, validated there
        data: dict[str, Any] = {
            "name": self.name,
            "seed": seed,
            "fabric": self.fabric,
            "hosts": self.hosts,
            "tenants": [{"name": t.name, "vni": t.vni, "hosts": list(t.hosts)} for t in self.tenants],
            "routing": routing,
            "reaction": reaction,
            "cluster": self.cluster,
            "nic": self.nic,
            "faults": self.faults,
            "limits": limits,
        }
        if "cluster" not in self.model_fields_set:  # the site's scenario says it has no cluster:
            del data["cluster"]
        if self.workload is not None:
            data["workload"] = self.workload
        if self.workloads:
            data["workloads"] = self.workloads
        try:
            return Scenario.model_validate(data)
        except ValidationError as err:
            raise ScenarioError(f"federation.sites.{self.name}: {_first(err)}") from err

    def has_jobs(self) -> bool:
        """Whether tenant jobs run on this site."""
        return self.workload is not None or bool(self.workloads)


class CloudFederation(FederationScenario):
    """The federation of one cloud: sites that carry their own jobs."""

    sites: tuple[CloudSite, ...] = Field(min_length=1)


class CloudVm(VmSpec):
    """A VM of one cloud: `cloud` names its site, `host` a host of that site, `network` the
    federated network it is attached to (its identity travels with it)."""

    network: str = Field(min_length=1)


class CloudMobility(Calibrated):
    """VMs on the sites and their migrations; `admission` per destination site; whether a VM
    on an `l3-routed` network may be renumbered when it moves."""

    vms: tuple[CloudVm, ...] = ()
    migrations: tuple[MigrationJob, ...] = ()
    admission: dict[str, Admission] = Field(default_factory=dict)
    allow_renumbering: bool = False


#: Telemetry sample period: a fault of 100 ms spans at least one sample instant.
DEFAULT_TELEMETRY_SAMPLE_S = 0.05


class Telemetry(_Model):
    """What the cloud's operations data samples: every flow's rate every `sample` (stored
    when it changes) and the NIC counters over the same intervals."""

    sample: Annotated[float, BeforeValidator(parse_time), Field(gt=0, le=60)] = DEFAULT_TELEMETRY_SAMPLE_S


class CloudScenario(_Model):
    """A whole cloud: federated sites with their jobs, the routing strategy of every fabric,
    the repair model, the VMs that move between sites, and the run's limits."""

    name: str = Field("cloud", min_length=1)
    seed: int = Field(1, ge=0, lt=2**63)
    routing: Routing = Field(default_factory=Routing)
    reaction: Reaction = Field(default_factory=Reaction)
    federation: CloudFederation
    mobility: CloudMobility = Field(default_factory=CloudMobility)
    limits: Limits = Field(default_factory=Limits)
    telemetry: Telemetry = Field(default_factory=Telemetry)

    def site_index(self, name: str) -> int:
        """The index of site `name` (ScenarioError when there is none)."""
        for i, site in enumerate(self.federation.sites):
            if site.name == name:
                return i
        raise ScenarioError(f"no site named {name!r}")

    def federation_scenario(self) -> FederationScenario:
        """The federation alone, as `cloudtwin federate` reads it."""
        return self.federation

    @model_validator(mode="after")
    def _consistent(self) -> CloudScenario:
        _check_sites(self)
        _check_vms(self)
        _check_migrations(self)
        return self


def _check_sites(cloud: CloudScenario) -> None:
    if "limits" in cloud.federation.model_fields_set:
        raise ValueError("federation.limits: a cloud's limits are its own (limits: at the top level)")
    names = [s.name for s in cloud.federation.sites]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ValueError(f"federation.sites.{i}.name: duplicate site {name!r}")
    for i, fault in enumerate(cloud.federation.gateway_faults):
        if fault.site not in names:
            raise ValueError(
                f"federation.gateway_faults.{i}.site: unknown site {fault.site!r} (sites: {', '.join(names)})"
            )
    for name in cloud.mobility.admission:
        if name not in names:
            raise ValueError(f"mobility.admission.{name}: unknown site {name!r}")


def _hosts_of(site: CloudSite) -> int:
    return site.site_scenario(0, Routing(), Reaction(), Limits()).host_count


def _check_vms(cloud: CloudScenario) -> None:
    sites = {s.name: s for s in cloud.federation.sites}
    networks = {n.name: n for n in cloud.federation.networks}
    seen: set[str] = set()
    for i, vm in enumerate(cloud.mobility.vms):
        if vm.name in seen:
            raise ValueError(f"mobility.vms.{i}.name: duplicate VM {vm.name!r}")
        seen.add(vm.name)
        if vm.cloud not in sites:
            raise ValueError(
                f"mobility.vms.{i}.cloud: site {vm.cloud!r} is not in the federation ({', '.join(sites)})"
            )
        hosts = _hosts_of(sites[vm.cloud])
        if not 0 <= vm.host < hosts:
            raise ValueError(
                f"mobility.vms.{i}.host: host {vm.host} is outside site {vm.cloud!r} (0-{hosts - 1})"
            )
        if vm.clients:
            raise ValueError(f"mobility.vms.{i}.clients: clients of a VM are not modelled across sites yet")
        if vm.network not in networks:
            raise ValueError(f"mobility.vms.{i}.network: no federated network named {vm.network!r}")
        if vm.cloud not in networks[vm.network].sites:
            raise ValueError(
                f"mobility.vms.{i}.network: federated network {vm.network!r} does not reach site {vm.cloud!r}"
            )
        _check_tenant_host(i, vm, sites[vm.cloud], networks[vm.network].tenant)


def _check_tenant_host(i: int, vm: CloudVm, site: CloudSite, tenant: str) -> None:
    """A VM sits on a host of its network's tenant at its site (its port is in that tenant's overlay)."""
    hosts = [h for t in site.tenants if t.name == tenant for h in t.hosts]
    if vm.host not in hosts:
        where = f"hosts {_ranges(hosts)}" if hosts else "no hosts"
        raise ValueError(
            f"mobility.vms.{i}.host: host {vm.host} of site {site.name!r} is not a host of tenant {tenant!r} "
            f"(network {vm.network!r}); the tenant has {where} there"
        )


def _ranges(hosts: list[int]) -> str:
    """`0-5,8` for [0, 1, 2, 3, 4, 5, 8]."""
    parts, ordered = [], sorted(set(hosts))
    start = prev = ordered[0]
    for h in [*ordered[1:], None]:
        if h is not None and h == prev + 1:
            prev = h
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if h is not None:
            start = prev = h
    return ",".join(parts)


def _check_migrations(cloud: CloudScenario) -> None:
    vms = {vm.name: vm for vm in cloud.mobility.vms}
    networks = {n.name: n for n in cloud.federation.networks}
    sites = {s.name for s in cloud.federation.sites}
    moved: set[str] = set()
    for i, job in enumerate(cloud.mobility.migrations):
        if job.vm not in vms:
            raise ValueError(f"mobility.migrations.{i}.vm: unknown VM {job.vm!r}")
        if job.vm in moved:
            raise ValueError(
                f"mobility.migrations.{i}.vm: VM {job.vm!r} already migrates (one migration per VM)"
            )
        moved.add(job.vm)
        vm = vms[job.vm]
        if job.to not in sites:
            raise ValueError(f"mobility.migrations.{i}.to: site {job.to!r} is not in the federation")
        if job.to == vm.cloud:
            raise ValueError(f"mobility.migrations.{i}.to: VM {job.vm!r} already runs at {job.to!r}")
        network = networks[vm.network]
        if job.to not in network.sites:
            raise ValueError(
                f"mobility.migrations.{i}.to: sites {vm.cloud!r} and {job.to!r} are not joined by "
                f"federated network {network.name!r} (it joins {', '.join(network.sites)})"
            )
        if network.mode == "l3-routed" and not cloud.mobility.allow_renumbering:
            raise ValueError(
                f"mobility.migrations.{i}.to: federated network {network.name!r} is l3-routed, so "
                f"{job.vm!r} would get a new address at {job.to!r}; set mobility.allow_renumbering: true "
                "to allow it"
            )


def _first(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def is_cloud(data: object) -> bool:
    """Whether a parsed document is a one-cloud scenario (it has a `federation:` section)."""
    return isinstance(data, dict) and "federation" in data


def load_cloud(text: str, source: str = "<scenario>", overrides: Iterable[str] = ()) -> CloudScenario:
    """Validate YAML `text` (with overrides) into a CloudScenario, or one-line ScenarioError."""
    data, node = parse_yaml(text, source)
    data = apply_overrides(data, overrides)
    check_hosts(data, source)
    federation = data.get("federation")
    default_site_kinds(federation.get("sites") if isinstance(federation, dict) else None)
    try:
        return CloudScenario.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, data, node, source) from err

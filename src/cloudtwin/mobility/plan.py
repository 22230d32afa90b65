"""Quick what-if plans: a migration from flags alone, or each migration of a scenario on an idle path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cloudtwin.errors import MobilityError
from cloudtwin.mobility.calibration import MigrationCalibration, calibration_from_data
from cloudtwin.mobility.memory import VmMemory, place_working_set
from cloudtwin.mobility.options import DEFAULT_RESUME_S, MigrationOptions
from cloudtwin.mobility.precopy import MigrationResult, plan_migration
from cloudtwin.scenario.mobility import Calibrated, MigrationOptionsSpec, PlanRequest, VmSpec
from cloudtwin.scenario.model import Scenario

if TYPE_CHECKING:
    from cloudtwin.scenario.cloud import CloudScenario
    from cloudtwin.scenario.federation import WanLink

__all__ = [
    "ScenarioPlan",
    "calibration_of",
    "memory_of",
    "options_of",
    "plan_cloud",
    "plan_request",
    "plan_scenario",
    "scenario_nic_bps",
]


def memory_of(vm: VmSpec | PlanRequest) -> VmMemory:
    """The memory model of a VM (or of a flags-only request)."""
    data = vm.memory if vm.resident is None else vm.resident
    share = vm.working_set / data if data else 1.0
    layout, order = place_working_set(vm.working_set_at, vm.write_order, share)
    if isinstance(vm, PlanRequest):
        return VmMemory(
            vm.memory, vm.working_set, vm.dirty_rate, vm.resident, layout=layout, write_order=order
        )
    return VmMemory(
        memory_bytes=vm.memory,
        working_set_bytes=vm.working_set,
        dirty_rate_bps=vm.dirty_rate,
        resident_bytes=vm.resident,
        cold_set_bytes=vm.cold_set,
        cold_rate_bps=vm.cold_rate,
        trace_rate_bps=vm.trace,
        trace_interval_s=vm.trace_interval,
        layout=layout,
        write_order=order,
    )


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def options_of(
    spec: MigrationOptionsSpec,
    bandwidth_bps: float,
    rtt_s: float,
    calibration: MigrationCalibration | None = None,
) -> MigrationOptions:
    """Migration options from a scenario's (or flags') knobs and the path's bandwidth and
    RTT; the stop-and-copy rates, the path's buffer, the resume, set-up and sync times a
    migration does not set come from `calibration` when one is loaded."""
    cal = calibration
    final, resent, buffer, resume, setup, sync = (
        (cal.final_bandwidth_bps, cal.resent_bandwidth_bps, cal.socket_buffer_bytes, cal.resume_s,
         cal.setup_s, cal.sync_s)
        if cal is not None
        else (None, None, None, None, None, None)
    )
    return MigrationOptions(
        bandwidth_bps=bandwidth_bps,
        downtime_limit_s=spec.downtime_limit,
        max_bandwidth_bps=spec.max_bandwidth,
        final_bandwidth_bps=_first(spec.final_bandwidth, final),
        resent_bandwidth_bps=_first(spec.resent_bandwidth, resent),
        socket_buffer_bytes=_first(spec.socket_buffer, buffer) or 0.0,
        resume_s=_first(spec.resume, resume, DEFAULT_RESUME_S) or 0.0,
        setup_s=_first(spec.setup_time, setup) or 0.0,
        sync_s=_first(spec.sync_time, sync) or 0.0,
        overlay_update_s=spec.overlay_update,
        device_state_bytes=spec.device_state,
        auto_converge=spec.auto_converge,
        throttle_initial=spec.throttle_initial,
        throttle_increment=spec.throttle_increment,
        throttle_max=spec.throttle_max,
        throttle_trigger=spec.throttle_trigger,
        postcopy=spec.postcopy,
        xbzrle=spec.xbzrle,
        xbzrle_cache_bytes=spec.xbzrle_cache,
        xbzrle_ratio=spec.xbzrle_ratio,
        multifd_channels=spec.multifd_channels,
        policy=spec.policy,
        storage=spec.storage,
        max_rounds=spec.max_rounds,
        stall_rounds=spec.stall_rounds,
        timeout_s=spec.timeout,
        max_downtime_s=_first(spec.max_downtime, max(2.0, spec.downtime_limit)) or 2.0,
        downtime_step_s=_first(spec.downtime_step, spec.downtime_limit) or spec.downtime_limit,
        protected=spec.protected,
        stream_bps=spec.stream_bandwidth,
        rtt_s=rtt_s,
        syncs=spec.syncs,
        sync_period_s=spec.sync_period,
    )


def calibration_of(mobility: Calibrated) -> MigrationCalibration | None:
    """The migration profile a mobility section loads (None without one); MobilityError
    when its file was not read or is not a profile."""
    if mobility.calibration is None:
        return None
    data = mobility.calibration_data()
    if data is None:
        raise MobilityError(f"mobility.calibration: profile file {mobility.calibration} was not read "
                            "(profile files are read with the scenario file by the cloudtwin commands)")
    return calibration_from_data(data, f"mobility.calibration: {mobility.calibration}")


def plan_request(request: PlanRequest, calibration: MigrationCalibration | None = None) -> MigrationResult:
    """`cloudtwin migrate plan --memory ... --bandwidth ...`: constant bandwidth and dirty
    rate; `calibration`: a migration profile (`--calibration`)."""
    options = options_of(request, request.bandwidth, request.rtt, calibration)
    return plan_migration(memory_of(request), options, request.disk, request.disk_dirty_rate)


@dataclass(frozen=True)
class ScenarioPlan:
    """The plan of one migration of a scenario, on its path without other traffic."""

    vm: str
    source: str
    destination: str
    bandwidth_bps: float
    result: MigrationResult


def scenario_nic_bps(scenario: Scenario) -> float:
    """A host's NIC rate in the scenario's fabric."""
    fabric = scenario.fabric
    nic = scenario.hosts.nic_rate
    return float(nic if nic is not None else fabric.host_link)


def plan_scenario(scenario: Scenario) -> list[ScenarioPlan]:
    """Each migration of the scenario alone on its path (bottleneck: the host NIC or the WAN)."""
    mobility = scenario.mobility
    if not mobility.migrations:
        raise MobilityError("mobility.migrations: the scenario has no migration to plan")
    vms = {vm.name: vm for vm in mobility.vms}
    bandwidth = min(scenario_nic_bps(scenario), mobility.wan.bandwidth)
    rtt = 2 * mobility.wan.latency
    plans = []
    calibration = calibration_of(mobility)
    for job in mobility.migrations:
        vm = vms[job.vm]
        options = options_of(job, bandwidth, rtt, calibration)
        result = plan_migration(memory_of(vm), options, vm.disk, vm.disk_dirty_rate)
        plans.append(ScenarioPlan(job.vm, vm.cloud, job.to, bandwidth, result))
    return plans


def plan_cloud(cloud: CloudScenario) -> list[ScenarioPlan]:
    """Each migration of a one-cloud scenario alone on its path: the bottleneck of the two
    hosts' NICs, both sites' gateways and the WAN link between them; the WAN's round trip."""
    if not cloud.mobility.migrations:
        raise MobilityError("mobility.migrations: the cloud has no migration to plan")
    sites = {s.name: s for s in cloud.federation.sites}
    vms = {vm.name: vm for vm in cloud.mobility.vms}
    plans = []
    calibration = calibration_of(cloud.mobility)
    for i, job in enumerate(cloud.mobility.migrations):
        vm = vms[job.vm]
        wan = _wan(cloud, vm.cloud, job.to, i)
        rates = [wan.bandwidth]
        for name in (vm.cloud, job.to):
            site = sites[name]
            nic = site.hosts.nic_rate
            rates += [float(nic if nic is not None else site.fabric.host_link), site.gateway.rate_bps]
        bandwidth = float(min(rates))
        options = options_of(job, bandwidth, 2 * wan.latency, calibration)
        result = plan_migration(memory_of(vm), options, vm.disk, vm.disk_dirty_rate)
        plans.append(ScenarioPlan(job.vm, vm.cloud, job.to, bandwidth, result))
    return plans


def _wan(cloud: CloudScenario, a: str, b: str, index: int) -> WanLink:
    for link in cloud.federation.wan:
        if set(link.between) == {a, b}:
            return link
    raise MobilityError(
        f"mobility.migrations.{index}.to: no WAN link joins {a!r} and {b!r} directly; plan it with "
        "`cloudtwin migrate run`, which routes it across the federation"
    )

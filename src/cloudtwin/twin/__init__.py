"""The one place a run is assembled: the kernel (`Run`, `Driver`), what a run needs prepared
once per scenario and strategy (`Prepared`), jobs in engine form (the job registry and the
workbench), the drivers (live migrations, federated traffic) and the assemblies (fault-free,
faulted, migrations, the whole cloud)."""

from cloudtwin.twin.assembly import JobsRun, run_jobs, run_migrations, run_scenario_jobs
from cloudtwin.twin.faulted import FaultedRun, run_faulted, simulate_faulted
from cloudtwin.twin.federation import FederationRun, simulate_federation
from cloudtwin.twin.jobs import (
    CollectiveJobRun,
    JobBuilder,
    JobInfo,
    JobPart,
    JobRequest,
    Workbench,
    build_job,
    build_workbench,
    job_kinds,
    register_job,
    scenario_jobs,
)
from cloudtwin.twin.migration import (
    MigrationDriver,
    MigrationOutcome,
    MigrationPaths,
    MigrationRun,
    VmMigration,
)
from cloudtwin.twin.migration_paths import FabricPaths, fabric_migrations
from cloudtwin.twin.preparation import Prepared, prepare, resolve_strategy
from cloudtwin.twin.rings import DataParallelRings, HplRings, nic_limited_capacity
from cloudtwin.twin.routing import route_flows, tenant_groups, tenant_name, tenant_of_host
from cloudtwin.twin.run import Driver, EngineJobs, Run, RunHistory
from cloudtwin.twin.traffic import TrafficDriver

__all__ = [
    "CollectiveJobRun",
    "DataParallelRings",
    "Driver",
    "EngineJobs",
    "FabricPaths",
    "FaultedRun",
    "FederationRun",
    "HplRings",
    "JobBuilder",
    "JobInfo",
    "JobPart",
    "JobRequest",
    "JobsRun",
    "MigrationDriver",
    "MigrationOutcome",
    "MigrationPaths",
    "MigrationRun",
    "Prepared",
    "Run",
    "RunHistory",
    "TrafficDriver",
    "VmMigration",
    "Workbench",
    "build_job",
    "build_workbench",
    "fabric_migrations",
    "job_kinds",
    "nic_limited_capacity",
    "prepare",
    "register_job",
    "resolve_strategy",
    "route_flows",
    "run_faulted",
    "run_jobs",
    "run_migrations",
    "run_scenario_jobs",
    "scenario_jobs",
    "simulate_faulted",
    "simulate_federation",
    "tenant_groups",
    "tenant_name",
    "tenant_of_host",
]

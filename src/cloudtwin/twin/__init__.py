"""The one place a run is assembled: jobs in engine form (the job registry and the
workbench), routing of a job's flows, fault-free and faulted runs on the engine."""

from cloudtwin.twin.faulted import FaultedRun, plan_faulted, simulate_faulted
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
from cloudtwin.twin.migration import MigrationDriver, MigrationRun, VmMigration
from cloudtwin.twin.rings import DataParallelRings, HplRings, nic_limited_capacity
from cloudtwin.twin.routing import route_flows, tenant_groups, tenant_name, tenant_of_host
from cloudtwin.twin.run import (
    Driver,
    EngineJobs,
    JobsRun,
    Run,
    engine_jobs,
    run_flows,
    run_jobs,
    run_migrations,
    run_scenario_jobs,
    simulate_jobs,
)

__all__ = [
    "CollectiveJobRun",
    "DataParallelRings",
    "Driver",
    "EngineJobs",
    "FaultedRun",
    "FederationRun",
    "HplRings",
    "JobBuilder",
    "JobInfo",
    "JobPart",
    "JobRequest",
    "JobsRun",
    "MigrationDriver",
    "MigrationRun",
    "Run",
    "VmMigration",
    "Workbench",
    "build_job",
    "build_workbench",
    "engine_jobs",
    "job_kinds",
    "nic_limited_capacity",
    "plan_faulted",
    "register_job",
    "route_flows",
    "run_flows",
    "run_jobs",
    "run_migrations",
    "run_scenario_jobs",
    "scenario_jobs",
    "simulate_faulted",
    "simulate_federation",
    "simulate_jobs",
    "tenant_groups",
    "tenant_name",
    "tenant_of_host",
]

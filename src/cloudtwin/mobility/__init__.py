"""Live VM migration between clouds: the pre-copy model, the insularity protocol, identity kept."""

from cloudtwin.mobility.memory import PAGE_BYTES, VmMemory
from cloudtwin.mobility.options import MigrationOptions, Policy, StorageMode
from cloudtwin.mobility.precopy import Migration, MigrationResult, Transfer, plan_migration

__all__ = [
    "PAGE_BYTES",
    "Migration",
    "MigrationOptions",
    "MigrationResult",
    "Policy",
    "StorageMode",
    "Transfer",
    "VmMemory",
    "plan_migration",
]

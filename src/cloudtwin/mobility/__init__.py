"""Live VM migration between clouds: the pre-copy model, the insularity protocol, identity kept."""

from cloudtwin.mobility.calibration import MigrationCalibration, calibration_from_data
from cloudtwin.mobility.memory import PAGE_BYTES, VmMemory
from cloudtwin.mobility.options import MigrationOptions, Policy, StorageMode
from cloudtwin.mobility.precopy import Migration, MigrationResult, PathEvent, Round, Transfer, plan_migration

__all__ = [
    "PAGE_BYTES",
    "Migration",
    "MigrationCalibration",
    "MigrationOptions",
    "MigrationResult",
    "PathEvent",
    "Policy",
    "Round",
    "StorageMode",
    "Transfer",
    "VmMemory",
    "calibration_from_data",
    "plan_migration",
]

"""Parameter sweeps: a command over the product (or zip) of varied scenario keys, on a
local process pool or a Ray cluster, resumable, with every result streamed into the store.

Names are imported on first use (`cloudtwin.lazy_exports`): `cloudtwin sweep --help` reads
the check limit without importing the simulator that a sweep's points run."""

from typing import TYPE_CHECKING

from cloudtwin import lazy_exports

if TYPE_CHECKING:
    from cloudtwin.sweep.check import CHECK_LIMIT_S, Checked, check_plan
    from cloudtwin.sweep.executors import Executor, Outcome, PoolExecutor, SerialExecutor
    from cloudtwin.sweep.points import SEED, Plan, Point, point_key
    from cloudtwin.sweep.runner import SweepRun, run_points
    from cloudtwin.sweep.summary import Group, Summary, interval95, metric_value, summarize
    from cloudtwin.sweep.task import COMMANDS, Command, Task, default_metric
    from cloudtwin.sweep.values import Vary, parse_vary, split_values

__all__ = [
    "CHECK_LIMIT_S",
    "COMMANDS",
    "SEED",
    "Checked",
    "Command",
    "Executor",
    "Group",
    "Outcome",
    "Plan",
    "Point",
    "PoolExecutor",
    "SerialExecutor",
    "Summary",
    "SweepRun",
    "Task",
    "Vary",
    "check_plan",
    "default_metric",
    "interval95",
    "metric_value",
    "parse_vary",
    "point_key",
    "run_points",
    "split_values",
    "summarize",
]
__getattr__, __dir__ = lazy_exports(__name__)

"""nccl-tests busbw of the collective jobs of a run."""

from __future__ import annotations

import numpy as np

from cloudtwin.engine.simulator import SimResult
from cloudtwin.evaluation.results import Busbw, JobBusbw
from cloudtwin.scenario.model import Scenario
from cloudtwin.twin.jobs import Workbench

__all__ = ["collective_busbw"]


def collective_busbw(scenario: Scenario, bench: Workbench, result: SimResult) -> Busbw | None:
    """busbw (GB/s) per collective job and overall, or None when no job is a collective.

    Each job's time runs from its start to its last flow's finish; algbw = size / time
    and busbw = algbw x the nccl-tests factor of its op and rank count. Overall: jobs of
    one op and size as nccl-tests reports them (size over the mean time), else the mean.
    """
    if not bench.collectives:
        return None
    from cloudtwin.workloads.collective import bus_factor

    per_job: dict[str, JobBusbw] = {}
    for run in bench.collectives:
        finish = result.finish_s[run.flows]
        job = np.asarray(run.plan.unrolled.job)
        for local, global_job in enumerate(run.jobs):
            time_s = float(finish[job == local].max()) - run.start_s
            algbw = run.workload.size / time_s / 1e9
            ranks = run.plan.jobs[local].size
            per_job[bench.jobs[global_job].name] = JobBusbw(
                op=run.workload.op,
                size_bytes=int(run.workload.size),
                ranks=int(ranks),
                time_s=time_s,
                algbw_GBps=algbw,
                busbw_GBps=algbw * bus_factor(run.workload.op, ranks),
            )
    values = list(per_job.values())
    sizes = {v.size_bytes for v in values}
    if len(sizes) == 1 and len({v.op for v in values}) == 1:
        # as `cloudtwin nccl-tests` reports several tenants' jobs: size over the mean time
        algbw = sizes.pop() / float(np.mean([v.time_s for v in values])) / 1e9
        factor = float(np.mean([v.busbw_GBps / v.algbw_GBps for v in values]))
        busbw = algbw * factor
    else:
        algbw = float(np.mean([v.algbw_GBps for v in values]))
        busbw = float(np.mean([v.busbw_GBps for v in values]))
    return Busbw(busbw_GBps=busbw, algbw_GBps=algbw, per_job=per_job)

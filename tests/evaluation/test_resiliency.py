"""Dip and recovery on hand-built step functions (evaluation/resiliency.py)."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.engine.simulator import SimResult
from cloudtwin.evaluation.resiliency import fault_outcomes
from cloudtwin.faults.plan import RepairPlan


def _run(times: list[float], gbps: list[float]) -> SimResult:
    t = np.array(times)
    return SimResult(
        start_s=np.array([0.0]),
        finish_s=np.array([t[-1]]),
        events=0,
        solves=0,
        timeline_s=t,
        timeline_bps=np.array(gbps) * 1e9,
    )


def _no_stall() -> RepairPlan:
    return RepairPlan([], [], np.array([0.0]), np.zeros((1, 1), bool), np.zeros((1, 1), bool))


def _outcome(baseline: SimResult, faulted: SimResult, at: float = 1.0):  # type: ignore[no-untyped-def]
    (outcome,) = fault_outcomes(
        baseline, faulted, _no_stall(), [at], np.array([0.0]), np.array([0.0])
    )
    return outcome


def test_a_dip_is_the_deepest_shortfall_before_recovery() -> None:
    # 100 Gb/s until the fault at 1 s, 40 from 1 s, 100 again from 2 s; the fault-free run
    # keeps 100 throughout: dip 1 - 40/100, recovered after 1 s
    baseline = _run([0.0, 4.0], [100.0, 0.0])
    faulted = _run([0.0, 1.0, 2.0, 4.0], [100.0, 40.0, 100.0, 0.0])
    outcome = _outcome(baseline, faulted)
    assert outcome.dip == pytest.approx(0.6)
    assert outcome.recovered and outcome.time_to_recover_s == pytest.approx(1.0)


def test_a_step_boundary_a_rounding_error_apart_is_not_a_dip() -> None:
    # both runs pause (latency between pipeline steps) from 1.5 s to 1.6 s, the faulted
    # run's pause starting 1e-15 s earlier; a 30% dip from the fault until 1.2 s is all there is
    baseline = _run([0.0, 1.5, 1.6, 4.0], [100.0, 0.0, 100.0, 0.0])
    faulted = _run([0.0, 1.0, 1.2, 1.5 - 1e-15, 1.6, 4.0], [100.0, 70.0, 90.0, 0.0, 90.0, 0.0])
    outcome = _outcome(baseline, faulted)
    assert outcome.dip == pytest.approx(0.3)
    # 90 stays below 95% of 100 until the fault-free run pauses too (its rate is the
    # reference when lower): recovered at 1.5 s, the window ends there
    assert outcome.recovered and outcome.time_to_recover_s == pytest.approx(0.5)


def test_a_pause_in_the_faulted_run_alone_is_a_full_dip() -> None:
    baseline = _run([0.0, 4.0], [100.0, 0.0])
    faulted = _run([0.0, 1.0, 1.1, 4.0], [100.0, 0.0, 100.0, 0.0])
    outcome = _outcome(baseline, faulted)
    assert outcome.dip == pytest.approx(1.0)
    assert outcome.recovered and outcome.time_to_recover_s == pytest.approx(0.1)

"""The three-fold evaluation end to end (in-process): jobs, faults, repairs, the document."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from cloudtwin.engine import SimResult
from cloudtwin.errors import ScenarioError, WorkloadError
from cloudtwin.evaluation.evaluate import DEFAULT_FAULT_FRACTION, evaluate
from cloudtwin.evaluation.report import (
    conclusions,
    recommendation,
    render_markdown,
    results,
)
from cloudtwin.evaluation.resiliency import bytes_behind, step_value
from cloudtwin.evaluation.results import (
    Complexity,
    Performance,
    Resiliency,
    Results,
    StrategyResult,
    read_results,
)
from cloudtwin.scenario import load_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = """
name: small
seed: 3
fabric: {kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 2}
tenants:
  - {name: a, vni: 10, hosts: "0-3"}
  - {name: b, vni: 20, hosts: "4-7"}
workloads:
  - {name: first, tenants: a, pattern: shift, size: 256MiB}
  - {name: second, tenants: [b], pattern: permutation, size: 256MiB, start: 5ms}
faults:
  - {kind: link, target: leaf0-spine0, at: 4ms, until: 30ms}
  - {kind: random, count: 1, at: 2ms, until: 12ms}
"""


@pytest.fixture(scope="module")
def small_evaluation():
    return evaluate(load_scenario(SMALL), ["ecmp", "adaptive", "pinning"])


def test_jobs_run_per_tenant_with_their_own_start(small_evaluation) -> None:
    bench = small_evaluation.bench
    assert [j.name for j in bench.jobs] == ["first", "second"]
    flows = bench.connections
    assert set(flows.tenant[flows.job == 0].tolist()) == {0}
    assert set(flows.tenant[flows.job == 1].tolist()) == {1}
    np.testing.assert_allclose(flows.start_s[flows.job == 1], 0.005)
    for outcome in small_evaluation.outcomes:
        assert set(outcome.performance.per_job) == {"first", "second"}
        assert set(outcome.performance.per_tenant) == {"a", "b"}
        assert set(outcome.resiliency.job_slowdown) == {"first", "second"}
        second = outcome.connection_start_s[flows.job == 1]
        assert np.all(second >= 0.005)


def test_document_has_the_documented_keys(small_evaluation) -> None:
    document = results(small_evaluation).to_json()
    assert document["scenario"] == "small"
    assert list(document) == [
        "scenario", "seed", "fabric", "jobs", "faults", "default_faults", "reaction_timings_s",
        "first_strategy", "strategies", "conclusions", "recommendation",
    ]
    for name, strategy in document["strategies"].items():
        # no migrations, no collective: their keys are left out, not null
        assert list(strategy) == ["spec", "reaction", "performance", "resiliency", "complexity"], name
        assert "busbw_faulted" not in strategy["resiliency"]
        assert list(strategy["performance"])[:3] == ["scenario", "strategy", "flows"]
        assert list(strategy["performance"])[-2:] == ["busbw", "ratio_to_first"]
        res, cx = strategy["resiliency"], strategy["complexity"]
        for key in ("recovered", "time_to_recover_s", "dip", "bytes_delayed", "flows_affected"):
            assert key in res, (name, key)
        for key in (
            "score",
            "forwarding_entries",
            "rule_changes_per_fault",
            "controller",
            "host_cooperation",
        ):
            assert key in cx, (name, key)
        assert len(res["timeline"]["t_s"]) == len(res["timeline"]["faulted_gbps"]) > 2
    assert document["strategies"]["pinning"]["complexity"]["controller"] is True
    assert document["strategies"]["ecmp"]["complexity"]["controller"] is False
    assert "## Three-fold trade-off" in render_markdown(results(small_evaluation))


def test_the_document_reads_back_as_the_same_results(small_evaluation) -> None:
    document = results(small_evaluation).to_json()
    stored = json.loads(json.dumps(document))  # as the store keeps it
    assert json.dumps(Results.from_json(stored).to_json()) == json.dumps(document)
    assert json.dumps(read_results(stored).to_json()) == json.dumps(document)
    # a key no type describes (another version's figure) is refused, not dropped unseen
    stored["strategies"]["ecmp"]["resiliency"]["surprise_s"] = 1.0
    with pytest.raises(ValidationError, match=r"strategies\.ecmp\.resiliency\.surprise_s"):
        read_results(stored)


def test_same_seed_same_document() -> None:
    first = results(evaluate(load_scenario(SMALL), ["ecmp", "pinning"])).to_json()
    again = results(evaluate(load_scenario(SMALL), ["ecmp", "pinning"])).to_json()
    assert first == again


def test_a_scenario_without_faults_gets_one_random_cable_failure(make_scenario) -> None:
    scenario = make_scenario("fabric.leaves=4", "fabric.spines=2", "fabric.hosts_per_leaf=2")
    evaluation = evaluate(scenario, ["ecmp", "pinning"])
    assert evaluation.default_faults
    assert len(evaluation.faults) == 1 and len(evaluation.faults[0].links) == 2
    shortest = min(o.baseline.completion_s for o in evaluation.outcomes)
    assert evaluation.faults[0].at_s == pytest.approx(DEFAULT_FAULT_FRACTION * shortest)


def test_a_user_strategy_is_evaluated_like_the_builtins(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    evaluation = evaluate(load_scenario(SMALL), ["ecmp", "user_strategy:LowestSpine"])
    document = results(evaluation).to_json()
    assert list(document["strategies"]) == ["ecmp", "lowest-spine"]
    user = document["strategies"]["lowest-spine"]
    assert user["spec"] == "user_strategy:LowestSpine" and user["reaction"] == "protocol"
    assert set(user) >= {"performance", "resiliency", "complexity"}
    assert user["complexity"]["controller"] is True
    assert (
        user["performance"]["aggregate_gbps"]
        < document["strategies"]["ecmp"]["performance"]["aggregate_gbps"]
    )


def test_a_fault_that_never_ends_on_a_host_is_refused(make_scenario) -> None:
    scenario = load_scenario(
        SMALL.replace("at: 4ms, until: 30ms", "at: 4ms").replace(
            "kind: link, target: leaf0-spine0", "kind: nic, target: host0"
        )
    )
    with pytest.raises(ScenarioError, match="give it an until"):
        evaluate(scenario, ["ecmp"])


def test_training_jobs_are_not_evaluated() -> None:
    text = "name: t\nfabric: {kind: leaf-spine, leaves: 2, spines: 2}\nworkload: {kind: hpl}\n"
    with pytest.raises(WorkloadError, match="workload.kind: evaluate runs perftest and collective"):
        evaluate(load_scenario(text), ["ecmp"])


def _result(times: list[float], bps: list[float]) -> SimResult:
    return SimResult(
        np.zeros(1), np.array([times[-1]]), 0, 0, timeline_s=np.array(times), timeline_bps=np.array(bps)
    )


def test_step_values_and_bytes_behind() -> None:
    assert step_value(np.array([0.0, 1.0]), np.array([5.0, 2.0]), np.array([-1, 0, 0.5, 1, 3])).tolist() == [
        0,
        5,
        5,
        2,
        2,
    ]
    baseline = _result([0.0, 2.0], [8.0, 0.0])  # 16 bits by t=2
    faulted = _result([0.0, 1.0, 1.5, 2.5], [8.0, 0.0, 8.0, 0.0])  # stalled 1..1.5
    assert bytes_behind(baseline, faulted) == pytest.approx(0.5)  # 4 bits behind at t = 1.5 to 2


def test_conclusions_and_recommendation_follow_the_numbers() -> None:
    def strategy(gbps: float, score: float, recovered: bool = True, slowdown: float = 1.1) -> StrategyResult:
        # only the figures the verdicts read (model_construct: the rest left out)
        return StrategyResult.model_construct(
            performance=Performance.model_construct(aggregate_gbps=gbps, busbw=None),
            resiliency=Resiliency.model_construct(
                recovered=recovered,
                time_to_recover_s=0.1 if recovered else None,
                job_slowdown={"job": slowdown},
            ),
            complexity=Complexity.model_construct(score=score),
        )

    table = {"ecmp": strategy(50, 2), "spray": strategy(100, 4), "pinning": strategy(100, 8)}
    c = conclusions(table)
    assert c.all_resilient and c.pinning_fastest and c.pinning_most_complex
    assert recommendation(table).startswith("spray:")  # as fast, as robust, simpler
    table["spray"] = strategy(100, 4, slowdown=3.0)
    assert recommendation(table).startswith("pinning:")  # spray is hit harder by the faults
    assert "spray (3.00x)" in recommendation(table)
    table["spray"] = strategy(100, 4, recovered=False)
    c = conclusions(table)
    assert not c.all_resilient and "spray" in c.all_resilient_statement
    assert recommendation(table).startswith("pinning:")
    table["pinning"] = strategy(80, 1)
    c = conclusions(table)
    assert c.pinning_fastest is False and c.pinning_most_complex is False
    assert c.pinning_statement.startswith("does not hold")
    assert recommendation(table).startswith("pinning:")  # the best of those that recovered


MIXED = """
name: mixed
seed: 2
fabric: {kind: leaf-spine, leaves: 4, spines: 2, hosts_per_leaf: 2}
hosts: {gpus: 4}
tenants:
  - {name: ai, vni: 10, hosts: "0-3"}
  - {name: web, vni: 20, hosts: "4-7"}
workloads:
  - {name: ring, kind: collective, tenants: ai, size: 64MiB, channels: 2}
  - {name: rdma-test, tenants: web, pattern: permutation, size: 256MiB, start: 2ms}
faults:
  - {kind: link, target: leaf0-spine0, at: 1ms, until: 20ms}
"""


def test_collective_and_perftest_jobs_share_the_fabric() -> None:
    evaluation = evaluate(load_scenario(MIXED), ["ecmp", "pinning"])
    bench = evaluation.bench
    assert [(j.name, j.kind) for j in bench.jobs] == [("ring", "collective"), ("rdma-test", "perftest")]
    assert bench.dependencies is not None and bench.segments is not None
    # the perftest flows start at 2 ms and carry the path latency; the collective's do not
    perftest = bench.flow_job == 1
    assert np.all(bench.start_s[perftest] == pytest.approx(0.002)) and bench.latency_mask[perftest].all()
    assert not bench.latency_mask[~perftest].any()
    for outcome in evaluation.outcomes:
        busbw = outcome.performance.busbw
        assert busbw is not None and set(busbw.per_job) == {"ring"} and busbw.busbw_GBps > 0
        assert set(outcome.performance.per_job) == {"ring", "rdma-test"}
        assert set(outcome.performance.per_tenant) == {"ai", "web"}
        assert set(outcome.resiliency.job_slowdown) == {"ring", "rdma-test"}
        faulted = outcome.resiliency.busbw_faulted
        assert faulted is not None and faulted.busbw_GBps <= busbw.busbw_GBps * (1 + 1e-9)


def test_the_reports_timelines_share_one_scale_with_labelled_ticks(small_evaluation) -> None:
    import re

    from cloudtwin.evaluation.report import render_html

    page = render_html(results(small_evaluation))
    svgs = re.findall(r'<svg[^>]*class="timeline".*?</svg>', page, re.S)
    assert len(svgs) == 3
    scales = {re.search(r'data-y-max="([^"]+)" data-x-max="([^"]+)"', s).groups() for s in svgs}  # type: ignore[union-attr]
    assert len(scales) == 1, scales  # one rate range and one time span for every strategy
    ticks = {tuple(re.findall(r'class="ytick"[^>]*>([^<]+)<', s)) for s in svgs}
    assert len(ticks) == 1
    (labels,) = ticks
    assert len(labels) >= 3 and labels[0] == "0 Gbps" and all(t.endswith(" Gbps") for t in labels)
    bins = [s.resiliency.timeline_binned for s in results(small_evaluation).strategies.values()]
    peak = max(max(*b.faulted_gbps, *b.baseline_gbps) for b in bins)
    assert float(labels[-1].split()[0]) >= peak  # the top tick covers every curve
    assert all(len(re.findall(r'class="xtick"[^>]*>[^<]+ ms<', s)) >= 3 for s in svgs)
    # the wide complexity table scrolls in its own box instead of running off the page
    assert '<div class="wide"><table id="complexity">' in page

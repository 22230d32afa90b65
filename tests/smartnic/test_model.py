"""The NIC model: tier capacities by hand, placements, accounting, flow cache, storm, boot."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudtwin.errors import NicError, ScenarioError
from cloudtwin.scenario.nic import Nic, NicFunction
from cloudtwin.smartnic.boot import STAGES, SignedStage, boot_chain, provider_key, sign_stage, stage_images
from cloudtwin.smartnic.capacity import tier_capacity_bps, tier_packets_per_s
from cloudtwin.smartnic.flowcache import slow_path_share, storm
from cloudtwin.smartnic.offload import HostTraffic, account
from cloudtwin.smartnic.placement import plan_nics
from cloudtwin.smartnic.profiles import line_rate_pps


def test_bmv2_like_pipeline_moves_80_kpps_of_1500_bytes() -> None:
    plan = plan_nics(Nic(profile="bmv2-like"), 1)
    nic = plan.nics[0]
    assert tier_packets_per_s(nic, "pipeline", plan) == 80_000
    assert tier_capacity_bps(nic, "pipeline", plan) == pytest.approx(0.96e9)


def test_software_vswitch_host_tier_by_hand() -> None:
    plan = plan_nics(Nic(profile="software-vswitch", packet_size=1000), 1)
    # overlay 1000 + SG 400 + conntrack 700 + RL 200 cycles, plus 0.25 cycles/B x 1000 B
    cycles = 1000 + 400 + 700 + 200 + 250
    assert tier_packets_per_s(plan.nics[0], "host", plan) == pytest.approx(4 * 2.5e9 / cycles)
    assert tier_capacity_bps(plan.nics[0], "host", plan) == pytest.approx(4 * 2.5e9 / cycles * 8000)


def test_janus_pipeline_runs_at_line_rate() -> None:
    plan = plan_nics(Nic(profile="janus-100g", packet_size=64), 1)
    assert tier_capacity_bps(plan.nics[0], "pipeline", plan) == pytest.approx(100e9)
    assert 250e6 > line_rate_pps(100e9, 64) == pytest.approx(148.8e6, rel=1e-3)  # 250 Mpps covers 64 B frames


def test_packet_mix_averages_bytes_and_cycles() -> None:
    plan = plan_nics(Nic(profile="software-vswitch", packet_mix=((64, 1.0), (1500, 1.0))), 1)
    assert plan.mean_packet_bytes == pytest.approx(782)
    cycles = 2300 + 0.25 * 782
    assert tier_packets_per_s(plan.nics[0], "host", plan) == pytest.approx(1e10 / cycles)


@pytest.mark.parametrize(
    ("nic", "message"),
    [
        (
            Nic(profile="janus-100g", functions=(NicFunction(name="storage-initiator", tier="pipeline"),)),
            "nic.functions.0.tier: storage-initiator cannot run on the pipeline: NVMe-oF is a stateful",
        ),
        (
            Nic(profile="software-vswitch", functions=(NicFunction(name="overlay", tier="nic-cores"),)),
            "nic.functions.0.tier: profile software-vswitch has no embedded cores",
        ),
        (
            Nic(profile="bmv2-like", functions=(NicFunction(name="conntrack", tier="pipeline"),)),
            "conntrack cannot run on the pipeline",
        ),
    ],
)
def test_impossible_placements_are_refused(nic: Nic, message: str) -> None:
    with pytest.raises(NicError) as info:
        plan_nics(nic, 4)
    assert message in str(info.value)


def test_scenario_refuses_unknown_tier_and_hosts_outside() -> None:
    from tests.conftest import scenario_from

    with pytest.raises(ScenarioError, match="nic.functions.0.tier"):
        scenario_from("nic.profile=janus-100g", "nic.functions=[{name: overlay, tier: fpga}]")
    with pytest.raises(ScenarioError, match=r"nic.boot_faults.0.hosts: host 999 is outside"):
        scenario_from("nic.boot_faults=[{hosts: 999}]")


def test_offload_accounting_by_hand() -> None:
    # one host sending 1500 B packets at 10 Gbps, everything in host software vs overlay on the pipeline
    traffic = HostTraffic(
        np.array([1e9]), np.array([0.0]), np.array([10.0]), np.array([0.0]), np.array([10e9])
    )
    pps = 10e9 / (1500 * 8)
    offloaded = Nic(profile="janus-100g", functions=(NicFunction(name="overlay"),), new_flows_per_s=1000)
    report = account(plan_nics(offloaded, 1), traffic, ("host0",))
    setup = 1000 * 100_000 / 2.5e9  # slow-path set-up of 1000 new flows/s
    assert report.host_cores[0] == pytest.approx(setup)
    assert report.baseline_host_cores[0] == pytest.approx(pps * (1000 + 0.25 * 1500) / 2.5e9 + setup)
    assert report.pipeline_pps[0] == pytest.approx(pps)
    assert report.added_latency_s[0] == pytest.approx(1e-6)
    totals = report.totals()
    assert totals["host_cores_saved"] == pytest.approx(report.baseline_host_cores[0] - report.host_cores[0])


def test_basic_nics_cost_nothing() -> None:
    traffic = HostTraffic(np.ones(2), np.ones(2), np.ones(2), np.ones(2), np.full(2, 100e9))
    report = account(plan_nics(Nic(), 2), traffic, ("host0", "host1"))
    assert report.host_cores.sum() == 0 and report.totals()["host_cores_saved"] == 0


@given(st.floats(1.0, 1e7), st.floats(1.0, 1e7))
def test_slow_path_share_is_one_minus_r_over_rate(rate: float, insertions: float) -> None:
    share = slow_path_share(rate, insertions)
    assert 0.0 <= share < 1.0
    assert share == (pytest.approx(1 - insertions / rate) if rate > insertions else 0.0)


def test_storm_dips_then_recovers() -> None:
    result = storm(
        fast_bps=100e9,
        slow_bps=20e9,
        base_flows_per_s=10_000,
        storm_flows_per_s=190_000,
        insertions_per_s=100_000,
        start_s=0.05,
        duration_s=0.1,
        lifetime_s=0.01,
    )
    assert result.baseline_bps == pytest.approx(100e9)
    assert result.steady_slow_share == pytest.approx(0.5)
    # in the storm's steady state half the flows wait: 50 Gbps fast + min(50, 20) slow
    during = (result.time_s > 0.1) & (result.time_s < 0.15)
    assert np.median(result.throughput_bps[during]) == pytest.approx(70e9, rel=0.03)
    assert result.dip_bps == pytest.approx(30e9, rel=0.05)
    assert 0 < result.recovery_s <= 0.011  # the waiting flows end within one lifetime


def test_no_storm_below_the_insertion_rate() -> None:
    result = storm(100e9, 20e9, 1000, 50_000, 100_000, 0.01, 0.05, 0.01)
    assert result.dip_bps == pytest.approx(0.0, abs=1.0) and result.recovery_s == 0.0


@pytest.mark.parametrize("duration_s", [1e6, 1e9, math.inf, math.nan])
def test_a_storm_too_long_to_step_is_refused_with_its_estimate(duration_s: float) -> None:
    # duration: 1000000s asked for 10^10 steps and ended in an allocation traceback
    with pytest.raises(NicError, match=r"steps of 0.1 ms, more than the 300,000") as caught:
        storm(100e9, 20e9, 1000, 50_000, 100_000, 0.1, duration_s, 0.01)
    assert caught.value.field == "nic.storm.duration"


def _chain(seed: int = 1) -> tuple[list[SignedStage], object]:
    key = provider_key(seed)
    images = stage_images("janus-100g", "program text")
    return [sign_stage(key, name, images[name]) for name in STAGES], key.public_key()


def test_measured_boot_attests_a_signed_chain() -> None:
    stages, public = _chain()
    report = boot_chain("host0", stages, public)  # type: ignore[arg-type]
    assert report.attested and report.booted == STAGES and len(report.measurement) == 64
    again = boot_chain("host1", _chain()[0], public)  # type: ignore[arg-type]
    assert again.measurement == report.measurement  # same images, same measurement


@pytest.mark.parametrize("stage", STAGES)
def test_a_tampered_or_unsigned_stage_stops_the_chain(stage: str) -> None:
    stages, public = _chain()
    i = STAGES.index(stage)
    tampered = list(stages)
    tampered[i] = SignedStage(stage, stages[i].image + b"!", stages[i].signature)
    report = boot_chain("host0", tampered, public)  # type: ignore[arg-type]
    assert not report.attested and report.failed_stage == stage and report.booted == STAGES[:i]
    unsigned = list(stages)
    unsigned[i] = SignedStage(stage, stages[i].image, None)
    assert boot_chain("host0", unsigned, public).reason == "unsigned"  # type: ignore[arg-type]


def test_a_chain_signed_by_another_key_fails() -> None:
    stages, _ = _chain(seed=1)
    _, other = _chain(seed=2)
    assert boot_chain("host0", stages, other).failed_stage == "firmware"  # type: ignore[arg-type]

"""The pre-copy model against a closed form derived here, and its policies, options and bad input."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from tests.cli.cli_helpers import cloudtwin

from cloudtwin.errors import MobilityError
from cloudtwin.mobility import MigrationOptions, VmMemory, plan_migration

MIB = 1 << 20
GIB = 1 << 30
F = 4104 / 4096  # a page and its 8-byte header


def closed_form(
    memory: float,
    working_set: float,
    rate: float,
    bandwidth: float,
    limit: float,
    final: float,
    resume: float,
    resident: float | None = None,
) -> dict[str, float] | None:
    """Rounds, total time, downtime and bytes for constant bandwidth and dirty rate (bytes/s).

    Round 0 sends the resident memory at F per byte and each zero page as a 9-byte marker,
    S0 = resident F + (memory - resident) / 4096 x 9, in t0 = S0 / B. The first dirty set
    is D1 = min(W, r t0); while the working set does not cap it, each later set is
    rho = r F / B times the one before, so D_i = D1 rho^(i-1). The VM stops at the first n
    with D_n <= B x limit. None when it does not converge (rho >= 1 with D1 above the threshold).
    """
    resident = memory if resident is None else resident
    s0 = resident * F + (memory - resident) / 4096 * 9
    t0 = s0 / bandwidth
    d1 = min(working_set, rate * t0)
    threshold = bandwidth * limit
    rho = rate * F / bandwidth
    if d1 <= threshold:
        n = 1
    elif rho >= 1:
        return None
    else:
        n = 1 + math.ceil(math.log(threshold / d1) / math.log(rho))
    live = d1 * (1 - rho ** (n - 1)) / (1 - rho) if n > 1 else 0.0
    last = d1 * rho ** (n - 1)
    downtime = last * F / final + resume
    return {
        "rounds": n,
        "total_time_s": t0 + live * F / bandwidth + downtime,
        "downtime_s": downtime,
        "bytes": s0 + live * F + last * F,
    }


def _plan(
    memory: int,
    working_set: int,
    rate: float,
    bandwidth: float,
    limit: float = 0.3,
    final: float | None = None,
    resident: int | None = None,
    syncs: str = "rounds",
):
    vm = VmMemory(
        memory_bytes=memory, working_set_bytes=working_set, dirty_rate_bps=rate * 8, resident_bytes=resident
    )
    # an unprotected stream: the path's bandwidth alone limits it, as in the closed form
    options = MigrationOptions(
        bandwidth_bps=bandwidth * 8,
        downtime_limit_s=limit,
        protected=False,
        final_bandwidth_bps=None if final is None else final * 8,
        syncs=syncs,  # type: ignore[arg-type]
    )
    return plan_migration(vm, options)


def _assert_matches(plan, expected: dict[str, float]) -> None:
    assert plan.converged
    assert plan.rounds == expected["rounds"]
    for key in ("total_time_s", "downtime_s", "bytes"):
        assert getattr(plan, key) == pytest.approx(expected[key], rel=1e-9, abs=1e-12), key


def test_issue_example_equals_closed_form() -> None:
    plan = _plan(4 * GIB, GIB, 50 * MIB, 1e9 / 8)
    _assert_matches(plan, closed_form(4 * GIB, GIB, 50 * MIB, 1e9 / 8, 0.3, 1e9 / 8, 0.01))
    assert plan.rounds == 5


def test_idle_vm_is_one_round_and_memory_over_bandwidth() -> None:
    plan = _plan(GIB, 0, 0.0, 125e6)
    assert plan.rounds == 1
    assert plan.total_time_s == pytest.approx(GIB * F / 125e6 + 0.01, rel=1e-12)
    assert plan.downtime_s == pytest.approx(0.01)


@settings(max_examples=200, deadline=None)
@given(
    memory_mib=st.integers(64, 65536),
    ws_share=st.floats(0.0, 1.0),
    rate_share=st.floats(0.0, 0.95),
    bandwidth=st.floats(10e6, 10e9),
    limit=st.floats(0.01, 2.0),
    final_share=st.floats(0.5, 20.0),
    resident_share=st.sampled_from([None, 0.0, 0.25, 0.5, 0.9]),
)
def test_plan_equals_closed_form(
    memory_mib: int,
    ws_share: float,
    rate_share: float,
    bandwidth: float,
    limit: float,
    final_share: float,
    resident_share: float | None,
) -> None:
    memory = memory_mib * MIB
    resident = None if resident_share is None else int(memory_mib * resident_share) * MIB
    working_set = int(memory * ws_share)
    rate = bandwidth * rate_share
    final = bandwidth * final_share
    expected = closed_form(memory, working_set, rate, bandwidth, limit, final, 0.01, resident)
    assume(expected is not None and expected["rounds"] < 30 and expected["total_time_s"] < 3600)
    s0 = memory * F if resident is None else resident * F + (memory - resident) / 4096 * 9
    d1 = min(working_set, rate * s0 / bandwidth)
    rho = rate * F / bandwidth
    if d1 > bandwidth * limit:  # keep away from a round boundary where rounding could decide
        exponent = math.log(bandwidth * limit / d1) / math.log(rho)
        assume(abs(exponent - round(exponent)) > 1e-6)
    _assert_matches(_plan(memory, working_set, rate, bandwidth, limit, final, resident), expected)


def test_cli_plan_json_equals_closed_form() -> None:
    done = cloudtwin(
        "migrate",
        "plan",
        "--memory",
        "4GiB",
        "--dirty-rate",
        "50MiB/s",
        "--working-set",
        "1GiB",
        "--bandwidth",
        "1Gbps",
        "--downtime-limit",
        "300ms",
        "--final-bandwidth",
        "5Gbps",
        "--syncs",
        "rounds",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    expected = closed_form(4 * GIB, GIB, 50 * MIB, 1e9 / 8, 0.3, 5e9 / 8, 0.01)
    assert result["converged"] is True
    assert result["rounds"] == expected["rounds"]
    for key in ("total_time_s", "downtime_s", "bytes"):
        assert result[key] == pytest.approx(expected[key], rel=1e-9)
    assert [e["phase"] for e in result["timeline"]][-1] == "stop-and-copy"
    assert sum(e["bytes"] for e in result["timeline"]) == pytest.approx(result["bytes"], rel=1e-12)


def qemu_syncs(
    resident: float, working_set: float, rate: float, bandwidth: float, limit: float, period: float = 0.1
) -> list[dict[str, float]]:
    """QEMU's syncs for constant bandwidth and dirty rate (bytes/s), from the documented rules.

    A transfer sends whole periods (bandwidth x period bytes each) until less than the
    threshold T = bandwidth x limit is left unsent; the sync then finds the unsent part
    plus the bytes dirtied during the transfer (min(W, r t)) less those that were still
    waiting: in the first pass the unsent share of the data (the working set spread evenly
    over it), later the unsent share of the working set. Returns each sync's pending set
    and the transfer before it, until the pending set fits T.
    """
    threshold, chunk = bandwidth * limit, bandwidth * period
    pending, first, syncs = resident, True, []
    while pending > threshold and len(syncs) < 50:
        send = min(pending, (math.floor((pending - threshold) / chunk) + 1) * chunk)
        unsent = pending - send
        seconds = send * F / bandwidth
        waiting = unsent / resident if first else min(1.0, unsent / working_set)
        pending = unsent + min(working_set, rate * seconds) * (1 - waiting)
        syncs.append({"send": send, "seconds": seconds, "pending": pending})
        first = False
    return syncs


def test_qemu_syncs_by_hand() -> None:
    # 400 MB of data at 100 MB/s, limit 0.3 s: T = 30 MB, periods of 10 MB. The first pass
    # sends 38 periods (380 MB; 20 MB left < T) in 3.8 F s; it dirtied 38 F MB of the
    # 100 MB working set, of which 20/400 were still waiting: pending 20 + 0.95 x 38 F.
    # That is 56.17 MB > T: 3 periods (30 MB) in 0.3 F s leave 26.17 MB, and the 3 F MB
    # dirtied meanwhile add (1 - 26.17/100) of themselves: 28.39 MB <= T, so it stops.
    mb = 1e6
    p1 = 20 * mb + 0.95 * 38 * F * mb
    u1 = p1 - 30 * mb
    p2 = u1 + 3 * F * mb * (1 - u1 / (100 * mb))
    assert p2 < 30 * mb
    vm = VmMemory(memory_bytes=400_000_000, working_set_bytes=100_000_000, dirty_rate_bps=80e6)
    options = MigrationOptions(bandwidth_bps=800e6, protected=False, final_bandwidth_bps=8e9)
    plan = plan_migration(vm, options)
    assert plan.converged and plan.rounds == 2
    expected_bytes = [380 * mb * F, 30 * mb * F, p2 * F]
    assert [e.bytes for e in plan.timeline] == pytest.approx(expected_bytes, rel=1e-12)
    assert plan.downtime_s == pytest.approx(p2 * F / 1e9 + 0.01, rel=1e-12)
    assert plan.total_time_s == pytest.approx(4.1 * F + p2 * F / 1e9 + 0.01, rel=1e-12)
    assert plan.bytes == pytest.approx((410 * mb + p2) * F, rel=1e-12)
    by_rules = qemu_syncs(400 * mb, 100 * mb, 10 * mb, 100 * mb, 0.3)
    assert by_rules[-1]["pending"] == pytest.approx(p2, rel=1e-12)


def test_setup_and_sync_times_by_hand() -> None:
    # the case above with a 20 ms set-up and 50 ms per sync: the first pass starts at 20 ms
    # and dirties as before; the second round waits for the 50 ms sync, and the VM dirties
    # through it: 10 MB/s x (0.05 + 0.3 F) s, of which (1 - 26.17/100) is new. The sync that
    # stops it takes another 50 ms before the pause; the downtime is as without them.
    mb = 1e6
    p1 = 20 * mb + 0.95 * 38 * F * mb
    u1 = p1 - 30 * mb
    p2 = u1 + (0.05 + 0.3 * F) * 10 * mb * (1 - u1 / (100 * mb))
    assert p2 < 30 * mb
    vm = VmMemory(memory_bytes=400_000_000, working_set_bytes=100_000_000, dirty_rate_bps=80e6)
    options = MigrationOptions(bandwidth_bps=800e6, protected=False, final_bandwidth_bps=8e9,
                               setup_s=0.02, sync_s=0.05)
    plan = plan_migration(vm, options)
    assert plan.converged and plan.rounds == 2
    assert [e.bytes for e in plan.timeline] == pytest.approx([380 * mb * F, 30 * mb * F, p2 * F], rel=1e-12)
    starts = [0.02, 0.07 + 3.8 * F, 0.12 + 4.1 * F]
    assert [e.start_s for e in plan.timeline] == pytest.approx(starts, rel=1e-12)
    assert plan.downtime_s == pytest.approx(p2 * F / 1e9 + 0.01, rel=1e-12)
    assert plan.total_time_s == pytest.approx(0.12 + 4.1 * F + p2 * F / 1e9 + 0.01, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    memory_mib=st.integers(64, 16384),
    ws_share=st.floats(0.01, 1.0),
    rate_share=st.floats(0.0, 0.9),
    bandwidth=st.floats(10e6, 10e9),
    limit=st.floats(0.01, 2.0),
    final_share=st.floats(0.5, 20.0),
)
def test_plan_equals_qemu_syncs(
    memory_mib: int, ws_share: float, rate_share: float, bandwidth: float, limit: float, final_share: float
) -> None:
    memory = memory_mib * MIB
    working_set = max(1.0, memory * ws_share)
    rate = bandwidth * rate_share
    syncs = qemu_syncs(memory, working_set, rate, bandwidth, limit)
    assume(0 < len(syncs) < 20 and sum(s["seconds"] for s in syncs) < 3600)
    # keep away from period boundaries and a stall, where rounding could decide
    pendings = [memory] + [s["pending"] for s in syncs]
    assume(all(b < a for a, b in zip(pendings[1:], pendings[2:], strict=False)))
    for p in pendings:
        ratio = (p - bandwidth * limit) / (bandwidth * 0.1)
        assume(p <= bandwidth * limit or abs(ratio - round(ratio)) > 1e-6)
    assume(abs(syncs[-1]["pending"] - bandwidth * limit) > 1e-6 * bandwidth * limit)
    plan = _plan(memory, int(working_set), rate, bandwidth, limit, bandwidth * final_share, syncs="qemu")
    expected = qemu_syncs(memory, int(working_set), rate, bandwidth, limit)
    last = expected[-1]["pending"]
    assert plan.converged and plan.rounds == len(expected)
    assert plan.bytes == pytest.approx((sum(s["send"] for s in expected) + last) * F, rel=1e-9)
    downtime = last * F / (bandwidth * final_share) + 0.01
    assert plan.downtime_s == pytest.approx(downtime, rel=1e-9)
    assert plan.total_time_s == pytest.approx(sum(s["seconds"] for s in expected) + downtime, rel=1e-9)


def test_dirtying_faster_than_sending_does_not_converge_and_aborts() -> None:
    plan = _plan(GIB, 512 * MIB, 200 * MIB, 100 * MIB)
    assert not plan.converged and plan.outcome == "aborted"
    assert plan.downtime_s == 0.0
    # round 0, then two rounds that resend the whole working set without shrinking it
    assert plan.rounds == 3
    assert plan.bytes == pytest.approx((GIB + 2 * 512 * MIB) * F)


def _policy(policy: str, **extra: object):
    vm = VmMemory(memory_bytes=4 * GIB, working_set_bytes=GIB, dirty_rate_bps=200 * MIB * 8)
    return plan_migration(vm, MigrationOptions(bandwidth_bps=1e9, policy=policy, **extra))  # type: ignore[arg-type]


def test_auto_converge_throttles_by_qemu_steps_until_it_converges() -> None:
    plan = _policy("auto-converge")
    assert plan.converged
    throttles = sorted({round(e.throttle, 6) for e in plan.timeline} - {0.0})
    assert throttles[0] == pytest.approx(0.2)
    assert all(b - a == pytest.approx(0.1) for a, b in zip(throttles, throttles[1:], strict=False))
    # converged once the throttled rate dropped below what the link sends
    assert 200 * MIB * 8 * (1 - plan.max_throttle) < 1e9


def test_postcopy_pauses_only_for_the_switchover() -> None:
    plan = _policy("postcopy")
    assert plan.converged
    assert plan.downtime_s == pytest.approx(0.01)
    assert plan.timeline[-1].phase == "postcopy"
    assert plan.postcopy_faults > 0 and 0 < plan.postcopy_stall_s <= plan.timeline[-1].end_s


def test_raise_downtime_raises_step_by_step_then_gives_up() -> None:
    plan = _policy("raise-downtime")
    limits = [e.downtime_limit_s for e in plan.timeline]
    assert limits == sorted(limits) and limits[-1] == pytest.approx(2.0)
    assert not plan.converged  # 1 GiB never fits 2 s at 1 Gbps


def test_raise_downtime_converges_when_a_larger_limit_fits() -> None:
    vm = VmMemory(memory_bytes=GIB, working_set_bytes=64 * MIB, dirty_rate_bps=400 * MIB * 8)
    plan = plan_migration(vm, MigrationOptions(bandwidth_bps=1e9, policy="raise-downtime"))
    assert plan.converged and plan.downtime_limit_s > 0.3
    assert plan.stop_copy_s <= plan.downtime_limit_s


def test_bandwidth_cap_applies_to_live_rounds_only() -> None:
    vm = VmMemory(memory_bytes=GIB, working_set_bytes=64 * MIB, dirty_rate_bps=10 * MIB * 8)
    plan = plan_migration(vm, MigrationOptions(bandwidth_bps=10e9, max_bandwidth_bps=1e9, protected=False))
    bulk = plan.timeline[0]
    # whole 100 ms periods at the cap until less than 1 Gbps x 0.3 s is left unsent
    sent = (math.floor((GIB - 37.5e6) / 12.5e6) + 1) * 12.5e6
    assert bulk.bytes == pytest.approx(sent * F)
    assert bulk.end_s == pytest.approx(sent * F * 8 / 1e9)
    stop = plan.timeline[-1]
    assert stop.end_s - stop.start_s == pytest.approx(stop.bytes * 8 / 10e9)


def test_xbzrle_sends_fewer_bytes_for_resent_pages() -> None:
    vm = VmMemory(memory_bytes=GIB, working_set_bytes=32 * MIB, dirty_rate_bps=50 * MIB * 8)
    # whole rounds: everything after the first pass is re-sent, at a quarter of a page
    plain = plan_migration(vm, MigrationOptions(bandwidth_bps=1e9, syncs="rounds"))
    packed = plan_migration(vm, MigrationOptions(bandwidth_bps=1e9, xbzrle=True, syncs="rounds"))
    assert packed.timeline[0].bytes == plain.timeline[0].bytes
    assert packed.timeline[1].bytes == pytest.approx(plain.timeline[1].bytes * 0.25)


def test_xbzrle_never_shrinks_pages_sent_for_the_first_time() -> None:
    # QEMU's syncs leave the first pass's tail unsent; XBZRLE has no old copy of it. With
    # nothing dirtied, every page is sent once, so XBZRLE changes nothing.
    vm = VmMemory(memory_bytes=GIB, working_set_bytes=0, dirty_rate_bps=0.0)
    plain = plan_migration(vm, MigrationOptions(bandwidth_bps=1e9, protected=False))
    packed = plan_migration(vm, MigrationOptions(bandwidth_bps=1e9, protected=False, xbzrle=True))
    assert plain.timeline[-1].bytes > 0  # the tail went in the pause
    assert packed.bytes == plain.bytes == pytest.approx(GIB * F)


def test_protected_stream_caps_bandwidth_per_channel() -> None:
    vm = VmMemory(memory_bytes=GIB, working_set_bytes=0, dirty_rate_bps=0.0)
    one = plan_migration(vm, MigrationOptions(bandwidth_bps=100e9))
    four = plan_migration(vm, MigrationOptions(bandwidth_bps=100e9, multifd_channels=4))
    assert one.timeline[0].end_s == pytest.approx(one.timeline[0].bytes * 8 / 8e9)
    assert four.timeline[0].end_s == pytest.approx(four.timeline[0].bytes * 8 / 32e9)
    assert one.crypto_cpu_s == pytest.approx(one.bytes * 8 / 8e9)


def test_block_storage_copies_the_disk_first_and_remote_then_local_after() -> None:
    vm = VmMemory(memory_bytes=GIB, working_set_bytes=0, dirty_rate_bps=0.0)
    block = plan_migration(vm, MigrationOptions(bandwidth_bps=8e9, storage="block"), disk_bytes=10 * GIB)
    later = plan_migration(
        vm, MigrationOptions(bandwidth_bps=8e9, storage="remote-then-local"), disk_bytes=10 * GIB
    )
    assert block.timeline[0].phase == "disk" and later.timeline[-1].phase == "disk-background"
    assert block.downtime_s == pytest.approx(later.downtime_s, rel=1e-12)
    assert block.bytes == pytest.approx(later.bytes)


def test_hot_cold_and_trace_dirtying() -> None:
    vm = VmMemory(
        memory_bytes=GIB,
        working_set_bytes=64 * MIB,
        dirty_rate_bps=64 * MIB * 8,
        cold_set_bytes=512 * MIB,
        cold_rate_bps=8 * MIB * 8,
    )
    assert vm.dirtied(0.0, 0.5) == pytest.approx(32 * MIB + 4 * MIB)
    assert vm.dirtied(0.0, 10.0) == pytest.approx(64 * MIB + 80 * MIB)
    traced = VmMemory(
        memory_bytes=GIB,
        working_set_bytes=GIB,
        dirty_rate_bps=0.0,
        trace_rate_bps=(8.0 * MIB, 0.0),
        trace_interval_s=1.0,
    )
    assert traced.dirtied(0.5, 1.0) == pytest.approx(0.5 * MIB)
    assert traced.dirtied(0.0, 4.0) == pytest.approx(2 * MIB)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"memory_bytes": GIB, "working_set_bytes": 2 * GIB, "dirty_rate_bps": 1.0}, "working_set"),
        ({"memory_bytes": GIB, "working_set_bytes": 0, "dirty_rate_bps": -1.0}, "dirty_rate"),
    ],
)
def test_bad_memory_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(MobilityError, match=f"^{field}:"):
        VmMemory(**kwargs)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--dirty-rate", "-5MiB/s"], "dirty_rate"),
        (["--working-set", "8GiB"], "working_set"),
        (["--downtime-limit", "0ms"], "downtime_limit"),
        (["--bandwidth", "fast"], "bandwidth"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args: list[str], field: str) -> None:
    done = cloudtwin("migrate", "plan", "--memory", "4GiB", *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{field}:" in lines[0], done.stderr


@settings(max_examples=300, deadline=None)
@given(
    memory_mib=st.integers(1, 4096),
    resident_share=st.floats(0.0, 1.0),
    ws_share=st.floats(0.0, 1.0),
    cold_share=st.floats(0.0, 0.5),
    rate_share=st.floats(0.0, 3.0),
    cold_rate_share=st.floats(0.0, 1.0),
    bandwidth=st.floats(1e6, 1e11),
    cap_share=st.one_of(st.none(), st.floats(0.01, 2.0)),
    limit=st.floats(0.001, 5.0),
    syncs=st.sampled_from(["qemu", "rounds"]),
    policy=st.sampled_from(["abort", "raise-downtime", "auto-converge", "postcopy"]),
    xbzrle=st.booleans(),
    storage=st.sampled_from(["shared", "block", "remote-then-local"]),
    disk_mib=st.integers(0, 2048),
)
def test_any_plan_finishes_with_a_consistent_timeline(
    memory_mib: int, resident_share: float, ws_share: float, cold_share: float, rate_share: float,
    cold_rate_share: float, bandwidth: float, cap_share: float | None, limit: float, syncs: str,
    policy: str, xbzrle: bool, storage: str, disk_mib: int,
) -> None:
    memory = memory_mib * MIB
    working_set = int(memory * ws_share * (1 - cold_share))
    cold = int(memory * cold_share * (1 - ws_share))
    vm = VmMemory(
        memory_bytes=memory,
        resident_bytes=int(memory * resident_share),
        working_set_bytes=working_set,
        dirty_rate_bps=bandwidth * rate_share,
        cold_set_bytes=cold,
        cold_rate_bps=bandwidth * cold_rate_share / 10,
    )
    options = MigrationOptions(
        bandwidth_bps=bandwidth,
        max_bandwidth_bps=None if cap_share is None else bandwidth * cap_share,
        downtime_limit_s=limit,
        max_downtime_s=max(2.0, limit),
        syncs=syncs,  # type: ignore[arg-type]
        policy=policy,  # type: ignore[arg-type]
        xbzrle=xbzrle,
        storage=storage,  # type: ignore[arg-type]
    )
    plan = plan_migration(vm, options, disk_bytes=disk_mib * MIB)
    assert plan.outcome in ("completed", "aborted")
    assert plan.converged == (plan.outcome == "completed")
    timeline = plan.timeline
    assert timeline and timeline[0].start_s == 0.0
    for before, after in zip(timeline, timeline[1:], strict=False):
        gap = after.start_s - before.end_s
        assert gap == pytest.approx(0.0, abs=1e-9) or (before.phase == "stop-and-copy" and gap >= 0)
    assert all(e.end_s >= e.start_s and e.bytes >= 0 for e in timeline)
    assert plan.bytes == pytest.approx(sum(e.bytes for e in timeline), rel=1e-9)
    if plan.converged:
        assert plan.total_time_s >= timeline[-1].end_s - 1e-9
        assert [e.phase for e in timeline].count("stop-and-copy") == 1
        # every page holding data crosses at least once (live, paused or pushed after), and
        # the disk too unless it is shared
        disk = 0 if storage == "shared" else disk_mib * MIB
        assert plan.bytes >= (vm.data_bytes * F + disk) * (1 - 1e-9)
    else:
        assert plan.downtime_s == 0.0


def test_a_pause_longer_than_the_limit_is_converged_but_over_the_limit() -> None:
    # An idle VM, whole rounds: nothing is pending after the first pass, so the pause is
    # only the resume (10 ms): over a 5 ms limit, within the default 300 ms.
    idle = VmMemory(1 << 30, 0, 0.0)
    short = plan_migration(idle, MigrationOptions(bandwidth_bps=1e9, downtime_limit_s=0.005, syncs="rounds"))
    assert short.converged and short.downtime_s == pytest.approx(0.010)
    assert short.over_limit and short.status() == "converged, over the limit"
    assert short.over_limit_note().startswith("downtime 10.0 ms is over the 5 ms limit")
    within = plan_migration(idle, MigrationOptions(bandwidth_bps=1e9, syncs="rounds"))
    assert not within.over_limit and within.status() == "converged" and within.over_limit_note() == ""
    # QEMU's syncs stop with just under the threshold unsent (in pages, without their
    # headers), then resume: 300.5 ms under a 300 ms limit, converged but over it
    qemu = plan_migration(idle, MigrationOptions(bandwidth_bps=1e9))
    assert qemu.downtime_s > qemu.downtime_limit_s == 0.3 and qemu.status() == "converged, over the limit"


def test_migrate_plan_does_not_call_a_pause_over_the_limit_plainly_converged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cloudtwin.cli.app import main

    flags = ["--memory", "1GiB", "--dirty-rate", "100MiB/s", "--working-set", "36MiB", "--bandwidth", "1Gbps"]
    assert main(["migrate", "plan", *flags, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["downtime_s"] > document["downtime_limit_s"] == 0.3  # 309 ms
    assert main(["migrate", "plan", *flags]) == 0
    table = capsys.readouterr().out
    # the cells wrap at the terminal's width: read the converged column's words in order
    rows = [line.split("│") for line in table.splitlines() if line.count("│") > 3]
    converged, notes = (" ".join(r[i].strip() for r in rows if r[i].strip()) for i in (2, -2))
    assert converged == "yes, over the limit" and "over the 300 ms limit" in notes


def _idle_pass(**options: float) -> MigrationOptions:
    """100 MiB of data at 100 MB/s with a 300 ms limit: the first pass sends eight 10 MB
    periods and pauses with the 24.8576 MB it never reached (no dirtying)."""
    return MigrationOptions(bandwidth_bps=8e8, protected=False, resume_s=0.002, **options)


def test_pause_ends_when_its_last_byte_is_in_the_socket_buffer() -> None:
    vm = VmMemory(memory_bytes=100 * MIB, working_set_bytes=0, dirty_rate_bps=0.0)
    plain = plan_migration(vm, _idle_pass(final_bandwidth_bps=2e9))
    buffered = plan_migration(vm, _idle_pass(final_bandwidth_bps=2e9, socket_buffer_bytes=5e6))
    wire = (100 * MIB - 80e6) * F  # every page of the pause is one the destination never held
    assert plain.stop_copy_s == pytest.approx(wire / 250e6, rel=1e-12)
    # the buffer takes the last 5 MB at once; the rest drains at the first-time rate
    assert buffered.stop_copy_s == pytest.approx((wire - 5e6) / 250e6, rel=1e-12)
    assert buffered.downtime_s == pytest.approx(buffered.stop_copy_s + 0.002, rel=1e-12)
    assert buffered.bytes == plain.bytes  # the buffer changes when, not what, is sent
    # the re-sent rate does not apply: nothing in this pause was sent before
    faster = plan_migration(
        vm, _idle_pass(final_bandwidth_bps=2e9, socket_buffer_bytes=5e6, resent_bandwidth_bps=8e10)
    )
    assert faster.stop_copy_s == buffered.stop_copy_s
    whole = plan_migration(vm, _idle_pass(final_bandwidth_bps=2e9, socket_buffer_bytes=30e6))
    assert whole.stop_copy_s == 0.0 and whole.downtime_s == 0.002


@settings(max_examples=40, deadline=None)
@given(
    working_set_mib=st.integers(8, 128),
    rate_mib_s=st.integers(1, 60),
    buffer_mb=st.floats(0, 20),
    resent_over_first=st.floats(1, 10),
)
def test_a_buffer_and_faster_resent_pages_never_lengthen_the_pause(
    working_set_mib: int, rate_mib_s: int, buffer_mb: float, resent_over_first: float
) -> None:
    vm = VmMemory(
        memory_bytes=256 * MIB, working_set_bytes=working_set_mib * MIB, dirty_rate_bps=rate_mib_s * MIB * 8
    )
    base = _idle_pass(final_bandwidth_bps=2e9)
    plain = plan_migration(vm, base)
    assume(plain.converged)
    better = plan_migration(
        vm,
        _idle_pass(
            final_bandwidth_bps=2e9,
            socket_buffer_bytes=buffer_mb * 1e6,
            resent_bandwidth_bps=2e9 * resent_over_first,
        ),
    )
    assert better.converged and better.rounds == plain.rounds and better.bytes == plain.bytes
    assert better.stop_copy_s <= plain.stop_copy_s * (1 + 1e-12)
    assert (
        better.stop_copy_s
        >= max(0.0, plain.stop_copy_s - buffer_mb * 1e6 / 250e6) / resent_over_first - 1e-12
    )

"""The QEMU benchmark's parts that need no QEMU: the random draw, the targets, the calibration rules."""

from __future__ import annotations

import sys

import pytest
from tests.cli.cli_helpers import REPO

from cloudtwin.cli.measure import qemu_guest as qg
from cloudtwin.errors import MobilityError

sys.path.insert(0, str(REPO / "benchmarks"))
import qemu_migration as bench  # noqa: E402


def test_the_draw_is_the_seed_s_and_stays_in_the_stated_distribution() -> None:
    trials = bench.draw(20, 2112)
    assert trials == bench.draw(20, 2112) and trials != bench.draw(20, 2113)
    for t in trials:
        assert t.memory_mib in (128, 256, 384, 512)
        assert 8 <= t.dirty_mib <= t.memory_mib // 4
        assert 32 <= t.bandwidth_mib_s <= 128
        assert 0 <= t.rate_mib_s <= 1.5 * t.bandwidth_mib_s
        assert 100 <= t.downtime_limit_ms <= 500 and t.downtime_limit_ms % 10 == 0
        assert t.give_up_s == 25.0
    # some configurations dirty faster than the cap: the draw includes runs that cannot converge
    assert any(t.rate_mib_s > t.bandwidth_mib_s for t in trials)


def _row(measured_s: float | None, predicted_s: float | None) -> dict:
    return {
        "measured_converged": measured_s is not None,
        "predicted_converged": predicted_s is not None,
        "measured_total_s": 2.0 if measured_s is not None else None,
        "predicted_total_s": 2.2 if predicted_s is not None else None,
        "measured_bytes": 100.0,
        "predicted_bytes": 116.0,
        "measured_downtime_s": measured_s,
        "predicted_downtime_s": predicted_s,
    }


@pytest.mark.parametrize(
    ("measured_s", "predicted_s", "downtime_ok"),
    [
        (0.005, 0.014, True),  # 10 ms absolute beats 50 % of 5 ms
        (0.005, 0.016, False),
        (0.100, 0.149, True),  # 50 % of 100 ms
        (0.100, 0.151, False),
        (0.100, 0.051, True),
        (0.100, 0.049, False),
    ],
)
def test_downtime_target_is_max_of_half_and_ten_ms(
    measured_s: float, predicted_s: float, downtime_ok: bool
) -> None:
    checks = bench.checks(_row(measured_s, predicted_s))
    assert checks == {
        "classified_right": True,
        "total_ok": True,
        "bytes_ok": False,
        "downtime_ok": downtime_ok,
    }


def test_a_run_classified_wrong_has_nothing_else_to_compare() -> None:
    checks = bench.checks(_row(None, 0.1))
    assert checks == {"classified_right": False, "total_ok": None, "bytes_ok": None, "downtime_ok": None}


def test_calibration_rules_pick_the_median_or_the_fastest_of_the_largest_pauses_per_kind() -> None:
    def run(kind: str, paused: float, ms: int) -> dict:
        return {"status": "completed", "downtime": ms, "ram": {"downtime-bytes": paused}, "calibrates": kind}

    switchover = [
        run("first", 100e6, 500),
        run("first", 95e6, 400),
        run("first", 50e6, 10),
        run("resent", 80e6, 100),
    ]
    assert bench.switchover_rate_bps(switchover, "first", "fastest") == pytest.approx(95e6 * 8 / 0.4)
    assert bench.switchover_rate_bps(switchover, "resent", "fastest") == pytest.approx(80e6 * 8 / 0.1)
    assert bench.switchover_rate_bps(switchover[:3], "resent") is None  # saved before it was measured
    # the median of the largest pauses (50 MB is under 90 % of the largest and does not count)
    median = [*switchover, run("first", 98e6, 1000)]
    assert bench.switchover_rate_bps(median) == pytest.approx(100e6 * 8 / 0.5)
    assert bench.switchover_rate_bps(median, "first", "fastest") == pytest.approx(95e6 * 8 / 0.4)
    assert bench.switchover_rate_bps(switchover) == pytest.approx((95e6 / 0.4 + 100e6 / 0.5) * 4)
    with pytest.raises(MobilityError, match="calibration_rule"):
        bench.switchover_rate_bps(switchover, "first", "slowest")
    idle = {"256": {"downtime": 9, "idle_downtimes_ms": [9, 3, 0]}, "512": {"downtime": 17}}
    assert bench.floor_s(idle) == 0.003  # the smallest idle pause; QEMU's 0 (no time) does not count


def test_loopback_buffer_is_measured() -> None:
    assert qg.loopback_buffer_bytes(warm_bytes=4 << 20) > 64 << 10


def test_scan_places_are_shares_of_the_in_use_frames_below_each_slice() -> None:
    # 4 runs of 4 frames; in use: 4, 0, 2, 2 (8 in all); slices at frames 2, 9, 13 and 15
    layout = {"slice_pages": 64, "slices": [2, 9, 13, 15], "run_frames": 4, "in_use": [4, 0, 2, 2]}
    # frame 2: half of run 0 (2 of 8); frame 9: run 2 begins after 4, a quarter in (4.5);
    # frame 13: 6 + 1/4 x 2 = 6.5; frame 15: 6 + 3/4 x 2 = 7.5
    assert bench.scan_places(layout) == pytest.approx((2 / 8, 4.5 / 8, 6.5 / 8, 7.5 / 8))


def test_a_run_with_its_layout_places_the_working_set_and_starts_the_writer_where_it_was() -> None:
    measured = {"idle": {"256": _idle(256)}, "socket_buffer_bytes": 0}
    trial = qg.Trial(256, 64, 32, 128).__dict__
    everywhere = {"slice_pages": 64, "slices": [], "run_frames": 256, "in_use": [256] * 256}
    # the buffer at the very top of memory, written in order: what the first pass dirties
    # is still unsent when it ends, so the pause holds the unsent tail and nothing more
    top = everywhere | {"slices": [256 * 256 - 1] * 256}
    run = {"layout": top, "write_lead_s": 0.5}
    placed = bench.predict(trial, measured["idle"]["256"], None, run)
    spread = bench.predict(trial, measured["idle"]["256"], None)
    assert placed["rounds"] == 1 and placed["bytes"] < spread["bytes"]
    # the buffer at the bottom: everything dirtied was sent already, more than spread evenly
    bottom = {"layout": everywhere | {"slices": [0] * 256}, "write_lead_s": 0.5}
    assert bench.predict(trial, measured["idle"]["256"], None, bottom)["bytes"] > spread["bytes"]
    # a run without a layout (grids 1-8) is the model as before
    assert bench.predict(trial, measured["idle"]["256"], None, {"layout": None}) == spread


def _idle(memory_mib: int) -> dict:
    pages = 17_000  # the guest's own non-zero pages
    return {
        "status": "completed",
        "downtime": 10,
        "total-time": 500,
        "ram": {"page-size": 4096, "normal": pages, "transferred": pages * 4104 * 3},
    }


def test_the_serial_console_gives_the_dirtier_s_layout(tmp_path) -> None:
    serial = tmp_path / "source.serial"
    serial.write_text("GUEST-UP\nLAYOUT 64 100 200\nINUSE 256 10 256 3\nREADY pages=128\n")
    guest = qg.Guest(process=None, qmp_path=tmp_path / "q", serial=serial)  # type: ignore[arg-type]
    assert guest.layout() == {
        "slice_pages": 64,
        "slices": [100, 200],
        "run_frames": 256,
        "in_use": [10, 256, 3],
    }
    serial.write_text("GUEST-UP\nREADY pages=128\n")  # a dirtier that could not read its page map
    assert guest.layout() is None


def test_a_completed_migration_is_read_again_until_qemu_has_its_times(monkeypatch) -> None:
    answers = iter([{"status": "completed", "total-time": 0}, {"status": "completed", "total-time": 903}])

    class Qmp:
        def execute(self, command: str) -> dict:
            assert command == "query-migrate"
            return next(answers)

    monkeypatch.setattr(qg.time, "sleep", lambda _s: None)
    first = {"status": "completed", "total-time": 0, "downtime": 0}
    assert qg._with_times(Qmp(), first) == {"status": "completed", "total-time": 903}  # type: ignore[arg-type]
    # a QEMU that never sets them: the last answer, after a bounded number of tries
    answers = iter([{"status": "completed", "total-time": 0}] * qg.TIMES_TRIES)
    assert qg._with_times(Qmp(), first)["total-time"] == 0  # type: ignore[arg-type]

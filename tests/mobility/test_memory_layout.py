"""Where the working set sits in QEMU's scan, and in which order the VM writes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.cli.cli_helpers import REPO, cloudtwin

from cloudtwin.errors import MobilityError
from cloudtwin.mobility import MigrationOptions, VmMemory, plan_migration
from cloudtwin.mobility.precopy import WIRE_FACTOR

MB = 1_000_000
W = 40 * MB


def _memory(
    layout: tuple[float, ...] = (), order: str = "sequential", start: float = 0.0, **more: float
) -> VmMemory:
    fields = {"memory_bytes": 100 * MB, "working_set_bytes": W, "dirty_rate_bps": 80e6} | more
    return VmMemory(layout=layout, write_order=order, write_start=start, **fields)  # type: ignore[arg-type]


LAYOUT = (0.1, 0.9, 0.8, 0.2)


@pytest.mark.parametrize(
    ("start", "dirtied", "share"),
    [
        (0.25, W / 2, 1.0),  # slices 1 and 2, both past the half the scan has sent
        (0.125, W / 2, 0.75),  # half of slice 0 (sent), slice 1, half of slice 2: 1.5 of 2 slices
        (0.75, W / 2, 0.0),  # slices 3 and 0 (wrapping round): both sent
        (0.5, 2 * W, 0.5),  # a whole cycle (and more): as a random writer
        (0.3, 0.0, 1.0),  # nothing written yet: the slice the writer is in
    ],
)
def test_a_sequential_writer_covers_an_arc_of_its_slices(start: float, dirtied: float, share: float) -> None:
    assert _memory(LAYOUT, "sequential", start).unscanned_share(0.5, dirtied) == pytest.approx(share)


def test_a_random_writer_and_the_even_spread() -> None:
    assert _memory(LAYOUT, "random").unscanned_share(0.5, W / 4) == 0.5  # 0.9 and 0.8 of four
    assert _memory().unscanned_share(0.3, W / 4) == pytest.approx(0.7)  # no layout: spread evenly
    # without a layout the first pass is the model it always was: the dirtied bytes times
    # the share of the data already sent
    memory = _memory(cold_set_bytes=20 * MB, cold_rate_bps=8e6)
    assert memory.dirtied_behind_scan(0.0, 0.5, 0.0, 25 * MB) == pytest.approx(
        memory.dirtied(0.0, 0.5) * (1 - 25 / 100)
    )
    # with one, the cold set stays spread evenly: only the working set is placed
    placed = _memory((1.0,) * 4, cold_set_bytes=20 * MB, cold_rate_bps=8e6)
    assert placed.dirtied_behind_scan(0.0, 0.5, 0.0, 25 * MB) == pytest.approx(0.5 * MB * 0.75)


@given(
    layout=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40).map(tuple),
    start=st.floats(0.0, 0.999),
    scanned=st.floats(0.0, 1.0),
    dirtied=st.floats(0.0, 3 * W),
)
def test_the_share_is_a_share_and_a_whole_cycle_is_the_random_writer_s(
    layout: tuple[float, ...], start: float, scanned: float, dirtied: float
) -> None:
    sequential = _memory(layout, "sequential", start)
    share = sequential.unscanned_share(scanned, dirtied)
    assert -1e-12 <= share <= 1 + 1e-12
    random_share = _memory(layout, "random").unscanned_share(scanned, dirtied)
    if dirtied >= W:
        assert share == pytest.approx(random_share)
    if all(place >= scanned for place in layout):
        assert share == pytest.approx(1.0)
    if all(place < scanned for place in layout):
        assert share == pytest.approx(0.0)


def test_a_working_set_the_scan_reaches_last_is_still_unsent_at_the_first_sync() -> None:
    """Worked by hand: 100 MB of data at 100 MB/s, limit 300 ms (threshold 30 MB), periods
    of 10 MB: the first pass sends 8 periods and leaves 20 MB. Spread evenly, 80 % of what
    the VM dirtied meanwhile was sent already and the pause holds 20 MB plus that; with the
    working set at the end of memory every dirtied page is still unsent, and the pause
    holds exactly the 20 MB tail."""
    options = MigrationOptions(bandwidth_bps=800e6, downtime_limit_s=0.3, resume_s=0.0)
    at_end = plan_migration(_memory((1.0,) * 8, "sequential", 0.0, dirty_rate_bps=80e6), options)
    spread = plan_migration(_memory(dirty_rate_bps=80e6), options)
    pause = [r for r in at_end.timeline if r.phase == "stop-and-copy"][0]
    assert at_end.rounds == 1 and pause.bytes == pytest.approx(20 * MB * WIRE_FACTOR)
    first_pass_s = 80 * MB * WIRE_FACTOR / 100e6
    dirtied = min(W, 10 * MB * first_pass_s)
    spread_pause = [r for r in spread.timeline if r.phase == "stop-and-copy"][0]
    assert spread_pause.bytes == pytest.approx((20 * MB + dirtied * 0.8) * WIRE_FACTOR)
    assert at_end.bytes == pytest.approx(100 * MB * WIRE_FACTOR)


@pytest.mark.parametrize(
    ("fields", "word"),
    [
        ({"layout": (0.5, 1.5)}, "layout"),
        ({"layout": (float("nan"),)}, "layout"),
        ({"write_order": "backwards"}, "write_order"),
        ({"write_start": 1.0}, "write_start"),
        ({"write_start": -0.1}, "write_start"),
    ],
)
def test_a_bad_layout_is_refused_naming_the_field(fields: dict, word: str) -> None:
    with pytest.raises(MobilityError, match=word):
        VmMemory(memory_bytes=100 * MB, working_set_bytes=W, dirty_rate_bps=1e6, **fields)


def _pause_bytes(*flags: str) -> float:
    done = cloudtwin(
        "migrate", "plan", "--memory", "100MB", "--working-set", "40MB", "--dirty-rate", "10MB/s",
        "--bandwidth", "800Mbps", "--downtime-limit", "300ms", *flags, "--json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["rounds"] == 1
    return [r["bytes"] for r in result["timeline"] if r["phase"] == "stop-and-copy"][0]


@pytest.mark.parametrize(
    ("flags", "fresh_mb"),
    [
        # the first pass sends 80 of the 100 MB in 0.8 x F s (threshold 30 MB, periods of 10 MB)
        # and the VM writes 8 MB of its 40 MB working set meanwhile; what of that the pass had
        # sent already is added to the 20 MB it left unsent
        ((), 8 * 0.8),  # spread evenly: 80 % was sent
        (("--working-set-at", "last"), 8 * 0.5),  # at 60-100 % of the scan: half of it below 80 %
        (("--working-set-at", "last", "--write-order", "descending"), 0.0),  # from the top: all unsent
        (("--working-set-at", "last", "--write-order", "ascending"), 8.0),  # from 60 % up: all sent
        (("--working-set-at", "first"), 8.0),  # scanned first: all sent
    ],
)
def test_migrate_plan_places_the_working_set(flags: tuple[str, ...], fresh_mb: float) -> None:
    first_pass_s = 80 * MB * WIRE_FACTOR / 100e6
    written = 10 * MB * first_pass_s  # a little over 8 MB: the pass sends headers too
    expected = (20 * MB + written * fresh_mb / 8) * WIRE_FACTOR
    assert _pause_bytes(*flags) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--write-order", "ascending"), "write_order: ascending needs working_set_at first or last"),
        (("--working-set-at", "middle"), "working_set_at: Input should be 'spread', 'first' or 'last'"),
        (("--working-set-at", "last", "--write-order", "sideways"), "write_order: Input should be"),
    ],
)
def test_a_bad_placement_flag_is_one_line_naming_it(flags: tuple[str, ...], message: str) -> None:
    done = cloudtwin("migrate", "plan", "--memory", "1GiB", "--working-set", "100MiB", *flags)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("cloudtwin: error: ") and message in done.stderr


def test_a_scenario_vm_places_its_working_set(tmp_path: Path) -> None:
    text = (REPO / "examples" / "migration.yaml").read_text()
    spread = tmp_path / "spread.yaml"
    spread.write_text(text)
    placed = tmp_path / "placed.yaml"
    vm = "resident: 6GiB, labels: [web]}"
    placed.write_text(text.replace(vm, vm[:-1] + ", working_set_at: last, write_order: descending}"))
    assert placed.read_text() != text

    def web1(path: Path) -> dict:
        done = cloudtwin("migrate", "plan", str(path), "--json")
        assert done.returncode == 0, done.stderr
        return [m for m in json.loads(done.stdout)["migrations"] if m["vm"] == "web1"][0]

    # written from the top of memory down, what the first pass dirties is still unsent:
    # fewer bytes than spread evenly
    assert web1(placed)["bytes"] < web1(spread)["bytes"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(vm, vm[:-1] + ", write_order: ascending}"))
    done = cloudtwin("migrate", "plan", str(bad))
    assert done.returncode == 2 and "write_order: ascending needs working_set_at first or last" in done.stderr

"""Meters in rounds (`meter.meter_colours`): the colours and buckets of metering each packet
one after the other (RFC 2698, as the datapath did before), bit for bit, whichever way a
batch is metered and however it is split."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.p4 import meter
from cloudtwin.p4.meter import GREEN, RED, YELLOW, meter_colours


def reference(config, tokens, cells, times_ns, amounts, every_cell=None):  # type: ignore[no-untyped-def]
    """One packet at a time, as `_Meter.execute` metered before the rounds."""
    out = []
    for cell, time_ns, amount in zip(cells, times_ns, amounts, strict=True):
        rates = config.get(cell) or every_cell
        if rates is None:
            out.append(GREEN)
            continue
        cir, cburst, pir, pburst = rates
        state = tokens.setdefault(cell, [cburst, pburst, -1.0])
        now = int(time_ns) * 1e-9
        if state[2] >= 0:
            elapsed = now - state[2]
            state[0] = min(cburst, state[0] + cir * elapsed)
            state[1] = min(pburst, state[1] + pir * elapsed)
        state[2] = now
        if state[1] < amount:
            out.append(RED)
        elif state[0] < amount:
            out.append(YELLOW)
            state[1] -= amount
        else:
            out.append(GREEN)
            state[0] -= amount
            state[1] -= amount
    return out


RATE, BURST = st.floats(0, 1e9, allow_nan=False), st.floats(0, 1e6, allow_nan=False)
RATES = st.tuples(RATE, BURST, RATE, BURST)
PACKETS = st.lists(
    st.tuples(st.integers(0, 9), st.integers(0, 2_000_000), st.sampled_from([1.0, 64.0, 1500.0, 9000.0])),
    max_size=300,
)


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(st.integers(0, 9), RATES, max_size=8),
    PACKETS,
    st.integers(0, 300),
    st.booleans(),
    st.none() | RATES,
)
def test_rounds_and_one_by_one_meter_as_one_packet_at_a_time(
    rates: dict[int, tuple[float, float, float, float]],
    packets: list[tuple[int, int, float]],
    split: int,
    rounds: bool,
    every_cell: tuple[float, float, float, float] | None,
) -> None:
    start = 1_700_000_000_000_000_000
    times = np.cumsum([t for _, t, _ in packets], dtype=np.int64).astype(np.uint64) + np.uint64(start)
    cells = np.array([c for c, _, _ in packets], dtype=np.int64)
    amounts = np.array([a for _, _, a in packets], dtype=np.float64)
    config = {cell: (cir, cb, pir, pb) for cell, (cir, cb, pir, pb) in rates.items()}
    tokens = {cell: [cb, pb, -1.0] for cell, (_, cb, _, pb) in config.items()}
    expected_tokens = copy.deepcopy(tokens)
    columns = (cells.tolist(), times.tolist(), amounts.tolist())
    expected = reference(config, expected_tokens, *columns, every_cell)
    saved = meter.ROUND_PACKETS
    meter.ROUND_PACKETS = 0 if rounds else 1 << 30
    try:
        parts = (slice(0, split), slice(split, None))  # two batches: the buckets carry over
        got = [meter_colours(config, tokens, cells[p], times[p], amounts[p], every_cell) for p in parts]
    finally:
        meter.ROUND_PACKETS = saved
    assert np.concatenate(got).tolist() == expected
    assert tokens == expected_tokens


def test_a_rate_limited_cell_turns_yellow_then_red() -> None:
    # 1,000 B/s committed with a 1,500 B burst, 2,000 B/s peak with a 3,000 B burst; 1,500 B
    # packets 0.1 s apart: green (1,500 committed left 0), yellow (+100 committed < 1,500;
    # peak 1,500 + 200 = 1,700 >= 1,500), red (peak 200 + 200 = 400 < 1,500)
    config = {3: (1000.0, 1500.0, 2000.0, 3000.0)}
    tokens = {3: [1500.0, 3000.0, -1.0]}
    times = np.array([0, 100_000_000, 200_000_000], dtype=np.uint64)
    colours = meter_colours(config, tokens, np.array([3, 3, 3]), times, np.full(3, 1500.0))
    assert colours.tolist() == [GREEN, YELLOW, RED]


@pytest.mark.parametrize("cells", [[0] * 100, list(range(100)) * 2])
def test_an_unconfigured_cell_is_green_and_keeps_no_state(cells: list[int]) -> None:
    tokens: dict[int, list[float]] = {}
    colours = meter_colours({}, tokens, np.array(cells), np.zeros(len(cells), np.uint64), np.ones(len(cells)))
    assert colours.tolist() == [GREEN] * len(cells) and tokens == {}

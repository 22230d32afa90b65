"""The fluid simulator: hand-computed completion times, a brute-force reference, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.engine import Dependencies, max_min_rates, simulate
from cloudtwin.errors import EngineError
from cloudtwin.topology import Paths

BIG = 1e6


def paths_of(rows: list[list[int]]) -> Paths:
    indptr = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    return Paths(indptr, np.array([x for r in rows for x in r], dtype=np.int64))


def run(rows, capacity, size_bytes, start=None, caps=None, latency=None, deps=None):
    n = len(rows)
    return simulate(
        paths_of(rows),
        np.array(capacity, dtype=float),
        np.array(size_bytes, dtype=float),
        np.zeros(n) if start is None else np.array(start, dtype=float),
        np.full(n, BIG) if caps is None else np.array(caps, dtype=float),
        None if latency is None else np.array(latency, dtype=float),
        deps,
    )


def test_two_flows_share_then_one_frees_capacity() -> None:
    # link 80 bit/s; f0 800 bits, f1 1600 bits; both at 40 -> f0 done at 20 s,
    # f1 has 800 left at 80 -> done at 30 s
    result = run([[0], [0]], [80.0], [100, 200])
    np.testing.assert_allclose(result.finish_s, [20.0, 30.0], rtol=1e-12)
    np.testing.assert_allclose(result.fct_s, [20.0, 30.0], rtol=1e-12)
    assert result.completion_s == pytest.approx(30.0)


def test_staggered_arrival() -> None:
    # f0 alone 0..5 s at 80 -> 400 of 800 bits left; then 40 each: f0 done at 15 s.
    # f1 (1600 bits) got 400 by 15 s, 1200 left at 80 -> 30 s
    result = run([[0], [0]], [80.0], [100, 200], start=[0.0, 5.0])
    np.testing.assert_allclose(result.finish_s, [15.0, 30.0], rtol=1e-12)
    np.testing.assert_allclose(result.fct_s, [15.0, 25.0], rtol=1e-12)


def test_late_arrival_on_idle_link_after_first_finishes() -> None:
    # f0 800 bits at 80 -> done at 10; f1 starts at 12 alone -> 12 + 10 = 22
    result = run([[0], [0]], [80.0], [100, 100], start=[0.0, 12.0])
    np.testing.assert_allclose(result.finish_s, [10.0, 22.0], rtol=1e-12)


def test_latency_added() -> None:
    # same as the shared case, latency 0.5 s and 2 s added to each finish
    result = run([[0], [0]], [80.0], [100, 200], latency=[0.5, 2.0])
    np.testing.assert_allclose(result.finish_s, [20.5, 32.0], rtol=1e-12)


def test_nic_cap() -> None:
    # f0 capped at 20 -> f1 gets 60; f0 800 bits -> 40 s; f1 800 bits -> 800/60 = 13.33 s,
    # after which f0 stays at its cap of 20: 40 s
    result = run([[0], [0]], [80.0], [100, 100], caps=[20.0, 1000.0])
    np.testing.assert_allclose(result.finish_s, [40.0, 800 / 60], rtol=1e-12)


def test_multi_link_rerates_after_completion() -> None:
    # L0 (10): f0, f1; L1 (8): f0, f2, f3; L2 (20): f3, f4 -> rates 8/3, 22/3, 8/3, 8/3, 52/3.
    # sizes in bits: f1 = 22/3*3 = 22 bits -> done at 3 s; others large.
    # Give f2 8 bits: done at 3 s too (8/(8/3)). After 3 s: L0 holds f0 only, L1 f0, f3:
    # f0 = f3 = 4 (L1), f4 = 16 (L2).
    sizes_bits = np.array([8 / 3 * 3 + 4 * 2, 22.0, 8.0, 8 / 3 * 3 + 4 * 2, 52 / 3 * 3 + 16 * 1])
    result = run([[0, 1], [0], [1], [1, 2], [2]], [10.0, 8.0, 20.0], sizes_bits / 8)
    # f0, f3: 8 bits by 3 s, then 8 more at 4 -> 5 s; f4: 52 bits by 3 s, then 16 at 16 -> 4 s
    # but at 4 s... f4 ends at 4 s before f0/f3 (unchanged rates for them on L1).
    np.testing.assert_allclose(result.finish_s, [5.0, 3.0, 3.0, 5.0, 4.0], rtol=1e-9)


def test_dependency_with_gap_and_latency() -> None:
    # f0: 800 bits alone at 80 -> 10 s, +1 s latency = 11 s.
    # f1 waits for f0, gap 2 s -> starts 13 s, 800 bits on L1 at 80 -> 23 s (+0 latency)
    deps = Dependencies(np.array([0, 0, 1]), np.array([0]), np.array([0.0, 2.0]))
    result = run([[0], [1]], [80.0, 80.0], [100, 100], latency=[1.0, 0.0], deps=deps)
    np.testing.assert_allclose(result.start_s, [0.0, 13.0])
    np.testing.assert_allclose(result.finish_s, [11.0, 23.0], rtol=1e-12)


def test_dependency_chain() -> None:
    # A -> B -> C, each 800 bits at 80 (10 s) + 1 s latency, gap 0.5 s:
    # A 0..11, B 11.5..22.5, C 23..34
    deps = Dependencies(np.array([0, 0, 1, 2]), np.array([0, 1]), np.full(3, 0.5))
    result = run([[0], [0], [0]], [80.0], [100] * 3, latency=[1.0] * 3, deps=deps)
    np.testing.assert_allclose(result.start_s, [0.0, 11.5, 23.0])
    np.testing.assert_allclose(result.finish_s, [11.0, 22.5, 34.0], rtol=1e-12)


def test_dependency_waits_for_latest_and_own_start() -> None:
    # f0 10 s, f1 20 s (own links); f2 after both -> 20 s; f3 after f0 but starts at 50 s
    deps = Dependencies(np.array([0, 0, 0, 2, 3]), np.array([0, 1, 0]))
    result = run(
        [[0], [1], [2], [3]], [80.0] * 4, [100, 200, 100, 100], start=[0, 0, 0, 50], deps=deps
    )
    np.testing.assert_allclose(result.start_s, [0.0, 0.0, 20.0, 50.0])
    np.testing.assert_allclose(result.finish_s, [10.0, 20.0, 30.0, 60.0], rtol=1e-12)


def test_same_inputs_same_bits() -> None:
    rng = np.random.default_rng(3)
    rows = [list(rng.choice(6, size=rng.integers(1, 4), replace=False)) for _ in range(40)]
    args = (rows, rng.uniform(1, 10, 6), rng.integers(1, 100, 40), rng.uniform(0, 5, 40))
    a, b = run(*args), run(*args)
    assert a.finish_s.tobytes() == b.finish_s.tobytes()
    assert a.start_s.tobytes() == b.start_s.tobytes()
    assert (a.events, a.solves) == (b.events, b.solves)


def reference(rows, capacity, size_bytes, start, caps, latency) -> np.ndarray:
    """Brute force: recompute max-min rates of the flows in flight at every event."""
    n = len(rows)
    remaining = np.array(size_bytes, dtype=float) * 8
    start = np.array(start, dtype=float)
    finish = np.full(n, np.nan)
    now = float(start.min())
    while np.isnan(finish).any():
        active = [f for f in range(n) if start[f] <= now and np.isnan(finish[f])]
        pending = [start[f] for f in range(n) if start[f] > now]
        next_arrival = min(pending, default=np.inf)
        if not active:
            now = next_arrival
            continue
        rate = max_min_rates(
            np.concatenate(([0], np.cumsum([len(rows[f]) for f in active]))).astype(np.int64),
            np.array([x for f in active for x in rows[f]], dtype=np.int64),
            np.asarray(capacity, dtype=float),
            np.asarray(caps, dtype=float)[active],
        )
        to_finish = remaining[active] / rate
        step = min(float(to_finish.min()), next_arrival - now)
        now += step
        for i, f in enumerate(active):
            remaining[f] -= rate[i] * step
            if to_finish[i] <= step * (1 + 1e-12):
                remaining[f] = 0.0
                finish[f] = now + latency[f]
    return finish


@st.composite
def sim_instances(draw):
    n_links = draw(st.integers(1, 4))
    capacity = draw(st.lists(st.integers(1, 10), min_size=n_links, max_size=n_links))
    n = draw(st.integers(1, 7))
    rows = [
        draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True))
        for _ in range(n)
    ]
    size = draw(st.lists(st.integers(1, 50), min_size=n, max_size=n))
    start = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]), min_size=n, max_size=n))
    caps = draw(st.lists(st.floats(0.5, 20.0), min_size=n, max_size=n))
    latency = draw(st.lists(st.sampled_from([0.0, 0.1, 1.0]), min_size=n, max_size=n))
    return rows, [float(c) for c in capacity], size, start, caps, latency


@settings(max_examples=150, deadline=None)
@given(sim_instances())
def test_matches_brute_force_reference(instance) -> None:
    rows, capacity, size, start, caps, latency = instance
    got = run(rows, capacity, size, start, caps, latency)
    want = reference(rows, capacity, size, start, caps, latency)
    np.testing.assert_allclose(got.finish_s, want, rtol=1e-9)
    np.testing.assert_array_equal(got.start_s, start)
    # no flow beats its line rate
    floor = np.array(start) + np.array(size) * 8 / np.array(caps) + np.array(latency)
    assert np.all(got.finish_s >= floor * (1 - 1e-12))


@settings(max_examples=60, deadline=None)
@given(sim_instances())
def test_bytes_conserved_link_never_above_capacity(instance) -> None:
    # Integrate the reference-free bound: the bits crossing each link by the end cannot
    # exceed capacity * (time the link was busy), and every flow finishes.
    rows, capacity, size, start, caps, _ = instance
    result = run(rows, capacity, size, start, caps)
    assert np.all(np.isfinite(result.finish_s))
    bits_on = np.zeros(len(capacity))
    for f, row in enumerate(rows):
        bits_on[row] += size[f] * 8
    first = min(start)
    span = result.completion_s - first
    assert np.all(bits_on <= np.array(capacity) * span * (1 + 1e-9))


def _base():
    return dict(
        paths=paths_of([[0], [1]]),
        capacity_bps=np.array([1.0, 1.0]),
        size_bytes=np.array([1.0, 1.0]),
        start_s=np.zeros(2),
        rate_cap_bps=np.ones(2),
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"size_bytes": np.array([1.0, -1.0])}, "size_bytes must be positive"),
        ({"size_bytes": np.array([1.0, 0.0])}, "size_bytes must be positive"),
        ({"size_bytes": np.array([1.0])}, r"size_bytes has shape \(1,\), expected \(2,\)"),
        ({"start_s": np.zeros(3)}, "start_s has shape"),
        ({"start_s": np.array([0.0, np.nan])}, "start_s holds a value that is not finite"),
        ({"rate_cap_bps": np.array([1.0, 0.0])}, "rate_cap_bps must be positive"),
        ({"latency_s": np.zeros((2, 1))}, "latency_s has shape"),
        ({"paths": paths_of([[0], [2]])}, "a path names a link that does not exist"),
        ({"paths": paths_of([[0], [-1]])}, "a path names a link that does not exist"),
        (
            {"dependencies": Dependencies(np.array([0, 1, 2]), np.array([1, 0]))},
            "never started",
        ),
        (
            {"dependencies": Dependencies(np.array([0, 1]), np.array([1]))},
            "dependencies do not match",
        ),
        (
            {"dependencies": Dependencies(np.array([0, 0, 1]), np.array([5]))},
            "dependencies do not match",
        ),
        ({"capacity_bps": np.array([1.0, 0.0])}, "can make no progress"),
    ],
)
def test_bad_inputs(change: dict, message: str) -> None:
    with pytest.raises(EngineError, match=message):
        simulate(**(_base() | change))


def test_progress_reports_every_flow() -> None:
    seen: list[tuple[int, int]] = []
    rows = [[0]] * 10
    simulate(
        paths_of(rows),
        np.array([8.0]),
        np.arange(1, 11),
        np.zeros(10),
        np.full(10, 100.0),
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen[-1] == (10, 10)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_weighted_paths_in_simulation() -> None:
    # f0 sprays 0.5/0.5 over L0, L1 (cap 80 each) alone: rate 160, 1600 bits -> 10 s
    paths = Paths(np.array([0, 2]), np.array([0, 1]), np.array([0.5, 0.5]))
    result = simulate(
        paths, np.array([80.0, 80.0]), np.array([200.0]), np.zeros(1), np.array([1e9])
    )
    np.testing.assert_allclose(result.finish_s, [10.0])


def test_flows_finishing_together_free_their_link() -> None:
    # Regression: two flows completing in one batch on a saturated link must let the third
    # rise (the engine once checked each finished flow's share alone and skipped the re-solve).
    # link 1 bit/s; f0, f1 (8 bits) at 0.5 until f2 arrives at 0.5 s, then 1/3 each.
    # f0, f1 have 7.75 bits left -> done at 0.5 + 23.25 = 23.75 s; f2 sent 7.75 bits, 0.25 left
    # at 1 bit/s -> 24.0 s (not 24.5 s at its old 1/3 rate).
    result = run([[0], [0], [0]], [1.0], [1, 1, 1], start=[0.0, 0.0, 0.5], caps=[1.0] * 3)
    np.testing.assert_allclose(result.finish_s, [23.75, 23.75, 24.0], rtol=1e-12)


@pytest.mark.parametrize("compiled", [False, True])
def test_both_kernels_drive_the_simulator(monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    import cloudtwin.engine.maxmin as maxmin

    if compiled and not maxmin.COMPILED:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(maxmin, "COMPILED", compiled)
    # the hand-computed cases above, on the chosen kernel
    result = run([[0], [0], [0]], [1.0], [1, 1, 1], start=[0.0, 0.0, 0.5], caps=[1.0] * 3)
    np.testing.assert_allclose(result.finish_s, [23.75, 23.75, 24.0], rtol=1e-12)
    sizes_bits = np.array([16.0, 22.0, 8.0, 16.0, 68.0])
    result = run([[0, 1], [0], [1], [1, 2], [2]], [10.0, 8.0, 20.0], sizes_bits / 8)
    np.testing.assert_allclose(result.finish_s, [5.0, 3.0, 3.0, 5.0, 4.0], rtol=1e-9)

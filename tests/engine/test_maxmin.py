"""Exact max-min fair rates: hand-computed cases and the max-min conditions on random instances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.engine import max_min_rates, water_fill
from cloudtwin.engine.maxmin import COMPILED

BIG = 1e12  # a cap that never binds
KERNELS = [False, True] if COMPILED else [False]
# every test runs on the numpy kernel and, where numba is installed, on the compiled one
pytestmark = pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: "numba" if k else "numpy")


def rates(
    paths: list[list[int]],
    capacity: list[float],
    caps: list[float] | None = None,
    weights: list[list[float]] | None = None,
    kernel: bool = False,
) -> np.ndarray:
    flow = np.repeat(np.arange(len(paths)), [len(p) for p in paths]).astype(np.int64)
    links = np.array([link for p in paths for link in p], dtype=np.int64)
    w = np.ones(links.size) if weights is None else np.array([x for row in weights for x in row])
    cap = np.full(len(paths), BIG) if caps is None else np.array(caps, dtype=float)
    return water_fill(flow, links, w, np.array(capacity, dtype=float), cap, compiled=kernel)


def test_single_link_equal_split(kernel: bool) -> None:
    # 3 flows on a 9 bit/s link: 3 each
    np.testing.assert_allclose(rates([[0], [0], [0]], [9.0], kernel=kernel), [3.0, 3.0, 3.0], rtol=1e-12)


def test_two_links_bottleneck_then_rest(kernel: bool) -> None:
    # L0 cap 1 holds f0,f1 -> 0.5 each; L1 cap 2 holds f0,f2 -> f2 takes 2 - 0.5 = 1.5
    np.testing.assert_allclose(
        rates([[0, 1], [0], [1]], [1.0, 2.0], kernel=kernel), [0.5, 0.5, 1.5], rtol=1e-12
    )


def test_classic_three_links(kernel: bool) -> None:
    # L0 (10): f0, f1; L1 (8): f0, f2, f3; L2 (20): f3, f4.
    # L1 saturates first at 8/3: f0 = f2 = f3 = 8/3.
    # L0 left for f1: 10 - 8/3 = 22/3.  L2 left for f4: 20 - 8/3 = 52/3.
    got = rates([[0, 1], [0], [1], [1, 2], [2]], [10.0, 8.0, 20.0], kernel=kernel)
    np.testing.assert_allclose(got, [8 / 3, 22 / 3, 8 / 3, 8 / 3, 52 / 3], rtol=1e-12)


def test_nic_cap_lets_others_take_more(kernel: bool) -> None:
    # link 10; f0 capped at 2 -> f1 and f2 share the remaining 8
    np.testing.assert_allclose(
        rates([[0], [0], [0]], [10.0], [2.0, 100.0, 100.0], kernel=kernel), [2.0, 4.0, 4.0]
    )


def test_all_capped_below_link(kernel: bool) -> None:
    np.testing.assert_allclose(rates([[0], [0]], [10.0], [1.0, 3.0], kernel=kernel), [1.0, 3.0])


def test_weighted_split_flow(kernel: bool) -> None:
    # f0 sprays half on L0 and half on L1 (cap 10 each); f1 on L0 only.
    # L0 load per unit of level: 0.5 + 1 = 1.5 -> saturates at 20/3; L1 would allow 20.
    got = rates([[0, 1], [0]], [10.0, 10.0], weights=[[0.5, 0.5], [1.0]], kernel=kernel)
    np.testing.assert_allclose(got, [20 / 3, 20 / 3], rtol=1e-12)


def test_weighted_split_flow_fills_both_halves(kernel: bool) -> None:
    # f0 split 0.5/0.5 over L0, L1 (cap 10 each), alone: rate 20 (each half carries 10)
    np.testing.assert_allclose(rates([[0, 1]], [10.0, 10.0], weights=[[0.5, 0.5]], kernel=kernel), [20.0])


def test_flow_without_links_gets_its_cap(kernel: bool) -> None:
    np.testing.assert_allclose(rates([[], [0]], [5.0], [7.0, 100.0], kernel=kernel), [7.0, 5.0])


def test_no_flows(kernel: bool) -> None:
    assert rates([], [1.0], kernel=kernel).size == 0


def test_cap_count_must_match(kernel: bool) -> None:
    from cloudtwin.errors import EngineError

    with pytest.raises(EngineError, match="rate_cap_bps has 1 entries for 2 flows"):
        max_min_rates(np.array([0, 1, 2]), np.array([0, 0]), np.array([1.0]), np.array([1.0]))


@st.composite
def instances(draw, weighted: bool = False):
    n_links = draw(st.integers(1, 6))
    capacity = draw(st.lists(st.floats(0.5, 100.0), min_size=n_links, max_size=n_links))
    n_flows = draw(st.integers(1, 10))
    paths = [
        draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True))
        for _ in range(n_flows)
    ]
    caps = draw(st.lists(st.floats(0.1, 200.0), min_size=n_flows, max_size=n_flows))
    weights = None
    if weighted:
        weights = [
            draw(st.lists(st.sampled_from([0.25, 0.5, 1.0]), min_size=len(p), max_size=len(p))) for p in paths
        ]
    return paths, capacity, caps, weights


def check_max_min(paths, capacity, caps, weights, got: np.ndarray) -> None:
    capacity = np.asarray(capacity)
    weights = weights or [[1.0] * len(p) for p in paths]
    load = np.zeros(capacity.size)
    for f, (path, w) in enumerate(zip(paths, weights, strict=True)):
        for link, x in zip(path, w, strict=True):
            load[link] += x * got[f]
    assert np.all(got > 0)
    assert np.all(load <= capacity * (1 + 1e-9)), "a link is above capacity"
    assert np.all(got <= np.asarray(caps) * (1 + 1e-9)), "a flow is above its cap"
    saturated = load >= capacity * (1 - 1e-9)
    for f, path in enumerate(paths):
        if got[f] >= caps[f] * (1 - 1e-9):
            continue
        bottleneck = [
            link
            for link in path
            if saturated[link]
            and all(got[f] >= got[g] * (1 - 1e-9) for g, other in enumerate(paths) if link in other)
        ]
        assert bottleneck, f"flow {f} ({got[f]}) is below its cap with no bottleneck link"


@settings(max_examples=150, deadline=None)
@given(instances())
def test_max_min_conditions(kernel: bool, instance) -> None:
    paths, capacity, caps, _ = instance
    got = rates(paths, capacity, caps, kernel=kernel)
    check_max_min(paths, capacity, caps, None, got)
    np.testing.assert_array_equal(got, rates(paths, capacity, caps, kernel=kernel))  # deterministic


@settings(max_examples=100, deadline=None)
@given(instances(weighted=True))
def test_max_min_conditions_weighted(kernel: bool, instance) -> None:
    paths, capacity, caps, weights = instance
    got = rates(paths, capacity, caps, weights, kernel=kernel)
    check_max_min(paths, capacity, caps, weights, got)


@settings(max_examples=50, deadline=None)
@given(instances(), st.randoms(use_true_random=False))
def test_flow_order_does_not_matter(kernel: bool, instance, rnd) -> None:
    paths, capacity, caps, _ = instance
    order = list(range(len(paths)))
    rnd.shuffle(order)
    got = rates(paths, capacity, caps, kernel=kernel)
    shuffled = rates([paths[i] for i in order], capacity, [caps[i] for i in order], kernel=kernel)
    np.testing.assert_allclose(shuffled, got[order], rtol=1e-9)


def test_water_fill_ignores_unused_links(kernel: bool) -> None:
    # link 1 (capacity 0.001) is used by nobody; f0 alone on link 0
    got = water_fill(np.array([0]), np.array([0]), np.array([1.0]), np.array([4.0, 0.001]), np.array([9.0]))
    np.testing.assert_allclose(got, [4.0])


@settings(max_examples=100, deadline=None)
@given(instances(weighted=True))
def test_kernels_agree(kernel: bool, instance) -> None:
    paths, capacity, caps, weights = instance
    numpy_rates = rates(paths, capacity, caps, weights, kernel=False)
    np.testing.assert_allclose(rates(paths, capacity, caps, weights, kernel=kernel), numpy_rates, rtol=1e-9)


def test_max_min_rates_csr_entry_point(kernel: bool) -> None:
    # the CSR form of the classic case: rows [0,1], [0], [1], [1,2], [2]
    got = max_min_rates(
        np.array([0, 2, 3, 4, 6, 7]),
        np.array([0, 1, 0, 1, 1, 2, 2]),
        np.array([10.0, 8.0, 20.0]),
        np.full(5, BIG),
    )
    np.testing.assert_allclose(got, [8 / 3, 22 / 3, 8 / 3, 8 / 3, 52 / 3], rtol=1e-12)

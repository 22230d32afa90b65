"""Bipartite edge colouring (König): max-degree colours always suffice."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.routing import color_bipartite_edges

edges = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=60)


def max_degree(left: np.ndarray, right: np.ndarray) -> int:
    return max(int(np.bincount(left).max()), int(np.bincount(right).max()))


def uses(side: np.ndarray, color: np.ndarray) -> int:
    """The largest number of times one vertex holds one colour."""
    pairs = side * 10_000 + color
    return int(np.unique(pairs, return_counts=True)[1].max())


@settings(max_examples=200, deadline=None)
@given(edges, st.integers(0, 3))
def test_proper_colouring_with_max_degree_colours(pairs, extra: int) -> None:
    left = np.array([a for a, _ in pairs])
    right = np.array([b for _, b in pairs])
    colors = max_degree(left, right) + extra
    color = color_bipartite_edges(left, right, colors)
    assert color.shape == left.shape
    assert color.min() >= 0 and color.max() < colors
    assert uses(left, color) == 1
    assert uses(right, color) == 1


@settings(max_examples=100, deadline=None)
@given(edges, st.integers(1, 4))
def test_fewer_colours_than_degree_are_dealt_evenly(pairs, colors: int) -> None:
    left = np.array([a for a, _ in pairs])
    right = np.array([b for _, b in pairs])
    bound = math.ceil(max_degree(left, right) / colors)
    color = color_bipartite_edges(left, right, colors)
    assert color.min() >= 0 and color.max() < colors
    assert uses(left, color) <= bound
    assert uses(right, color) <= bound


def test_complete_bipartite_needs_all_colours() -> None:
    # K_{4,4}: degree 4, 16 edges -> every vertex sees all 4 colours once (a Latin square)
    left, right = (a.ravel() for a in np.meshgrid(np.arange(4), np.arange(4), indexing="ij"))
    color = color_bipartite_edges(left, right, 4).reshape(4, 4)
    for row in color:
        assert sorted(row.tolist()) == [0, 1, 2, 3]
    for column in color.T:
        assert sorted(column.tolist()) == [0, 1, 2, 3]


def test_empty() -> None:
    assert color_bipartite_edges(np.array([]), np.array([]), 3).size == 0

"""Edge colouring of bipartite multigraphs (König): Δ colours suffice, found with Kempe chains.

This is what lets a pinning controller route any permutation on a non-blocking Clos
without a shared link: colours are uplinks, left vertices source switches, right
vertices destination switches.
"""

from __future__ import annotations

import numpy as np

__all__ = ["color_bipartite_edges"]


def color_bipartite_edges(left: np.ndarray, right: np.ndarray, colors: int) -> np.ndarray:
    """A colour in [0, colors) per edge (left[i], right[i]) so that edges sharing a vertex
    differ wherever the maximum degree allows (degree <= colors); above that, colours
    are dealt so that no vertex holds a colour more than ceil(degree / colors) times.

    >>> color_bipartite_edges(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), 2).tolist()
    [1, 0, 0, 1]
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if left.size == 0:
        return np.empty(0, dtype=np.int64)
    degree = max(int(np.bincount(left).max()), int(np.bincount(right).max()))
    palette = max(degree, colors)
    at_left = np.full((int(left.max()) + 1, palette), -1, dtype=np.int64)
    at_right = np.full((int(right.max()) + 1, palette), -1, dtype=np.int64)
    color = np.full(left.size, -1, dtype=np.int64)
    for edge in range(left.size):
        u, v = int(left[edge]), int(right[edge])
        a = int(np.argmax(at_left[u] < 0))
        if at_right[v, a] >= 0:
            b = int(np.argmax(at_right[v] < 0))
            _swap_chain(v, a, b, at_left, at_right, left, right, color)
        color[edge] = a
        at_left[u, a] = edge
        at_right[v, a] = edge
    return color % colors


def _swap_chain(
    v: int,
    a: int,
    b: int,
    at_left: np.ndarray,
    at_right: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    color: np.ndarray,
) -> None:
    """Swap colours a and b along the a/b alternating path that starts at right vertex v."""
    chain: list[int] = []
    side_right, vertex, want = True, v, a
    while True:
        table = at_right if side_right else at_left
        edge = int(table[vertex, want])
        if edge < 0:
            break
        chain.append(edge)
        vertex = int(left[edge]) if side_right else int(right[edge])
        side_right = not side_right
        want = b if want == a else a
    for edge in chain:
        old = int(color[edge])
        at_left[left[edge], old] = -1
        at_right[right[edge], old] = -1
    for edge in chain:
        new = b if int(color[edge]) == a else a
        color[edge] = new
        at_left[left[edge], new] = edge
        at_right[right[edge], new] = edge

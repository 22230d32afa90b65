"""Path and flow operations on the shared data types, against hand-computed results."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cloudtwin.flows import Flows, Paths

# flow 0: links 5, 6; flow 1: link 7; flow 2: links 6, 8 (half its rate on each entry)
PATHS = Paths(np.array([0, 2, 3, 5]), np.array([5, 6, 7, 6, 8]), np.array([1.0, 1.0, 1.0, 0.5, 0.5]))


def _flows(n: int) -> Flows:
    column = np.arange(n, dtype=np.int64)
    return Flows(column, column + 10, column * 100.0, column * 1e-3, column % 2, column % 3,
                 column, column + 1, column + 2, column + 3)


def test_take_picks_rows_in_order_with_repeats() -> None:
    taken = PATHS.take(np.array([2, 0, 2]))
    assert taken.indptr.tolist() == [0, 2, 4, 6]
    assert taken.link_ids.tolist() == [6, 8, 5, 6, 6, 8]
    assert taken.weights is not None and taken.weights.tolist() == [0.5, 0.5, 1, 1, 0.5, 0.5]
    assert PATHS.take(np.array([], dtype=np.int64)).flow_count == 0


def test_crosses_counts_entries_with_a_positive_weight_only() -> None:
    mask = np.zeros(9, dtype=bool)
    mask[6] = True
    assert PATHS.crosses(mask).tolist() == [True, False, True]
    unused = Paths(np.array([0, 1]), np.array([6]), np.array([0.0]))
    assert unused.crosses(mask).tolist() == [False]


def test_differs_compares_links_and_weights() -> None:
    moved = PATHS.replace(np.array([1]), Paths(np.array([0, 2]), np.array([7, 8])))
    assert PATHS.differs(moved).tolist() == [False, True, False]
    reweighted = Paths(PATHS.indptr, PATHS.link_ids, np.array([1.0, 1.0, 1.0, 0.25, 0.75]))
    assert PATHS.differs(reweighted).tolist() == [False, False, True]
    assert not PATHS.differs(PATHS).any()


def test_flows_take_keeps_every_column() -> None:
    flows = _flows(4)
    taken = flows.take(np.array([3, 1]))
    assert len(taken) == 2
    assert taken.src.tolist() == [3, 1] and taken.sport.tolist() == [6, 4] and taken.job.tolist() == [0, 1]


@given(st.lists(st.integers(0, 2), max_size=8))
def test_take_then_concat_is_the_same_as_take_of_the_concatenation(rows: list[int]) -> None:
    index = np.array(rows, dtype=np.int64)
    both = Paths.concat([PATHS, PATHS])
    once = PATHS.take(index)
    twice = both.take(index + 3)
    assert not once.differs(twice).any() if len(rows) else twice.flow_count == 0

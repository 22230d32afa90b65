"""Tests of the grouping accuracy metric."""

from __future__ import annotations

import pytest

from cloudtwin.ops import grouping_accuracy


def test_perfect_grouping_scores_one_whatever_the_labels() -> None:
    assert grouping_accuracy(["a", "a", "b"], [7, 7, 3]) == 1.0


def test_a_split_group_makes_all_its_lines_wrong() -> None:
    assert grouping_accuracy(["a", "a", "b", "b"], [1, 2, 3, 3]) == 0.5


def test_a_merged_group_makes_all_its_lines_wrong() -> None:
    assert grouping_accuracy(["a", "a", "b", "c"], [1, 1, 1, 2]) == 0.25


def test_lengths_must_agree() -> None:
    with pytest.raises(ValueError, match="2 truth labels but 1"):
        grouping_accuracy(["a", "b"], [1])

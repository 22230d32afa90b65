"""Grouping accuracy (GA) of a template miner against ground-truth event ids."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

__all__ = ["grouping_accuracy"]


def grouping_accuracy(truth: Sequence[Hashable], predicted: Sequence[Hashable]) -> float:
    """The fraction of lines whose predicted group is exactly their true group.

    As in the Loghub benchmark (Zhu et al., ICSE 2019): a line is correct iff the set of
    lines in its predicted group equals the set of lines that share its true event id.

    >>> grouping_accuracy(["a", "a", "b", "c"], [1, 1, 2, 2])
    0.5
    """
    if len(truth) != len(predicted):
        raise ValueError(f"{len(truth)} truth labels but {len(predicted)} predictions")
    if not truth:
        return 1.0
    pred_groups: dict[Hashable, list[int]] = defaultdict(list)
    true_groups: dict[Hashable, int] = defaultdict(int)
    for i, (t, p) in enumerate(zip(truth, predicted, strict=True)):
        pred_groups[p].append(i)
        true_groups[t] += 1
    correct = 0
    for members in pred_groups.values():
        labels = {truth[i] for i in members}
        if len(labels) == 1 and true_groups[next(iter(labels))] == len(members):
            correct += len(members)
    return correct / len(truth)

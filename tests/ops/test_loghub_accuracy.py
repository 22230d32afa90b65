"""Grouping accuracy of the miner on the eight Loghub-2k systems, as floors.

Measured with the Loghub benchmark settings (per-system format, masking regexes,
similarity threshold and depth): HDFS 0.9975, Hadoop 0.9475, Spark 0.9200,
Zookeeper 0.9665, BGL 0.9625, OpenSSH 0.7875, Apache 1.0000, Linux 0.6900
(mean 0.9089). These equal the Drain figures published by Zhu et al. (ICSE 2019).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cloudtwin.ops import PRESETS, MinerConfig, TemplateMiner, grouping_accuracy

Lines = Callable[[str], list[str]]
Rows = Callable[[str], list[dict[str, str]]]
SYSTEMS = ["HDFS", "Hadoop", "Spark", "Zookeeper", "BGL", "OpenSSH", "Apache", "Linux"]

FLOORS = {
    "HDFS": 0.995, "Hadoop": 0.945, "Spark": 0.915, "Zookeeper": 0.96,
    "BGL": 0.96, "OpenSSH": 0.78, "Apache": 0.995, "Linux": 0.685,
}


def _accuracy(system: str, raw_lines: Lines, structured: Rows) -> float:
    preset = PRESETS[system.lower()]
    miner = TemplateMiner(
        MinerConfig(depth=preset.depth, sim_threshold=preset.sim_threshold, masks=preset.masks)
    )
    contents = []
    for line in raw_lines(system):
        fields = preset.format.parse(line)
        assert fields is not None
        contents.append(fields["Content"].strip())
    predicted = miner.add_batch(contents).tolist()
    return grouping_accuracy([row["EventId"] for row in structured(system)], predicted)


@pytest.mark.parametrize("system", SYSTEMS)
def test_grouping_accuracy_floor(system: str, raw_lines: Lines, structured: Rows) -> None:
    assert _accuracy(system, raw_lines, structured) >= FLOORS[system]


def test_mean_grouping_accuracy_is_at_least_090(raw_lines: Lines, structured: Rows) -> None:
    scores = [_accuracy(s, raw_lines, structured) for s in SYSTEMS]
    assert sum(scores) / len(scores) >= 0.90

"""Tests of the template miner: batch and streaming agree, incremental mining, config."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cloudtwin.errors import LogFormatError
from cloudtwin.ops import PRESETS, MinerConfig, TemplateMiner

Lines = Callable[[str], list[str]]


def _contents(system: str, raw_lines: Lines) -> list[str]:
    fmt = PRESETS[system.lower()].format
    return [fields["Content"].strip() for line in raw_lines(system) if (fields := fmt.parse(line))]


def _config(system: str) -> MinerConfig:
    p = PRESETS[system.lower()]
    return MinerConfig(depth=p.depth, sim_threshold=p.sim_threshold, masks=p.masks)


def test_batches_give_the_same_groups_as_one_by_one(system: str, raw_lines: Lines) -> None:
    contents = _contents(system, raw_lines)
    one_by_one = TemplateMiner(_config(system)).add_many(contents)
    miner = TemplateMiner(_config(system))
    batched = miner.add_batch(contents[:613]).tolist() + miner.add_batch(contents[613:]).tolist()
    assert batched == one_by_one
    assert sum(c.size for c in miner.clusters) == len(contents)


def test_a_second_file_extends_the_same_template_set(raw_lines: Lines) -> None:
    contents = _contents("HDFS", raw_lines)
    miner = TemplateMiner(_config("HDFS"))
    first = miner.add_batch(contents[:1000]).tolist()
    known = len(miner.clusters)
    second = miner.add_batch(contents[1000:]).tolist()
    whole = TemplateMiner(_config("HDFS")).add_many(contents)
    assert first + second == whole
    assert len(miner.clusters) >= known


def test_restored_templates_route_like_the_originals() -> None:
    miner = TemplateMiner(MinerConfig(masks=(r"\d+",)))
    miner.add_batch(["port 1 down", "port 2 down", "bgp peer up"])
    copy = TemplateMiner(MinerConfig(masks=(r"\d+",)))
    for c in miner.clusters:
        copy.restore(c.template_id, c.template, c.size, c.route)
    assert copy.add("port 9 down").template_id == 1
    assert copy.cluster(1).size == 3


def test_different_messages_get_different_templates() -> None:
    miner = TemplateMiner()
    ids = miner.add_many(["link Ethernet1 down", "link Ethernet1 up", "fan tray failed now"])
    assert ids == [1, 1, 2]
    assert miner.cluster(1).template == "link Ethernet1 <*>"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"depth": 2}, "depth"),
        ({"sim_threshold": 1.5}, "similarity"),
        ({"max_children": 1}, "children"),
    ],
)
def test_bad_config_is_rejected(kwargs: dict[str, float], reason: str) -> None:
    with pytest.raises(LogFormatError, match=reason):
        MinerConfig(**kwargs)  # type: ignore[arg-type]


def test_bad_mask_is_rejected() -> None:
    with pytest.raises(LogFormatError, match="mask '\\(' is not a valid pattern"):
        TemplateMiner(MinerConfig(masks=("(",)))

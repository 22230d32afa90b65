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
    return PRESETS[system.lower()].miner_config()


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
    miner = TemplateMiner()
    miner.add_batch(["port 1 down", "port 2 down", "bgp peer up"])
    copy = TemplateMiner()
    for c in miner.clusters:
        copy.restore(c.template_id, c.template, c.size, c.route)
    assert copy.add("port 9 down").template_id == 1
    assert copy.cluster(1).size == 3


def test_different_messages_get_different_templates() -> None:
    miner = TemplateMiner()
    ids = miner.add_many(
        ["link Ethernet1 down", "link Ethernet2 down", "link Ethernet1 up", "fan tray failed now"]
    )
    assert ids == [1, 1, 2, 3]
    assert miner.cluster(1).template == "link <*> down"


def test_shared_variables_neither_help_nor_hurt_a_match() -> None:
    """Many numbers in common do not join two events whose words differ."""
    miner = TemplateMiner()
    ids = miner.add_many([
        "Received disconnect from 10.0.0.1: 11: Bye Bye [preauth]",
        "Received disconnect from 10.0.0.2: 11: disconnected by user",
        "Received disconnect from 10.0.0.3: 11: Bye Bye [preauth]",
    ])
    assert ids == [1, 2, 1]


def test_drain_similarity_counts_every_position() -> None:
    """Stores mined before the "constants" measure keep Drain's, which joins these."""
    miner = TemplateMiner(MinerConfig(depth=4, sim_threshold=0.5, similarity="drain"))
    ids = miner.add_many(["cupsd startup succeeded", "cupsd shutdown succeeded"])
    assert ids == [1, 1]
    assert miner.cluster(1).template == "cupsd <*> succeeded"


def test_absorb_routes_a_template_like_a_message(raw_lines: Lines) -> None:
    """Merging a worker's groups into another miner gives the groups of one miner."""
    contents = _contents("OpenSSH", raw_lines)
    whole = TemplateMiner()
    whole.add_batch(contents)
    first, second = TemplateMiner(), TemplateMiner()
    first.add_batch(contents[:1000])
    second.add_batch(contents[1000:])
    for cluster in second.clusters:
        first.absorb(cluster.tokens, cluster.size)
    assert sum(c.size for c in first.clusters) == len(contents)
    assert sorted(c.template for c in first.clusters) == sorted(c.template for c in whole.clusters)


def test_absorb_starts_a_group_for_a_new_template() -> None:
    miner = TemplateMiner()
    miner.add("disk 1 full")
    cluster = miner.absorb(["fan", "<*>", "failed"], 5)
    assert (cluster.template_id, cluster.size, cluster.template) == (2, 5, "fan <*> failed")
    assert [c.template_id for c in miner.take_changed()] == [1, 2]


def test_same_input_gives_the_same_ids(raw_lines: Lines) -> None:
    contents = _contents("Linux", raw_lines)
    assert TemplateMiner().add_many(contents) == TemplateMiner().add_many(contents)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"depth": 2}, "depth"),
        ({"sim_threshold": 1.5}, "similarity"),
        ({"max_children": 1}, "children"),
        ({"similarity": "cosine"}, "similarity must be"),
    ],
)
def test_bad_config_is_rejected(kwargs: dict[str, object], reason: str) -> None:
    with pytest.raises(LogFormatError, match=reason):
        MinerConfig(**kwargs)  # type: ignore[arg-type]


def test_bad_mask_is_rejected() -> None:
    with pytest.raises(LogFormatError, match="mask '\\(' is not a valid pattern"):
        TemplateMiner(MinerConfig(masks=("(",)))


def test_optional_variable_parts_do_not_split_an_event() -> None:
    miner = TemplateMiner()
    ids = miner.add_many([
        "proxy:5070 close, 453 bytes sent, 352 bytes received, lifetime 00:02",
        "proxy:5070 close, 1481 bytes (1.44 KB) sent, 1804 bytes (1.76 KB) received, lifetime 00:32",
        "proxy:5070 close, 935 bytes sent, 6675 bytes (6.51 KB) received, lifetime <1 sec",
        "proxy:5070 open through proxy proxy:5070 HTTPS",
    ])
    assert ids == [1, 1, 1, 2]
    apart = TemplateMiner(MinerConfig(join_by_words=False))
    assert apart.add_many(["a 1 b", "a 1 2 b"]) == [1, 2]


def test_joining_by_words_restores_to_the_same_routes(raw_lines: Lines) -> None:
    """The index by constant words follows the templates, so a copy joins the same way."""
    contents = _contents("BGL", raw_lines)
    miner = TemplateMiner()
    first = miner.add_batch(contents[:1000]).tolist()
    copy = TemplateMiner()
    for c in miner.clusters:
        copy.restore(c.template_id, c.template, c.size, c.route)
    copy.restore_cache(miner.take_cache_changes()[1])
    assert copy.add_batch(contents[1000:]).tolist() == miner.add_batch(contents[1000:]).tolist()
    assert len(first) == 1000

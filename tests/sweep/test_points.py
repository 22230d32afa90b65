"""Points of a sweep: product and zip, the seed under zip, keys, and the points checked first."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudtwin.errors import SweepError
from cloudtwin.sweep import Plan, parse_vary, point_key


def plan(*varies: str, zipped: bool = False) -> Plan:
    return Plan(tuple(parse_vary(v) for v in varies), zipped)


def test_product_in_order_last_key_fastest() -> None:
    p = plan("seed=1..2", "routing.strategy=ecmp,pinning")
    assert list(p.overrides()) == [
        ("seed=1", "routing.strategy=ecmp"),
        ("seed=1", "routing.strategy=pinning"),
        ("seed=2", "routing.strategy=ecmp"),
        ("seed=2", "routing.strategy=pinning"),
    ]
    assert p.size == 4


def test_zip_pairs_values_and_a_varied_seed_still_multiplies() -> None:
    p = plan("fabric.leaves=4,8", "seed=1..3", "tenants.0.hosts=0-7,0-15", zipped=True)
    points = list(p.overrides())
    assert p.size == len(points) == 6
    assert points[0] == ("fabric.leaves=4", "seed=1", "tenants.0.hosts=0-7")
    assert points[5] == ("fabric.leaves=8", "seed=3", "tenants.0.hosts=0-15")
    assert {(a, c) for a, _, c in points} == {
        ("fabric.leaves=4", "tenants.0.hosts=0-7"),
        ("fabric.leaves=8", "tenants.0.hosts=0-15"),
    }


def test_zip_needs_equal_lengths() -> None:
    with pytest.raises(SweepError, match="zip: .*fabric.leaves has 2, fabric.spines has 3"):
        plan("fabric.leaves=4,8", "fabric.spines=1,2,3", zipped=True)


def test_a_key_varied_twice_is_refused() -> None:
    with pytest.raises(SweepError, match="vary seed: the key is varied twice"):
        plan("seed=1,2", "seed=3")


def test_keys_depend_on_task_and_overrides_only() -> None:
    p = plan("seed=1..3")
    first, again, other = p.points("task-a"), p.points("task-a"), p.points("task-b")
    assert [x.key for x in first] == [x.key for x in again]
    assert not {x.key for x in first} & {x.key for x in other}
    assert len({x.key for x in first}) == 3
    assert first[1].key == point_key("task-a", ("seed=2",))


def test_checks_cover_every_combination_and_the_seeds_range_ends() -> None:
    p = plan("fabric.spines=2,4", "seed=1..1000", "routing.strategy=ecmp,pinning")
    assert list(p.checks()) == [
        ("fabric.spines=2", "seed=1", "routing.strategy=ecmp"),
        ("fabric.spines=2", "seed=1", "routing.strategy=pinning"),
        ("fabric.spines=4", "seed=1", "routing.strategy=ecmp"),
        ("fabric.spines=4", "seed=1", "routing.strategy=pinning"),
        ("fabric.spines=2", "seed=1000", "routing.strategy=ecmp"),
    ]
    assert p.check_count() == 5 and set(p.checks()) <= set(p.overrides())


def test_checks_under_zip_pair_values_and_without_a_seed_are_every_point() -> None:
    zipped = plan("seed=5,1..3", "fabric.leaves=4,8", "fabric.spines=1,2", zipped=True)
    assert list(zipped.checks()) == [
        ("seed=5", "fabric.leaves=4", "fabric.spines=1"),
        ("seed=5", "fabric.leaves=8", "fabric.spines=2"),
        ("seed=1", "fabric.leaves=4", "fabric.spines=1"),
        ("seed=3", "fabric.leaves=4", "fabric.spines=1"),
    ]
    assert zipped.check_count() == 4
    only_seed = plan("seed=0..9")
    assert list(only_seed.checks()) == [("seed=0",), ("seed=9",)] and only_seed.check_count() == 2
    no_seed = plan("fabric.leaves=4,8", "fabric.spines=1,2")
    assert list(no_seed.checks()) == list(no_seed.overrides()) and no_seed.check_count() == 4


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.booleans())
def test_size_matches_expansion_and_points_are_distinct(counts: list[int], zipped: bool) -> None:
    if zipped:
        counts = [counts[0]] * len(counts)
    varies = [f"k{i}=" + ",".join(str(v) for v in range(n)) for i, n in enumerate(counts)]
    p = plan(*varies, zipped=zipped)
    points = list(p.overrides())
    assert len(points) == p.size == len(set(points))
    expected = counts[0] if zipped else len(list(itertools.product(*[range(n) for n in counts])))
    assert p.size == expected


def test_value_checks_take_each_probe_once_and_the_last_corner() -> None:
    p = plan("fabric.spines=2,4", "seed=1..1000", "routing.strategy=ecmp,pinning")
    assert p.value_checks() == [
        ("fabric.spines=2", "seed=1", "routing.strategy=ecmp"),
        ("fabric.spines=4", "seed=1", "routing.strategy=ecmp"),
        ("fabric.spines=2", "seed=1000", "routing.strategy=ecmp"),
        ("fabric.spines=2", "seed=1", "routing.strategy=pinning"),
        ("fabric.spines=4", "seed=1000", "routing.strategy=pinning"),
    ]
    big = plan("fabric.spines=1..1000", "fabric.leaves=1..1000")
    assert big.size == 1_000_000 and big.value_checks() == [
        ("fabric.spines=1", "fabric.leaves=1"),
        ("fabric.spines=1000", "fabric.leaves=1"),
        ("fabric.spines=1", "fabric.leaves=1000"),
        ("fabric.spines=1000", "fabric.leaves=1000"),
    ]


def test_value_checks_under_zip_take_the_pairs_holding_a_probe() -> None:
    zipped = plan("seed=5,1..3", "fabric.leaves=4..100", "fabric.spines=1..97", zipped=True)
    assert zipped.value_checks() == [
        ("seed=5", "fabric.leaves=4", "fabric.spines=1"),
        ("seed=5", "fabric.leaves=100", "fabric.spines=97"),
        ("seed=1", "fabric.leaves=4", "fabric.spines=1"),
        ("seed=3", "fabric.leaves=4", "fabric.spines=1"),
    ]
    assert set(zipped.value_checks()) <= set(zipped.overrides())

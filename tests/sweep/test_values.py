"""The KEY=VALUES grammar of --vary: lists, ranges, nested values, and its one-line errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudtwin.errors import SweepError
from cloudtwin.sweep import parse_vary, split_values


def test_list_and_range_mix_in_order() -> None:
    vary = parse_vary("seed=1..3,10,20..40:10")
    assert vary.key == "seed"
    assert vary.values == ("1", "2", "3", "10", "20", "30", "40")
    assert vary.probes == ("1", "3", "10", "20", "40")


def test_values_keep_their_yaml_text() -> None:
    vary = parse_vary("workload={kind: perftest, size: 1GiB},{kind: collective, op: allreduce}")
    assert vary.values == ("{kind: perftest, size: 1GiB}", "{kind: collective, op: allreduce}")
    assert parse_vary("tenants.0.hosts=0-7,'0-3,5'").values == ("0-7", "'0-3,5'")


def test_a_range_step_that_misses_the_end_probes_the_last_value() -> None:
    assert parse_vary("seed=0..10:4").values == ("0", "4", "8")
    assert parse_vary("seed=0..10:4").probes == ("0", "8")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seed", "expected key=values"),
        ("=1,2", "expected key=values"),
        ("seed=1..", "not a range like 1..100"),
        ("seed=a..b", "not a range like 1..100"),
        ("seed=1.5..3", "not a range like 1..100"),
        ("seed=5..1", "runs backwards"),
        ("seed=1..5:0", "step of at least 1"),
        ("seed=1,,2", "an empty value"),
        ("seed=", "an empty value"),
        ("seed=1,2,1", "given twice"),
        ("seed=0..99999999999", "more than"),
    ],
)
def test_malformed_varies_name_the_key_in_one_line(text: str, message: str) -> None:
    with pytest.raises(SweepError, match=message) as err:
        parse_vary(text)
    assert "\n" not in str(err.value)


@given(st.integers(-50, 50), st.integers(0, 60), st.integers(1, 7))
def test_ranges_are_inclusive_and_stepped(start: int, span: int, step: int) -> None:
    vary = parse_vary(f"k={start}..{start + span}:{step}")
    assert [int(v) for v in vary.values] == list(range(start, start + span + 1, step))
    assert vary.probes[0] == vary.values[0] and vary.probes[-1] == vary.values[-1]


ITEM = st.from_regex(r"[a-z0-9]{1,5}|\{[a-z]: [0-9], [a-z]: [0-9]\}|\[[0-9], [0-9]\]", fullmatch=True)


@given(st.lists(ITEM, min_size=1, max_size=6))
def test_split_values_undoes_a_join(items: list[str]) -> None:
    assert split_values(",".join(items)) == items

"""Hostile scenario documents: alias bombs, deep nesting, repeated keys, huge numbers."""

from __future__ import annotations

import pytest

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario import load_scenario

BASE = "name: t\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + f"\nname: *a{levels - 1}\n"


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    # 9^9 strings once expanded: this took 66 s and 5.4 GiB before
    with pytest.raises(ScenarioError, match="expands to more than 200,000 values"):
        load_scenario(_bomb(), "bomb.yaml")


def test_a_few_aliases_still_work() -> None:
    text = BASE + (
        "tenants:\n  - &t {name: a, vni: 10, hosts: '0-1'}\n"
        "  - {<<: *t, name: b, vni: 11, hosts: '2-3'}\n"
    )
    scenario = load_scenario(text, "s.yaml")
    assert [t.name for t in scenario.tenants] == ["a", "b"]


@pytest.mark.parametrize("text", ["[" * 20_000, "a: " + "[" * 5000 + "]" * 5000, "x:\n" + "".join(
    "  " * i + f"k{i}:\n" for i in range(1, 200)
)])
def test_deep_nesting_is_one_line_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ScenarioError, match="nested more than 64 levels deep|not valid YAML"):
        load_scenario(text, "deep.yaml")


def test_a_key_given_twice_is_refused_with_both_lines() -> None:
    expected = r"dup.yaml: line 4: .*key 'seed' appears twice \(first on line 3\)"
    with pytest.raises(ScenarioError, match=expected):
        load_scenario(BASE + "seed: 1\nseed: 2\n", "dup.yaml")


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ScenarioError, match="alias refers to a node that contains it|not valid"):
        load_scenario("name: &a [*a]\n", "loop.yaml")


def test_a_seed_beyond_64_bits_is_a_scenario_error() -> None:
    with pytest.raises(ScenarioError, match="seed"):
        load_scenario(BASE + f"seed: {2**64}\n", "s.yaml")


def test_an_override_into_a_scalar_names_the_key() -> None:
    text = BASE + "tenants: [t1]\n"
    with pytest.raises(ScenarioError, match="tenants.0 is a value, not a section"):
        load_scenario(text, "s.yaml", ["tenants.0.name=x"])


@pytest.mark.parametrize("prefix", ["a: ", "a: it's\nb: "])
def test_thirty_thousand_brackets_are_refused_at_once(prefix: str) -> None:
    # PyYAML's scanner is quadratic in flow nesting: this took about 110 s before
    with pytest.raises(ScenarioError, match="nested more than 64 levels deep"):
        load_scenario(prefix + "[" * 30_000 + "]" * 30_000, "deep.yaml")


def test_brackets_in_quotes_do_not_count_and_a_huge_text_is_refused() -> None:
    assert load_scenario(BASE.replace("name: t", "name: '[[[[[[[['"), "s.yaml").name == "[" * 8
    with pytest.raises(ScenarioError, match="more than the 1,048,576 a scenario may have"):
        load_scenario(BASE + "x: " + "y" * 2_000_000 + "\n", "big.yaml")


@pytest.mark.parametrize(
    "value", ["1__000", "0x10", "0o17", "0b11", "1:30", ".nan", ".inf", "-.inf", "1.0e+400"]
)
def test_yaml_numbers_beyond_plain_decimal_are_refused(value: str) -> None:
    # YAML 1.1 read these as 1000, 16, 3, 90, NaN, inf: a silent surprise in a scenario
    with pytest.raises(ScenarioError) as caught:
        load_scenario(BASE, "s.yaml", [f"seed={value}"])
    assert repr(value) in str(caught.value) and caught.value.field == "seed"


def test_a_leading_zero_is_decimal_not_octal_and_digits_may_be_grouped() -> None:
    assert load_scenario(BASE + "seed: 010\n", "s.yaml").seed == 10
    assert load_scenario(BASE + "seed: 3_600_000\n", "s.yaml").seed == 3_600_000


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("cluster.overheads.compute=nan", "cluster.overheads.compute"),
        ("cluster.overheads.nic_latency=-inf", "cluster.overheads.nic_latency"),
        ("faults=[{kind: link, target: leaf0-spine0, capacity: '\u0661\u0660%'}]", "faults.0.capacity"),
        ("faults=[{kind: link, target: leaf0-spine0, capacity: 'nan%'}]", "faults.0.capacity"),
        ("fabric.leaves=\uff12", "fabric.leaves"),
        ("fabric.leaves=\u0662", "fabric.leaves"),
    ],
)
def test_non_finite_and_non_ascii_numbers_are_refused_naming_the_field(override: str, field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(BASE, "s.yaml", [override])
    assert caught.value.field == field

"""Scenario files: the example validates; overrides; bad input is one line naming its key."""

from __future__ import annotations

import pytest

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario import (
    FatTreeFabric,
    LeafSpineFabric,
    RailOptimizedFabric,
    apply_overrides,
    load_scenario,
    parse_host_ranges,
)

# The example of issue 2, verbatim (comments included).
EXAMPLE = """\
name: leaf-spine-perftest
seed: 1
fabric:
  kind: leaf-spine        # leaf-spine | fat-tree (3-tier k-ary) | rail-optimized
  leaves: 16
  spines: 8
  hosts_per_leaf: 8
  host_link: 100Gbps
  uplink: 100Gbps         # one link from every leaf to every spine unless configured otherwise
  latency: 1us            # per link
hosts:
  nics: 1                 # NICs (rails) per host
tenants:                  # optional; default: one tenant holding every host
  - {name: t1, vni: 1001, hosts: "0-63"}
routing:
  strategy: ecmp          # ecmp | ecmp-qp | adaptive | spray | pinning | package.module:Class
workload:
  kind: perftest
  pattern: permutation    # pairs | permutation | shift | incast | all-to-all
  size: 1GiB
  qps: 1                  # QPs per connection
"""


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing `needle`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_issue_example_validates() -> None:
    scenario = load_scenario(EXAMPLE, "example.yaml")
    assert scenario.name == "leaf-spine-perftest"
    assert scenario.seed == 1
    fabric = scenario.fabric
    assert isinstance(fabric, LeafSpineFabric) and not isinstance(fabric, RailOptimizedFabric)
    assert (fabric.leaves, fabric.spines, fabric.hosts_per_leaf) == (16, 8, 8)
    assert fabric.host_link == 100e9 and fabric.uplink == 100e9
    assert fabric.latency == pytest.approx(1e-6)
    assert scenario.hosts.nics == 1
    assert scenario.host_count == 128  # 16 leaves * 8 hosts
    assert [(t.name, t.vni, t.hosts) for t in scenario.tenants] == [("t1", 1001, tuple(range(64)))]
    assert scenario.routing.strategy == "ecmp"
    assert scenario.workload.pattern == "permutation"
    assert scenario.workload.size == 1 << 30
    assert scenario.workload.qps == 1


def test_an_empty_file_is_refused_but_overrides_alone_give_defaults() -> None:
    for text in ("", "# only a comment\n", "{}\n"):
        with pytest.raises(ScenarioError, match="empty.yaml: the scenario is empty"):
            load_scenario(text, "empty.yaml")
    scenario = load_scenario("", "empty.yaml", ["name=defaults"])
    assert isinstance(scenario.fabric, LeafSpineFabric)
    assert scenario.tenants == ()
    assert scenario.host_count == 16 * 8


def test_scenario_is_frozen() -> None:
    scenario = load_scenario(EXAMPLE)
    with pytest.raises(Exception, match="frozen"):
        scenario.seed = 3  # type: ignore[misc]


def test_overrides_nested_and_top_level() -> None:
    scenario = load_scenario(
        EXAMPLE, "example.yaml", ["fabric.leaves=8", "seed=7", "routing.strategy=pinning"]
    )
    assert scenario.fabric.leaves == 8
    assert scenario.seed == 7
    assert scenario.routing.strategy == "pinning"


def test_override_list_index() -> None:
    scenario = load_scenario(EXAMPLE, "example.yaml", ["tenants.0.vni=7", "tenants.0.hosts=0-3"])
    assert scenario.tenants[0].vni == 7
    assert scenario.tenants[0].hosts == (0, 1, 2, 3)


def test_override_switches_fabric_kind() -> None:
    scenario = load_scenario("fabric: {kind: fat-tree}\n", "f.yaml", ["fabric.k=8"])
    assert isinstance(scenario.fabric, FatTreeFabric)
    assert scenario.fabric.k == 8
    assert scenario.host_count == 128  # k^3/4


def test_override_units_are_strict() -> None:
    scenario = load_scenario(EXAMPLE, "example.yaml", ["fabric.uplink=400G"])
    assert scenario.fabric.uplink == 400e9
    with pytest.raises(ScenarioError, match=r"fabric\.uplink: .*needs a unit"):
        load_scenario(EXAMPLE, "example.yaml", ["fabric.uplink=400"])


def test_apply_overrides_does_not_touch_its_input() -> None:
    data = {"fabric": {"leaves": 16}, "tenants": [{"vni": 1}]}
    out = apply_overrides(data, ["fabric.leaves=8", "tenants.0.vni=2"])
    assert data == {"fabric": {"leaves": 16}, "tenants": [{"vni": 1}]}
    assert out == {"fabric": {"leaves": 8}, "tenants": [{"vni": 2}]}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("fabric.spine=4", "fabric.spine: unknown key"),
        ("colour=red", "colour: unknown key"),
        ("tenants.3.vni=7", "tenants.3.vni: '3' is not an index of a 1-item list"),
        ("tenants.x.vni=7", "tenants.x.vni: 'x' is not an index"),
        ("tenants.\u00b9.vni=7", "tenants.\u00b9.vni: '\u00b9' is not an index"),  # a digit to isdigit() only
        ("seed", "override 'seed': expected key=value"),
        ("=3", "expected key=value"),
        ("seed.x=1", "seed.x: seed is a value, not a section"),
        ("fabric.leaves=abc", "fabric.leaves: Input should be a valid integer"),
    ],
)
def test_bad_overrides(override: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(EXAMPLE, "example.yaml", [override])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def _tenants(*specs: str) -> str:
    rows = "".join(
        f'  - {{name: t{i}, vni: {100 + i}, hosts: "{h}"}}\n' for i, h in enumerate(specs)
    )
    return EXAMPLE.replace('  - {name: t1, vni: 1001, hosts: "0-63"}\n', rows)


# (id, scenario text, key the message must name, text the message must hold, line or None)
BAD = [
    (
        "unknown-key",
        EXAMPLE.replace("  spines: 8", "  spine: 8"),
        "fabric.spine",
        "unknown key",
        "spine: 8",
    ),
    ("unknown-top", EXAMPLE + "extra: 1\n", "extra", "unknown key", "extra: 1"),
    (
        "wrong-unit",
        EXAMPLE.replace("host_link: 100Gbps", "host_link: 100GiB"),
        "fabric.host_link",
        "unknown rate unit 'GiB'",
        "host_link:",
    ),
    (
        "bare-time",
        EXAMPLE.replace("latency: 1us", "latency: 1"),
        "fabric.latency",
        "needs a unit",
        "latency:",
    ),
    (
        "bad-size",
        EXAMPLE.replace("size: 1GiB", "size: 1Gb"),
        "workload.size",
        "unknown size unit",
        "size:",
    ),
    (
        "bad-kind",
        EXAMPLE.replace("kind: leaf-spine ", "kind: torus "),
        "fabric",
        "unknown kind 'torus'",
        "fabric:",
    ),
    (
        "bad-workload-kind",
        EXAMPLE.replace("kind: perftest", "kind: nccl"),
        "workload",
        "unknown kind 'nccl'",
        "workload:",
    ),
    (
        "bad-pattern",
        EXAMPLE.replace("pattern: permutation", "pattern: ring"),
        "workload.pattern",
        "'ring'",
        "pattern:",
    ),
    (
        "zero-qps",
        EXAMPLE.replace("qps: 1 ", "qps: 0 "),
        "workload.qps",
        "greater than or equal to 1",
        "qps:",
    ),
    (
        "vni-too-big",
        EXAMPLE.replace("vni: 1001", "vni: 99999999"),
        "tenants.0.vni",
        "16777215",
        "vni:",
    ),
    ("bad-range", _tenants("7-3"), "tenants.0.hosts", "runs backwards", "7-3"),
    (
        "overlap",
        _tenants("0-63", "60-70"),
        "tenants.1.hosts",
        "host 60 already belongs to tenant 't0'",
        "60-70",
    ),
    (
        "negative-seed",
        EXAMPLE.replace("seed: 1", "seed: -1"),
        "seed",
        "greater than or equal to 0",
        "seed:",
    ),
    (
        "out-of-range",
        _tenants("0-128"),
        "tenants.0.hosts",
        "host 128 is outside the fabric (0-127)",
        "0-128",
    ),
    (
        "rail-leaves",
        EXAMPLE.replace("kind: leaf-spine ", "kind: rail-optimized ").replace(
            "nics: 1 ", "nics: 3 "
        ),
        "fabric.leaves",
        "multiple of hosts.nics (3)",
        "leaves:",
    ),
    ("fat-tree-odd-k", "fabric:\n  kind: fat-tree\n  k: 5\n", "fabric.k", "even", "k: 5"),
]


@pytest.mark.parametrize(
    ("text", "key", "reason", "line"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_input_is_one_line_naming_key_and_line(
    text: str, key: str, reason: str, line: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(text, "bad.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert f"{key}: " in message, message
    assert reason in message, message
    assert message.startswith(f"bad.yaml:{line_of(text, line)}: "), message


@pytest.mark.parametrize(
    "text",
    ["fabric: [1, 2\nseed: 1\n", "name: x\n  bad: indent\n", "a: b: c\n"],
)
def test_broken_yaml(text: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(text, "broken.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("broken.yaml:")
    assert "not valid YAML" in message
    assert "line " in message


def test_not_a_mapping() -> None:
    with pytest.raises(ScenarioError, match="must be a mapping of keys, not list"):
        load_scenario("- 1\n- 2\n", "list.yaml")


def test_duplicate_tenant_name() -> None:
    text = EXAMPLE.replace(
        '  - {name: t1, vni: 1001, hosts: "0-63"}\n',
        '  - {name: a, vni: 1, hosts: "0-3"}\n  - {name: a, vni: 2, hosts: "4-7"}\n',
    )
    with pytest.raises(ScenarioError, match=r"tenants\.1\.name: duplicate tenant name 'a'"):
        load_scenario(text, "dup.yaml")


@pytest.mark.parametrize(
    ("spec", "hosts"),
    [
        ("0-3,8", (0, 1, 2, 3, 8)),
        ("5", (5,)),
        (5, (5,)),
        ([2, 1], (2, 1)),
        (" 1 - 2 , 4", (1, 2, 4)),
    ],
)
def test_parse_host_ranges(spec: object, hosts: tuple[int, ...]) -> None:
    assert parse_host_ranges(spec) == hosts  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", ["a-b", "1-", "3-1", True])
def test_parse_host_ranges_rejects(spec: object) -> None:
    with pytest.raises(ValueError):
        parse_host_ranges(spec)  # type: ignore[arg-type]


def test_sections_without_kind_take_the_default_kind() -> None:
    # `kind` defaults to leaf-spine / perftest, so a section (or an override into it) may omit it
    scenario = load_scenario("fabric: {leaves: 4}\n", "f.yaml", ["workload.qps=4"])
    assert isinstance(scenario.fabric, LeafSpineFabric)
    assert not isinstance(scenario.fabric, RailOptimizedFabric)
    assert scenario.fabric.leaves == 4
    assert scenario.workload.kind == "perftest" and scenario.workload.qps == 4
    assert load_scenario("", "e.yaml", ["fabric.spines=2"]).fabric.spines == 2

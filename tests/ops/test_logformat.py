"""Tests of log formats: Loghub format strings, syslog and JSON presets, bad formats."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cloudtwin.errors import LogFormatError
from cloudtwin.ops import PRESETS, LogFormat, resolve_format
from cloudtwin.ops.miner import TemplateMiner
from cloudtwin.ops.parser import LogParser
from cloudtwin.ops.reader import LineBatch

Lines = Callable[[str], list[str]]
Rows = Callable[[str], list[dict[str, str]]]


def test_every_loghub_line_parses_and_content_matches_ground_truth(
    system: str, raw_lines: Lines, structured: Rows
) -> None:
    fmt = PRESETS[system.lower()].format
    rows = structured(system)
    contents = [fmt.parse(line) for line in raw_lines(system)]
    assert all(c is not None for c in contents)
    assert [c["Content"].strip() for c in contents if c] == [r["Content"].strip() for r in rows]


def test_fast_split_agrees_with_the_lazy_pattern(system: str, raw_lines: Lines) -> None:
    fmt = PRESETS[system.lower()].format
    assert fmt.pattern is not None and fmt.fast_pattern is not None
    for line in raw_lines(system):
        fast = fmt.fast_pattern.match(line.strip())
        if fast is not None:
            exact = fmt.pattern.match(line.strip())
            assert exact is not None and exact.groupdict() == fast.groupdict()


def test_a_field_with_spaces_still_parses_through_the_lazy_pattern() -> None:
    fmt = LogFormat.from_string("<Date> <Component>: <Content>")
    assert fmt.parse("2024-01-01 my app: hello") == {
        "Date": "2024-01-01", "Component": "my app", "Content": "hello",
    }


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("<Date> <Bad Name> <Content>", "placeholder <Bad Name> at column 8"),
        ("<Date> <Level>", "no <Content> placeholder"),
        ("<Date> <Date> <Content>", "<Date> appears twice"),
        ("<Date> <Content", "unbalanced '<'"),
        ("<Date> ( <Content>", "not a valid pattern"),
        ("nosuchpreset", "neither a preset"),
        (r"(a)\1 <Content>", "cannot run in time linear in the line"),
        (r"(?=x)x <Content>", "cannot run in time linear in the line"),
        (r"a{100000}{100000}<Content>", "not a valid pattern"),
        (r"(?:a{1000}){1000}<Content>", "cannot run in time linear in the line"),
    ],
)
def test_bad_formats_name_the_problem(text: str, reason: str) -> None:
    with pytest.raises(LogFormatError, match=reason.replace("(", r"\(")):
        resolve_format(text)


def test_a_format_that_backtracks_in_python_parses_in_linear_time() -> None:
    """`(a+)+b` over a line of a's is exponential in Python's re; RE2 answers at once."""
    fmt = resolve_format("(a+)+b<Content>").format
    assert fmt.parse("a" * 5000) is None
    assert fmt.parse("aaab rest")["Content"] == " rest"  # type: ignore[index]


def test_a_format_with_groups_of_its_own_keeps_its_fields_apart() -> None:
    """The format's own (unnamed) groups do not shift the fields of a batch."""
    fmt = resolve_format(r"(x|y)<Level> <Component>: <Content>").format
    parser = LogParser(fmt, TemplateMiner())
    lines = ["xINFO disk: a 1", "yWARN net: b 2"]
    out = parser.parse_batch(LineBatch(lines, [0, 16], [1, 2], 32))
    assert (out.levels, out.components, out.contents) == (["INFO", "WARN"], ["disk", "net"], ["a 1", "b 2"])


def test_rfc3164_syslog_with_priority_gives_the_level() -> None:
    fields = PRESETS["syslog"].format.parse(
        "<187>Mar  3 10:00:01 leaf1 bgpd[812]: neighbor 10.0.0.2 Down"
    )
    assert fields is not None
    assert (fields["Level"], fields["Component"], fields["Content"]) == (
        "err", "bgpd", "neighbor 10.0.0.2 Down",
    )


def test_rfc5424_syslog() -> None:
    line = "<165>1 2003-10-11T22:14:15.003Z spine2 lldpd 42 ID47 - port Ethernet4 down"
    fields = PRESETS["rfc5424"].format.parse(line)
    assert fields is not None
    assert (fields["Timestamp"], fields["Component"], fields["Level"]) == (
        "2003-10-11T22:14:15.003Z", "lldpd", "notice",
    )
    assert fields["Content"] == "port Ethernet4 down"


def test_json_lines_map_common_keys() -> None:
    fmt = PRESETS["jsonl"].format
    assert fmt.parse('{"ts": "2024-05-01T00:00:00", "level": "WARN", "msg": "x 1"}') == {
        "Content": "x 1", "Level": "WARN", "Timestamp": "2024-05-01T00:00:00",
    }
    assert fmt.parse("[1, 2]") is None
    assert fmt.parse("{not json") is None

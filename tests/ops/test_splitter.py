"""Tests of splitting a chunk's headers with numpy cursors: the fields are the format's,
every line it takes is one the format's own parser splits the same way, and a chunk is
mined to the same columns as by the format's regular expression."""

from __future__ import annotations

import io
from collections.abc import Callable

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.ops import PRESETS, LogFormat
from cloudtwin.ops import columnar as columnar_module
from cloudtwin.ops.chunks import read_chunks
from cloudtwin.ops.columnar import chunk_pattern, mine_chunk
from cloudtwin.ops.miner import TemplateMiner
from cloudtwin.ops.splitter import HeaderLayout, header_layout, split_headers

PLAIN = ["hdfs", "hadoop", "spark", "zookeeper", "bgl", "openssh", "apache"]
CUSTOM = [
    "<Date> <Time> <Level> <Component>: <Content>",
    "<Level>;<Component>;<Content>",
    r"\[<Time>\] <Content>",
    "<Content> end",
]


def test_plain_presets_get_cursor_steps_and_regular_expressions_do_not() -> None:
    layout = header_layout(PRESETS["zookeeper"].format)
    assert layout is not None
    assert [(s.name, s.kind, chr(s.stop) if s.stop else "", s.after) for s in layout.steps] == [
        ("Date", "word", "", (" ",)),
        ("Time", "word", "", (" ", "-", " ")),
        ("Level", "word", "", (" ", "[")),
        ("Node", "stop", ":", (":",)),
        ("Component", "stop", "@", ("@",)),
        ("Id", "stop", "]", ("]", " ", "-", " ")),
        ("Content", "rest", "", ()),
    ]
    assert header_layout(PRESETS["linux"].format) is None  # an optional group: (\[<PID>\])?
    assert header_layout(PRESETS["syslog"].format) is None  # given as a regular expression
    assert header_layout(PRESETS["jsonl"].format) is None
    assert header_layout(LogFormat.from_string(r"<Date>\d+<Content>")) is None
    assert header_layout(LogFormat.from_string("<A>x<Content>")) is not None


def test_the_fields_of_a_chunk_are_those_of_the_format() -> None:
    fmt = PRESETS["hdfs"].format
    layout = header_layout(fmt)
    assert layout is not None
    texts = pa.array([
        "081109 203615 148 INFO dfs.DataNode: Receiving block blk_1",
        "  081109\t203615 148  INFO dfs.DataNode$Packet: a: b  ",
        "081109 203615 148 INFO no colon here",
        "",
        "081109 203615 148 INFO caf\u00e9: x",
    ])
    fields, missed = split_headers(texts, layout, ["Date", "Level", "Component", "Content"])
    assert missed.tolist() == [False, False, True, True, False]
    assert fields["Component"].to_pylist() == ["dfs.DataNode", "dfs.DataNode$Packet", "", "", "caf\u00e9"]
    assert fields["Content"].to_pylist() == ["Receiving block blk_1", "a: b  ", "", "", "x"]
    assert fields["Date"].to_pylist()[:2] == ["081109", "081109"]


_PIECES = st.sampled_from([
    "081109", "203615", "INFO", "dfs.DataNode", ":", " ", "  ", "\t", "[", "]", "@", "-", ";",
    "caf\u00e9", "\u00a0", "\x0b", "\x1c", "x" * 1001, "end", "a:b", "blk_-1", "\r",
])
_LINES = st.lists(st.lists(_PIECES, max_size=14).map("".join), min_size=1, max_size=30)


def _old_pattern(monkeypatch: pytest.MonkeyPatch, fmt: LogFormat) -> object:
    with monkeypatch.context() as m:
        m.setattr(columnar_module, "header_layout", lambda _fmt: None)
        return chunk_pattern(fmt)


@settings(max_examples=150, deadline=None)
@given(lines=_LINES, fmt_text=st.sampled_from(PLAIN + CUSTOM))
def test_every_line_the_cursor_takes_is_split_as_the_format_splits_it(
    lines: list[str], fmt_text: str
) -> None:
    fmt = PRESETS[fmt_text].format if fmt_text in PRESETS else LogFormat.from_string(fmt_text)
    layout = header_layout(fmt)
    assert isinstance(layout, HeaderLayout)
    fields, missed = split_headers(pa.array(lines, pa.string()), layout, list(fmt.fields))
    for k, line in enumerate(lines):
        if missed[k]:
            continue
        parsed = fmt.parse(line)
        assert parsed is not None, line
        for name in fmt.fields:
            got = fields[name][k].as_py()
            want = parsed[name]
            assert (got.strip() if name == "Content" else got) == (
                want.strip() if name == "Content" else want
            ), (line, name)


_BLANKS = st.sampled_from([" ", " ", "  ", "\t", " \t ", "\u00a0", "\x0b", " " * 9, ""])
_VALUES = st.lists(_PIECES, min_size=0, max_size=4).map("".join)


@st.composite
def _shaped(draw: st.DrawFn, layout: HeaderLayout) -> str:
    """A line laid out as the format says, with odd values and spacing now and then."""
    def literal(pieces: tuple[str, ...]) -> str:
        return "".join(draw(_BLANKS) if p == " " else p for p in pieces)

    out = draw(st.sampled_from(["", "", " ", "\t"])) + literal(layout.before)
    for step in layout.steps:
        plain = st.sampled_from(["081109", "INFO", "dfs.DataNode", "blk_-1", "x"])
        out += draw(st.one_of(plain, plain, _VALUES)) + literal(step.after)
    return out


@settings(max_examples=150, deadline=None)
@given(data=st.data(), fmt_text=st.sampled_from(PLAIN + CUSTOM))
def test_lines_shaped_like_the_format_are_split_as_the_format_splits_them(
    data: st.DataObject, fmt_text: str
) -> None:
    fmt = PRESETS[fmt_text].format if fmt_text in PRESETS else LogFormat.from_string(fmt_text)
    layout = header_layout(fmt)
    assert layout is not None
    lines = data.draw(st.lists(_shaped(layout), min_size=1, max_size=20))
    fields, missed = split_headers(pa.array(lines, pa.string()), layout, list(fmt.fields))
    for k, line in enumerate(lines):
        parsed = fmt.parse(line)
        if missed[k]:
            continue
        assert parsed is not None, line
        for name in fmt.fields:
            got, want = fields[name][k].as_py(), parsed[name]
            assert (got.strip(), want.strip()) if name == "Content" else got == want, (line, name)


def _mined(data: bytes, fmt: LogFormat, pattern: object) -> list[list[object]]:
    miner = TemplateMiner()
    out: list[list[object]] = []
    for chunk in read_chunks(io.BytesIO(data), "x", chunk_bytes=300):
        mined = mine_chunk(chunk, fmt, miner, pattern)  # type: ignore[arg-type]
        out += [mined.lines.to_pylist(), mined.unparsed.to_pylist()]
    return out


@settings(max_examples=60, deadline=None)
@given(lines=_LINES, preset=st.sampled_from(PLAIN))
def test_a_chunk_is_mined_the_same_by_the_cursor_and_by_the_regular_expression(
    lines: list[str], preset: str
) -> None:
    fmt = PRESETS[preset].format
    data = "\n".join(lines).encode()
    with pytest.MonkeyPatch.context() as m:
        old = _old_pattern(m, fmt)
    assert not isinstance(old, HeaderLayout)
    assert _mined(data, fmt, chunk_pattern(fmt)) == _mined(data, fmt, old)


def test_the_loghub_samples_are_taken_whole_by_the_cursor(raw_lines: Callable[[str], list[str]]) -> None:
    for system in ("HDFS", "Hadoop", "Spark", "Zookeeper", "BGL", "OpenSSH", "Apache"):
        fmt = PRESETS[system.lower()].format
        layout = header_layout(fmt)
        assert layout is not None
        lines = raw_lines(system)
        fields, missed = split_headers(pa.array(lines), layout, list(fmt.fields))
        parsed = [fmt.parse(line) for line in lines]
        assert missed.sum() == 0, system
        assert fields["Content"].to_pylist() == [p["Content"] for p in parsed if p], system

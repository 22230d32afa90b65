"""Splitting a chunk's lines by a plain header format with numpy over the chunk's bytes.

A Loghub format string whose literal text is plain (spaces, punctuation, escaped
brackets: every preset but Linux) is a sequence of fields, each either one word
(``\\S+``, followed by a space), text up to a stop character (``[^:]{0,1000}``,
followed by ``:``) or the rest of the line. Such a format is matched by one cursor per
line that moves through the line's bytes with numpy: the next byte of a kind is found
by a binary search in the sorted positions of that kind of byte in the whole chunk, so
there is no Python object per line. A field's values become an Arrow array by taking
every other string of an array whose offsets alternate between fields and the gaps
between them, over the chunk's own buffer.

Where this cursor could disagree with the format's regular expression (a word with a
byte outside printable ASCII, a field longer than its limit, spacing other than spaces
and tabs), the line is left to the format's own parser: the cursor only ever takes
lines on which the two agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cloudtwin.ops.logformat import MAX_FIELD_CHARS, LogFormat

__all__ = ["FieldStep", "HeaderLayout", "header_layout", "split_headers"]

_PLACEHOLDER = re.compile(r"<([^<>]*)>")
_SPACE, _TAB = 32, 9
#: Consecutive spaces and tabs a separator may hold on the fast path; longer runs (rare)
#: go to the format's parser.
_MAX_RUN = 8
#: First bytes of the characters Python's ``\s`` takes beyond spaces and tabs (``\v``,
#: ``\f``, ``\r``, ``\x1c``-``\x1f``, and in UTF-8 U+0085, U+00A0, U+1680, U+2000-U+205F,
#: U+3000): a field after a separator that starts with one is left to the format's parser,
#: whose separator would take it.
_MAYBE_SPACE = np.zeros(257, dtype=bool)
_MAYBE_SPACE[[0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0xC2, 0xE1, 0xE2, 0xE3]] = True


@dataclass(frozen=True)
class FieldStep:
    """One field: its name, how it ends, and the literal pieces after it.

    ``kind`` is ``word`` (non-space printable ASCII, ended by a space or tab), ``stop``
    (anything but ``stop`` for at most MAX_FIELD_CHARS bytes) or ``rest`` (the rest of
    the line). ``after`` is the literal text after the field: ``" "`` for a run of
    spaces and tabs, any other string for itself.
    """

    name: str
    kind: Literal["word", "stop", "rest"]
    stop: int
    after: tuple[str, ...]


@dataclass(frozen=True)
class HeaderLayout:
    """A plain format: the literal pieces before the first field, then its fields."""

    before: tuple[str, ...]
    steps: tuple[FieldStep, ...]


def header_layout(fmt: LogFormat) -> HeaderLayout | None:
    """The format as cursor steps, or None when its text is not plain enough for them.

    >>> layout = header_layout(LogFormat.from_string("<Date> <Level> <Component>: <Content>"))
    >>> [(s.name, s.kind, s.after) for s in layout.steps]  # doctest: +NORMALIZE_WHITESPACE
    [('Date', 'word', (' ',)), ('Level', 'word', (' ',)),
     ('Component', 'stop', (':', ' ')), ('Content', 'rest', ())]
    """
    if fmt.kind != "regex" or fmt.in_re2:
        return None
    placeholders = list(_PLACEHOLDER.finditer(fmt.text))
    if tuple(m.group(1) for m in placeholders) != fmt.fields:
        return None  # a format given as a regular expression (syslog presets)
    literals = [
        fmt.text[(placeholders[k - 1].end() if k else 0) : m.start()]
        for k, m in enumerate(placeholders)
    ] + [fmt.text[placeholders[-1].end() :]]
    pieces = [_pieces(literal) for literal in literals]
    if any(p is None for p in pieces):
        return None
    steps = []
    for k, match in enumerate(placeholders):
        after = pieces[k + 1]
        assert after is not None
        final = match.end() == len(fmt.text)
        if final:
            steps.append(FieldStep(match.group(1), "rest", 0, ()))
        elif after[:1] == (" ",):
            steps.append(FieldStep(match.group(1), "word", 0, after))
        elif after and len(after[0]) and after[0] != " " and after[0][0].isascii():
            steps.append(FieldStep(match.group(1), "stop", ord(after[0][0]), after))
        else:
            return None  # a field followed by other text is lazy in the format: not here
    before = pieces[0]
    assert before is not None
    return HeaderLayout(before, tuple(steps))


def _pieces(literal: str) -> tuple[str, ...] | None:
    """Literal regex source as text pieces and ``" "`` for runs of spaces; None if it
    holds a regular expression operator or an escape that is not of punctuation."""
    out: list[str] = []
    text = ""
    i = 0
    while i < len(literal):
        ch = literal[i]
        if ch == " ":
            if text:
                out.append(text)
                text = ""
            if not out or out[-1] != " ":
                out.append(" ")
            i += 1
            continue
        if ch == "\\":
            nxt = literal[i + 1 : i + 2]
            if not nxt or nxt.isalnum() or not nxt.isascii() or nxt.isspace():
                return None
            text += nxt
            i += 2
            continue
        if ch in ".^$*+?{}[]|()" or ch.isspace() or not ch.isascii():
            return None
        text += ch
        i += 1
    if text:
        out.append(text)
    return tuple(out)


class _Bytes:
    """The chunk's bytes and, per kind of byte, its sorted positions (made when needed)."""

    def __init__(self, raw: npt.NDArray[np.uint8]) -> None:
        self.raw = raw
        self._at: dict[object, npt.NDArray[np.int64]] = {}

    def byte(self, at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The byte at each position (-1 past the end)."""
        out = np.full(len(at), -1, np.int64)
        inside = at < len(self.raw)
        out[inside] = self.raw[at[inside]]
        return out

    def next_of(self, kind: object, at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The first position at or after ``at`` holding a byte of ``kind`` (a byte value,
        or ``"blank"`` for any byte outside printable ASCII); len(raw) if none."""
        positions = self._at.get(kind)
        if positions is None:
            raw = self.raw
            found = (raw < 0x21) | (raw > 0x7E) if kind == "blank" else raw == kind
            positions = self._at[kind] = np.append(np.flatnonzero(found), len(raw))
        return positions[np.minimum(np.searchsorted(positions, at), len(positions) - 1)]


def split_headers(
    texts: pa.StringArray, layout: HeaderLayout, names: list[str]
) -> tuple[dict[str, pa.Array], npt.NDArray[np.bool_]]:
    """The fields ``names`` of every line and which lines the cursor did not take.

    A line it did not take has empty values here; the caller splits it otherwise.
    """
    n = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], np.int32)[texts.offset : texts.offset + n + 1]
    data = texts.buffers()[2]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    start = offsets[:-1].astype(np.int64)
    end = offsets[1:].astype(np.int64)
    chunk = _Bytes(raw)
    ok = np.ones(n, dtype=bool)
    cursor = _skip_blanks(chunk, start.copy(), end, ok, required=False)
    cursor = _literals(chunk, cursor, end, ok, layout.before)
    spans: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    for step in layout.steps:
        if step.kind != "word":
            ok &= ~_MAYBE_SPACE[chunk.byte(cursor)]
        if step.kind == "rest":
            spans[step.name] = (cursor, end.copy())
            cursor = end.copy()
            continue
        if step.kind == "word":
            stop = chunk.next_of("blank", cursor)
            ok &= stop > cursor
        else:
            stop = chunk.next_of(step.stop, cursor)
            ok &= stop - cursor <= MAX_FIELD_CHARS
        ok &= stop < end
        stop = np.minimum(stop, end)
        spans[step.name] = (cursor, stop)
        cursor = _literals(chunk, stop, end, ok, step.after)
    ok &= _skip_blanks(chunk, cursor, end, ok, required=False) == end
    return {name: _field(data, spans[name], ok, n) for name in names}, ~ok


def _literals(
    chunk: _Bytes,
    cursor: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    pieces: tuple[str, ...],
) -> npt.NDArray[np.int64]:
    """The cursor past ``pieces``; lines where they are not there are marked not ok."""
    for piece in pieces:
        if piece == " ":
            cursor = _skip_blanks(chunk, cursor, end, ok, required=True)
            continue
        for byte in piece.encode("ascii"):
            ok &= (cursor < end) & (chunk.byte(cursor) == byte)
            cursor = np.minimum(cursor + 1, end)
    return cursor


def _skip_blanks(
    chunk: _Bytes,
    cursor: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    required: bool,
) -> npt.NDArray[np.int64]:
    """The cursor past a run of spaces and tabs (at least one if ``required``)."""
    if required:
        first = chunk.byte(cursor)
        ok &= (cursor < end) & ((first == _SPACE) | (first == _TAB))
    for _ in range(_MAX_RUN):
        here = chunk.byte(cursor)
        blank = (cursor < end) & ((here == _SPACE) | (here == _TAB))
        if not blank.any():
            return cursor
        cursor = cursor + blank
    here = chunk.byte(cursor)
    ok &= ~((cursor < end) & ((here == _SPACE) | (here == _TAB)))
    return cursor


def _field(
    data: pa.Buffer | None,
    span: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    ok: npt.NDArray[np.bool_],
    n: int,
) -> pa.Array:
    """The field's text on every line taken, empty on the others.

    Spans of consecutive lines do not overlap, so an array whose offsets alternate
    between the starts and the ends of the spans holds each span as its even strings.
    """
    if n == 0 or data is None:
        return pa.array([""] * n, pa.string())
    first, last = span
    last = np.where(ok, last, first)
    bounds = np.empty(2 * n + 1, np.int32)
    bounds[0:-1:2] = first
    bounds[1::2] = last
    bounds[-1] = last[-1]
    both = pa.Array.from_buffers(pa.string(), 2 * n, [None, pa.py_buffer(bounds), data])
    return both.take(pa.array(np.arange(0, 2 * n, 2)))

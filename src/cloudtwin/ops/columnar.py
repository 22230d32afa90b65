"""Mining a chunk of log lines into columns: split, header fields, masks, templates, parameters.

The chunk's bytes become one Arrow string array without a Python object per line; the
header is split by the format's pattern in RE2, masks run in RE2, and only the distinct
masked messages go through the parse tree. Lines the RE2 pattern does not take are tried
one by one with the format's own (careful) pattern, so the result is the format's.

Each chunk is mined by a miner restored from one snapshot (the templates known when the
ingest began), so chunks can be mined anywhere in any order; the store's writer then
merges each chunk's templates into its own miner, in chunk order (:func:`merge_chunk`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cloudtwin.ops.chunks import Chunk
from cloudtwin.ops.logformat import SYSLOG_SEVERITIES, LogFormat
from cloudtwin.ops.masking import WILDCARD
from cloudtwin.ops.miner import TemplateMiner
from cloudtwin.ops.parameters import extract_parameters_batch
from cloudtwin.ops.reader import MAX_LINE_BYTES
from cloudtwin.ops.splitter import HeaderLayout, header_layout, split_headers

__all__ = [
    "ChunkMiner",
    "LocalTemplate",
    "MinedChunk",
    "chunk_pattern",
    "line_parameters",
    "merge_chunk",
    "mine_chunk",
]

#: A group as a chunk's miner left it: id, template tokens, lines of the chunk, route.
LocalTemplate = tuple[int, list[str], int, str]

@dataclass
class MinedChunk:
    """One chunk's result: its lines as columns, its unparsed lines, its miner's groups.

    ``lines`` has ``byte_offset``, ``line``, ``ts_text``, ``level``, ``component``,
    ``template_id`` (the chunk miner's ids), ``content`` and ``params``; ``unparsed``
    has ``byte_offset``, ``line``, ``text``, ``reason``. ``templates`` are the groups the
    chunk created or grew, ``cache`` the exact-message cache entries it added.
    ``cpu_s`` is the CPU time its mining took on the thread that mined it (for
    benchmarks: it never reaches the store).
    """

    index: int
    lines: pa.Table
    unparsed: pa.Table
    templates: list[LocalTemplate] = field(default_factory=list)
    cache: list[tuple[str, int]] = field(default_factory=list)
    end_offset: int = 0
    next_line: int = 1
    known: int = 0
    cpu_s: float = 0.0
    #: The lines as a Parquet segment, when the worker stored them so (``lines`` is then
    #: empty), and how many lines it holds.
    segment: bytes = b""
    segment_lines: int = 0


class ChunkMiner:
    """Mines chunks with one format, each from the same snapshot of a miner.

    Picklable: it is what a worker process or a Ray task receives once per ingest.
    """

    def __init__(self, fmt: LogFormat, snapshot: bytes) -> None:
        self.format = fmt
        self.snapshot = snapshot
        self._pattern = chunk_pattern(fmt)

    def __call__(self, chunk: Chunk) -> MinedChunk:
        start = time.thread_time()
        miner = TemplateMiner.from_snapshot(self.snapshot)
        mined = mine_chunk(chunk, self.format, miner, self._pattern)
        mined.cpu_s = time.thread_time() - start
        return mined


#: The group that takes a whole line the format's header does not fit.
_REST = "cloudtwin_rest"
_NAMED = re.compile(r"\(\?P?<(\w+)>")
#: A chunk's pattern: a plain format's cursor steps over the chunk's bytes, Python's
#: regular expression over the chunk's text, or (a format with regular expressions of
#: the user's) RE2's, run by Arrow over each of its lines.
ChunkPattern = HeaderLayout | re.Pattern[str] | str


def chunk_pattern(fmt: LogFormat) -> ChunkPattern | None:
    """The format's pattern for a whole chunk: one match per line, always.

    A format of plain text (every Loghub preset but Linux) is split by numpy cursors
    over the chunk's bytes (:mod:`cloudtwin.ops.splitter`). Otherwise only the fields a
    chunk stores are captured. A line the header fits gives its fields; any other line
    (or an empty one) is taken by a last alternative, so splitting the chunk by it lines
    up with its lines. No part of it matches a newline, so no match
    runs into the next line. A format with regular expressions of the user's gets an RE2
    pattern for Arrow's ``extract_regex`` instead, which gives nulls where a line does
    not fit. None when neither can be built (every line then goes through the format).
    """
    if fmt.kind != "regex":
        return None
    layout = header_layout(fmt)
    if layout is not None:
        return layout
    source = fmt.fast_pattern or fmt.pattern
    if source is None:
        return None
    inner = source.pattern
    for head in ("^\\s*", "^"):
        if inner.startswith(head):
            inner = inner[len(head):]
            break
    for tail in ("\\s*$", "$"):
        if inner.endswith(tail) and not inner.endswith("\\" + tail):
            inner = inner[: -len(tail)]
            break
    kept = {"Content", "Pri", fmt.level_field, fmt.component_field, *fmt.time_fields}
    inner = _without_newlines(_capturing_only(inner, kept))
    if fmt.in_re2:
        line = "^[ \\t]*" + inner + "[ \\t]*$"
        try:
            pc.extract_regex(pa.array([""], pa.string()), pattern=line)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        return line
    try:
        return re.compile("^(?:[ \\t]*" + inner + "[ \\t]*|(?P<" + _REST + ">.*))$", re.MULTILINE)
    except re.error:
        return None


def _capturing_only(pattern: str, kept: set[str | None]) -> str:
    """``pattern`` with every group but the named ones in ``kept`` made non-capturing."""
    out = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            start = i + 1 + (pattern[i + 1 : i + 2] == "^")
            if pattern[start : start + 1] == "]":  # a leading ] is a member
                out.append(pattern[i : start + 1])
                i = start + 1
                continue
        elif ch == "(":
            named = _NAMED.match(pattern, i)
            if named is None and pattern[i + 1 : i + 2] != "?" or (
                named is not None and named.group(1) not in kept
            ):
                out.append("(?:")
                i = named.end() if named is not None else i + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _without_newlines(pattern: str) -> str:
    """``\\s`` outside character classes as a space or a tab.

    Python's ``\\s`` would also match the newline between two lines; a line spaced with
    other whitespace does not fit this pattern and is split by the format's own.
    """
    out = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pair = pattern[i : i + 2]
            out.append("[ \\t]" if pair == "\\s" and not in_class else pair)
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class:
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


def _lines_array(data: bytes) -> tuple[pa.Array, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The chunk's lines (without line endings), their start offsets and byte lengths."""
    raw = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(raw == 10)
    starts = np.empty(len(ends) + 1, np.int64)
    starts[0] = 0
    starts[1:] = ends + 1
    if starts[-1] == len(data):  # the last line has its newline
        starts = starts[:-1]
    bounds = np.append(starts, len(data))
    lengths = np.diff(bounds)
    array = pa.Array.from_buffers(
        pa.string(), len(starts), [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(data)]
    )
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:  # invalid UTF-8: replaced, line by line as the reader does
        texts = data.decode("utf-8", "replace").split("\n")
        if data.endswith(b"\n"):
            texts.pop()
        array = pa.array(texts, pa.string())
    return pc.utf8_rtrim(array, characters="\r\n"), starts, lengths


def mine_chunk(
    chunk: Chunk, fmt: LogFormat, miner: TemplateMiner, pattern: ChunkPattern | None = None
) -> MinedChunk:
    """Split, parse and mine one chunk's lines with ``miner`` (which it changes)."""
    texts, starts, lengths = _lines_array(chunk.data)
    n = len(texts)
    shift = np.zeros(n + 1, np.int64)
    for at, left_out in chunk.cut.items():
        shift[at + 1] += left_out
    offsets = chunk.offset + starts + np.cumsum(shift)[:n]
    numbers = chunk.first_line + np.arange(n, dtype=np.int64)
    too_long = lengths > MAX_LINE_BYTES
    if chunk.cut:
        too_long[list(chunk.cut)] = True
    fields, reasons = _split(chunk.data, texts, fmt, pattern, too_long)
    content = pc.utf8_trim_whitespace(fields["Content"])
    empty = pc.fill_null(pc.equal(content, ""), True).to_numpy(zero_copy_only=False)
    reasons = np.where(empty & (reasons == None), "empty message (no <Content>)", reasons)  # noqa: E711
    ok = reasons == None  # noqa: E711
    keep = pa.array(np.flatnonzero(ok))
    content = content.take(keep)
    ids = miner.add_array(content)
    lines = pa.table({
        "byte_offset": pa.array(offsets[ok]),
        "line": pa.array(numbers[ok]),
        "ts_text": _time_text(fields, fmt).take(keep),
        "level": _level(fields, fmt).take(keep),
        "component": _column(fields, fmt.component_field, n).take(keep),
        "template_id": pa.array(ids.astype(np.int32)),
        "content": content,
        "params": line_parameters(ids, content, miner),
    })
    bad = np.flatnonzero(~ok)
    bad_text = texts.take(pa.array(bad))
    if too_long.any():
        bad_text = pc.utf8_slice_codeunits(bad_text, 0, MAX_LINE_BYTES)
    unparsed = pa.table({
        "byte_offset": pa.array(offsets[bad]),
        "line": pa.array(numbers[bad]),
        "text": bad_text,
        "reason": pa.array(reasons[bad].tolist(), pa.string()),
    })
    templates = [(c.template_id, list(c.tokens), c.size, c.route) for c in miner.take_changed()]
    _, cache = miner.take_cache_changes()
    return MinedChunk(chunk.index, lines, unparsed, templates, cache, chunk.end_offset,
                      chunk.first_line + chunk.lines)


def _split(
    data: bytes,
    texts: pa.Array,
    fmt: LogFormat,
    pattern: ChunkPattern | None,
    too_long: npt.NDArray[np.bool_],
) -> tuple[dict[str, pa.Array], npt.NDArray[np.object_]]:
    """Every line's header fields (null where it does not fit) and why a line does not fit.

    One ``split`` by the chunk pattern over the chunk's text (or one ``extract_regex``
    over its lines, in RE2) splits every line the header fits; the others go one by one
    through the format's own parser.
    """
    n = len(texts)
    names = _stored_fields(fmt)
    reasons = np.full(n, None, dtype=object)
    reasons[too_long] = f"line longer than {MAX_LINE_BYTES} bytes (cut)"
    found = _header_fields(data, texts, pattern, names)
    if found is None:
        columns = {name: pa.nulls(n, pa.string()) for name in names}
        slow = np.ones(n, dtype=bool)
    else:
        columns, missed = found
        blank = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(columns["Content"]), ""), True)
        slow = np.asarray(pc.or_(missed, blank).to_numpy(zero_copy_only=False), dtype=bool)
    slow &= ~too_long
    rows = np.flatnonzero(slow)
    if len(rows):
        columns = _split_slowly(texts, fmt, rows, columns, reasons)
    return columns, reasons


def _stored_fields(fmt: LogFormat) -> list[str]:
    """The fields a chunk keeps: the message, level, component and time."""
    wanted = {"Content", "Pri", fmt.level_field, fmt.component_field, *fmt.time_fields}
    return [f for f in fmt.fields if f in wanted and (f != "Level" or "Pri" not in fmt.fields)]


def _header_fields(
    data: bytes, texts: pa.Array, pattern: ChunkPattern | None, names: list[str]
) -> tuple[dict[str, pa.Array], pa.Array] | None:
    """The stored fields of every line (null where the header does not fit them) and which
    lines it does not fit; None when the chunk cannot be split at once."""
    if isinstance(pattern, HeaderLayout):
        columns, missed = split_headers(texts, pattern, names)
        return columns, pa.array(missed)
    if isinstance(pattern, str):
        if not len(texts):
            return None
        found = pc.extract_regex(texts, pattern=pattern)
        by_name = {f.name: column for f, column in zip(found.type, found.flatten(), strict=True)}
        return {name: by_name[name] for name in names}, pc.is_null(found)
    split = _split_chunk(data, pattern, len(texts))
    if split is None:
        return None
    assert pattern is not None
    at = pattern.groupindex
    return {name: split(at[name]) for name in names}, pc.is_valid(split(at[_REST]))


def _split_chunk(
    data: bytes, pattern: re.Pattern[str] | None, n: int
) -> Callable[[int], pa.Array] | None:
    """The chunk split by its pattern: a group's values for every line, by group number.

    ``pattern.split`` gives, per line, its groups and then the newline before the next
    line; a chunk where that does not line up (it cannot, unless the pattern is odd) is
    split one line at a time instead.
    """
    if pattern is None or n == 0:
        return None
    text = data.decode("utf-8", "replace")
    if text.endswith("\n"):
        text = text[:-1]
    parts = pattern.split(text)
    step = pattern.groups + 1
    if len(parts) != n * step + 1 or parts[step:-1:step].count("\n") != n - 1:
        return None
    return lambda group: pa.array(parts[group::step], pa.string())


def _split_slowly(
    texts: pa.Array,
    fmt: LogFormat,
    rows: npt.NDArray[np.int64],
    columns: dict[str, pa.Array],
    reasons: npt.NDArray[np.object_],
) -> dict[str, pa.Array]:
    """The lines RE2 did not take, one by one with the format's own parser."""
    values: dict[str, list[str | None]] = {name: [] for name in columns}
    for i, text in zip(rows.tolist(), texts.take(pa.array(rows)).to_pylist(), strict=True):
        parsed = fmt.parse(text)
        if parsed is None or not (parsed.get("Content") or "").strip():
            if not text.strip():
                reasons[i] = "empty line"
            elif parsed is not None:
                reasons[i] = "empty message (no <Content>)"
            else:
                reasons[i] = fmt.why_not(text)
            parsed = {}
        for name in columns:
            values[name].append(parsed.get(name))
    mask = np.zeros(len(texts), dtype=bool)
    mask[rows] = True
    marks = pa.array(mask)
    return {
        name: pc.replace_with_mask(column, marks, pa.array(values[name], pa.string()))
        for name, column in columns.items()
    }


def _column(fields: dict[str, pa.Array], name: str | None, n: int) -> pa.Array:
    if name is None or name not in fields:
        return pa.nulls(n, pa.string())
    return fields[name]


def _level(fields: dict[str, pa.Array], fmt: LogFormat) -> pa.Array:
    """The level column: a syslog priority's severity, or the format's level field."""
    if "Pri" in fields:
        pri = fields["Pri"]
        code = pc.cast(pc.if_else(pc.equal(pri, ""), pa.scalar(None, pa.string()), pri), pa.int64())
        return pa.array(SYSLOG_SEVERITIES, pa.string()).take(pc.bit_wise_and(code, 7))
    return _column(fields, fmt.level_field, len(fields["Content"]))


def _time_text(fields: dict[str, pa.Array], fmt: LogFormat) -> pa.Array:
    parts = [fields[f] for f in fmt.time_fields if f in fields]
    n = len(fields["Content"])
    if not parts:
        return pa.nulls(n, pa.string())
    if len(parts) == 1:
        return parts[0]
    filled = [pc.fill_null(part, "") for part in parts]
    joined = pc.utf8_trim(pc.binary_join_element_wise(*filled, " "), " ")
    return pc.if_else(pc.equal(joined, ""), pa.scalar(None, pa.string()), joined)


def line_parameters(
    ids: npt.NDArray[np.int64], content: pa.Array, miner: TemplateMiner
) -> pa.Array:
    """Each line's parameters (a list) against its template as ``miner`` knows it now.

    The values are those of :func:`cloudtwin.ops.parameters.extract_parameters`: a slot
    that is a whole token takes the line's token at its place, a slot inside a token
    takes what is left of the token around the template's text. Lines are split on
    single spaces first, then on any whitespace; a line whose tokens still do not line
    up with its template (a mask that took a space) and a token with two slots go
    through the template's pattern.
    """
    n = len(ids)
    out = _Slots()
    lines = np.arange(n)
    for split in (lambda c: pc.split_pattern(c, " "), pc.utf8_split_whitespace):
        if not len(lines):
            break
        part = content if len(lines) == n else content.take(pa.array(lines))
        lines = _token_slots(lines, ids[lines], split(part), miner, out)
    if len(lines):
        where, slot_of, value = extract_parameters_batch(
            ids[lines], content.take(pa.array(lines)), lambda tid: miner.cluster(tid).template
        )
        out.add(lines[where], value, np.arange(len(value)), slot_of.astype(np.int64))
    row = np.concatenate(out.rows) if out.rows else np.zeros(0, np.int64)
    slot = np.concatenate(out.slots) if out.slots else np.zeros(0, np.int64)
    sort = np.lexsort((slot, row))
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(row, minlength=n), out=offsets[1:])
    pick = np.concatenate(out.picks)[sort] if out.picks else np.zeros(0, np.int64)
    sources = [s.cast(pa.string()) for s in out.sources] or [pa.array([], pa.string())]
    values = pa.concat_arrays(sources).take(pa.array(pick))
    return pa.ListArray.from_arrays(pa.array(offsets), values)


class _Slots:
    """Parameter values gathered so far: line numbers, value arrays, picks into them."""

    def __init__(self) -> None:
        self.rows: list[npt.NDArray[np.int64]] = []
        self.slots: list[npt.NDArray[np.int64]] = []
        self.picks: list[npt.NDArray[np.int64]] = []
        self.sources: list[pa.Array] = []
        self.size = 0

    def add(
        self,
        rows: npt.NDArray[np.int64],
        source: pa.Array,
        picks: npt.NDArray[np.int64],
        slots: npt.NDArray[np.int64],
    ) -> None:
        """Values of slots: ``source[picks[i]]`` is slot ``slots[i]`` of line ``rows[i]``."""
        self.rows.append(rows)
        self.slots.append(slots)
        self.picks.append(self.size + picks)
        self.sources.append(source)
        self.size += len(source)


def _token_slots(
    lines: npt.NDArray[np.int64],
    ids: npt.NDArray[np.int64],
    tokens: pa.ListArray,
    miner: TemplateMiner,
    out: _Slots,
) -> npt.NDArray[np.int64]:
    """The slots of lines whose tokens line up with their template; the other lines."""
    bounds = tokens.offsets.to_numpy().astype(np.int64)
    starts, counts = bounds[:-1], np.diff(bounds)
    flat = tokens.flatten()
    whole_rows: list[npt.NDArray[np.int64]] = []
    whole_picks: list[npt.NDArray[np.int64]] = []
    whole_slots: list[npt.NDArray[np.int64]] = []
    careful: list[npt.NDArray[np.int64]] = []
    order = np.argsort(ids, kind="stable")
    for group in np.split(order, np.flatnonzero(np.diff(ids[order])) + 1) if len(ids) else []:
        template = miner.cluster(int(ids[group[0]])).tokens
        slots = [(k, token) for k, token in enumerate(template) if WILDCARD in token]
        if not slots:
            continue
        if any(token.count(WILDCARD) > 1 for _, token in slots):
            careful.append(group)
            continue
        fits = counts[group] == len(template)
        careful.append(group[~fits])
        group = group[fits]
        keep = np.ones(len(group), dtype=bool)
        inside: dict[int, pa.Array] = {}
        for k, token in slots:
            head, tail = token.split(WILDCARD)
            if head or tail:  # a slot inside a token: the token less the template's text
                taken = flat.take(pa.array(starts[group] + k))
                ok = pc.and_(pc.starts_with(taken, head), pc.ends_with(taken, tail))
                keep &= np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
                inside[k] = pc.utf8_slice_codeunits(taken, len(head), -len(tail) if tail else None)
        careful.append(group[~keep])
        kept = group[keep]
        for slot, (k, _token) in enumerate(slots):
            at = np.full(len(kept), slot, dtype=np.int64)
            if k in inside:
                out.add(lines[kept], inside[k].filter(pa.array(keep)), np.arange(len(kept)), at)
            else:
                whole_rows.append(lines[kept])
                whole_picks.append(starts[kept] + k)
                whole_slots.append(at)
    if whole_rows:
        out.add(np.concatenate(whole_rows), flat, np.concatenate(whole_picks),
                np.concatenate(whole_slots))
    return lines[np.sort(np.concatenate(careful))] if careful else np.zeros(0, np.int64)


def merge_chunk(miner: TemplateMiner, mined: MinedChunk, known: int) -> npt.NDArray[np.int32]:
    """Take a chunk's groups into ``miner``; the miner's id for each of the chunk's ids.

    ``known`` is how many groups the snapshot held: those keep their ids (and are widened
    by what the chunk made of them); the chunk's new groups are absorbed in id order.
    """
    mapping = np.arange(max([known, *(t[0] for t in mined.templates)]) + 1, dtype=np.int32)
    for template_id, tokens, size, _route in sorted(mined.templates, key=lambda t: t[0]):
        if template_id <= known:
            miner.widen(template_id, tokens, size)
        else:
            mapping[template_id] = miner.absorb(tokens, size).template_id
    miner.learn((masked, int(mapping[tid])) for masked, tid in mined.cache)
    return mapping

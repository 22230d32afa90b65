"""The log parser: splits a batch of lines by a format and mines the messages' templates."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cloudtwin.ops.logformat import LogFormat
from cloudtwin.ops.miner import TemplateMiner
from cloudtwin.ops.parameters import extract_parameters
from cloudtwin.ops.patterns import LinearPattern
from cloudtwin.ops.reader import MAX_LINE_BYTES, LineBatch

__all__ = ["LogParser", "ParsedBatch"]


@dataclass
class ParsedBatch:
    """Columns for the lines of a batch that fit the format, and the ones that did not."""

    numbers: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    time_texts: list[str | None] = field(default_factory=list)
    levels: list[str | None] = field(default_factory=list)
    components: list[str | None] = field(default_factory=list)
    contents: list[str] = field(default_factory=list)
    template_ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    bad_numbers: list[int] = field(default_factory=list)
    bad_offsets: list[int] = field(default_factory=list)
    bad_texts: list[str] = field(default_factory=list)
    bad_reasons: list[str] = field(default_factory=list)
    end_offset: int = 0


class LogParser:
    """Parses batches of raw lines with one format into columns and template ids.

    >>> from cloudtwin.ops.reader import LineBatch
    >>> fmt = LogFormat.from_string("<Level> <Content>")
    >>> parser = LogParser(fmt, TemplateMiner())
    >>> out = parser.parse_batch(LineBatch(["INFO disk 1 full", "INFO disk 2 full", "x"],
    ...                                    [0, 17, 34], [1, 2, 3], 36))
    >>> out.template_ids.tolist(), out.bad_numbers, parser.miner.cluster(1).template
    ([1, 1], [3], 'disk <*> full')
    """

    def __init__(self, fmt: LogFormat, miner: TemplateMiner) -> None:
        self.format = fmt
        self.miner = miner
        self._level = fmt.level_field
        self._component = fmt.component_field
        self._time = fmt.time_fields

    def parse_batch(self, batch: LineBatch) -> ParsedBatch:
        """Split and mine every line of the batch, in order."""
        fmt = self.format
        if fmt.kind == "regex" and fmt.pattern is not None and not batch.too_long:
            out = self._split_regex(batch, fmt.pattern)
        else:
            out = self._split_each(batch)
        out.template_ids = self.miner.add_batch(out.contents)
        return out

    def _split_regex(self, batch: LineBatch, exact: LinearPattern) -> ParsedBatch:
        """The common case, in list comprehensions: a regex format, no over-long line.

        A row holds every group of the pattern, the format's own unnamed ones included,
        so a field is found by its group number.
        """
        texts = batch.texts
        at: dict[str, int] = {name: k - 1 for name, k in exact.groupindex.items()}
        content_at = at["Content"]
        rows = self._split_joined(texts, exact.groups)
        if rows is None:
            matches = [self.format.match(t) for t in texts]
            groups = [m.groups() if m is not None else None for m in matches]
            if any(g is None for g in groups):
                return self._split_each(batch)  # some lines do not fit: the careful path
            rows = [g for g in groups if g is not None]
        if not all(g[content_at].strip() for g in rows):
            return self._split_each(batch)
        out = ParsedBatch(end_offset=batch.end_offset)
        out.numbers = batch.numbers
        out.offsets = batch.offsets
        out.contents = [g[content_at].strip() for g in rows]
        out.levels = self._column(rows, at, self._level)
        out.components = self._column(rows, at, self._component)
        time_at = [at[f] for f in self._time]
        if len(time_at) == 1:
            out.time_texts = [g[time_at[0]] for g in rows]
        elif time_at:
            out.time_texts = [" ".join([g[i] for i in time_at]) for g in rows]
        else:
            out.time_texts = [None] * len(rows)
        return out

    def _split_joined(self, texts: list[str], width: int) -> list[tuple[str, ...]] | None:
        """All lines split by one findall over the joined batch, if every line matches.

        Matches are anchored at line starts and ends and cannot overlap, so as many
        matches as lines means exactly one match per line.
        """
        pattern = self.format.batch_pattern
        if pattern is None:
            return None
        found = pattern.findall("\n".join(texts))
        if len(found) != len(texts):
            return None
        return found if width > 1 else [(g,) for g in found]

    @staticmethod
    def _column(
        rows: list[tuple[str, ...]], at: dict[str, int], name: str | None
    ) -> list[str | None]:
        if name is None or name not in at:
            return [None] * len(rows)
        return [g[at[name]] for g in rows]

    def _split_each(self, batch: LineBatch) -> ParsedBatch:
        out = ParsedBatch(end_offset=batch.end_offset)
        parse = self.format.parse
        for i, text in enumerate(batch.texts):
            fields = parse(text) if i not in batch.too_long else None
            content = fields.get("Content") if fields is not None else None
            if fields is None or content is None or not content.strip():
                self._reject(out, batch, i, fields)
                continue
            out.numbers.append(batch.numbers[i])
            out.offsets.append(batch.offsets[i])
            out.contents.append(content.strip())
            out.levels.append(fields.get(self._level) if self._level else None)
            out.components.append(fields.get(self._component) if self._component else None)
            out.time_texts.append(self._time_text(fields))
        return out

    def parameters(self, template_id: int, content: str) -> list[str]:
        """The message's values for the current template's ``<*>`` slots."""
        return extract_parameters(self.miner.cluster(template_id).template, content)

    def _time_text(self, fields: dict[str, str]) -> str | None:
        parts = [fields[f] for f in self._time if fields.get(f)]
        return " ".join(parts) if parts else None

    def _reject(self, out: ParsedBatch, batch: LineBatch, i: int, fields: object) -> None:
        text = batch.texts[i]
        if i in batch.too_long:
            reason = f"line longer than {MAX_LINE_BYTES} bytes (cut)"
        elif not text.strip():
            reason = "empty line"
        elif fields is not None:
            reason = "empty message (no <Content>)"
        else:
            reason = self.format.why_not(text)
        out.bad_numbers.append(batch.numbers[i])
        out.bad_offsets.append(batch.offsets[i])
        out.bad_texts.append(text)
        out.bad_reasons.append(reason)

"""Masking of variable parts of a message (addresses, ids, numbers) before template mining."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from cloudtwin.ops.patterns import compile_linear

__all__ = ["GENERIC_MASKS", "WILDCARD", "Masker"]

#: The token that stands for a variable part in a template.
WILDCARD = "<*>"

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*"
#: Characters that end a token's variable part: a key in ``key=value`` and brackets,
#: quotes and list punctuation around a value stay in the template.
_SEPARATORS = r"\s=,;()\[\]{}<>\"'"

_DATE = (
    rf"\b(?:{_WEEKDAY},?\s+)?{_MONTH}\s+\d{{1,2}},?(?:\s+\d{{4}})?\s+\d{{1,2}}:\d\d"
    rf"(?::\d\d(?:[.,]\d+)?)?(?:\s+\d{{4}})?\b"
)
_URL = r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s\"'<>]+"
_PATH = r"(/[\w.\-]+){2,}/?"
_NUMBER_UNIT = r"\b\d+(?:\.\d+)?\s+(?:[KMGTPE]i?B|B|[mun]?s|secs?)\b"
_WITH_DIGIT = rf"[^{_SEPARATORS}]*\d[^{_SEPARATORS}]*"

#: The token classifier run before the tree, the same for every log format: a date and
#: time written out in a message (``Fri Jun 17 07:07:00 2005``, one variable however
#: many words), URLs, paths of two or more parts, a number with a size or short time
#: unit written apart (``1.44 KB``, ``2 s``; not ``40 seconds``, which reads as part of
#: the sentence), and any token with a digit in it
#: (numbers with units such as ``12ms`` or ``3.5KB``, hex, IPv4 and IPv6 addresses
#: with ports, ids, versions, host names with numbers), cut at :data:`_SEPARATORS` so
#: that ``uid=0`` gives ``uid=<*>`` and ``(12)`` gives ``(<*>)``. The classes are one
#: pattern, tried in that order at each position, so a batch is scanned once.
GENERIC_MASKS: tuple[str, ...] = (
    "|".join(f"(?:{part})" for part in (_DATE, _URL, _PATH, _NUMBER_UNIT, _WITH_DIGIT)),
)


class Masker:
    """Replaces every match of its regular expressions, in order, by ``<*>``.

    Patterns run in RE2 (time linear in the text; look-around and back-references are
    refused), with ASCII classes (``\\d``, ``\\w``, ``\\b``), so that one line masked here
    and a batch masked by Arrow's RE2 in :meth:`mask_many` give the same text.

    >>> Masker([r"(\\d+\\.){3}\\d+"]).mask("from 10.0.0.1 port 22")
    'from <*> port 22'
    >>> Masker(GENERIC_MASKS).mask("read 512 bytes from /dev/sda1 at 0x1F")
    'read <*> bytes from <*> at <*>'
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        compiled = [compile_linear(pattern, "mask") for pattern in self.patterns]
        self._subs = tuple(functools.partial(rx.sub, _wildcard) for rx in compiled)
        self._re2 = tuple(_runs_in_re2(p) for p in self.patterns)
        self._joinable = not any(_anchored(p) for p in self.patterns)

    def mask(self, content: str) -> str:
        """The content with every mask match replaced by the wildcard."""
        for sub in self._subs:
            content = sub(content)
        return content

    def mask_many(self, contents: Sequence[str]) -> list[str]:
        """Mask a batch of messages at once; same result as :meth:`mask` on each.

        The batch is joined into one text and each pattern runs once over it (RE2
        through Arrow where it can), which avoids per-message overhead; if a pattern
        could see across messages (anchors, newlines), each message is masked alone.

        >>> Masker([r"\\d+"]).mask_many(["a 1", "b 22"])
        ['a <*>', 'b <*>']
        """
        if not contents:
            return []
        if self._joinable:
            text = "\n".join(contents)
            if text.count("\n") == len(contents) - 1:
                out = self._mask_text(text).split("\n")
                if len(out) == len(contents):
                    return out
        return [self.mask(c) for c in contents]

    def mask_array(self, contents: pa.Array) -> pa.Array:
        """Mask an Arrow string array; same values as :meth:`mask` on each.

        Where no pattern can see across messages, the array is joined into one text in
        Arrow, masked there and split again (one RE2 pass per pattern, no per-message
        call); otherwise each message is masked alone.

        >>> Masker([r"\\d+"]).mask_array(pa.array(["a 1", "b 22"])).to_pylist()
        ['a <*>', 'b <*>']
        """
        n = len(contents)
        if n == 0 or not self.patterns:
            return contents
        if self._joinable and contents.null_count == 0:
            whole = pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), contents)
            text = pc.binary_join(whole, "\n")
            for pattern, sub, re2 in zip(self.patterns, self._subs, self._re2, strict=True):
                if re2:
                    text = pc.replace_substring_regex(text, pattern=pattern, replacement=WILDCARD)
                else:
                    text = pa.array([sub(text[0].as_py())], pa.string())
            out = pc.split_pattern(text, "\n").flatten()
            if len(out) == n:
                return out.cast(pa.string())
        masked = [self.mask(c) for c in contents.to_pylist()]
        return pa.array(masked, pa.string())

    def _mask_text(self, text: str) -> str:
        for pattern, sub, re2 in zip(self.patterns, self._subs, self._re2, strict=True):
            if re2:
                big = pa.array([text], pa.large_string())
                done = pc.replace_substring_regex(big, pattern=pattern, replacement=WILDCARD)
                text = str(done[0].as_py())
            else:
                text = sub(text)
        return text


def _wildcard(_match: object) -> str:
    return WILDCARD


def _anchored(pattern: str) -> bool:
    """Whether a pattern may use line anchors, which a joined batch would change."""
    plain = pattern.replace("[^", "[").replace("\\^", "").replace("\\$", "")
    return any(token in plain for token in ("^", "$", "\\A", "\\Z", "\\z", "(?m"))


def _runs_in_re2(pattern: str) -> bool:
    probe = pa.array(["x"], pa.string())
    try:
        pc.replace_substring_regex(probe, pattern=pattern, replacement=WILDCARD)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True

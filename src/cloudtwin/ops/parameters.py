"""Extraction of a message's parameters: the text that a template's ``<*>`` slots stand for."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cloudtwin.ops.masking import WILDCARD

__all__ = ["extract_parameters", "extract_parameters_batch"]


#: A slot stands for text within one token: tokens are split on ASCII whitespace, the
#: same in Python and in RE2, so a slot never runs across a space and the match is linear.
_SPACE = "[ \t\n\r\f\v]+"
_WHOLE = "[^ \t\n\r\f\v]+"
_PART = "[^ \t\n\r\f\v]*?"


def _token_pattern(token: str, slot: Callable[[str], str], escape: Callable[[str], str]) -> str:
    parts = token.split(WILDCARD)
    if len(parts) == 2 and parts == ["", ""]:
        return slot(_WHOLE)
    out = escape(parts[0])
    for part in parts[1:]:
        out += slot(_PART) + escape(part)
    return out


@lru_cache(maxsize=4096)
def _template_pattern(template: str) -> re.Pattern[str]:
    pieces = [_token_pattern(t, lambda cls: f"({cls})", re.escape) for t in template.split()]
    return re.compile("^" + _SPACE.join(pieces) + "$")


def extract_parameters(template: str, content: str) -> list[str]:
    """The values of the template's variable slots in this message, left to right.

    >>> extract_parameters("Receiving block <*> src: /<*> dest: /<*>",
    ...                    "Receiving block blk_1 src: /10.0.0.1:5 dest: /10.0.0.2:5")
    ['blk_1', '10.0.0.1:5', '10.0.0.2:5']
    >>> extract_parameters("disk <*> full", "no match here")
    []
    """
    if WILDCARD not in template:
        return []
    match = _template_pattern(template).match(content.strip())
    return list(match.groups()) if match else []


def _re2_escape(text: str) -> str:
    return "".join(
        "\\" + ch if ch.isascii() and not ch.isalnum() and ch != "_" else ch for ch in text
    )


@lru_cache(maxsize=4096)
def _re2_template(template: str) -> str:
    slots = iter(range(template.count(WILDCARD)))
    pieces = [
        _token_pattern(t, lambda cls: f"(?P<p{next(slots)}>{cls})", _re2_escape)
        for t in template.split()
    ]
    return "^" + _SPACE.join(pieces) + "$"


def extract_parameters_batch(
    template_ids: npt.NDArray[np.int64],
    contents: Sequence[str] | pa.Array,
    template_of: Callable[[int], str]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int16], pa.Array]:
    """Parameters of many messages at once, grouped by template and run through RE2.

    Returns the message index, the slot position and the value of every parameter,
    as :func:`extract_parameters` would give them message by message.

    >>> rows, pos, vals = extract_parameters_batch(
    ...     np.array([1, 2, 1]), ["port 1 up", "fan ok", "port 7 down"],
    ...     {1: "port <*> <*>", 2: "fan ok"}.__getitem__)
    >>> rows.tolist(), pos.tolist(), vals.to_pylist()
    ([0, 2, 0, 2], [0, 0, 1, 1], ['1', '7', 'up', 'down'])
    """
    ids = np.asarray(template_ids)
    order = np.argsort(ids, kind="stable")
    bounds = np.flatnonzero(np.diff(ids[order])) + 1
    texts = pc.utf8_trim_whitespace(
        contents if isinstance(contents, pa.Array) else pa.array(contents, pa.string())
    )
    rows: list[npt.NDArray[np.int64]] = []
    positions: list[npt.NDArray[np.int16]] = []
    values: list[pa.Array] = []
    for group in np.split(order, bounds) if len(ids) else []:
        template = template_of(int(ids[group[0]]))
        slots = template.count(WILDCARD)
        if slots == 0:
            continue
        found = pc.extract_regex(texts.take(pa.array(group)), pattern=_re2_template(template))
        valid = found.is_valid()
        kept = group[np.asarray(valid.to_numpy(zero_copy_only=False), dtype=bool)]
        matched = found.filter(valid)
        for slot in range(slots):
            rows.append(kept)
            positions.append(np.full(len(kept), slot, dtype=np.int16))
            values.append(matched.field(slot))
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int16), pa.array([], pa.string())
    return np.concatenate(rows), np.concatenate(positions), pa.concat_arrays(values)

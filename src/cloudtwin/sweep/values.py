"""What a `KEY=VALUES` vary says: a scenario key and the values it takes.

Values are comma-separated; each is a YAML scalar or flow value, read exactly as a
`--set` override reads its value, or an inclusive integer range `A..B` (`A..B:STEP`).
Commas inside brackets, braces or quotes do not separate values, so a whole section
can be varied: `workload={kind: perftest, size: 1GiB},{kind: collective}`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cloudtwin.errors import SweepError

__all__ = ["Range", "Vary", "parse_vary", "split_values"]

_KEY = re.compile(r"^[A-Za-z_][\w-]*(\.[\w-]+)*$")
_RANGE = re.compile(r"^(-?[0-9]+)\.\.(-?[0-9]+)(?::([0-9]+))?$")
_CLOSING = {"[": "]", "{": "}"}

#: More values than this for one key is a mistake (a range missing a digit), not a sweep.
MAX_VALUES = 10_000_000
#: Values listed one by one (not in a range) for one key: each is checked before the sweep
#: starts, so a list this long is already seconds of checking; longer lists are ranges.
MAX_LISTED = 1000


@dataclass(frozen=True)
class Range:
    """An inclusive integer range `start..stop` with a positive `step`."""

    start: int
    stop: int
    step: int = 1

    def values(self) -> list[str]:
        """Every value, as the text an override carries."""
        return [str(v) for v in range(self.start, self.stop + 1, self.step)]

    def ends(self) -> list[str]:
        """The first and last value: enough to check a range against a field's bounds."""
        last = self.start + (self.stop - self.start) // self.step * self.step
        return [str(self.start)] if last == self.start else [str(self.start), str(last)]


@dataclass(frozen=True)
class Vary:
    """One varied key: its dotted scenario key and its values (override text, in order)."""

    key: str
    values: tuple[str, ...]
    #: The values to validate before a sweep starts (a range's ends, every listed value).
    probes: tuple[str, ...]

    def overrides(self, index: int) -> str:
        """The `key=value` override of the value at `index`."""
        return f"{self.key}={self.values[index]}"


def split_values(text: str) -> list[str]:
    """Split at the commas that are not inside brackets, braces or quotes.

    >>> split_values("1,2,{a: 1, b: 2},'x,y'")
    ['1', '2', '{a: 1, b: 2}', "'x,y'"]
    """
    items, depth, quote, start = [], [], "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _CLOSING:
            depth.append(_CLOSING[char])
        elif depth and char == depth[-1]:
            depth.pop()
        elif char == "," and not depth:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items]


def _range(key: str, item: str) -> Range | None:
    if ".." not in item or item.startswith(("[", "{", "'", '"')):
        return None
    match = _RANGE.match(item)
    if match is None:
        raise SweepError(f"vary {key}: {item!r} is not a range like 1..100 or 0..100:10 (integers)")
    start, stop, step = int(match.group(1)), int(match.group(2)), int(match.group(3) or 1)
    if stop < start:
        raise SweepError(f"vary {key}: range {item!r} runs backwards")
    if step < 1:
        raise SweepError(f"vary {key}: range {item!r} needs a step of at least 1")
    if (stop - start) // step + 1 > MAX_VALUES:
        raise SweepError(f"vary {key}: range {item!r} has more than {MAX_VALUES:,} values")
    return Range(start, stop, step)


def parse_vary(text: str) -> Vary:
    """A `KEY=VALUES` vary; SweepError naming the key on anything malformed.

    >>> parse_vary("seed=1..3,10").values
    ('1', '2', '3', '10')
    >>> parse_vary("fabric.spines=4,8").overrides(1)
    'fabric.spines=8'
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key):
        raise SweepError(f"vary {text!r}: expected key=values, e.g. seed=1..10 or fabric.spines=4,8")
    values: list[str] = []
    probes: list[str] = []
    items = split_values(raw)
    listed = sum(1 for item in items if ".." not in item)
    if listed > MAX_LISTED:
        raise SweepError(
            f"vary {key}: {listed:,} values listed one by one, more than the {MAX_LISTED:,} a vary "
            "may list (each is checked before the sweep starts); give a range like 1..5000"
        )
    for item in items:
        if not item:
            raise SweepError(f"vary {key}: an empty value in {raw!r}")
        span = _range(key, item)
        values.extend(span.values() if span else [item])
        probes.extend(span.ends() if span else [item])
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise SweepError(f"vary {key}: value {value} is given twice")
        seen.add(value)
    return Vary(key, tuple(values), tuple(probes))

"""Strict parsing of quantities with units: rates (`100Gbps`), sizes (`1GiB`), times (`2us`).

A bare number is accepted only where it cannot be misread: a size in bytes given as an
integer. Rates and times always need a unit.

>>> parse_rate("100Gbps")
100000000000.0
>>> parse_size("1GiB")
1073741824
>>> parse_time("2us")
2e-06
"""

from __future__ import annotations

import math
import re

__all__ = [
    "format_rate",
    "format_size",
    "format_time",
    "parse_int",
    "parse_number",
    "parse_rate",
    "parse_size",
    "parse_time",
]

#: ASCII digits, grouped by single underscores if at all (`3_600_000`, as YAML and Python
#: source write them). Python's int() and float() also take other scripts' digits ('١٢',
#: '１２'), surrounding whitespace, 'nan' and 'inf': every reader here refuses them.
DIGITS = r"[0-9]+(?:_[0-9]+)*"
_NUMBER = rf"(?P<num>{DIGITS}(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"
_INT_TEXT = re.compile(rf"[+-]?{DIGITS}")
_NUMBER_TEXT = re.compile(rf"[+-]?(?:{DIGITS}(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PATTERN = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[A-Za-zµ/]*)\s*$")

#: The slowest rate a link or NIC may have (one bit per second).
MIN_RATE_BPS = 1.0
#: The largest size a transfer may have (1 EiB; sizes are held as 64-bit floats).
MAX_SIZE_BYTES = 1 << 60

_RATE_UNITS: dict[str, float] = {
    "bps": 1.0,
    "Kbps": 1e3,
    "Mbps": 1e6,
    "Gbps": 1e9,
    "Tbps": 1e12,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Gb/s": 1e9,
    "Mb/s": 1e6,
    "Tb/s": 1e12,
    "B/s": 8.0,
    "KB/s": 8e3,
    "MB/s": 8e6,
    "GB/s": 8e9,
    "TB/s": 8e12,
    "KiB/s": 8.0 * 2**10,
    "MiB/s": 8.0 * 2**20,
    "GiB/s": 8.0 * 2**30,
}

_SIZE_UNITS: dict[str, int] = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "PiB": 2**50,
    "EiB": 2**60,
    "PB": 10**15,
    "EB": 10**18,
}

_TIME_UNITS: dict[str, float] = {
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
    "min": 60.0,
}


def parse_int(text: str, what: str = "whole number") -> int:
    """A whole number written in ASCII digits (grouped by `_` if at all), with an optional
    sign; ValueError otherwise.

    The one reader of whole numbers in user text (flow files, CLI flags, ranges).

    >>> parse_int("-12")
    -12
    >>> parse_int("3_600_000")
    3600000
    >>> parse_int("\u0661\u0662")
    Traceback (most recent call last):
    ValueError: '١٢' is not a whole number (ASCII digits, e.g. 12)
    """
    if not isinstance(text, str) or not _INT_TEXT.fullmatch(text):
        raise ValueError(f"{text!r} is not a {what} (ASCII digits, e.g. 12)")
    return int(text)


def parse_number(text: str, what: str = "number") -> float:
    """A finite number written in ASCII (`12`, `-1.5`, `2e-3`); ValueError otherwise
    (`nan`, `inf`, `1e400`, `0x10`, `1__0`, ` 5`, other scripts' digits).

    >>> parse_number("2.5e3")
    2500.0
    >>> parse_number("1e400")
    Traceback (most recent call last):
    ValueError: '1e400' is not a finite number
    """
    if not isinstance(text, str) or not _NUMBER_TEXT.fullmatch(text):
        raise ValueError(f"{text!r} is not a {what} (ASCII digits, e.g. 1.5 or 2e-3)")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def _split(text: str, what: str, units: dict[str, float] | dict[str, int]) -> tuple[str, str]:
    match = _PATTERN.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a {what} (expected e.g. {_example(what)})")
    unit = match.group("unit")
    if unit and unit not in units:
        known = ", ".join(units)
        raise ValueError(f"unknown {what} unit {unit!r} in {text!r} (known: {known})")
    return match.group("num"), unit


def _example(what: str) -> str:
    return {"rate": "100Gbps or 400G", "size": "1GiB or 4096", "time": "2us or 1.5ms"}[what]


def parse_rate(value: str | float | int, allow_zero: bool = False) -> float:
    """A link or NIC rate in bit/s from `100Gbps`, `400G`, `25Gb/s` or `12.5GB/s`.

    With `allow_zero` (a VM that dirties no pages), zero is a rate too, with a unit
    (`0MiB/s`) or without (`0`).
    """
    if allow_zero and value in (0, "0"):
        return 0.0
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"{value!r} needs a unit, e.g. 100Gbps")
    num, unit = _split(value, "rate", _RATE_UNITS)
    if not unit:
        raise ValueError(f"{value!r} needs a unit, e.g. 100Gbps")
    rate = float(num) * _RATE_UNITS[unit]
    if allow_zero and rate == 0:
        return 0.0
    if rate <= 0:
        raise ValueError(f"rate {value!r} must be positive")
    if not MIN_RATE_BPS <= rate < math.inf:
        raise ValueError(f"rate {value!r} must be at least 1bps and finite")
    return rate


def parse_size(value: str | int, allow_zero: bool = False) -> int:
    """A size in bytes from `1GiB`, `64KB`, `4096B` or an integer number of bytes (at
    most 1EiB; zero only with `allow_zero`)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str):
        num, unit = _split(value, "size", _SIZE_UNITS)
        scaled = float(num) * _SIZE_UNITS[unit or "B"]
        if not scaled <= MAX_SIZE_BYTES:
            raise ValueError(f"size {value!r} is more than 1EiB")
        if scaled != int(scaled):
            raise ValueError(f"size {value!r} is not a whole number of bytes")
        size = int(scaled)
    else:
        raise ValueError(f"{value!r} is not a size (expected e.g. 1GiB)")
    if size == 0 and allow_zero:
        return 0
    if size <= 0:
        raise ValueError(f"size {value!r} must be positive")
    if size > MAX_SIZE_BYTES:
        raise ValueError(f"size {value!r} is more than 1EiB")
    return size


def parse_time(value: str | float | int) -> float:
    """A duration in seconds from `2us`, `1.5ms`, `10s`; zero is allowed."""
    if isinstance(value, bool) or not isinstance(value, str):
        if value == 0:
            return 0.0
        raise ValueError(f"{value!r} needs a unit, e.g. 1us")
    num, unit = _split(value, "time", _TIME_UNITS)
    if not unit:
        if float(num) == 0:
            return 0.0
        raise ValueError(f"{value!r} needs a unit, e.g. 1us")
    seconds = float(num) * _TIME_UNITS[unit]
    if not math.isfinite(seconds):
        raise ValueError(f"time {value!r} must be finite")
    return seconds


def format_rate(rate_bps: float) -> str:
    """`100Gbps` style text for a rate in bit/s.

    >>> format_rate(4e11)
    '400Gbps'
    """
    for unit, scale in (("Tbps", 1e12), ("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3)):
        if rate_bps >= scale:
            return f"{rate_bps / scale:g}{unit}"
    return f"{rate_bps:g}bps"


def format_size(size_bytes: int) -> str:
    """`1GiB` style text for a size in bytes (binary units when exact); `parse_size` reads
    every text it gives.

    >>> format_size(1 << 30), format_size(1 << 60)
    ('1GiB', '1EiB')
    """
    for unit in ("EiB", "PiB", "TiB", "GiB", "MiB", "KiB"):
        scale = _SIZE_UNITS[unit]
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale}{unit}"
    return f"{size_bytes}B"


def format_time(seconds: float) -> str:
    """Human text for a duration.

    >>> format_time(2.5e-6)
    '2.5us'
    """
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g}{unit}"
    return f"{seconds / 1e-9:.4g}ns"

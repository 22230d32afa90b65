"""Strict unit parsing: rates and times need a unit, sizes may be bare integers."""

from __future__ import annotations

import pytest

from cloudtwin.scenario import (
    format_rate,
    format_size,
    format_time,
    parse_rate,
    parse_size,
    parse_time,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("100Gbps", 100e9),
        ("400G", 400e9),
        ("25Gb/s", 25e9),
        ("12.5GB/s", 100e9),  # 12.5 GB/s * 8 bit/B
        ("1.6Tbps", 1.6e12),
        (" 10 Mbps ", 10e6),
        ("1e2Kbps", 1e5),
    ],
)
def test_parse_rate(text: str, bps: float) -> None:
    assert parse_rate(text) == pytest.approx(bps, rel=1e-12)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (100, "needs a unit"),
        (1e11, "needs a unit"),
        ("100", "needs a unit"),
        ("100GiB", "unknown rate unit"),
        ("100gbps", "unknown rate unit"),
        ("-5Gbps", "not a rate"),
        ("0Gbps", "must be positive"),
        ("fast", "not a rate"),
        ("", "not a rate"),
        (True, "needs a unit"),
    ],
)
def test_parse_rate_rejects(value: object, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_rate(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("1GiB", 1 << 30),
        ("64KB", 64_000),
        ("1.5KiB", 1536),
        ("4096B", 4096),
        ("4096", 4096),
        (4096, 4096),
        ("2MiB", 2 << 20),
        ("1TB", 10**12),
    ],
)
def test_parse_size(value: str | int, size: int) -> None:
    assert parse_size(value) == size
    assert isinstance(parse_size(value), int)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("1Gb", "unknown size unit"),
        ("0.5B", "whole number"),
        ("-1KiB", "not a size"),
        (0, "must be positive"),
        (-5, "must be positive"),
        ("0B", "must be positive"),
        (True, "not a size"),
        (1.5, "not a size"),
    ],
)
def test_parse_size_rejects(value: object, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_size(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2us", 2e-6),
        ("2µs", 2e-6),
        ("1.5ms", 1.5e-3),
        ("10s", 10.0),
        ("5ns", 5e-9),
        ("1min", 60.0),
        ("0", 0.0),
        (0, 0.0),
        ("0us", 0.0),
    ],
)
def test_parse_time(value: str | int, seconds: float) -> None:
    assert parse_time(value) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (5, "needs a unit"),
        (0.5, "needs a unit"),
        ("5", "needs a unit"),
        ("3h", "unknown time unit"),
        ("-1us", "not a time"),
        ("soon", "not a time"),
    ],
)
def test_parse_time_rejects(value: object, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_time(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bps", "text"),
    [(4e11, "400Gbps"), (25e9, "25Gbps"), (1.6e12, "1.6Tbps"), (10e6, "10Mbps"), (500.0, "500bps")],
)
def test_format_rate_round_trips(bps: float, text: str) -> None:
    assert format_rate(bps) == text
    assert parse_rate(text) == pytest.approx(bps, rel=1e-12)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (1 << 30, "1GiB"),
        (3 << 20, "3MiB"),
        (1536, "1536B"),
        (2048, "2KiB"),
        (1, "1B"),
        (1 << 40, "1TiB"),
    ],
)
def test_format_size_round_trips(size: int, text: str) -> None:
    assert format_size(size) == text
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(2.5e-6, "2.5us"), (0.5, "500ms"), (3e-9, "3ns"), (12.0, "12s"), (1e-3, "1ms")],
)
def test_format_time(seconds: float, text: str) -> None:
    assert format_time(seconds) == text
    assert parse_time(text) == pytest.approx(seconds, rel=1e-12)

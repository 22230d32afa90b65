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


# -- one strict ASCII number reader; the formatter and the parser agree -----------------


@pytest.mark.parametrize(
    "text",
    ["\u0661\u0662", "\uff11\uff12", "1__0", "_1", "1_", " 5", "5 ", "0x10", "1e400", "nan", "inf", "", "+"],
)
def test_numbers_are_ascii_finite_and_bare(text: str) -> None:
    from cloudtwin.scenario.units import parse_int, parse_number

    with pytest.raises(ValueError, match="not a"):
        parse_number(text)
    with pytest.raises(ValueError, match="not a"):
        parse_int(text)


def test_plain_numbers_read() -> None:
    from cloudtwin.scenario.units import parse_int, parse_number

    assert (parse_int("-12"), parse_int("+7"), parse_number("2.5e-3"), parse_number(".5")) == (
        -12, 7, 2.5e-3, 0.5
    )
    # digits grouped as YAML and Python source group them (examples/vela-hpl.yaml: 3_600_000)
    assert (parse_int("3_600_000"), parse_number("1_000.5"), parse_size("1_024KiB")) == (
        3_600_000, 1000.5, 1 << 20
    )


def test_every_size_the_formatter_prints_is_read_back() -> None:
    # "more than 1EiB" was printed while 1EiB was refused
    for size in (1, 1023, 1 << 10, 5 << 30, 3 << 40, 7 << 50, 1 << 60):
        assert parse_size(format_size(size)) == size
    assert parse_size("1EiB") == 1 << 60
    with pytest.raises(ValueError, match="more than 1EiB"):
        parse_size("2EiB")


def test_every_rate_and_time_the_formatter_prints_is_read_back() -> None:
    for rate in (1.0, 999.0, 25e9, 1.6e12, 4e15):
        assert parse_rate(format_rate(rate)) == pytest.approx(rate, rel=1e-5)
    for seconds in (1e-9, 2.5e-6, 3e-3, 12.0, 1e6):
        assert parse_time(format_time(seconds)) == pytest.approx(seconds, rel=1e-3)


def test_a_zero_rate_or_size_with_a_unit_is_zero_where_zero_is_allowed() -> None:
    # `migrate plan --dirty-rate 0MiB/s` was refused while `0` was accepted
    assert parse_rate("0MiB/s", allow_zero=True) == parse_rate("0", allow_zero=True) == 0.0
    assert parse_size("0GiB", allow_zero=True) == parse_size("0", allow_zero=True) == 0
    with pytest.raises(ValueError, match="must be positive"):
        parse_rate("0MiB/s")

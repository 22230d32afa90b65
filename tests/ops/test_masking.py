"""Tests of masking: batches (joined, RE2) agree with one message at a time."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cloudtwin.errors import LogFormatError
from cloudtwin.ops import GENERIC_MASKS, PRESETS, Masker

Lines = Callable[[str], list[str]]


def test_batch_masking_equals_single_masking_on_real_logs(system: str, raw_lines: Lines) -> None:
    preset = PRESETS[system.lower()]
    contents = [f["Content"] for line in raw_lines(system) if (f := preset.format.parse(line))]
    masker = Masker(preset.masks)
    assert masker.mask_many(contents) == [masker.mask(c) for c in contents]
    generic = Masker(GENERIC_MASKS)
    assert generic.mask_many(contents) == [generic.mask(c) for c in contents]


@pytest.mark.parametrize(
    "patterns",
    [
        (r"[0-9]+$",),  # anchored: would see only the end of the joined batch
        (r"\s+\d",),  # may eat a newline between messages
    ],
)
def test_patterns_that_cannot_be_joined_still_mask_each_message(patterns: tuple[str]) -> None:
    contents = ["x1 at 10", "x 22", "multi\nline 3", "x4"]
    masker = Masker(patterns)
    assert masker.mask_many(contents) == [masker.mask(c) for c in contents]


@pytest.mark.parametrize("pattern", [r"(?<=x)\d", r"(a)\1", r"x(?=y)", r"a{1000}{1000}", r"a++"])
def test_masks_that_could_backtrack_are_refused_naming_the_mask(pattern: str) -> None:
    with pytest.raises(LogFormatError, match="^mask ") as caught:
        Masker([pattern])
    assert caught.value.field == "mask"


def test_a_mask_that_backtracks_in_python_runs_in_linear_time() -> None:
    """`(a+)+b` over a's is exponential in Python's re; RE2 answers at once."""
    line = "a" * 5000
    masker = Masker([r"(a+)+b", r"(x|x)*y"])
    assert masker.mask(line) == line
    assert masker.mask_many([line, "aab"]) == [line, "<*>"]


def test_generic_masks_cover_addresses_ids_and_numbers() -> None:
    masker = Masker(GENERIC_MASKS)
    text = "conn 10.1.2.3:4791 qp 0x1a2b id 123e4567-e89b-12d3-a456-426614174000 file /var/log/x.log n=42"
    assert masker.mask(text) == "conn <*> qp <*> id <*> file <*> n=<*>"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("took 12ms to read 3.5KB", "took <*> to read <*>"),
        ("sent 1481 bytes (1.44 KB) in 2 s", "sent <*> bytes (<*>) in <*>"),
        ("over 40 seconds", "over <*> seconds"),
        ("peer fe80::1ff:fe23:4567:890a port 22 up", "peer <*> port <*> up"),
        ("from [2001:db8::1]:443 via 10.0.0.1:80", "from [<*>]<*> via <*>"),
        ("GET http://example.org/a/b?x=1 done", "GET <*> done"),
        ("Resolved MSRA-SA-41.fareast.corp.microsoft.com to /default-rack",
         "Resolved <*> to /default-rack"),
        ("connection at Fri Jun 17 07:07:00 2005 closed", "connection at <*> closed"),
        ("session opened by (uid=0) user=root", "session opened by (uid=<*>) user=root"),
        ("attempt_1445144423722_0020_m_000001_0 done", "<*> done"),
    ],
)
def test_generic_masks_classify_variable_tokens(text: str, masked: str) -> None:
    """Whole tokens with a digit, dates, URLs and paths; keys and brackets stay."""
    assert Masker(GENERIC_MASKS).mask(text) == masked

"""Bounded reads of a user's file: regular files only, never more than the limit, one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudtwin.errors import CloudtwinError, ScenarioError
from cloudtwin.files import read_bounded, read_text_bounded


def test_a_regular_file_under_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_bytes(b"name: x\n")
    assert read_bounded(path, 8, "scenario") == b"name: x\n"
    assert read_text_bounded(path, 8, "scenario") == "name: x\n"


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _loop(tmp_path: Path) -> Path:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (_fifo, "the scenario is a FIFO, not a regular file"),
        (lambda tmp: tmp, "the scenario is a directory, not a regular file"),
        (lambda tmp: Path("/dev/zero"), "is a character device, not a regular file"),
        (lambda tmp: Path("/dev/urandom"), "is a character device, not a regular file"),
        (_loop, "the scenario path is a symlink loop"),
        (lambda tmp: tmp / "missing", "no such scenario file"),
    ],
)
def test_what_is_not_a_readable_regular_file_is_refused_in_one_line(
    tmp_path: Path, make: object, reason: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(ScenarioError) as caught:
        read_bounded(path, 1 << 20, "scenario", ScenarioError)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and reason in message and "\n" not in message


def test_a_file_over_the_limit_is_refused_with_the_hint(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * 11)
    with pytest.raises(CloudtwinError, match=r"larger than 10 bytes, the most it may be; raise it"):
        read_bounded(path, 10, "flow file", hint="raise it")


def test_a_file_that_reports_no_size_is_still_cut_at_the_limit() -> None:
    # /proc files report st_size 0 but hold text: the read itself stops at the limit
    with pytest.raises(CloudtwinError, match="larger than 4 bytes"):
        read_bounded("/proc/self/status", 4, "token file")


def test_memory_of_a_process_is_refused_not_a_traceback() -> None:
    with pytest.raises(CloudtwinError, match="/proc/self/mem: cannot read the scenario"):
        read_bounded("/proc/self/mem", 1 << 20, "scenario")


def test_text_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"ab\xff")
    with pytest.raises(CloudtwinError, match=r"the scenario is not UTF-8 text"):
        read_text_bounded(path, 10, "scenario")

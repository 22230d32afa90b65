"""`cloudtwin.files.read_bounded`: regular files only, never more than the limit, never blocking."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudtwin.errors import CloudtwinError, NicError
from cloudtwin.files import read_bounded, read_text_bounded


def test_a_regular_file_up_to_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_bounded(path, 10, "pcap") == b"x" * 10
    assert read_text_bounded(path, 10, "program") == "x" * 10


def test_one_byte_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    with pytest.raises(NicError, match=r"the pcap is larger than 10 bytes"):
        read_bounded(path, 10, "pcap", NicError)


@pytest.mark.parametrize(
    ("name", "kind"), [("/dev/zero", "a character device"), ("/dev/urandom", "a character device")]
)
def test_devices_are_refused_before_any_read(name: str, kind: str) -> None:
    with pytest.raises(CloudtwinError, match=f"^{name}: the P4 program is {kind}, not a regular file$"):
        read_bounded(name, 1 << 40, "P4 program")


def test_a_fifo_without_a_writer_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(CloudtwinError, match="is a FIFO, not a regular file"):
        read_bounded(fifo, 100, "pcap")


def test_a_directory_missing_file_and_non_utf8_text_are_one_line_each(tmp_path: Path) -> None:
    with pytest.raises(CloudtwinError, match="is a directory"):
        read_bounded(tmp_path, 100, "pcap")
    with pytest.raises(CloudtwinError, match="no such pcap file"):
        read_bounded(tmp_path / "nope", 100, "pcap")
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(CloudtwinError, match="is not UTF-8 text"):
        read_text_bounded(bad, 100, "program")

"""The bearer token file: read bounded, and only from a regular file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudtwin.errors import StoreError
from cloudtwin.service.token import load_or_create_token


def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "t.token")
    return tmp_path / "t.token"


def _loop(tmp_path: Path) -> Path:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


def _big(tmp_path: Path) -> Path:
    path = tmp_path / "t.token"
    path.write_bytes(b"x" * 5000)
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda tmp: Path("/dev/zero"), "the token is a character device"),  # grew without bound
        (lambda tmp: Path("/dev/urandom"), "the token is a character device"),
        (_fifo, "the token is a FIFO"),  # blocked forever
        (_loop, "the token path is a symlink loop"),
        (lambda tmp: tmp, "the token is a directory"),
        (_big, "larger than 4,096 bytes"),
    ],
)
def test_a_token_file_that_is_not_one_is_refused_in_one_line(
    tmp_path: Path, make: object, reason: str
) -> None:
    with pytest.raises(StoreError) as caught:
        load_or_create_token(make(tmp_path))  # type: ignore[operator]
    assert reason in str(caught.value) and "\n" not in str(caught.value)


def test_a_new_token_is_made_and_read_back(tmp_path: Path) -> None:
    token, created = load_or_create_token(tmp_path / "t.token")
    assert created and load_or_create_token(tmp_path / "t.token") == (token, False)

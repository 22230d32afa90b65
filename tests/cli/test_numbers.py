"""Numbers on the command line are read by the one strict ASCII parser, as in files."""

from __future__ import annotations

import pytest

from cloudtwin.cli.app import main
from cloudtwin.cli.train import parse_gpus
from cloudtwin.errors import WorkloadError


@pytest.mark.parametrize("value", ["\u0663", "\uff13", " 3", "3 ", "0x10", "nan", "1e400"])
def test_an_int_flag_takes_ascii_digits_only(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["logs", "search", "x", "--limit", value])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"Invalid value for '--limit': {value!r} is not a whole number" in err


@pytest.mark.parametrize("value", ["\u0666\u0664", "6\uff14", "1e400", " "])
def test_gpu_counts_take_ascii_digits_only(value: str) -> None:
    with pytest.raises(WorkloadError, match="gpus: .* is not a comma-separated list of GPU counts"):
        parse_gpus(value)

"""JSON the CLI writes is strict JSON: no NaN or Infinity, which strict readers refuse."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudtwin.cli.output import emit_json, write_json
from cloudtwin.store.documents import finite_json


def test_non_finite_floats_become_null_anywhere_in_the_document() -> None:
    document = {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf}], "d": (2, "x"), "e": None}
    assert finite_json(document) == {"a": None, "b": [1.0, None, {"c": None}], "d": [2, "x"], "e": None}


def test_emit_and_write_json_give_finite_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = {"mean": math.nan, "ok": 1.5}
    emit_json(document)
    printed = capsys.readouterr().out

    def refuse(word: str) -> None:
        raise ValueError(word)

    assert json.loads(printed, parse_constant=refuse) == {"mean": None, "ok": 1.5}
    write_json(tmp_path / "out.json", document)
    assert json.loads((tmp_path / "out.json").read_text(), parse_constant=refuse) == {"mean": None, "ok": 1.5}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_strict_json_always_serialises_without_nan(value: object) -> None:
    json.dumps(finite_json(value), allow_nan=False)

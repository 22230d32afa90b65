"""Tests of parameter extraction: the batch (RE2) path agrees with the one-message path."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cloudtwin.ops import PRESETS, TemplateMiner, extract_parameters
from cloudtwin.ops.parameters import extract_parameters_batch

Lines = Callable[[str], list[str]]


def test_batch_parameters_equal_message_by_message(system: str, raw_lines: Lines) -> None:
    preset = PRESETS[system.lower()]
    contents = [
        f["Content"].strip() for line in raw_lines(system) if (f := preset.format.parse(line))
    ]
    miner = TemplateMiner(preset.miner_config())
    ids = miner.add_batch(contents)
    rows, positions, values = extract_parameters_batch(
        ids, contents, lambda t: miner.cluster(t).template
    )
    batch: dict[int, list[str]] = {}
    for row, pos, value in sorted(zip(rows.tolist(), positions.tolist(), values.to_pylist(),
                                      strict=True)):
        assert pos == len(batch.setdefault(row, []))
        batch[row].append(value)
    single = {
        i: params for i, (tid, c) in enumerate(zip(ids.tolist(), contents, strict=True))
        if (params := extract_parameters(miner.cluster(tid).template, c))
    }
    assert batch == single
    assert len(single) > 0 or system == "Apache"


def test_a_message_that_no_longer_fits_its_template_has_no_parameters() -> None:
    rows, _, _ = extract_parameters_batch(
        np.array([1]), ["totally different"], lambda _t: "port <*> up"
    )
    assert rows.tolist() == []

"""Tomography scoring on hand-built flows: shared degraded links score, busy healthy ones don't."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.diagnosis.tomography import TomographyConfig, degraded_samples, link_scores


def _rows(samples: list[tuple[int, int, float, list[int]]]) -> tuple[np.ndarray, ...]:
    sample = np.array([s[0] for s in samples])
    flow = np.array([s[1] for s in samples])
    rate = np.array([s[2] for s in samples])
    indptr = np.concatenate(([0], np.cumsum([len(s[3]) for s in samples])))
    links = np.array([k for s in samples for k in s[3]])
    return sample, flow, rate, indptr, links


# Links: 0 and 1 are host uplinks, 2 and 3 two spine paths, 4 the common downlink.
PATHS = {0: [0, 2, 4], 1: [1, 2, 4], 2: [0, 3, 4], 3: [1, 3, 4]}


def _scenario(broken: int) -> list[tuple[int, int, float, list[int]]]:
    """Four flows over two instants; at instant 1 the flows on spine path `broken` stall."""
    rows = [(0, f, 25.0, path) for f, path in PATHS.items()]
    rows += [(1, f, 0.0 if broken in path else 25.0, path) for f, path in PATHS.items()]
    rows += [(2, f, 25.0, path) for f, path in PATHS.items()]
    return rows


@pytest.mark.parametrize("broken", [2, 3])
def test_the_link_only_degraded_flows_share_scores_highest(broken: int) -> None:
    score, degraded, healthy = link_scores(*_rows(_scenario(broken)), link_count=5)
    assert int(np.argmax(score)) == broken
    assert degraded[broken] == 2 and healthy[broken] == 4
    # the common downlink carries the stalled flows too, but as many healthy ones
    assert score[4] == pytest.approx(score[broken] / 2)
    # exact value: 2 stalled flows x severity 1 / 3 links each, all flows on it degraded
    assert score[broken] == pytest.approx(2 / 3)
    other = 5 - broken
    assert score[other] == 0.0


def test_usual_rate_is_the_flows_own_so_a_steady_slow_flow_is_not_degraded() -> None:
    flow = np.array([0, 0, 0, 1, 1, 1])
    rate = np.array([10.0, 10.0, 10.0, 100.0, 40.0, 100.0])
    severity = degraded_samples(flow, rate, TomographyConfig(degraded_below=0.5))
    assert severity.tolist() == pytest.approx([0, 0, 0, 0, 0.6, 0])


def test_config_is_checked() -> None:
    with pytest.raises(ValueError):
        TomographyConfig(degraded_below=0)

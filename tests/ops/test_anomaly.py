"""Tests of the change detector and the PCA detector on counts with known anomalies."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from cloudtwin.ops import DetectorConfig, PcaConfig, detect_changes, detect_pca

T0 = datetime(2026, 3, 1)


def _windows(n: int) -> list[datetime]:
    return [T0 + timedelta(minutes=5 * i) for i in range(n)]


def _steady(seed: int, n: int = 48, rates: tuple[float, ...] = (40.0, 15.0, 5.0)) -> np.ndarray:
    return np.random.default_rng(seed).poisson(rates, size=(n, len(rates))).astype(float)


@pytest.mark.parametrize("seed", range(5))
def test_steady_poisson_traffic_raises_no_alarm(seed: int) -> None:
    assert detect_changes(_steady(seed), _windows(48), ["a", "b", "c"]) == []


@pytest.mark.parametrize("seed", range(5))
def test_a_burst_is_found_at_its_window_and_key(seed: int) -> None:
    counts = _steady(seed)
    counts[30, 1] += 60
    found = detect_changes(counts, _windows(48), ["a", "b", "c"])
    assert [(a.kind, a.key, a.window_start) for a in found] == [("burst", "b", _windows(48)[30])]
    assert found[0].count == counts[30, 1] and found[0].expected < 20 and found[0].score > 6


def test_silence_and_new_keys_are_flagged_once() -> None:
    counts = _steady(1)
    counts[25:, 0] = 0  # "a" stops at window 25
    counts = np.hstack([counts, np.zeros((48, 1))])
    counts[40:, 3] = 7  # "d" appears at window 40
    found = detect_changes(counts, _windows(48), ["a", "b", "c", "d"])
    kinds = {(a.kind, a.key, a.window_start) for a in found}
    assert ("silent", "a", _windows(48)[25]) in kinds
    assert ("new", "d", _windows(48)[40]) in kinds
    assert len(found) == 2


def test_the_threshold_and_history_are_honoured() -> None:
    counts = _steady(2)
    counts[30, 1] += 25
    strict = detect_changes(counts, _windows(48), list("abc"), DetectorConfig(threshold=50))
    assert strict == []
    early = counts.copy()
    early[1, 1] += 100
    found = detect_changes(early, _windows(48), list("abc"), DetectorConfig(min_history=3))
    assert all(a.window_start != _windows(48)[1] for a in found)  # too little history yet
    found = detect_changes(early, _windows(48), list("abc"), DetectorConfig(min_history=1))
    assert ("burst", "b", _windows(48)[1]) in {(a.kind, a.key, a.window_start) for a in found}


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="counts are"):
        detect_changes(np.zeros((3, 2)), _windows(2), ["a", "b"])


def _correlated(seed: int, n: int = 80, keys: int = 10) -> np.ndarray:
    rng = np.random.default_rng(seed)
    load = rng.uniform(20, 60, size=(n, 2)) @ rng.uniform(0.5, 2.0, size=(2, keys))
    return rng.poisson(load).astype(float)


@pytest.mark.parametrize("seed", range(5))
def test_pca_finds_a_window_that_breaks_the_correlation(seed: int) -> None:
    counts = _correlated(seed)
    counts[50, 7] += 200  # measured: found for 20 of 20 seeds, 17 of 20 at +100
    found = detect_pca(counts, _windows(80), [f"t{i}" for i in range(10)])
    assert [(a.window_start, a.key) for a in found][:1] == [(_windows(80)[50], "t7")]


def test_pca_false_alarms_stay_rare_on_normal_windows() -> None:
    alarms = sum(len(detect_pca(_correlated(s), _windows(80), list("abcdefghij"), PcaConfig()))
                 for s in range(20))
    assert alarms <= 4  # 1600 normal windows at alpha 0.001 (measured: 0)


def test_a_key_that_comes_in_sessions_is_judged_by_its_usual_session_size() -> None:
    rng = np.random.default_rng(7)
    counts = np.zeros((200, 1))
    counts[::10, 0] = rng.poisson(20, size=20)  # a cron job: 20 lines every 10th window
    assert detect_changes(counts, _windows(200), ["cron"]) == []
    counts[150, 0] = 90
    found = detect_changes(counts, _windows(200), ["cron"])
    assert [(a.kind, a.window_start) for a in found] == [("burst", _windows(200)[150])]


def test_pca_ignores_empty_windows() -> None:
    busy = _correlated(3)
    counts = np.zeros((240, 10))
    counts[::3] = busy
    assert detect_pca(counts, _windows(240), list("abcdefghij")) == []
    counts[150, 7] += 200  # window 150 is busy row 50
    found = detect_pca(counts, _windows(240), list("abcdefghij"))
    assert [(a.window_start, a.key) for a in found] == [(_windows(240)[150], "h")]

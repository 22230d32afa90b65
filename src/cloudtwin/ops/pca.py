"""The PCA detector (Xu et al., SOSP 2009): windows whose template mix is unusual."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from cloudtwin.ops.anomaly import Anomaly

__all__ = ["PcaConfig", "detect_pca"]


@dataclass(frozen=True)
class PcaConfig:
    """Settings of the PCA detector.

    The normal subspace keeps the components whose variance exceeds ``noise_factor``
    times the Poisson noise of square-rooted counts; ``alpha`` is the false-alarm rate
    of the threshold; ``trim`` the share of most outlying windows (largest robust
    z-score of any template) left out of the fit.
    """

    noise_factor: float = 4.0
    alpha: float = 0.001
    trim: float = 0.1

    def __post_init__(self) -> None:
        if not (0 < self.alpha < 1 and 0 <= self.trim < 1 and self.noise_factor > 0):
            raise ValueError(f"need 0 < alpha < 1, 0 <= trim < 1, noise_factor > 0: {self}")


_SQRT_POISSON_VARIANCE = 0.25


def detect_pca(
    counts: npt.NDArray[np.float64],
    windows: Sequence[datetime],
    keys: Sequence[str],
    config: PcaConfig | None = None,
) -> list[Anomaly]:
    """Flag windows whose squared prediction error exceeds the Q-statistic threshold.

    Windows without any line are left out. Counts are square-rooted (so Poisson
    noise is about the same for every template) and centred; the principal
    components above the noise level span the normal subspace; the residual's
    squared length (SPE) is compared with the
    Jackson-Mudholkar threshold. An anomaly's key names the template that contributes
    most to the residual; its score is SPE divided by the threshold.

    >>> from datetime import datetime, timedelta
    >>> rng = np.random.default_rng(0)
    >>> load = rng.uniform(20, 60, size=(60, 2)) @ rng.uniform(0.5, 2.0, size=(2, 8))
    >>> counts = rng.poisson(load).astype(float)
    >>> counts[30, 5] += 150
    >>> ws = [datetime(2026, 1, 1) + timedelta(minutes=i) for i in range(60)]
    >>> [(a.window_start.minute, a.key) for a in detect_pca(counts, ws, list("abcdefgh"))]
    [(30, 'f')]
    """
    config = config or PcaConfig()
    x = np.asarray(counts, dtype=np.float64)
    busy = np.nonzero(x.sum(axis=1) > 0)[0]  # an empty window has no mix to judge
    x = x[busy]
    if x.shape[0] < 3 or x.shape[1] < 2:
        return []
    weighted = np.sqrt(x)  # variance-stabilised: Poisson noise becomes ~1/4 per template
    # Fit on the windows that look ordinary template by template, so that a strong
    # anomaly cannot pull the normal subspace towards itself.
    median = np.median(weighted, axis=0)
    spread = 1.4826 * np.median(np.abs(weighted - median), axis=0) + 0.5
    outlying = (np.abs(weighted - median) / spread).max(axis=1)
    fit = outlying <= np.quantile(outlying, 1.0 - config.trim)
    model = _fit(weighted[fit], config.noise_factor * _SQRT_POISSON_VARIANCE)
    if model is None:
        return []
    spe, residual, limit = _score(weighted, *model, config.alpha)
    found = []
    for w in (int(i) for i in np.nonzero(spe > limit)[0]):
        k = int(np.argmax(residual[w] ** 2))
        start = windows[int(busy[w])]
        found.append(Anomaly("pca", start, keys[k], int(x[w].sum()), round(float(limit), 4),
                             round(float(spe[w] / limit), 3)))
    found.sort(key=lambda a: (-a.score, a.window_start))
    return found


Model = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]


def _fit(weighted: npt.NDArray[np.float64], noise: float) -> Model | None:
    """Mean, normal-subspace basis and residual eigenvalues of the training windows."""
    mean = weighted.mean(axis=0)
    _, singular, vt = np.linalg.svd(weighted - mean, full_matrices=False)
    eig = singular**2 / max(weighted.shape[0] - 1, 1)
    if eig.sum() <= 0:
        return None
    kept = int((eig > noise).sum())
    rest = np.concatenate([eig[kept:], np.zeros(weighted.shape[1] - len(eig))])
    return mean, vt[:kept].T, rest


def _score(
    weighted: npt.NDArray[np.float64],
    mean: npt.NDArray[np.float64],
    normal: npt.NDArray[np.float64],
    rest: npt.NDArray[np.float64],
    alpha: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
    centred = weighted - mean
    residual = centred - centred @ normal @ normal.T
    return (residual**2).sum(axis=1), residual, _q_threshold(rest, alpha)


def _q_threshold(rest: npt.NDArray[np.float64], alpha: float) -> float:
    """Jackson and Mudholkar (1979) threshold of the squared prediction error."""
    phi1, phi2, phi3 = (float((rest**i).sum()) for i in (1, 2, 3))
    if phi1 <= 1e-12:
        return 1e-12
    h0 = 1.0 - 2.0 * phi1 * phi3 / (3.0 * phi2**2)
    c = NormalDist().inv_cdf(1.0 - alpha)
    inner = c * np.sqrt(2.0 * phi2 * h0**2) / phi1 + 1.0 + phi2 * h0 * (h0 - 1.0) / phi1**2
    return float(phi1 * max(inner, 1e-12) ** (1.0 / h0))

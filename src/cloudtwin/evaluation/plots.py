"""Figures of results, rendered to bytes (the caller decides where they go)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from cloudtwin.errors import WorkloadError
from cloudtwin.evaluation.training import TrainingResult

__all__ = ["PLOT_FORMATS", "scaling_plot"]

PLOT_FORMATS = ("png", "svg", "pdf")


def scaling_plot(results: Sequence[TrainingResult], title: str, fmt: str = "png") -> bytes:
    """Tokens/s against GPUs, with both ideals (strong: the same global batch from the smallest
    configuration that trains it; weak: the same batch per GPU from one node) and each
    point's two efficiencies."""
    if fmt not in PLOT_FORMATS:
        raise WorkloadError(f"plot: format {fmt!r} is not one of {', '.join(PLOT_FORMATS)}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = [r.gpus for r in results]
    tokens = [r.tokens_per_s for r in results]
    strong = [r.tokens_per_s / r.scaling_efficiency for r in results]
    weak = [r.tokens_per_s / r.weak_scaling_efficiency for r in results]
    figure, axis = plt.subplots(figsize=(7, 4.5))
    axis.plot(gpus, strong, "--", color="grey", label="ideal, same global batch (strong)")
    axis.plot(gpus, weak, ":", color="grey", label="ideal, same batch per GPU (weak)")
    axis.plot(gpus, tokens, "o-", label="predicted")
    for g, t, r in zip(gpus, tokens, results, strict=True):
        axis.annotate(f"strong {r.scaling_efficiency:.0%}, weak {r.weak_scaling_efficiency:.0%}", (g, t),
                      textcoords="offset points", xytext=(4, -12), fontsize=8)
    axis.set_xlabel("GPUs")
    axis.set_ylabel("tokens / s")
    axis.set_title(title)
    axis.legend()
    axis.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()

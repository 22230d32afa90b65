"""One colour per routing strategy, the same on every plot: the reports' SVG and the
dashboard's plotly figures (a strategy without its own colour takes a spare one, chosen
from its name so it keeps it from run to run)."""

from __future__ import annotations

__all__ = ["STRATEGY_COLOURS", "strategy_colour"]

STRATEGY_COLOURS = {
    "ecmp": "#1f77b4",
    "ecmp-qp": "#9467bd",
    "adaptive": "#2ca02c",
    "spray": "#8c564b",
    "pinning": "#ff7f0e",
}
_SPARE = ("#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#d62728")


def strategy_colour(name: str) -> str:
    """The colour of a strategy.

    >>> strategy_colour("pinning")
    '#ff7f0e'
    """
    return STRATEGY_COLOURS.get(name) or _SPARE[sum(map(ord, name)) % len(_SPARE)]

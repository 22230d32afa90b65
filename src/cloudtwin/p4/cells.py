"""The state of externs indexed by cell: counter totals (dense, or sparse for large arrays)
and two-rate three-colour meters."""

from __future__ import annotations

import numpy as np

from cloudtwin.p4.context import Context
from cloudtwin.p4.meter import meter_colours
from cloudtwin.p4.values import Value, as_column, is_wide

__all__ = [
    "COLOUR_NAMES",
    "Cells",
    "DENSE_CELLS",
    "GREEN",
    "Meter",
    "RED",
    "SparseCells",
    "YELLOW",
    "add_at",
    "in_array",
    "new_cells",
]


GREEN, YELLOW, RED = 0, 1, 2


COLOUR_NAMES = ("GREEN", "YELLOW", "RED")


def in_array(
    index: Value, width: int | None, n: int, size: int, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `mask` whose `index` is a cell of an extern array of `size` cells, and
    those cells (int64).

    As in PNA (and PSA), an index at or past the array's size leaves the extern's state
    alone: a counter does not count the packet, a meter marks it GREEN. The index is
    compared at its own width (a bit<64> index of 2**63 or more, or a bit<128> one, is
    outside, never wrapped into a cell).
    """
    if not isinstance(index, np.ndarray):
        inside = 0 <= int(index) < size
        rows = mask if inside else np.zeros(n, dtype=bool)
        return rows, np.full(int(rows.sum()), int(index) if inside else 0, dtype=np.int64)
    cells = as_column(index, n, width if is_wide(width) else 64)
    rows = mask & np.asarray(cells < size, dtype=bool)
    return rows, cells[rows].astype(np.int64)


DENSE_CELLS = 1 << 20
"""A counter of at most this many cells is a numpy array per total; a larger one (up to
PNA's 2**32 - 1) keeps only the cells packets touched, so its memory follows the traffic."""


class SparseCells:
    """Totals of a large counter array, for the cells packets touched (the others are 0)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.totals: dict[int, int] = {}

    def add(self, cells: np.ndarray, amounts: np.ndarray | int) -> None:
        """`totals[cells] += amounts`, repeated cells adding up."""
        if cells.size == 0:
            return
        unique, inverse = np.unique(cells, return_inverse=True)
        if isinstance(amounts, int):
            sums = np.bincount(inverse.reshape(-1)) * amounts
        else:
            sums = np.rint(np.bincount(inverse.reshape(-1), weights=amounts)).astype(np.int64)
        for cell, amount in zip(unique.tolist(), sums.tolist(), strict=True):
            self.totals[cell] = self.totals.get(cell, 0) + amount


Cells = np.ndarray | SparseCells


def new_cells(size: int) -> Cells:
    return np.zeros(size, dtype=np.int64) if size <= DENSE_CELLS else SparseCells(size)


def add_at(totals: Cells, cells: np.ndarray, amounts: np.ndarray | int) -> None:
    """`totals[cells] += amounts`, repeated cells adding up (np.add.at); counted with bincount
    when the totals are few (exact: a batch's sums stay far below 2**53)."""
    if isinstance(totals, SparseCells):
        totals.add(cells, amounts)
        return
    if totals.size > 1 << 16 or cells.size == 0 or cells.min() < 0:
        np.add.at(totals, cells, amounts)
        return
    if isinstance(amounts, int):
        totals += np.bincount(cells, minlength=totals.size) * amounts
    else:
        totals += np.rint(np.bincount(cells, weights=amounts, minlength=totals.size)).astype(totals.dtype)


class Meter:
    """A two-rate three-colour meter (RFC 2698) per cell, in bytes or packets."""

    def __init__(self, size: int, unit: str) -> None:
        self.size = size
        self.unit = unit
        self.config: dict[int, tuple[float, float, float, float]] = {}
        self.tokens: dict[int, list[float]] = {}
        self.every_cell: tuple[float, float, float, float] | None = None  # set for the whole array

    def configure_all(self, cir: float, cburst: float, pir: float, pburst: float) -> None:
        """Every cell's rates (each cell's buckets start full when a packet first meets it)."""
        self.config, self.tokens = {}, {}
        self.every_cell = (cir, cburst, pir, pburst)

    def configure(self, index: int, cir: float, cburst: float, pir: float, pburst: float) -> None:
        self.config[index] = (cir, cburst, pir, pburst)
        self.tokens[index] = [cburst, pburst, -1.0]

    def execute(self, ctx: Context, mask: np.ndarray, index: Value, width: int | None) -> np.ndarray:
        """The colour of each row of `mask` (GREEN for an unconfigured cell or an index outside
        the array), metered in rounds over the cells (`meter.meter_colours`)."""
        colours = np.zeros(ctx.n, dtype=np.uint64)
        rows, cells = in_array(index, width, ctx.n, self.size, mask)
        if not cells.size:
            return colours
        times = ctx.get("istd.timestamp_ns")[rows]
        amounts = np.ones(cells.size) if self.unit == "packets" else ctx.length[rows].astype(np.float64)
        colours[rows] = meter_colours(self.config, self.tokens, cells, times, amounts, self.every_cell)
        return colours

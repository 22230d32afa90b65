"""Two-rate three-colour meters (RFC 2698) over a batch, in rounds.

A meter cell's buckets change with every packet it meters, in time order, so the packets
of one cell are a sequence. Packets of different cells are not: round r meters the r-th
packet of every cell at once, as numpy columns over the cells. A batch whose packets
spread over few cells has nearly one round per packet; there the packets are metered one
after the other in plain Python floats instead. Both ways do the same float operations
in the same order, so they give the same colours and leave the same buckets, bit for bit
(a property test checks it).
"""

from __future__ import annotations

import numpy as np

__all__ = ["GREEN", "RED", "YELLOW", "meter_colours"]

GREEN, YELLOW, RED = 0, 1, 2

ROUND_PACKETS = 48
"""Rounds are used when they meter at least this many packets each on average: below it a
round's numpy calls cost more than metering its packets one by one."""

Rates = tuple[float, float, float, float]
Config = dict[int, Rates]
Tokens = dict[int, list[float]]


class _Defaulted(dict[int, Rates]):
    """Per-cell rates where every cell not set has `every` (a meter configured as a whole)."""

    def __init__(self, config: Config, every: Rates) -> None:
        super().__init__(config)
        self.every = every

    def __contains__(self, cell: object) -> bool:
        return True

    def __missing__(self, cell: int) -> Rates:
        return self.every


def meter_colours(
    config: Config,
    tokens: Tokens,
    cells: np.ndarray,
    times_ns: np.ndarray,
    amounts: np.ndarray,
    every_cell: Rates | None = None,
) -> np.ndarray:
    """The colour of each packet (in batch order) metered by cell `cells[i]` at `times_ns[i]`
    for `amounts[i]` (bytes or 1.0); `tokens[cell]` ([committed, peak, last time in s, or
    -1.0 before the first packet]) is updated in place. A cell's rates are `config[cell]`,
    else `every_cell` (its buckets start full when a packet first meets it); a cell with
    neither marks GREEN."""
    colours = np.zeros(cells.size, dtype=np.uint64)
    if every_cell is not None:
        config = _Defaulted(config, every_cell)
    known = np.fromiter((c in config for c in cells.tolist()), dtype=bool, count=cells.size)
    rows = np.flatnonzero(known)
    if rows.size == 0:
        return colours
    distinct, inverse, counts = np.unique(cells[rows], return_inverse=True, return_counts=True)
    if rows.size < ROUND_PACKETS * int(counts.max()):
        colours[rows] = _one_by_one(config, tokens, cells[rows], times_ns[rows], amounts[rows])
    else:
        colours[rows] = _rounds(config, tokens, distinct, inverse.reshape(-1), times_ns[rows], amounts[rows])
    return colours


def _one_by_one(
    config: Config, tokens: Tokens, cells: np.ndarray, times_ns: np.ndarray, amounts: np.ndarray
) -> np.ndarray:
    out = []
    for cell, time_ns, amount in zip(cells.tolist(), times_ns.tolist(), amounts.tolist(), strict=True):
        cir, cburst, pir, pburst = config[cell]
        state = tokens.setdefault(cell, [cburst, pburst, -1.0])
        now = time_ns * 1e-9
        if state[2] >= 0:
            elapsed = now - state[2]
            state[0] = min(cburst, state[0] + cir * elapsed)
            state[1] = min(pburst, state[1] + pir * elapsed)
        state[2] = now
        if state[1] < amount:
            out.append(RED)
        elif state[0] < amount:
            out.append(YELLOW)
            state[1] -= amount
        else:
            out.append(GREEN)
            state[0] -= amount
            state[1] -= amount
    return np.array(out, dtype=np.uint64)


def _rounds(
    config: Config,
    tokens: Tokens,
    distinct: np.ndarray,
    which: np.ndarray,
    times_ns: np.ndarray,
    amounts: np.ndarray,
) -> np.ndarray:
    """Round r meters the r-th packet of each cell (`which[i]`: packet i's position in
    `distinct`), all cells at once."""
    keys = distinct.tolist()
    rates = [config[k] for k in keys]
    cir, cburst, pir, pburst = np.array(rates, dtype=np.float64).T
    start = [tokens.setdefault(k, [r[1], r[3], -1.0]) for k, r in zip(keys, rates, strict=True)]
    committed, peak, last = np.array(start, dtype=np.float64).T.copy()
    now = times_ns.astype(np.float64) * 1e-9
    order = np.argsort(which, kind="stable")  # each cell's packets together, in batch order
    grouped = which[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    rank = np.empty(which.size, dtype=np.int64)
    rank[order] = np.arange(which.size) - np.repeat(starts, np.diff(np.r_[starts, which.size]))
    by_round = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_round], np.arange(int(rank.max()) + 2))
    colours = np.empty(which.size, dtype=np.uint64)
    for r in range(bounds.size - 1):
        rows = by_round[bounds[r] : bounds[r + 1]]
        c = which[rows]
        t, a = now[rows], amounts[rows]
        seen = last[c] >= 0
        elapsed = t - last[c]
        committed[c] = np.where(seen, np.minimum(cburst[c], committed[c] + cir[c] * elapsed), committed[c])
        peak[c] = np.where(seen, np.minimum(pburst[c], peak[c] + pir[c] * elapsed), peak[c])
        last[c] = t
        red = peak[c] < a
        yellow = ~red & (committed[c] < a)
        green = ~red & ~yellow
        peak[c] = np.where(red, peak[c], peak[c] - a)
        committed[c] = np.where(green, committed[c] - a, committed[c])
        colours[rows] = np.where(red, RED, np.where(yellow, YELLOW, GREEN))
    for i, key in enumerate(keys):
        tokens[key][:] = [float(committed[i]), float(peak[i]), float(last[i])]
    return colours

"""A VM's memory as live migration sees it: how much holds data, and how fast pages get dirty.

Three dirty-rate models, all answering one question: how many distinct bytes does the
VM dirty between `start_s` and `start_s + duration_s`?

- constant: pages of a writable working set `W` dirtied at rate `r`: `min(W, r * t)`;
- hot and cold: two such sets added (a small hot set written fast, a large cold set
  written slowly);
- trace: the rate follows a piecewise-constant trace (rate per interval, repeating),
  capped by the working set.

And one question about where those pages are: of the working set's pages dirtied while
the first pass runs, which had the pass not reached yet when it ended? Those still wait
to be sent and are sent once. Unless told, the working set is spread evenly over the
data, so that share is the share of the data not yet sent. A `layout` says instead where
each slice of the working set sits in the order QEMU scans memory, and `write_order`
whether the VM writes its slices in that order (cycling, from `write_start`) or at random.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from cloudtwin.errors import MobilityError

__all__ = ["PAGE_BYTES", "VmMemory", "WriteOrder", "place_working_set"]

WriteOrder = Literal["random", "sequential"]

PAGE_BYTES = 4096
"""x86 base page: the unit QEMU's dirty bitmap tracks."""


PLACED_SLICES = 64
"""Slices a placed working set is cut into (`place_working_set`)."""


def place_working_set(at: str, order: str, share: float) -> tuple[tuple[float, ...], WriteOrder]:
    """The `layout` and `write_order` of a working set that holds `share` of the data.

    `at`: "spread" (no layout: evenly over the data), "first" (the part of the data a
    migration scans first) or "last"; `order`: "random", "ascending" (written in turn
    along the scan) or "descending" (against it).
    """
    if at == "spread":
        return (), "random"
    share = min(1.0, max(0.0, share))
    low = 0.0 if at == "first" else 1.0 - share
    places = tuple(low + (i + 0.5) / PLACED_SLICES * share for i in range(PLACED_SLICES))
    if order == "descending":
        places = places[::-1]
    return places, "random" if order == "random" else "sequential"


@dataclass(frozen=True)
class VmMemory:
    """Memory size, the part that holds data (the rest is zero pages), and the dirtying.

    Rates are in bit/s like every rate in cloudtwin; sizes in bytes. `cold_*` adds a
    second, slower set (hot/cold model); `trace_rate_bps` with `trace_interval_s` makes
    the hot rate follow a repeating trace instead of a constant.
    """

    memory_bytes: int
    working_set_bytes: int
    dirty_rate_bps: float
    resident_bytes: int | None = None
    cold_set_bytes: int = 0
    cold_rate_bps: float = 0.0
    trace_rate_bps: tuple[float, ...] = field(default_factory=tuple)
    trace_interval_s: float = 1.0
    layout: tuple[float, ...] = field(default_factory=tuple)
    """Where the working set sits: for each equal slice of it, in the order the VM writes
    them, its place in QEMU's scan as a share of the data sent before it (0: the first
    page scanned, 1: the last). Empty: spread evenly over the data."""
    write_order: WriteOrder = "random"
    """`sequential`: the VM writes the slices of `layout` in turn, cycling (a ring buffer,
    a log, a streaming kernel); `random`: any page of the working set as likely as any."""
    write_start: float = 0.0
    """Where in its cycle a sequential writer is when the first pass starts (share of the
    working set already written in this cycle)."""

    def __post_init__(self) -> None:
        if self.memory_bytes <= 0:
            raise MobilityError(f"memory: must be positive, got {self.memory_bytes}")
        if self.dirty_rate_bps < 0 or self.cold_rate_bps < 0 or any(r < 0 for r in self.trace_rate_bps):
            raise MobilityError("dirty_rate: must not be negative")
        if self.working_set_bytes < 0:
            raise MobilityError(f"working_set: must not be negative, got {self.working_set_bytes}")
        if self.working_set_bytes + self.cold_set_bytes > self.memory_bytes:
            raise MobilityError(
                f"working_set: {self.working_set_bytes + self.cold_set_bytes} bytes is larger than "
                f"memory ({self.memory_bytes} bytes)"
            )
        if self.resident_bytes is not None and not 0 <= self.resident_bytes <= self.memory_bytes:
            raise MobilityError(f"resident: must lie between 0 and memory, got {self.resident_bytes}")
        if self.trace_rate_bps and self.trace_interval_s <= 0:
            raise MobilityError("trace_interval: must be positive")
        if any(not 0.0 <= place <= 1.0 for place in self.layout):  # also refuses NaN
            raise MobilityError("layout: every place must lie between 0 and 1")
        if self.write_order not in ("random", "sequential"):
            raise MobilityError(f"write_order: must be random or sequential, got {self.write_order!r}")
        if not 0.0 <= self.write_start < 1.0:
            raise MobilityError(f"write_start: must lie in [0, 1), got {self.write_start}")

    @property
    def data_bytes(self) -> int:
        """Bytes of memory that hold data (non-zero pages); all of it unless told."""
        return self.memory_bytes if self.resident_bytes is None else self.resident_bytes

    @property
    def zero_bytes(self) -> int:
        """Bytes of never-written memory: QEMU sends such a page as a 9-byte marker."""
        return self.memory_bytes - self.data_bytes

    def dirtied(self, start_s: float, duration_s: float, slowdown: float = 0.0) -> float:
        """Distinct bytes dirtied in [start_s, start_s + duration_s], the vCPUs throttled by `slowdown`."""
        hot, cold = self._dirtied_sets(start_s, duration_s, slowdown)
        return hot + cold

    def dirtied_behind_scan(
        self, start_s: float, duration_s: float, slowdown: float, unsent_bytes: float
    ) -> float:
        """Distinct bytes dirtied during a first pass that had sent them already.

        The pass ran `duration_s` from `start_s` and left `unsent_bytes` of the data
        unsent; dirtied pages among those are still waiting and add nothing.
        """
        hot, cold = self._dirtied_sets(start_s, duration_s, slowdown)
        unsent = min(1.0, max(0.0, unsent_bytes) / self.data_bytes) if self.data_bytes else 0.0
        if not self.layout:
            return (hot + cold) * (1.0 - unsent)
        return hot * (1.0 - self.unscanned_share(1.0 - unsent, hot)) + cold * (1.0 - unsent)

    def unscanned_share(self, scanned: float, dirtied_bytes: float) -> float:
        """Share of `dirtied_bytes` of the working set, written since the first pass began,
        that lies where the scan has not reached when it has sent `scanned` of the data."""
        if not self.layout:
            return 1.0 - scanned
        ahead = np.asarray(self.layout) >= scanned
        if self.write_order == "random" or self.working_set_bytes <= 0:
            return float(ahead.mean())
        # a sequential writer covered the arc [write_start, write_start + span) of its cycle;
        # each slice is an interval of 1/n of it, counted whole when ahead of the scan
        span = min(1.0, dirtied_bytes / self.working_set_bytes)
        slices = len(ahead)
        if span * slices < 1e-9:  # (next to) nothing written yet: the slice the writer is in
            return float(ahead[min(int(self.write_start * slices), slices - 1)])
        covered = np.concatenate(([0.0], np.cumsum(np.tile(ahead, 2), dtype=float)))
        grid = np.arange(covered.size, dtype=float)

        def ahead_before(x: float) -> float:
            return float(np.interp(x * slices, grid, covered))

        covered_slices = ahead_before(self.write_start + span) - ahead_before(self.write_start)
        return min(1.0, max(0.0, covered_slices / (span * slices)))  # a share, whatever the rounding

    def _dirtied_sets(self, start_s: float, duration_s: float, slowdown: float) -> tuple[float, float]:
        """Distinct bytes dirtied in the working set and in the cold set."""
        keep = 1.0 - slowdown
        hot = self._hot_written(start_s, duration_s) * keep
        cold = self.cold_rate_bps / 8 * duration_s * keep
        return min(float(self.working_set_bytes), hot), min(float(self.cold_set_bytes), cold)

    def _hot_written(self, start_s: float, duration_s: float) -> float:
        if not self.trace_rate_bps:
            return self.dirty_rate_bps / 8 * duration_s
        return (self._trace_integral(start_s + duration_s) - self._trace_integral(start_s)) / 8

    def _trace_integral(self, t: float) -> float:
        """Bits written by the trace from time 0 to t (the trace repeats)."""
        step = self.trace_interval_s
        rates = self.trace_rate_bps
        cycles, rest = divmod(t, step * len(rates))
        whole = int(rest // step)
        done = sum(rates[:whole]) * step + rates[whole % len(rates)] * (rest - whole * step)
        return cycles * sum(rates) * step + done

    @property
    def peak_rate_bps(self) -> float:
        """The highest dirty rate the VM reaches (for convergence warnings)."""
        hot = max(self.trace_rate_bps) if self.trace_rate_bps else self.dirty_rate_bps
        return hot + self.cold_rate_bps

    def pages(self, size_bytes: float) -> float:
        """Pages covering `size_bytes` (fractional: the fluid model)."""
        return size_bytes / PAGE_BYTES if math.isfinite(size_bytes) else math.inf

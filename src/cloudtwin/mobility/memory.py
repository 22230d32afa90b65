"""A VM's memory as live migration sees it: how much holds data, and how fast pages get dirty.

Three dirty-rate models, all answering one question: how many distinct bytes does the
VM dirty between `start_s` and `start_s + duration_s`?

- constant: pages of a writable working set `W` dirtied at rate `r`: `min(W, r * t)`;
- hot and cold: two such sets added (a small hot set written fast, a large cold set
  written slowly);
- trace: the rate follows a piecewise-constant trace (rate per interval, repeating),
  capped by the working set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cloudtwin.errors import MobilityError

__all__ = ["PAGE_BYTES", "VmMemory"]

PAGE_BYTES = 4096
"""x86 base page: the unit QEMU's dirty bitmap tracks."""


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
        keep = 1.0 - slowdown
        hot = self._hot_written(start_s, duration_s) * keep
        cold = self.cold_rate_bps / 8 * duration_s * keep
        return min(float(self.working_set_bytes), hot) + min(float(self.cold_set_bytes), cold)

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

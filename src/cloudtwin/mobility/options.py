"""Migration options with QEMU's defaults, and what happens when a migration does not converge.

Sources of the defaults (QEMU 7.2, `migration/migration.c` and `migration/ram.c`, and the
`migrate-set-parameters` QMP documentation):
- downtime-limit 300 ms;
- max-bandwidth applies to the live rounds only; the final stop-and-copy is not capped
  (observed in real migrations here, see docs/mobility.md);
- auto-converge: cpu-throttle-initial 20 %, cpu-throttle-increment 10 %, at most 99 %,
  triggered when a sync period dirtied more than throttle-trigger-threshold (50 %) of the
  bytes it sent, twice;
- XBZRLE cache 64 MiB; multifd-channels 2 when multifd is on;
- page header 8 bytes; a zero page is a header and one byte;
- the dirty log is synced when the unsent part of memory falls below the threshold
  (`ram_save_pending`), which the migration thread checks once per rate-limit period of
  100 ms (`BUFFER_DELAY`);
- a sync holds the migration thread (`migration_bitmap_sync` under the big lock) and the
  set-up (dirty logging on, the first sync) comes before the first page; both take a
  machine's time, 0 unless a migration profile or the migration says (`sync_s`,
  `setup_s`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cloudtwin.errors import MobilityError

__all__ = [
    "DEFAULT_DOWNTIME_LIMIT_S",
    "MigrationOptions",
    "Policy",
    "StorageMode",
    "Syncs",
]

DEFAULT_DOWNTIME_LIMIT_S = 0.3
THROTTLE_INITIAL = 0.20
THROTTLE_INCREMENT = 0.10
THROTTLE_MAX = 0.99
THROTTLE_TRIGGER = 0.50
XBZRLE_CACHE_BYTES = 64 << 20
MULTIFD_CHANNELS = 2
PAGE_HEADER_BYTES = 8
ZERO_PAGE_BYTES = 9
SYNC_PERIOD_S = 0.100
"""QEMU's rate-limit period (`BUFFER_DELAY`): the migration thread sends one period's
worth, then checks whether to sync the dirty log and whether to stop."""
THROTTLE_PERIOD_S = 1.0
"""QEMU judges auto-converge over dirty-log syncs at least one second apart."""
DEFAULT_RESUME_S = 0.010
"""Switchover floor (stop vCPUs, send device state, start at the destination): the order
of QEMU's measured downtime for idle guests on this machine (docs/mobility.md)."""
DEFAULT_OVERLAY_UPDATE_S = 0.050
"""Time for the federated overlay to re-point the VM's MAC/IP to the destination gateway:
one controller push plus a gateway table update (an assumption, stated in the docs)."""
DEFAULT_STREAM_BPS = 8e9
"""Throughput of one protected (TLS, AES-GCM) migration stream, bit/s: about one core's
worth of encrypt + copy (OpenSSL AES-GCM runs at several GB/s per core with AES-NI; the
TLS record handling and the copies bring one QEMU migration channel near 1 GB/s)."""
DEFAULT_XBZRLE_RATIO = 0.25
"""Encoded size of a re-sent page relative to the page (workload-dependent; an assumption)."""

Policy = Literal["abort", "raise-downtime", "auto-converge", "postcopy"]
Syncs = Literal["qemu", "rounds"]
StorageMode = Literal["shared", "block", "remote-then-local"]


@dataclass(frozen=True)
class MigrationOptions:
    """How a migration is run. Rates in bit/s, times in seconds.

    `bandwidth_bps` is the path's bandwidth for a plan (in an engine run the path gives
    it); `max_bandwidth_bps` is QEMU's cap on the live rounds (None: no cap);
    `final_bandwidth_bps` is the bandwidth of the stop-and-copy (default: the path's): the
    rate at which the destination takes pages it has never held; `resent_bandwidth_bps`
    the rate for pages it already holds (default: the same); `socket_buffer_bytes` what
    the path buffers between the sending and the receiving process (the pause ends when
    the last byte is written into it, as QEMU measures downtime; default 0: unbuffered).
    `setup_s` passes before the first page is sent (QEMU's set-up: dirty logging on, the
    first sync), `sync_s` after each later sync of a live round (the migration thread
    sends nothing while it reads the dirty log; the VM runs on and keeps dirtying).
    A migration that has not converged after `max_rounds` rounds, `timeout_s`, or two
    rounds in a row whose dirty set did not shrink, is handed to `policy`.

    `syncs` says when the dirty log is read: `qemu` (QEMU's rule: once the unsent part
    falls below the threshold, checked every `sync_period_s`; a round is the transfer
    between two syncs) or `rounds` (the textbook model: each round re-sends everything
    the previous round left dirty, and the stop is judged at round ends only).
    """

    bandwidth_bps: float = 10e9
    downtime_limit_s: float = DEFAULT_DOWNTIME_LIMIT_S
    max_bandwidth_bps: float | None = None
    final_bandwidth_bps: float | None = None
    resent_bandwidth_bps: float | None = None
    socket_buffer_bytes: float = 0.0
    resume_s: float = DEFAULT_RESUME_S
    setup_s: float = 0.0
    sync_s: float = 0.0
    overlay_update_s: float = DEFAULT_OVERLAY_UPDATE_S
    device_state_bytes: int = 0
    max_rounds: int = 30
    timeout_s: float = 3600.0
    stall_rounds: int = 2
    policy: Policy = "abort"
    max_downtime_s: float = 2.0
    downtime_step_s: float = DEFAULT_DOWNTIME_LIMIT_S
    auto_converge: bool = False
    throttle_initial: float = THROTTLE_INITIAL
    throttle_increment: float = THROTTLE_INCREMENT
    throttle_max: float = THROTTLE_MAX
    throttle_trigger: float = THROTTLE_TRIGGER
    postcopy: bool = False
    xbzrle: bool = False
    xbzrle_cache_bytes: int = XBZRLE_CACHE_BYTES
    xbzrle_ratio: float = DEFAULT_XBZRLE_RATIO
    multifd_channels: int = 1
    protected: bool = True
    stream_bps: float = DEFAULT_STREAM_BPS
    storage: StorageMode = "shared"
    rtt_s: float = 0.001
    syncs: Syncs = "qemu"
    sync_period_s: float = SYNC_PERIOD_S

    def __post_init__(self) -> None:
        positive = {
            "bandwidth": self.bandwidth_bps,
            "downtime_limit": self.downtime_limit_s,
            "stream_bandwidth": self.stream_bps,
            "timeout": self.timeout_s,
            "sync_period": self.sync_period_s,
        }
        for name, value in positive.items():
            if not value > 0:
                raise MobilityError(f"{name}: must be positive, got {value}")
        optional: tuple[tuple[str, float | None], ...] = (
            ("max_bandwidth", self.max_bandwidth_bps),
            ("final_bandwidth", self.final_bandwidth_bps),
            ("resent_bandwidth", self.resent_bandwidth_bps),
        )
        for name, maybe in optional:
            if maybe is not None and not maybe > 0:
                raise MobilityError(f"{name}: must be positive, got {maybe}")
        if self.max_rounds < 1 or self.stall_rounds < 1 or self.multifd_channels < 1:
            raise MobilityError("max_rounds, stall_rounds and multifd_channels: must be at least 1")
        if self.max_downtime_s < self.downtime_limit_s:
            raise MobilityError(
                f"max_downtime: {self.max_downtime_s} s is below the downtime limit "
                f"({self.downtime_limit_s} s)"
            )
        if not 0 < self.xbzrle_ratio <= 1:
            raise MobilityError(f"xbzrle_ratio: must lie in (0, 1], got {self.xbzrle_ratio}")
        for name, value in (
            ("resume", self.resume_s),
            ("overlay_update", self.overlay_update_s),
            ("rtt", self.rtt_s),
            ("socket_buffer", self.socket_buffer_bytes),
            ("setup_time", self.setup_s),
            ("sync_time", self.sync_s),
        ):
            if value < 0:
                raise MobilityError(f"{name}: must not be negative, got {value}")

    @property
    def stream_cap_bps(self) -> float:
        """What the migration streams can carry: protected streams are CPU-bound per channel."""
        return self.multifd_channels * self.stream_bps if self.protected else float("inf")

    def live_cap_bps(self) -> float:
        """The rate cap of a live round (QEMU's max-bandwidth and the streams)."""
        cap = self.max_bandwidth_bps if self.max_bandwidth_bps is not None else float("inf")
        return min(cap, self.stream_cap_bps)

    def resent_cap_bps(self) -> float:
        """The stop-and-copy rate of pages the destination already holds (the streams apply)."""
        if self.resent_bandwidth_bps is None:
            return self.final_cap_bps()
        return min(self.resent_bandwidth_bps, self.stream_cap_bps)

    def final_cap_bps(self) -> float:
        """The rate cap of the stop-and-copy (not QEMU's max-bandwidth; the streams only)."""
        final = self.final_bandwidth_bps if self.final_bandwidth_bps is not None else float("inf")
        return min(final, self.stream_cap_bps)

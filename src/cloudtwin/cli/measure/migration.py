"""Measuring live migration on this machine: QEMU guests migrated between two local QEMU
processes (`qemu_guest`), the calibration runs a migration profile is fitted on, and
random migrations drawn after the fit to hold out.

The calibration runs, stated so they can be checked:

- one idle guest per memory size, migrated without a bandwidth cap: its count of
  non-zero pages (what a guest of that size holds besides its working set) and its
  uncapped rate (how fast the path migrates at all); its downtime: the fixed part of a
  pause;
- the stop-and-copy rate of pages the destination never held: idle guests holding 32
  and 128 MiB of data migrated with a downtime limit of 60 s, so that after QEMU's first
  bandwidth estimate everything left goes in the stop-and-copy;
- the stop-and-copy rate of re-sent pages: a dirtied working set paused whole after the
  first pass (`RESENT`);
- the loopback path's socket buffer.

The live rounds of both stop-and-copy calibrations are capped at `CALIBRATION_CAP_MIB_S`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cloudtwin.cli.measure import qemu_guest as qg

__all__ = [
    "CALIBRATION_CAP_MIB_S",
    "RANDOM_MEMORY_MIB",
    "RESENT",
    "SWITCHOVER",
    "calibrate",
    "draw",
    "qemu_version",
]

UNCAPPED_MIB_S = 1 << 20
CALIBRATION_CAP_MIB_S = 32
"""The live rounds of the stop-and-copy calibrations are capped, as migrations between
hosts are, so that the path keeps up with the live rate when the VM pauses. Uncapped,
the destination is still behind the source at the pause and the calibration measures
that backlog (re-sent pages calibrated at 0.3-0.4 GB/s uncapped, where capped
migrations' pauses of re-sent pages drained at 0.9-2.2 GB/s)."""
SWITCHOVER = [
    qg.Trial(256, buffer, 0, CALIBRATION_CAP_MIB_S, downtime_limit_ms=60_000) for buffer in (32, 128)
]
RESENT = qg.Trial(256, 128, 512, CALIBRATION_CAP_MIB_S, give_up_s=30, raise_limit_ms=60_000)
"""Re-sent pages: a 128 MiB working set dirtied at 512 MiB/s never fits a 300 ms pause at
the calibration cap; once the first pass is over (4 syncs) the limit is raised to 60 s, so
the next check pauses the VM with the whole dirtied working set, every page of it sent
before."""
RANDOM_MEMORY_MIB = (128, 256, 384, 512)
RANDOM_CAP_MIB_S = (32, 128)
RANDOM_LIMIT_MS = (100, 500)
RANDOM_DIRTY_OVER_CAP = 1.5
RANDOM_GIVE_UP_S = 25.0


def draw(count: int, seed: int) -> list[qg.Trial]:
    """`count` configurations drawn at random with `seed`.

    Memory uniform over 128, 256, 384 and 512 MiB; working set uniform over 8 MiB to a
    quarter of memory (whole MiB); cap uniform over 32-128 MiB/s (whole MiB/s); dirty rate
    uniform over 0 to 1.5 times the cap (whole MiB/s: above the cap, or a working set
    larger than cap x limit dirtied fast enough, does not converge); downtime limit uniform
    over 100-500 ms (whole 10 ms). Runs not finished after 25 s are cancelled.
    """
    rng = np.random.default_rng(seed)
    low, high = RANDOM_LIMIT_MS
    trials = []
    for _ in range(count):
        memory = int(rng.choice(RANDOM_MEMORY_MIB))
        cap = int(rng.integers(RANDOM_CAP_MIB_S[0], RANDOM_CAP_MIB_S[1] + 1))
        trials.append(
            qg.Trial(
                memory_mib=memory,
                dirty_mib=int(rng.integers(8, memory // 4 + 1)),
                rate_mib_s=int(rng.integers(0, int(RANDOM_DIRTY_OVER_CAP * cap) + 1)),
                bandwidth_mib_s=cap,
                downtime_limit_ms=10 * int(rng.integers(low // 10, high // 10 + 1)),
                give_up_s=RANDOM_GIVE_UP_S,
            )
        )
    return trials


def calibrate(work: Path, initrd: Path, accel: str, sizes: list[int], tries: int,
              say: Callable[[str], None], nice: int | None = None, prealloc: bool = False
              ) -> dict[str, object]:
    """The calibration runs: idle guests per size, the stop-and-copy rates, the buffer
    (`tries` of each); QEMU at niceness `nice` (None: as this process), its guest memory
    faulted in at start when `prealloc`."""
    from cloudtwin.mobility.calibration import rate_bps

    idle = {}
    for memory in sizes:
        runs = [qg.migrate(work, initrd, accel, qg.Trial(memory, 1, 0, UNCAPPED_MIB_S), nice, prealloc)
                for _ in range(tries)]
        stats = max(runs, key=rate_bps)  # the try least slowed by other work on the machine
        stats["idle_downtimes_ms"] = [t.get("downtime") for t in runs]
        stats["idle_rates_bps"] = [rate_bps(t) for t in runs]
        idle[str(memory)] = stats
        say(f"idle {memory} MiB guest: {stats['ram']['normal']} non-zero pages, uncapped "
            f"{rate_bps(stats) / 8e6:.0f} MB/s, downtimes {stats['idle_downtimes_ms']} ms")
    buffers = sorted(qg.loopback_buffer_bytes() for _ in range(tries))
    say(f"loopback buffer: {', '.join(f'{b / 1e6:.1f}' for b in buffers)} MB")
    switchover = []
    # the first-time pages last: their rate moves most with other work on the machine, and
    # the held-out migrations follow the fit
    for trial in [RESENT, *SWITCHOVER]:
        for _ in range(tries):
            stats = qg.migrate(work, initrd, accel, trial, nice, prealloc)
            stats["calibrates"] = "resent" if trial is RESENT else "first"
            stats["live_cap_mib_s"] = trial.bandwidth_mib_s
            switchover.append(stats)
            say(f"switchover {trial.dirty_mib} MiB ({stats['calibrates']} pages): "
                f"{stats['ram']['downtime-bytes'] / 1e6:.1f} MB paused for {stats.get('downtime')} ms "
                f"(first touch {stats['first_touch_bps'] / 8e6:.0f} MB/s, load {os.getloadavg()[0]:.1f})")
    return {"idle": idle, "switchover": switchover, "socket_buffer_bytes": buffers[len(buffers) // 2],
            "socket_buffer_tries_bytes": buffers}


def qemu_version() -> str:
    """`qemu-system-x86_64 --version`'s first line."""
    done = subprocess.run([qg.QEMU, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0].strip() if done.stdout else "unknown"

"""How much a page costs the first time a process writes it, against how long memory sat free.

A migration's destination writes every page it never held (the first pass, and the part
of it left for the pause) into guest memory it touches for the first time, so what a
first touch costs on the destination host is part of the stop-and-copy's first-time rate
(docs/mobility.md). On a bare-metal host that is a page fault; on a host that is itself a
virtual machine whose kernel reports free memory to its hypervisor (virtio-balloon free
page reporting), memory that has sat free long enough is handed back, and touching it
again costs the hypervisor's fault as well.

This maps anonymous memory, asks for transparent huge pages on it as QEMU does for guest
memory (`--small-pages`: not), writes one byte per 4 KiB page, unmaps it, waits, and does
it again, for a list of waits; it prints the time per page after each wait, and the
kernel's page-reporting settings when it has them.

Usage:  python benchmarks/first_touch.py [--mib N] [--waits S,S,...] [--small-pages] [--json]
"""

from __future__ import annotations

import argparse
import json
import mmap
import time
from pathlib import Path

import numpy as np

PAGE = 4096
REPORTING = Path("/sys/module/page_reporting/parameters")


def touch_s(size_bytes: int, huge: bool = True) -> float:
    """Seconds to write one byte into each page of `size_bytes` of fresh anonymous memory
    (transparent huge pages asked for when `huge`)."""
    region = mmap.mmap(-1, size_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        if huge and hasattr(mmap, "MADV_HUGEPAGE"):
            region.madvise(mmap.MADV_HUGEPAGE)
        pages = np.frombuffer(region, dtype=np.uint8)[::PAGE]
        begin = time.perf_counter()
        pages[:] = 1
        return time.perf_counter() - begin
    finally:
        del pages
        region.close()


def reporting() -> dict[str, str] | None:
    """The kernel's free page reporting parameters (None where it has none)."""
    if not REPORTING.is_dir():
        return None
    return {p.name: p.read_text().strip() for p in sorted(REPORTING.iterdir()) if p.is_file()}


def measure(size_mib: int, waits_s: list[float], huge: bool = True) -> dict:
    size = size_mib << 20
    touch_s(size, huge)  # the first touch of all: whatever state memory was in
    rows = []
    for wait in waits_s:
        time.sleep(wait)
        seconds = touch_s(size, huge)
        rows.append({"idle_s": wait, "ms": seconds * 1e3, "us_per_page": seconds * 1e6 / (size // PAGE)})
    return {"mib": size_mib, "huge_pages": huge, "page_reporting": reporting(), "touches": rows}


def _mib(text: str) -> int:
    try:
        mib = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of MiB: {text!r}") from None
    if not 1 <= mib <= 4096:
        raise argparse.ArgumentTypeError(f"must lie between 1 and 4096 MiB, got {mib}")
    return mib


def _waits(text: str) -> list[float]:
    try:
        waits = [float(w) for w in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of seconds: {text!r}") from None
    if not waits or any(not 0 <= w <= 60 for w in waits):
        raise argparse.ArgumentTypeError("each wait must lie between 0 and 60 s")
    return waits


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--mib", type=_mib, default=200, metavar="N", help="memory touched each time (1-4096 MiB; 200)"
    )
    parser.add_argument(
        "--waits",
        type=_waits,
        default=[0, 0, 0.5, 1, 2, 3, 5, 0],
        help="seconds to leave the memory free before each touch (default 0,0,0.5,1,2,3,5,0)",
    )
    parser.add_argument("--small-pages", action="store_true", help="do not ask for transparent huge pages")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = measure(args.mib, args.waits, huge=not args.small_pages)
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    settings = figures["page_reporting"]
    print(f"free page reporting: {'none' if settings is None else settings}")
    pages = "transparent huge pages" if figures["huge_pages"] else "4 KiB pages"
    for row in figures["touches"]:
        print(
            f"free {row['idle_s']:4.1f} s, then {args.mib} MiB ({pages}) first touched in "
            f"{row['ms']:6.1f} ms ({row['us_per_page']:.2f} us per 4 KiB)"
        )


if __name__ == "__main__":
    main()

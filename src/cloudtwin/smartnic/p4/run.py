"""Running a P4 program with its entries over a capture: the use case behind `cloudtwin nic run`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cloudtwin.smartnic.p4.datapath import BatchResult, Datapath, PacketBatch
from cloudtwin.smartnic.p4.entries import parse_entries
from cloudtwin.smartnic.p4.frontend import parse_program
from cloudtwin.smartnic.p4.pcap import Capture

__all__ = ["BATCH_BYTES", "BATCH_PACKETS", "RunReport", "batches", "install", "load_datapath", "run_capture"]

BATCH_PACKETS = 8192
"""Packets per numpy batch: large enough to amortise Python, small enough for the caches."""

BATCH_BYTES = BATCH_PACKETS * 2048
"""A batch is a dense (packets x longest packet) byte matrix: at most this many bytes (16 MiB,
8,192 full-size Ethernet frames), so one long packet among short ones shrinks its batch
instead of widening every row to its length."""


@dataclass(frozen=True)
class RunReport:
    """What a capture did in the pipeline."""

    packets_in: int
    packets_out: int
    dropped: int
    parser_errors: int
    out_ports: dict[int, int]
    table_hits: dict[str, list[int]]
    counters: dict[str, dict[int, tuple[int, int]]]
    output: list[bytes]
    output_timestamp_ns: np.ndarray

    def to_json(self) -> dict[str, object]:
        return {
            "packets_in": self.packets_in,
            "packets_out": self.packets_out,
            "dropped": self.dropped,
            "parser_errors": self.parser_errors,
            "out_ports": {str(p): c for p, c in sorted(self.out_ports.items())},
            "table_hits": self.table_hits,
            "counters": {
                name: {str(i): {"packets": p, "bytes": b} for i, (p, b) in cells.items()}
                for name, cells in self.counters.items()
            },
        }


def install(datapath: Datapath, document: Any) -> None:
    """Check an entries document against the program and install it (all or nothing)."""
    tables, meters = parse_entries(datapath, document)
    for name, entries in tables.items():
        state = datapath.tables[name]
        state.entries = entries
        state.invalidate()
    for setting in meters:
        datapath.meters[setting.meter].configure(
            setting.index, setting.cir, setting.cburst, setting.pir, setting.pburst
        )


def load_datapath(text: str, source: str, entries: Any) -> Datapath:
    """A program parsed from `text` with the entries document installed."""
    datapath = Datapath(parse_program(text, source))
    install(datapath, entries)
    return datapath


def run_capture(datapath: Datapath, capture: Capture, direction: int, input_port: int) -> RunReport:
    """Every packet of `capture`, in batches, through `datapath`."""
    outputs: list[bytes] = []
    times: list[np.ndarray] = []
    ports: dict[int, int] = {}
    dropped = errors = 0
    n = len(capture.packets)
    lengths = np.fromiter((len(p) for p in capture.packets), dtype=np.int64, count=n)
    for start, stop in batches(lengths):
        batch = PacketBatch.from_packets(
            capture.packets[start:stop], direction, input_port, capture.timestamp_ns[start:stop]
        )
        result = datapath.process(batch)
        dropped += int(result.dropped.sum())
        errors += int(result.parser_error.sum())
        _collect(result, capture.timestamp_ns[start:stop], outputs, times, ports)
    counters = datapath.counter_totals()
    hits = {name: [int(h) for h in state.hits] for name, state in datapath.tables.items()}
    stamp = np.concatenate(times) if times else np.zeros(0, dtype=np.uint64)
    return RunReport(n, len(outputs), dropped, errors, ports, hits, counters, outputs, stamp)


def batches(lengths: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive runs [start, stop) of packets with these lengths: at most BATCH_PACKETS
    packets and BATCH_BYTES once every row is as long as the run's longest packet.

    Packets keep their order (a meter sees them in time order), so a long packet starts a
    short run of its own rather than moving elsewhere.

    >>> batches(np.array([64] * 3 + [BATCH_BYTES // 2] + [64] * 3))
    [(0, 3), (3, 5), (5, 7)]
    """
    out: list[tuple[int, int]] = []
    for chunk in range(0, lengths.size, BATCH_PACKETS):
        part = lengths[chunk : chunk + BATCH_PACKETS]
        if part.size * max(int(part.max()), 1) <= BATCH_BYTES:
            out.append((chunk, chunk + part.size))
            continue
        start, widest = 0, 1
        for i, length in enumerate(part.tolist()):
            wider = max(widest, length)
            if (i - start + 1) * wider > BATCH_BYTES and i > start:
                out.append((chunk + start, chunk + i))
                start, wider = i, max(length, 1)
            widest = wider
        out.append((chunk + start, chunk + part.size))
    return out


def _collect(
    result: BatchResult,
    stamps: np.ndarray,
    outputs: list[bytes],
    times: list[np.ndarray],
    ports: dict[int, int],
) -> None:
    kept = np.flatnonzero(~result.dropped)
    outputs.extend(result.data[i, : result.length[i]].tobytes() for i in kept)
    times.append(stamps[kept])
    for port, count in zip(*np.unique(result.out_port[kept], return_counts=True), strict=True):
        ports[int(port)] = ports.get(int(port), 0) + int(count)

"""Running a P4 program with its entries over a capture: the use case behind `cloudtwin nic run`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cloudtwin.errors import NicError, P4Error
from cloudtwin.p4.batch import PacketBatch
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.depth import parse_depth
from cloudtwin.p4.entries import parse_entries
from cloudtwin.p4.frontend import parse_program
from cloudtwin.p4.pcap import (
    Capture,
    Records,
    dense_rows,
    index_pcap,
    iter_pcap,
    pcap_parts,
    spliced_block,
)

__all__ = [
    "BATCH_BYTES",
    "BATCH_PACKETS",
    "RunReport",
    "batches",
    "install",
    "load_datapath",
    "run_capture",
    "run_pcap",
]

BATCH_PACKETS = 32_768
"""Packets per numpy batch: large enough to amortise Python (the VXLAN gateway runs 20-40 %
faster per packet than with 8,192), small enough for the caches."""

BATCH_BYTES = 16 << 20
"""A batch is a dense (packets x longest packet) byte matrix: at most this many bytes (16 MiB,
8,192 full-size Ethernet frames), so one long packet among short ones shrinks its batch
instead of widening every row to its length."""


@dataclass(frozen=True)
class RunReport:
    """What a capture did in the pipeline; `pcap_parts` make the file of the packets that left it
    (none when `run_pcap` wrote them as it went)."""

    packets_in: int
    packets_out: int
    dropped: int
    parser_errors: int
    out_ports: dict[int, int]
    table_hits: dict[str, list[int]]
    counters: dict[str, dict[int, tuple[int, int]]]
    pcap_parts: list[memoryview]
    phase_cpu_s: dict[str, float] = field(default_factory=dict)
    """CPU seconds spent reading and indexing the capture (`run_pcap`), building batches,
    processing them, making the output records and writing them (`run_pcap`)."""

    @property
    def pcap(self) -> bytes:
        """The pcap file of the packets that left (`pcap_parts` joined)."""
        return b"".join(self.pcap_parts)

    @property
    def output(self) -> list[bytes]:
        """The packets that left the pipeline, in capture order (one object each: for tests)."""
        return index_pcap(self.pcap).packets()

    @property
    def output_timestamp_ns(self) -> np.ndarray:
        return index_pcap(self.pcap).timestamp_ns

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
    pna = document.get("pna") if isinstance(document, dict) else None
    settings = datapath.pna.settings(pna) if datapath.pna is not None else None
    if pna is not None and datapath.pna is None:
        raise NicError("pna: only a program that reads pna.p4 takes PNA settings")
    for name, entries in tables.items():
        state = datapath.tables[name]
        state.entries = entries
        state.invalidate()
    for setting in meters:
        datapath.meters[setting.meter].configure(
            setting.index, setting.cir, setting.cburst, setting.pir, setting.pburst
        )
    if settings is not None:
        datapath.pna.apply(settings)


def load_datapath(text: str, source: str, entries: Any) -> Datapath:
    """A program parsed from `text` with the entries document installed."""
    program = parse_program(text, source)
    if program.architecture != "pna":
        what = f"{source}: a {program.architecture} program; `nic run` runs the NIC's PNA pipeline"
        raise P4Error(f"{what} (`nic stf` runs v1model and PSA programs)")
    datapath = Datapath(program)
    install(datapath, entries)
    return datapath


def run_capture(datapath: Datapath, capture: Capture | Records, direction: int, input_port: int) -> RunReport:
    """Every packet of `capture`, in batches, through `datapath`; the packets that leave it
    are written as pcap records batch by batch (columns in, columns out)."""
    records = capture if isinstance(capture, Records) else Records.of(capture.packets, capture.timestamp_ns)
    blocks: list[np.ndarray] = []
    run = _Run(datapath, direction, input_port)
    run.feed(records, blocks.append)
    return run.report(pcap_parts(blocks))


def run_pcap(
    datapath: Datapath,
    readinto: Callable[[memoryview], int],
    write: Callable[[Any], object] | None,
    direction: int,
    input_port: int,
    source: str = "<pcap>",
) -> RunReport:
    """`nic run` from file to file: the pcap stream `readinto` reads (as `iter_pcap` says)
    through `datapath`, a block at a time, each block's output records handed to `write`
    as soon as they are made (a nanosecond pcap file; with no `write`, none are made), so
    memory follows the block, not the capture. Errors are `iter_pcap`'s, raised before
    anything is written past the block."""
    run = _Run(datapath, direction, input_port)
    timed = None if write is None else _timed(write, run.phases, "write")
    if timed is not None:
        timed(pcap_parts([])[0])
    blocks = iter_pcap(readinto, source)
    while True:
        began = time.process_time()
        records = next(blocks, None)
        run.phases["read"] += time.process_time() - began
        if records is None:
            return run.report([])
        run.feed(records, timed)


def _timed(write: Callable[[Any], object], phases: dict[str, float], name: str) -> Callable[[Any], None]:
    def timed(part: Any) -> None:
        began = time.process_time()
        write(part)
        phases[name] += time.process_time() - began

    return timed


class _Run:
    """The running totals of one capture through a datapath, fed a block of records at a time.

    A program whose parser reads at most `parse_depth` bytes is batched by packet heads: the
    batch holds only those bytes of each packet, and each output record is the new head
    followed by the rest of the packet, copied from the capture's bytes untouched."""

    def __init__(self, datapath: Datapath, direction: int, input_port: int) -> None:
        self.datapath, self.direction, self.input_port = datapath, direction, input_port
        self.head = parse_depth(datapath.program)
        self.packets = self.dropped = self.errors = 0
        self.ports: dict[int, int] = {}
        self.phases = dict.fromkeys(("read", "batch", "process", "output", "write"), 0.0)

    def feed(self, records: Records, emit: Callable[[np.ndarray], None] | None) -> None:
        """Every packet of `records` through the datapath; each batch's output records to
        `emit` (none are made without it: only the counts are wanted)."""
        phases = self.phases
        first = records.length if self.head is None else np.minimum(records.length, self.head)
        for start, stop in batches(first):
            part = slice(start, stop)
            stamps, offset, length, head = (
                records.timestamp_ns[part], records.offset[part], records.length[part], first[part]
            )
            began = time.process_time()
            batch = PacketBatch.of_rows(
                dense_rows(records.buffer, offset, head), length, self.direction, self.input_port, stamps
            )
            built = time.process_time()
            result = self.datapath.process(batch)
            processed = time.process_time()
            self.dropped += int(result.dropped.sum())
            self.errors += int(result.parser_error.sum())
            kept = ~result.dropped
            _count_ports(result.out_port[kept], self.ports)
            block = None
            if emit is not None:
                cut = self.head is not None and bool((head < length).any())
                rest = (records.buffer, offset + head, length - head) if cut else None
                block = spliced_block(result.data, result.length, stamps, kept, rest)
            made = time.process_time()
            if emit is not None and block is not None:
                emit(block)
            phases["batch"] += built - began
            phases["process"] += processed - built
            phases["output"] += made - processed
        self.packets += len(records)

    def report(self, parts: list[memoryview]) -> RunReport:
        datapath = self.datapath
        hits = {name: [int(h) for h in state.hits] for name, state in datapath.tables.items()}
        return RunReport(
            self.packets,
            self.packets - self.dropped,
            self.dropped,
            self.errors,
            self.ports,
            hits,
            datapath.counter_totals(),
            parts,
            self.phases,
        )


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


def _count_ports(out_port: np.ndarray, ports: dict[int, int]) -> None:
    if out_port.size and int(out_port.min()) >= 0 and int(out_port.max()) < 1 << 16:  # counted, not sorted
        counts = np.bincount(out_port)
        found = np.flatnonzero(counts)
        pairs = zip(found.tolist(), counts[found].tolist(), strict=True)
    else:
        pairs = zip(*(a.tolist() for a in np.unique(out_port, return_counts=True)), strict=True)
    for port, count in pairs:
        ports[port] = ports.get(port, 0) + count

"""Packets in and out of the interpreter: a batch as a byte matrix, and what left the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cloudtwin.p4.pcap import Records, dense_rows

__all__ = ["BatchResult", "PacketBatch"]


@dataclass(frozen=True)
class PacketBatch:
    """Packets as a byte matrix: row i holds `length[i]` bytes (or, in a matrix narrower than
    the longest packet, the packet's head: see `Datapath.process`); where each came from and when."""

    data: np.ndarray
    length: np.ndarray
    direction: np.ndarray
    input_port: np.ndarray
    timestamp_ns: np.ndarray

    def __len__(self) -> int:
        return int(self.length.size)

    @classmethod
    def from_packets(
        cls,
        packets: list[bytes],
        direction: int | np.ndarray = 0,
        input_port: int | np.ndarray = 0,
        timestamp_ns: np.ndarray | None = None,
    ) -> PacketBatch:
        """A batch from packet bytes; `direction` 0 is from the network, 1 from the host."""
        laid = Records.of(packets, timestamp_ns)
        times = laid.timestamp_ns
        return cls.from_buffer(laid.buffer, laid.offset, laid.length, direction, input_port, times)

    @classmethod
    def from_buffer(
        cls,
        buffer: np.ndarray,
        offset: np.ndarray,
        length: np.ndarray,
        direction: int | np.ndarray = 0,
        input_port: int | np.ndarray = 0,
        timestamp_ns: np.ndarray | None = None,
    ) -> PacketBatch:
        """A batch of the packets at `buffer[offset[i]:][:length[i]]` (a capture's bytes, read
        in place by `index_pcap`): no Python object per packet."""
        return cls.of_rows(dense_rows(buffer, offset, length), length, direction, input_port, timestamp_ns)

    @classmethod
    def of_rows(
        cls,
        data: np.ndarray,
        length: np.ndarray,
        direction: int | np.ndarray = 0,
        input_port: int | np.ndarray = 0,
        timestamp_ns: np.ndarray | None = None,
    ) -> PacketBatch:
        """A batch of rows already laid out as a byte matrix (row i: `length[i]` bytes, then zeros)."""
        n = length.size
        times = np.zeros(n, dtype=np.uint64) if timestamp_ns is None else np.asarray(timestamp_ns, np.uint64)
        return cls(
            data,
            np.asarray(length, dtype=np.int64),
            np.broadcast_to(np.asarray(direction, dtype=np.uint64), (n,)).copy(),
            np.broadcast_to(np.asarray(input_port, dtype=np.uint64), (n,)).copy(),
            times,
        )


@dataclass(frozen=True)
class BatchResult:
    """What left the pipeline: bytes and output port per packet, or why it did not."""

    data: np.ndarray
    length: np.ndarray
    out_port: np.ndarray
    dropped: np.ndarray
    parser_error: np.ndarray

    def packet(self, i: int) -> bytes | None:
        """Packet i's output bytes, None when it was dropped."""
        if self.dropped[i]:
            return None
        return self.data[i, : self.length[i]].tobytes()

    def packets(self) -> list[bytes | None]:
        return [self.packet(i) for i in range(self.length.size)]

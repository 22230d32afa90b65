"""Flows as a structure of arrays: endpoints, bytes, start, tenant, job, QPs and UDP ports."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

__all__ = ["ROCE_UDP_PORT", "Flows"]

ROCE_UDP_PORT = 4791


@dataclass(frozen=True, eq=False)
class Flows:
    """One row per flow (one RoCE queue pair's transfer).

    `src`/`dst` are NIC nodes of the topology; `connection` groups the QPs of one
    connection (what perftest reports as one pair); `src_qp`/`dst_qp` are 24-bit queue
    pair numbers; `sport` is the RoCEv2 UDP source port (destination port is 4791);
    `tenant` indexes the scenario's tenants (-1: no overlay); `job` the workload.
    """

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    start_s: np.ndarray
    tenant: np.ndarray
    job: np.ndarray
    connection: np.ndarray
    src_qp: np.ndarray
    dst_qp: np.ndarray
    sport: np.ndarray

    def __len__(self) -> int:
        return int(self.src.size)

    @classmethod
    def concat(cls, parts: list[Flows]) -> Flows:
        """Flows of several workloads in one table (connections renumbered apart)."""
        offset = 0
        renumbered = []
        for part in parts:
            renumbered.append(part.connection + offset)
            offset += int(part.connection.max()) + 1 if len(part) else 0
        columns = {f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)}
        columns["connection"] = np.concatenate(renumbered) if parts else np.empty(0, dtype=np.int64)
        return cls(**columns)

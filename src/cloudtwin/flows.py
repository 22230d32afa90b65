"""Flows and their paths as structures of arrays: endpoints, bytes, start, tenant, job, QPs
and UDP ports per flow; the links each flow crosses as a CSR pair."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Protocol

import numpy as np

__all__ = ["ROCE_UDP_PORT", "Flows", "LinkLatencies", "Paths"]

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

    def take(self, index: np.ndarray) -> Flows:
        """The rows `index` of the table, in that order."""
        return Flows(**{f.name: getattr(self, f.name)[index] for f in fields(Flows)})

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


class LinkLatencies(Protocol):
    """Anything with a propagation latency per link (a `Topology`)."""

    latency_s: np.ndarray


@dataclass(frozen=True, eq=False)
class Paths:
    """The links each flow crosses: `link_ids[indptr[f]:indptr[f+1]]` for flow f.

    `weights` is the fraction of the flow's rate on each entry (1 on a single path;
    less where a flow is split over several paths, as spraying does). None means all 1.
    """

    indptr: np.ndarray
    link_ids: np.ndarray
    weights: np.ndarray | None = None

    @property
    def flow_count(self) -> int:
        """Number of flows."""
        return int(self.indptr.size - 1)

    @cached_property
    def flow_of_entry(self) -> np.ndarray:
        """The flow each entry of `link_ids` belongs to."""
        return np.repeat(np.arange(self.flow_count), np.diff(self.indptr))

    @cached_property
    def entry_weights(self) -> np.ndarray:
        """Weights with None expanded to ones."""
        if self.weights is None:
            return np.ones(self.link_ids.size)
        return self.weights

    def path(self, flow: int) -> np.ndarray:
        """The link ids of one flow."""
        return self.link_ids[self.indptr[flow] : self.indptr[flow + 1]]

    @classmethod
    def from_rows(cls, rows: np.ndarray) -> Paths:
        """From a (flows, hops) matrix padded with -1."""
        mask = rows >= 0
        indptr = np.concatenate(([0], np.cumsum(mask.sum(axis=1))))
        return cls(indptr=indptr.astype(np.int64), link_ids=rows[mask].astype(np.int64))

    @classmethod
    def concat(cls, parts: list[Paths]) -> Paths:
        """Paths of several flow sets, one after the other."""
        offsets = np.cumsum([0] + [int(p.link_ids.size) for p in parts[:-1]])
        indptr = np.concatenate(
            [[0]] + [p.indptr[1:] + o for p, o in zip(parts, offsets, strict=True)]
        )
        weights = None
        if any(p.weights is not None for p in parts):
            weights = np.concatenate([p.entry_weights for p in parts])
        return cls(indptr, np.concatenate([p.link_ids for p in parts]), weights)

    def replace(self, flows: np.ndarray, new: Paths) -> Paths:
        """These paths with flow `flows[i]` taking `new`'s path i instead (as after a repair)."""
        flows = np.asarray(flows, dtype=np.int64)
        lengths = np.diff(self.indptr)
        lengths[flows] = np.diff(new.indptr)
        indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        keep = np.ones(self.flow_count, dtype=bool)
        keep[flows] = False
        link_ids = np.empty(int(indptr[-1]), dtype=np.int64)
        weights = np.empty(int(indptr[-1]))
        old_entries = keep[self.flow_of_entry]
        target_old = np.repeat(indptr[:-1][keep], lengths[keep]) + _offsets(lengths[keep])
        link_ids[target_old] = self.link_ids[old_entries]
        weights[target_old] = self.entry_weights[old_entries]
        target_new = np.repeat(indptr[:-1][flows], lengths[flows]) + _offsets(lengths[flows])
        link_ids[target_new] = new.link_ids
        weights[target_new] = new.entry_weights
        uniform = self.weights is None and new.weights is None
        return Paths(indptr, link_ids, None if uniform else weights)

    def take(self, flows: np.ndarray) -> Paths:
        """The paths of `flows` only, in that order (repeats allowed).

        >>> p = Paths(np.array([0, 2, 3]), np.array([5, 6, 7]))
        >>> p.take(np.array([1, 0, 1])).link_ids.tolist()
        [7, 5, 6, 7]
        """
        flows = np.asarray(flows, dtype=np.int64)
        lengths = np.diff(self.indptr)[flows]
        entries = np.repeat(self.indptr[flows], lengths) + _offsets(lengths)
        indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        weights = None if self.weights is None else self.weights[entries]
        return Paths(indptr, self.link_ids[entries], weights)

    def crosses(self, link_mask: np.ndarray) -> np.ndarray:
        """Per flow: does its path use (with a positive weight) a link in `link_mask`?

        >>> p = Paths(np.array([0, 2, 3]), np.array([5, 6, 7]))
        >>> p.crosses(np.arange(8) == 7).tolist()
        [False, True]
        """
        hits = link_mask[self.link_ids] & (self.entry_weights > 0)
        return np.bincount(self.flow_of_entry, hits, minlength=self.flow_count) > 0

    def differs(self, other: Paths) -> np.ndarray:
        """Per flow: is its path here not the same as in `other` (links or weights)?

        >>> a = Paths(np.array([0, 2, 3]), np.array([5, 6, 7]))
        >>> a.differs(Paths(np.array([0, 2, 3]), np.array([5, 6, 8]))).tolist()
        [False, True]
        """
        la, lb = np.diff(self.indptr), np.diff(other.indptr)
        out = la != lb
        same = np.flatnonzero(~out)
        lengths = la[same]
        ia = np.repeat(self.indptr[same], lengths) + _offsets(lengths)
        ib = np.repeat(other.indptr[same], lengths) + _offsets(lengths)
        bad = (self.link_ids[ia] != other.link_ids[ib]) | (
            self.entry_weights[ia] != other.entry_weights[ib]
        )
        owner = np.repeat(np.arange(same.size), lengths)
        out[same] = np.bincount(owner, bad, minlength=same.size) > 0
        return out

    def latency_s(self, topology: LinkLatencies) -> np.ndarray:
        """Propagation latency per flow (weighted where a flow is split)."""
        per_entry = topology.latency_s[self.link_ids] * self.entry_weights
        return np.bincount(self.flow_of_entry, per_entry, minlength=self.flow_count)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """0..n-1 within each run of the given lengths, concatenated."""
    total = int(lengths.sum())
    return np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)

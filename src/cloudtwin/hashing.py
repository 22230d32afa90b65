"""Vectorised header hashes as switches and NICs compute them (uint64 arithmetic, wraps).

`mix` is a strong 64-bit mixer (splitmix64 finaliser chained over the fields), standing
in for the CRC-based hashes of switch ASICs; `xor` folds the fields with XOR, the weak
hash some switches offer, which shows how little entropy a 5-tuple can carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = ["HashKind", "hash_fields", "mix64", "switch_seeds"]

HashKind = Literal["mix", "xor"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser over an array of uint64.

    >>> int(mix64(np.array([0], dtype=np.uint64))[0]) == 0
    True
    """
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def hash_fields(
    fields: Sequence[np.ndarray], seed: np.ndarray | int, kind: HashKind = "mix"
) -> np.ndarray:
    """Hash header fields (arrays of equal length) under per-row or global `seed`."""
    seed_arr = np.asarray(seed).astype(np.uint64)
    if kind == "xor":
        folded = np.zeros(np.broadcast(*fields).shape, dtype=np.uint64)
        for field in fields:
            folded ^= np.asarray(field).astype(np.uint64)
        folded ^= folded >> np.uint64(16)
        return (folded ^ seed_arr) & np.uint64(0xFFFF)
    with np.errstate(over="ignore"):
        value = mix64(seed_arr + _GOLDEN)
        for field in fields:
            value = mix64(value ^ np.asarray(field).astype(np.uint64))
    return value


def switch_seeds(nodes: int, seed: int, per_switch: bool) -> np.ndarray:
    """The hash seed of every node: distinct per switch, or one for all (polarisation)."""
    base = np.full(nodes, seed, dtype=np.uint64)
    if per_switch:
        with np.errstate(over="ignore"):
            return mix64(base * np.uint64(1_000_003) + np.arange(nodes, dtype=np.uint64))
    return mix64(base)

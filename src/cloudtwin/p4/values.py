"""Values of bit<N> and int<N> as numpy columns: full columns, truncation to a width, two's
complement and the arithmetic P4 defines on them (uint64 columns up to 64 bits, Python ints
in object arrays above)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "BINARY_OPS",
    "COMPARISONS",
    "Value",
    "arith",
    "as_column",
    "bits_of",
    "compare_values",
    "concat_bits",
    "fit",
    "invert",
    "is_wide",
    "mask_of",
    "operands",
    "resize",
    "signed_of",
    "wrapping_sub",
]


Value = np.ndarray | int


def mask_of(width: int) -> int:
    return (1 << width) - 1


def is_wide(width: int | None) -> bool:
    return width is not None and width > 64


def as_column(value: Value, n: int, width: int | None) -> np.ndarray:
    """A value as a full column of the right storage type."""
    wide = is_wide(width)
    if isinstance(value, np.ndarray):
        if wide and value.dtype != object:
            return value.astype(object)
        if not wide and value.dtype == object:
            return value.astype(np.uint64)
        return value
    if wide:
        out = np.empty(n, dtype=object)
        out[:] = int(value)
        return out
    return np.full(n, int(value), dtype=np.uint64)


def fit(value: Value, width: int) -> Value:
    """`value` truncated to `width` bits (P4 assignment semantics)."""
    if isinstance(value, (int, np.integer)):
        return int(value) & mask_of(width)
    if value.dtype == bool:
        value = value.astype(np.uint64)
    if width >= 64 and value.dtype != object:
        return value
    if value.dtype == object:
        out = value & mask_of(width)
        return out if width > 64 else out.astype(np.uint64)
    return value & np.uint64(mask_of(width))


def signed_of(value: Value, width: int) -> Any:
    """The bits of an int<`width`> read in two's complement: int64 columns up to 64 bits,
    Python ints (object columns) beyond."""
    half = 1 << (width - 1)
    if isinstance(value, (int, np.integer)):
        number = int(value) & mask_of(width)
        return number - (1 << width) if number >= half else number
    if width > 64 or value.dtype == object:
        wide = value.astype(object) & mask_of(width)
        return np.where(wide >= half, wide - (1 << width), wide)
    bits = value.astype(np.uint64) & np.uint64(mask_of(width))
    if width == 64:
        return bits.view(np.int64)
    return (bits.astype(np.int64) ^ np.int64(half)) - np.int64(half)


def bits_of(value: Any, width: int) -> Value:
    """A signed number (from `signed_of` and arithmetic on it) back to its `width` bits."""
    if isinstance(value, (int, np.integer)):
        return int(value) & mask_of(width)
    if value.dtype == object:
        out = value & mask_of(width)
        return out if width > 64 else out.astype(np.uint64)
    return value.astype(np.uint64) & np.uint64(mask_of(width))


def resize(value: Value, source: int, target: int, signed: bool) -> Value:
    """`value` of `source` bits as `target` bits: sign-extended when it is signed."""
    if signed and target > source:
        return bits_of(signed_of(value, source), target)
    return fit(value, target)


def invert(value: Value, width: int) -> Value:
    if isinstance(value, (int, np.integer)):
        return ~int(value) & mask_of(width)
    return ~value if value.dtype != object else (value ^ mask_of(width))


def wrapping_sub(left: Value, right: Value, width: int) -> Value:
    return arith("sub", left, right, width)


def operands(left: Value, right: Value, width: int) -> tuple[Any, Any]:
    wide = width > 64 or any(isinstance(v, np.ndarray) and v.dtype == object for v in (left, right))
    if wide:
        left = left.astype(object) if isinstance(left, np.ndarray) else int(left)
        right = right.astype(object) if isinstance(right, np.ndarray) else int(right)
        return left, right
    if isinstance(left, np.ndarray) and left.dtype == bool:
        left = left.astype(np.uint64)
    if isinstance(right, np.ndarray) and right.dtype == bool:
        right = right.astype(np.uint64)
    a: Any = np.uint64(left & mask_of(64)) if isinstance(left, int) else left
    b: Any = np.uint64(right & mask_of(64)) if isinstance(right, int) else right
    return a, b


def arith(kind: str, left: Value, right: Value, width: int) -> Value:
    if isinstance(left, int) and isinstance(right, int):
        return (
            BINARY_OPS[kind](left, right) & mask_of(width)
            if kind not in ("shl", "shr")
            else ((left << right if kind == "shl" else left >> right) & mask_of(width))
        )
    a, b = operands(left, right, width)
    if kind in ("shl", "shr"):
        if isinstance(b, (np.integer, int)) and int(b) >= max(width, 64 if not is_wide(width) else width):
            return np.zeros_like(a) if isinstance(a, np.ndarray) else 0
        result = (a << b) if kind == "shl" else (a >> b)
        if isinstance(b, np.ndarray) and b.dtype != object:
            result = np.where(b >= np.uint64(64), np.uint64(0), result)
        return result
    with np.errstate(over="ignore"):
        return BINARY_OPS[kind](a, b)


def compare_values(
    op: Callable[[Value, Value], Value], left: Value, right: Value, width: int | None
) -> Value:
    a, b = operands(left, right, width or 64)
    result = op(a, b)
    return result.astype(bool) if isinstance(result, np.ndarray) else np.asarray(bool(result))


def concat_bits(left: Value, right: Value, shift: int, width: int) -> Value:
    if width > 64:
        a = left.astype(object) if isinstance(left, np.ndarray) else int(left)
        b = right.astype(object) if isinstance(right, np.ndarray) else int(right)
        return (a << shift) | b
    a, b = operands(left, right, width)
    out: np.ndarray = (a << np.uint64(shift)) | b
    return out


BINARY_OPS: dict[str, Callable[[Value, Value], Value]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "band": lambda a, b: a & b,
    "bor": lambda a, b: a | b,
    "bxor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "gt": lambda a, b: a > b,
    "le": lambda a, b: a <= b,
    "ge": lambda a, b: a >= b,
    "land": lambda a, b: a,
    "lor": lambda a, b: a,
    "concat": lambda a, b: a,
}


COMPARISONS = {"eq", "ne", "lt", "gt", "le", "ge"}

"""Fields in packet bytes: big-endian bit fields read from and written into a (rows, bytes)
matrix, as 64-bit words where they fit, and the 16-bit word sums of checksums."""

from __future__ import annotations

import numpy as np

from cloudtwin.p4.values import fit, mask_of

__all__ = [
    "distinct_values",
    "from_words",
    "gather",
    "read_bits",
    "to_words",
    "word_field",
    "word_put",
    "word_sum",
    "words_at",
    "write_bits",
]


def to_words(raw: np.ndarray) -> np.ndarray:
    """A (rows, bytes) matrix as big-endian 64-bit words (rows, ceil(bytes / 8))."""
    rows, size = raw.shape
    words = -(-size // 8)
    padded = np.zeros((rows, words * 8), dtype=np.uint8)
    padded[:, :size] = raw
    return padded.view(">u8").astype(np.uint64)


def words_at(data: np.ndarray, start: int, size: int) -> np.ndarray:
    """`to_words` of bytes [start, start + size) of every row, read in place when whole
    words fit in the rows (the bytes past `size` then fill the last word, never a field)."""
    end = start + -(-size // 8) * 8
    if end <= data.shape[1] and data.strides[1] == 1:
        return data[:, start:end].view(">u8").astype(np.uint64)
    return to_words(data[:, start : start + size])


def from_words(words: np.ndarray, size: int) -> np.ndarray:
    """The inverse of to_words."""
    return np.ascontiguousarray(words.astype(">u8")).view(np.uint8)[:, :size]


def word_field(words: np.ndarray, offset: int, width: int) -> np.ndarray:
    k, r = divmod(offset, 64)
    if r + width <= 64:
        return (words[:, k] >> np.uint64(64 - r - width)) & np.uint64(mask_of(width))
    low_bits = r + width - 64
    high = (words[:, k] & np.uint64(mask_of(64 - r))) << np.uint64(low_bits)
    return high | (words[:, k + 1] >> np.uint64(64 - low_bits))


def word_put(words: np.ndarray, value: np.ndarray, offset: int, width: int) -> None:
    k, r = divmod(offset, 64)
    value = value & np.uint64(mask_of(width))
    if r + width <= 64:
        words[:, k] |= value << np.uint64(64 - r - width)
        return
    low_bits = r + width - 64
    words[:, k] |= value >> np.uint64(low_bits)
    words[:, k + 1] |= value << np.uint64(64 - low_bits)


def distinct_values(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (fast when they are all the same, the common case, or
    small non-negative integers such as byte offsets, counted rather than sorted)."""
    if values.size and (values == values[0]).all():
        return values[:1]
    if values.size and values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if low >= 0 and high < 1 << 16:
            return np.flatnonzero(np.bincount(values, minlength=high + 1)).astype(values.dtype)
    return np.unique(values)


def gather(data: np.ndarray, rows: np.ndarray, starts: np.ndarray, size: int, n: int) -> np.ndarray:
    """Bytes [start, start + size) of each row; block slices where the rows share a start."""
    first = int(starts[0])
    if (starts == first).all():
        return data[:, first : first + size] if rows.size == n else data[rows, first : first + size]
    out = np.empty((rows.size, size), dtype=np.uint8)
    for start in distinct_values(starts):
        same = starts == start
        out[same] = data[rows[same], int(start) : int(start) + size]
    return out


def _scatter(out: np.ndarray, rows: np.ndarray, starts: np.ndarray, raw: np.ndarray, n: int) -> None:
    """The inverse of gather: write `raw` at each row's start."""
    size = raw.shape[1]
    for start in distinct_values(starts):
        same = starts == start
        s = int(start)
        if same.all():
            if rows.size == n:
                out[:, s : s + size] = raw
            else:
                out[rows, s : s + size] = raw
        else:
            out[rows[same], s : s + size] = raw[same]


def read_bits(raw: np.ndarray, offset: int, width: int) -> np.ndarray:
    """Field values (big-endian, `width` bits at bit `offset`) from a (rows, bytes) matrix."""
    first, last = offset // 8, (offset + width - 1) // 8
    span = last - first + 1
    tail = 8 * span - (offset % 8) - width
    if span <= 8:
        value = np.zeros(raw.shape[0], dtype=np.uint64)
        for j in range(span):
            value = (value << np.uint64(8)) | raw[:, first + j].astype(np.uint64)
        return fit(value >> np.uint64(tail), width)  # type: ignore[return-value]
    # wider: the span as big-endian 64-bit words, joined into Python ints a column at a time
    # (object arithmetic runs its loop in C: no Python statement per packet)
    words = to_words(raw[:, first : last + 1])
    out = words[:, 0].astype(object)
    for k in range(1, words.shape[1]):
        out = (out << 64) | words[:, k].astype(object)
    out = (out >> (8 * (8 * words.shape[1] - span) + tail)) & mask_of(width)
    return out if width > 64 else out.astype(np.uint64)


def write_bits(out: np.ndarray, value: np.ndarray, offset: int, width: int) -> None:
    """Write `width`-bit values at bit `offset` into a (rows, bytes) matrix (the inverse of read_bits)."""
    first, last = offset // 8, (offset + width - 1) // 8
    span = last - first + 1
    tail = 8 * span - (offset % 8) - width
    if span <= 7 and value.dtype != object:
        shifted = value << np.uint64(tail)
        keep = ~np.uint64(mask_of(width) << tail) & np.uint64(mask_of(8 * span))
        for j in range(span):
            shift = np.uint64(8 * (span - 1 - j))
            byte = ((shifted >> shift) & np.uint64(0xFF)).astype(np.uint8)
            kept = np.uint8((int(keep) >> int(shift)) & 0xFF)
            out[:, first + j] = (out[:, first + j] & kept) | byte
        return
    # wider: the span as big-endian 64-bit words; each word of the value cut from the Python
    # ints a column at a time (object arithmetic in C), merged with the bytes around the field
    region = to_words(out[:, first : last + 1])
    count = region.shape[1]
    shift = tail + 8 * (8 * count - span)  # the words' padding after the span
    placed = (value.astype(object) & mask_of(width)) << shift
    keep = ~(mask_of(width) << shift) & mask_of(64 * count)
    for k in range(count):
        down = 64 * (count - 1 - k)
        word = ((placed >> down) & mask_of(64)).astype(np.uint64)
        region[:, k] = (region[:, k] & np.uint64((keep >> down) & mask_of(64))) | word
    out[:, first : last + 1] = from_words(region, span)


def word_sum(value: np.ndarray, offset: int, width: int) -> np.ndarray:
    """Sum of the 16-bit words a `width`-bit value contributes when placed at bit `offset`."""
    total = np.zeros(value.size, dtype=np.uint64)
    end = offset + width
    word = offset // 16
    while word * 16 < end:
        lo, hi = max(offset, word * 16), min(end, word * 16 + 16)
        piece = (value >> np.uint64(end - hi)) & np.uint64(mask_of(hi - lo))
        total += piece << np.uint64(word * 16 + 16 - hi)
        word += 1
    return total

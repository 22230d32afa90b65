"""Fields wider than 64 bits (and narrower ones spanning 9 bytes) read from and written to
packet bytes a column at a time: the values and bytes of doing it one packet at a time."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.p4.bits import read_bits, write_bits


def mask(width: int) -> int:
    return (1 << width) - 1


def read_one_by_one(raw: np.ndarray, offset: int, width: int) -> list[int]:
    first, last = offset // 8, (offset + width - 1) // 8
    tail = 8 * (last - first + 1) - offset % 8 - width
    return [(int.from_bytes(row[first : last + 1].tobytes(), "big") >> tail) & mask(width) for row in raw]


def write_one_by_one(raw: np.ndarray, values: list[int], offset: int, width: int) -> np.ndarray:
    out = raw.copy()
    first, last = offset // 8, (offset + width - 1) // 8
    span = last - first + 1
    tail = 8 * span - offset % 8 - width
    for i, value in enumerate(values):
        old = int.from_bytes(out[i, first : last + 1].tobytes(), "big")
        merged = (old & ~(mask(width) << tail) & mask(8 * span)) | ((value & mask(width)) << tail)
        out[i, first : last + 1] = np.frombuffer(merged.to_bytes(span, "big"), dtype=np.uint8)
    return out


FIELDS = st.integers(1, 200).flatmap(lambda w: st.tuples(st.just(w), st.integers(0, 40)))


@settings(max_examples=150, deadline=None)
@given(FIELDS, st.integers(0, 6), st.data())
def test_wide_fields_read_and_write_as_one_packet_at_a_time(
    field: tuple[int, int], rows: int, data: st.DataObject
) -> None:
    width, offset = field
    size = (offset + width + 7) // 8 + data.draw(st.integers(0, 3))
    raw = np.frombuffer(data.draw(st.binary(min_size=rows * size, max_size=rows * size)), np.uint8)
    raw = raw.reshape(rows, size).copy()
    got = read_bits(raw, offset, width)
    assert [int(v) for v in got] == read_one_by_one(raw, offset, width)
    values = [data.draw(st.integers(0, mask(width))) for _ in range(rows)]  # fitted, as the datapath has them
    column = np.array(values, dtype=object) if width > 64 else np.array(values, dtype=np.uint64)
    written = raw.copy()
    write_bits(written, column, offset, width)
    expected = write_one_by_one(raw, [int(v) for v in column], offset, width)
    assert written.tobytes() == expected.tobytes()

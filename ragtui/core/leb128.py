"""Unsigned LEB128 varints, encoded and decoded with numpy (no per-value Python loop).

Values are non-negative integers below 2**32, so a varint is 1 to 5 bytes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["VarintError", "decode", "encode"]

_MAX_BYTES = 5


class VarintError(ValueError):
    """The bytes are not a well-formed sequence of u32 varints."""


def encode(values: np.ndarray) -> bytes:
    """Encode a 1-d array of integers in [0, 2**32) as concatenated varints."""
    v = np.asarray(values, dtype=np.uint64)
    if v.size == 0:
        return b""
    if int(v.max()) >= 1 << 32:
        raise ValueError("varint value does not fit in 32 bits")
    nbytes = np.ones(v.shape, dtype=np.int64)
    for shift in (7, 14, 21, 28):
        nbytes += v >= (1 << shift)
    starts = np.zeros(v.shape, dtype=np.int64)
    np.cumsum(nbytes[:-1], out=starts[1:])
    out = np.zeros(int(starts[-1] + nbytes[-1]), dtype=np.uint8)
    for j in range(_MAX_BYTES):
        has = nbytes > j
        if not has.any():
            break
        byte = (v[has] >> np.uint64(7 * j)) & np.uint64(0x7F)
        more = nbytes[has] > j + 1
        out[starts[has] + j] = (byte | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    return out.tobytes()


def decode(data: np.ndarray | bytes, expected: int | None = None) -> np.ndarray:
    """Decode concatenated varints into a uint64 array.

    ``data`` must end exactly at the end of a varint. Raises ``VarintError``
    for a truncated varint, one longer than 5 bytes, or a value of 2**32 or
    more; with ``expected`` set, also when the count differs.
    """
    buf = np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else data
    if buf.size == 0:
        if expected:
            raise VarintError(f"expected {expected} varints, found none")
        return np.zeros(0, dtype=np.uint64)
    last = (buf & 0x80) == 0
    if not last[-1]:
        raise VarintError("truncated varint at the end of the data")
    ends = np.flatnonzero(last)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if expected is not None and ends.size != expected:
        raise VarintError(f"expected {expected} varints, found {ends.size}")
    if int(lengths.max()) > _MAX_BYTES:
        raise VarintError("varint longer than 5 bytes")
    if ends.size == buf.size:
        # Every varint is one byte (the common case for gaps and tf).
        return buf.astype(np.uint64)
    # Each byte contributes its 7 payload bits shifted by 7 * (its place in its varint).
    owner = np.zeros(buf.size, dtype=np.int64)
    owner[ends[:-1] + 1] = 1
    np.cumsum(owner, out=owner)
    place = np.arange(buf.size, dtype=np.int64) - starts[owner]
    contrib = (buf & 0x7F).astype(np.uint64) << (np.uint64(7) * place.astype(np.uint64))
    values = np.add.reduceat(contrib, starts)
    if int(values.max()) >= 1 << 32:
        raise VarintError("varint value does not fit in 32 bits")
    return values

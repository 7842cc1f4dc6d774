"""Unsigned LEB128 varints, encoded and decoded with numpy (no per-value Python loop).

Values are non-negative integers below 2**32, so a varint is 1 to 5 bytes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["VarintError", "decode", "encode", "encode_one", "sizes"]

_MAX_BYTES = 5


class VarintError(ValueError):
    """The bytes are not a well-formed sequence of u32 varints."""


def encode_one(value: int) -> bytes:
    """One value's varint, for writers that emit single counts between arrays (``encode`` for arrays)."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(values: np.ndarray) -> bytes:
    """Encode a 1-d array of integers in [0, 2**32) as concatenated varints.

    All values are laid out as rows of ``width`` bytes (the longest varint
    present), each byte with its continuation bit; a mask of the bytes each
    value really uses, read in row order, is the encoding.
    """
    v = np.asarray(values)
    if v.size == 0:
        return b""
    if int(v.min()) < 0 or int(v.max()) >= 1 << 32:
        raise ValueError("varint value does not fit in 32 bits")
    v = v.astype(np.uint32)
    nbytes = sizes(v)
    width = int(nbytes.max())
    if width == 1:
        return v.astype(np.uint8).tobytes()
    rows = np.empty((v.size, width), dtype=np.uint8)
    for j in range(width):
        rows[:, j] = (v >> (7 * j)) & 0x7F
        if j < width - 1:
            rows[:, j] |= (nbytes > j + 1).view(np.uint8) << 7
    return rows[np.arange(width, dtype=np.uint8) < nbytes[:, None]].tobytes()


def sizes(values: np.ndarray) -> np.ndarray:
    """The length in bytes (uint8, 1 to 5) of each value's varint."""
    v = np.asarray(values)
    out = np.ones(v.shape, dtype=np.uint8)
    if v.size == 0:
        return out
    top = int(v.max())
    for j in range(1, _MAX_BYTES):
        if top < 1 << (7 * j):
            break
        out += v >= (1 << (7 * j))
    return out


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
    last = buf < 0x80
    if not last[-1]:
        raise VarintError("truncated varint at the end of the data")
    ends = np.flatnonzero(last)
    if expected is not None and ends.size != expected:
        raise VarintError(f"expected {expected} varints, found {ends.size}")
    if ends.size == buf.size:
        # Every varint is one byte (the common case for gaps and tf).
        return buf.astype(np.uint64)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if int(lengths.max()) > _MAX_BYTES:
        raise VarintError("varint longer than 5 bytes")
    # Each varint's first byte, then the k-th byte of the varints that long, 7 bits each: a pass over the
    # values per byte place, each over fewer of them (most varints are one or two bytes).
    values = (buf[starts] & 0x7F).astype(np.uint64)
    longer = np.flatnonzero(lengths > 1)
    for k in range(1, _MAX_BYTES):
        if longer.size == 0:
            break
        values[longer] |= (buf[starts[longer] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        longer = longer[lengths[longer] > k + 1]
    if int(values.max()) >= 1 << 32:
        raise VarintError("varint value does not fit in 32 bits")
    return values

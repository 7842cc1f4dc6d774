"""FNV-1a 64 and PCG32: the deterministic random source of the IVF build.

Every reader of an index must draw the same numbers from the same seed, so
this module follows spec/ivf.md (and spec/pcg32.md) bit for bit. Callers
may rely on:

- ``fnv1a64(data)`` is the 64-bit FNV-1a hash of ``data`` as an ``int`` in
  ``[0, 2**64)``.
- ``PCG32(initstate, initseq)`` is seeded exactly as the reference PCG32
  ``pcg32_srandom_r`` (XSH-RR, 64-bit state), so its ``next_u32()`` sequence
  matches every other conforming implementation.
- ``uniform()`` consumes exactly one ``next_u32()``; ``below(n)`` consumes one
  or more (rejection sampling), never zero.

Plain Python integers, masked to 64 bits: the build draws at most a few tens of
thousands of numbers, so clarity wins over speed here.
"""

from __future__ import annotations

from ragtui.core.errors import UsageError

__all__ = ["PCG32", "fnv1a64", "index_rng"]

_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_PCG_MULT = 6364136223846793005
# The stream selector the spec fixes for every index.
_INDEX_STREAM = 54


def fnv1a64(data: bytes) -> int:
    """Return the 64-bit FNV-1a hash of ``data``."""
    h = _FNV_OFFSET
    for c in data:
        h = ((h ^ c) * _FNV_PRIME) & _MASK64
    return h


class PCG32:
    """PCG32 (XSH-RR) with a 64-bit state and a selectable stream.

    ``initstate`` and ``initseq`` are taken modulo 2**64, like the C reference
    that receives them as ``uint64_t``.
    """

    __slots__ = ("_inc", "_state")

    def __init__(self, initstate: int, initseq: int) -> None:
        self._state = 0
        self._inc = ((initseq << 1) | 1) & _MASK64
        self.next_u32()
        self._state = (self._state + (initstate & _MASK64)) & _MASK64
        self.next_u32()

    def next_u32(self) -> int:
        """Advance the generator and return the next value in ``[0, 2**32)``."""
        old = self._state
        self._state = (old * _PCG_MULT + self._inc) & _MASK64
        x = (((old >> 18) ^ old) >> 27) & _MASK32
        rot = old >> 59
        return ((x >> rot) | (x << ((-rot) & 31))) & _MASK32

    def uniform(self) -> float:
        """Return ``next_u32() / 2**32``: a double in ``[0, 1)``, exact (no rounding)."""
        return self.next_u32() / 4294967296.0

    def below(self, n: int) -> int:
        """Return an unbiased integer in ``[0, n)`` for ``1 <= n <= 2**32``.

        Draws until ``r >= (2**32 - n) mod n`` and returns ``r mod n``, so the
        number of draws consumed is the same in every conforming reader.
        """
        if not 1 <= n <= 1 << 32:
            raise UsageError(f"below(n) needs 1 <= n <= 2**32, got {n}")
        threshold = ((1 << 32) - n) % n
        while True:
            r = self.next_u32()
            if r >= threshold:
                return r % n


def index_rng(index_id: str) -> PCG32:
    """Return the generator an index's IVF build starts from.

    Seeded ``PCG32(fnv1a64(index_id.encode("utf-8")), 54)`` as spec/ivf.md fixes.
    """
    return PCG32(fnv1a64(index_id.encode("utf-8")), _INDEX_STREAM)

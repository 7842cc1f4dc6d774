"""FNV-1a 64 and PCG32 against the test vectors of spec/ivf.md and spec/pcg32.md.

The derived vectors (below, uniform, the "docs" seed) were checked against the
PCG reference C code (pcg32_srandom_r / pcg32_boundedrand_r) compiled separately.
"""

from __future__ import annotations

import pytest

from ragtui.core.errors import UsageError
from ragtui.core.search.pcg32 import PCG32, fnv1a64, index_rng


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", 0xCBF29CE484222325),
        (b"a", 0xAF63DC4C8601EC8C),
        (b"foobar", 0x85944171F73967E8),
        (b"docs", 0xDC47FD6761F51D72),
    ],
)
def test_fnv1a64_vectors(data: bytes, expected: int) -> None:
    assert fnv1a64(data) == expected


def test_pcg32_spec_vector() -> None:
    rng = PCG32(42, 54)
    got = [rng.next_u32() for _ in range(6)]
    assert got == [0xA15C02B7, 0x7B47F409, 0xBA1D3330, 0x83D2F293, 0xBFA4784B, 0xCBED606E]


def test_pcg32_continues_the_reference_stream() -> None:
    rng = PCG32(42, 54)
    got = [rng.next_u32() for _ in range(10)]
    assert got[6:] == [0xBFC6A3AD, 0x812FFF6D, 0xE61F305A, 0xF9384B90]


def test_index_seed_uses_utf8_index_id_and_stream_54() -> None:
    rng = index_rng("docs")
    assert [rng.next_u32() for _ in range(4)] == [0x6F7B8DE2, 0xCA94C55E, 0x8DACDA90, 0xC2CDFDB3]
    other = PCG32(fnv1a64(b"docs"), 54)
    assert other.next_u32() == 0x6F7B8DE2


def test_index_seed_of_non_ascii_id_hashes_utf8_bytes() -> None:
    a = index_rng("döcs")
    b = PCG32(fnv1a64(bytes("döcs", "utf-8")), 54)
    assert [a.next_u32() for _ in range(3)] == [b.next_u32() for _ in range(3)]


def test_uniform_is_next_over_2_pow_32() -> None:
    a, b = PCG32(42, 54), PCG32(42, 54)
    for _ in range(50):
        assert a.uniform() == b.next_u32() / 2**32
    assert PCG32(42, 54).uniform() == 0xA15C02B7 / 4294967296


def test_below_vectors() -> None:
    rng = PCG32(42, 54)
    assert [rng.below(10) for _ in range(6)] == [3, 7, 4, 5, 5, 6]
    rng = index_rng("docs")
    assert [rng.below(100_000) for _ in range(4)] == [68226, 47486, 15600, 79731]


def test_below_rejects_and_redraws() -> None:
    # For n = 2**31 + 1 the threshold is 2**31 - 1: the 2nd draw (0x7B47F409) is
    # below it, so six results consume seven draws.
    rng = PCG32(42, 54)
    got = [rng.below(2**31 + 1) for _ in range(6)]
    assert got == [559678134, 974992175, 64156306, 1067743306, 1273847917, 1069982636]
    assert rng.next_u32() == 0x812FFF6D  # the 8th draw of the stream


class _Scripted(PCG32):
    """A generator that returns given values, to pin below()'s rejection rule."""

    def __init__(self, values: list[int]) -> None:  # no seeding: below() only calls next_u32
        self.values = list(values)
        self.drawn = 0

    def next_u32(self) -> int:
        self.drawn += 1
        return self.values.pop(0)


def test_below_threshold_is_2_pow_32_minus_n_mod_n() -> None:
    # n = 3: threshold = (2**32 - 3) % 3 = 1, so 0 is rejected and 1 accepted.
    rng = _Scripted([0, 0, 1])
    assert rng.below(3) == 1
    assert rng.drawn == 3
    # n = 2**32 - 1: threshold = 1 as well; r mod n maps 2**32 - 1 to 0.
    rng = _Scripted([2**32 - 1])
    assert rng.below(2**32 - 1) == 0


def test_below_one_consumes_one_draw() -> None:
    a, b = PCG32(7, 54), PCG32(7, 54)
    assert a.below(1) == 0
    b.next_u32()
    assert a.next_u32() == b.next_u32()


@pytest.mark.parametrize("n", [0, -1, 2**32 + 1])
def test_below_out_of_range_is_usage_error(n: int) -> None:
    with pytest.raises(UsageError):
        PCG32(1, 54).below(n)


def test_seed_arguments_wrap_modulo_2_pow_64() -> None:
    a, b = PCG32(42 + 2**64, 54 + 2**64), PCG32(42, 54)
    assert [a.next_u32() for _ in range(3)] == [b.next_u32() for _ in range(3)]

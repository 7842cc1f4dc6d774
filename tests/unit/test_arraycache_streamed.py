"""StreamedEntry: cache arrays written a block at a time before their key is known, named once it is."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ragtui.core.index.arraycache import StreamedEntry, cached_arrays, load_entry, store_streamed


def _never() -> dict[str, np.ndarray]:
    raise AssertionError("computed although the streamed entry should have been found")


def test_placed_arrays_are_what_a_later_load_finds(tmp_path):
    arrays = {"a": np.arange(10, dtype=np.int64), "w": np.linspace(0, 1, 7)}
    entry = StreamedEntry(tmp_path, "bm25", "docs")
    for key, value in arrays.items():
        entry.add(key, value.dtype, value.size, [value[:3], value[3:]])
    assert [p.name for p in tmp_path.iterdir()] == [f"bm25-docs-streamed.tmp{os.getpid()}"]
    assert load_entry(tmp_path, "bm25", "docs", "v1k-abc") is None  # not named yet: never read
    assert entry.place("v1k-abc")
    assert not entry.place("v1k-other")  # once only: the arrays are already named
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bm25-docs-v1k-abc"]
    got, from_cache = cached_arrays(tmp_path, "bm25", "docs", "v1k-abc", _never)
    assert from_cache
    assert all(np.array_equal(got[k], v) for k, v in arrays.items())


def test_an_unwritable_cache_costs_nothing_but_the_entry(tmp_path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")
    entry = StreamedEntry(blocked, "bm25", "docs")
    assert not entry.ok
    entry.add("a", np.int64, 3, [np.arange(3)])
    assert not entry.place("v1k-abc")  # no error, no entry
    assert blocked.read_text() == "a file where the cache folder should be"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


@pytest.mark.parametrize("dtype", [np.uint32, np.float64, np.int64, np.uint16])
@pytest.mark.parametrize("sizes", [[], [0], [5], [3, 0, 4], [1 << 16, 7]])
def test_a_column_counted_as_it_is_written_is_the_file_np_save_writes(tmp_path, dtype, sizes):
    """A column whose length is not known in advance gets the count into its header when it is closed."""
    blocks = [np.arange(n, dtype=np.int64).astype(dtype) for n in sizes]
    whole = np.concatenate(blocks) if blocks else np.zeros(0, dtype=dtype)
    entry = StreamedEntry(tmp_path, "stem", "docs")
    column = entry.column("a", dtype)
    for block in blocks:
        column.write(block)
    column.close()
    assert entry.place("k")
    np.save(tmp_path / "want.npy", whole, allow_pickle=False)
    assert (tmp_path / "stem-docs-k" / "a.npy").read_bytes() == (tmp_path / "want.npy").read_bytes()


def test_a_column_announced_with_a_count_must_get_that_many_values(tmp_path):
    entry = StreamedEntry(tmp_path, "stem", "docs")
    column = entry.column("a", np.uint32, 4)
    column.write(np.arange(3, dtype=np.uint32))
    with pytest.raises(ValueError, match="3 values written where 4 were announced"):
        column.close()
    assert not entry.place("k")  # what was written is gone
    assert list(tmp_path.iterdir()) == []


def _placing(values: np.ndarray, *, short: int = 0):
    """A placer that writes ``values`` back to front, one value a call (less ``short`` of the last values)."""

    def place(fd: int, start: int) -> int:
        written = 0
        for i in range(values.size - 1 - short, -1, -1):
            written += os.pwrite(fd, values[i : i + 1].tobytes(), start + i * values.itemsize)
        return written

    return place


def test_an_array_placed_out_of_order_is_stored_as_written_in_order(tmp_path):
    values = np.arange(9, dtype="<f4") * 1.5
    assert store_streamed(tmp_path, "ivf", "docs", "k1", {"packed": ((3, 3), np.dtype("<f4"), _placing(values))},
                          lambda: {"sums": np.arange(3, dtype=np.uint32)})
    got = load_entry(tmp_path, "ivf", "docs", "k1")
    assert got is not None and got["packed"].tobytes() == values.reshape(3, 3).tobytes()
    assert got["sums"].tolist() == [0, 1, 2]


def test_a_placer_that_falls_short_stores_nothing(tmp_path):
    values = np.arange(9, dtype="<f4")
    assert not store_streamed(tmp_path, "ivf", "docs", "k1",
                              {"packed": ((3, 3), np.dtype("<f4"), _placing(values, short=1))},
                              lambda: {"sums": np.arange(3, dtype=np.uint32)})
    assert load_entry(tmp_path, "ivf", "docs", "k1") is None
    assert list(tmp_path.iterdir()) == []  # nothing half written is left

"""StreamedEntry: cache arrays written a block at a time before their key is known, named once it is."""

from __future__ import annotations

import os

import numpy as np

from ragtui.core.index.arraycache import StreamedEntry, cached_arrays, load_entry


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

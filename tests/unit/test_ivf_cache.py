"""The IVF cache entry of a generation: built once ahead of readers, found without reading the vectors, never stale.

A generation its writer vouched for (``verified``) keys its IVF entry by that record's key, so a
fresh reader finds the lists, the calibrated nprobe and the list-ordered vectors (mapped) without
hashing vectors.f32; a changed or damaged vectors file has other stamps, hence no record, hence
the key of its bytes, which misses. A damaged list in the entry is never served.
"""

from __future__ import annotations

import mmap
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import ragtui.core.search.ivf_cache as ivf_cache
from ragtui.core.index import verified
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.sync import IndexWriter
from ragtui.core.search.flat import flat_search
from ragtui.core.search.ivf import IVFParams, build_ivf, calibration_text
from ragtui.core.search.ivf_cache import warm_ivf_cache
from ragtui.core.search.retriever import Retriever

from .fakes import HashEmbedder

PARAMS = IVFParams(nlist=12)


@pytest.fixture(autouse=True)
def writer_waits(monkeypatch):
    """A tiny index saves a reader too little for the writer to wait for a non-racy record: make it wait."""
    monkeypatch.setattr(verified, "reader_saving_ns", lambda *sizes: 10**9)


def publish(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    folder, art = tmp_path / "docs", tmp_path / "art"
    folder.mkdir(parents=True, exist_ok=True)
    topics = ["cats purr and sleep", "rust borrow checker lifetimes", "tar extracts gzip archives",
              "python asyncio event loop", "bread dough rises with yeast", "comets orbit the sun"]
    for i in range(60):
        words = " ".join(f"{topics[(i + j) % len(topics)]} note{i} part{j} {extra}" for j in range(8))
        (folder / f"d{i:02d}.md").write_text(words, encoding="utf-8")
    # A writer that leaves the lists to these tests' readers (a one-shot one makes them at publish).
    IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, derive_all=False).sync()
    return art / "rag" / "docs", art / "rag" / ".cache"


def mapped(a: np.ndarray) -> bool:
    """Whether ``a`` views a memory map (and holds no copy of its own)."""
    base = a
    while isinstance(base, np.ndarray):
        if base.flags.owndata:
            return False
        base = base.base
    return isinstance(base, mmap.mmap)


class Spy:
    """Counts builds and how each cache key was derived (from a generation's record, or from the bytes)."""

    def __init__(self, monkeypatch) -> None:
        self.builds = 0
        self.keys: list[str] = []
        real_build, real_key = ivf_cache._lists, ivf_cache.cache_key

        def build(*a, **kw):
            self.builds += 1
            return real_build(*a, **kw)

        def key(vectors, index_id, params, material, generation_key=None):
            self.keys.append("generation" if generation_key is not None else "bytes")
            return real_key(vectors, index_id, params, material, generation_key)

        monkeypatch.setattr(ivf_cache, "_lists", build)
        monkeypatch.setattr(ivf_cache, "cache_key", key)


def test_warm_entry_is_what_a_fresh_reader_uses_without_reading_the_vectors(tmp_path, monkeypatch):
    link, cache = publish(tmp_path)
    embedder = HashEmbedder()
    data = read_index(link)
    fresh = build_ivf(data.vectors, data.meta.index_id, PARAMS, texts=calibration_text(data, embedder))
    spy = Spy(monkeypatch)
    warmed = warm_ivf_cache(link, cache, embedder=embedder, params=PARAMS)
    assert spy.builds == 1 and spy.keys == ["generation"] and warmed.calibration_method == "spans"
    assert mapped(warmed._packed)  # the warm process too serves from the stored entry

    # A fresh reader: the same lists and nprobe, nothing built, the vectors neither hashed nor copied.
    retriever = Retriever.open(link, embedder=embedder, ivf_params=PARAMS, cache_dir=cache)
    assert retriever.data.stats["verified_entry"]
    lists = retriever.ivf()
    assert spy.builds == 1 and spy.keys == ["generation", "generation"]
    assert lists.from_cache and mapped(lists._packed)
    assert np.array_equal(lists.centroids, fresh.centroids) and np.array_equal(lists.rows, fresh.rows)
    assert lists.calibration == fresh.calibration and lists.calibration_method == "spans"
    for row in (0, 7, 31):
        q = data.vectors[row]
        assert lists.search(q, 10)[0].tolist() == fresh.search(q, 10)[0].tolist()
        every = lists.search(q, 10, nprobe=lists.nlist)
        assert every[0].tolist() == flat_search(data.vectors, q, 10)[0].tolist()

    # A reader without an embedder finds the same calibration (keyed by the span texts, not embedded again).
    bare = Retriever.open(link, ivf_params=PARAMS, cache_dir=cache).ivf()
    assert bare.calibration == fresh.calibration and bare.calibration_method == "spans" and spy.builds == 1


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_a_flipped_byte_in_the_vectors_misses_the_entry(tmp_path, monkeypatch, keep_mtime):
    link, cache = publish(tmp_path)
    embedder = HashEmbedder()
    warm_ivf_cache(link, cache, embedder=embedder, params=PARAMS)
    vectors = Path(os.path.realpath(link)) / "vectors.f32"
    st = os.stat(vectors)
    with open(vectors, "r+b") as f:  # the lowest mantissa bit of row 0's first value: still a unit row
        f.seek(0)
        byte = f.read(1)
        f.seek(0)
        f.write(bytes([byte[0] ^ 1]))
    if keep_mtime:
        os.utime(vectors, ns=(st.st_atime_ns, st.st_mtime_ns))  # the ctime still moves
    spy = Spy(monkeypatch)
    retriever = Retriever.open(link, embedder=embedder, ivf_params=PARAMS, cache_dir=cache)
    assert not retriever.data.stats["verified_entry"]
    lists = retriever.ivf()
    assert spy.keys == ["bytes"] and spy.builds == 1 and not lists.from_cache
    data = read_index(link)
    fresh = build_ivf(data.vectors, data.meta.index_id, PARAMS, texts=calibration_text(data, embedder))
    assert np.array_equal(lists.rows, fresh.rows) and np.array_equal(lists.centroids, fresh.centroids)
    q = data.vectors[0]
    assert lists.search(q, 10)[0].tolist() == fresh.search(q, 10)[0].tolist()
    # The entry now stored is keyed by those bytes: the next reader finds it (still hashing).
    again = Retriever.open(link, embedder=embedder, ivf_params=PARAMS, cache_dir=cache).ivf()
    assert again.from_cache and spy.keys == ["bytes", "bytes"]


def test_a_new_generation_never_finds_the_old_entry(tmp_path, monkeypatch):
    link, cache = publish(tmp_path)
    embedder = HashEmbedder()
    old = warm_ivf_cache(link, cache, embedder=embedder, params=PARAMS)
    publish(tmp_path, extra="changed")
    spy = Spy(monkeypatch)
    lists = Retriever.open(link, embedder=embedder, ivf_params=PARAMS, cache_dir=cache).ivf()
    assert spy.builds == 1 and not lists.from_cache
    assert not np.array_equal(lists._packed, old._packed)


def test_a_damaged_list_in_the_entry_is_never_served(tmp_path):
    link, cache = publish(tmp_path)
    embedder = HashEmbedder()
    warm = warm_ivf_cache(link, cache, embedder=embedder, params=PARAMS)
    (entry,) = cache.glob("ivf-docs-*")
    data = read_index(link)
    q = data.vectors[3]
    first = int(warm.probe(q, 1)[0])
    a, b = int(warm.offsets[first]), int(warm.offsets[first + 1])
    assert b > a
    # Negate that list's vectors in place: still unit rows, a plausible entry, but not this generation's.
    packed = np.load(entry / "packed.npy", mmap_mode="r+")
    packed[a:b] = -packed[a:b]
    packed.flush()
    del packed
    lists = Retriever.open(link, embedder=embedder, ivf_params=PARAMS, cache_dir=cache).ivf()
    assert lists.from_cache  # the entry's digest covers the lists, not the vectors: it loads
    expect = build_ivf(data.vectors, data.meta.index_id, PARAMS, calibrate=False)
    for nprobe in (1, 3, lists.nlist):
        got = lists.search(q, 10, nprobe=nprobe)
        want = expect.search(q, 10, nprobe=nprobe)
        assert got[0].tolist() == want[0].tolist() and np.array_equal(got[1], want[1])
    assert not entry.exists()  # removed: the next reader rebuilds it
    rebuilt = Retriever.open(link, embedder=embedder, ivf_params=PARAMS, cache_dir=cache).ivf()
    assert not rebuilt.from_cache and rebuilt.search(q, 10)[0].tolist() == expect.search(q, 10)[0].tolist()


def test_damaged_lists_or_calibration_entries_are_rebuilt(tmp_path):
    link, cache = publish(tmp_path)
    embedder = HashEmbedder()
    warm = warm_ivf_cache(link, cache, embedder=embedder, params=PARAMS)
    (entry,) = cache.glob("ivf-docs-*")
    (cal,) = cache.glob("ivfcal-docs-*")
    np.save(cal / "calibration.npy", np.array([10**6, 2.0, 1.0]))  # out of range
    rows = entry / "rows.npy"
    raw = rows.read_bytes()
    rows.write_bytes(raw[:-8] + bytes(8))
    lists = Retriever.open(link, embedder=embedder, ivf_params=PARAMS, cache_dir=cache).ivf()
    assert not lists.from_cache and lists.calibration == warm.calibration
    assert np.array_equal(lists.rows, warm.rows)
    shutil.rmtree(cache)
    alone = Retriever.open(link, embedder=embedder, ivf_params=PARAMS).ivf()  # no cache at all
    assert alone.calibration == warm.calibration and np.array_equal(alone.rows, warm.rows)


def test_a_reader_without_the_index_s_embedder_falls_back_to_sums_until_spans_are_cached(tmp_path):
    link, cache = publish(tmp_path)
    bare = Retriever.open(link, ivf_params=PARAMS, cache_dir=cache).ivf()
    assert bare.calibration_method == "sums"
    data = read_index(link)
    other = calibration_text(data, HashEmbedder(model="another-model"))
    assert other.embed is None  # an embedder of another model never calibrates this index
    spans = Retriever.open(link, embedder=HashEmbedder(), ivf_params=PARAMS, cache_dir=cache).ivf()
    assert spans.calibration_method == "spans" and spans.from_cache
    later = Retriever.open(link, ivf_params=PARAMS, cache_dir=cache).ivf()
    assert later.calibration_method == "spans" and later.calibration == spans.calibration


@pytest.mark.parametrize("stretch_rows", [1, 2, 7, 4096, 100_000])
@pytest.mark.parametrize("sizes", [[5, 0, 3, 9000, 0, 1], [0, 0, 4], [4096, 4096], [4095, 1, 4097, 0], [0]])
def test_the_placed_copy_and_its_sums_are_those_of_the_whole_copy(sizes, stretch_rows, tmp_path, monkeypatch):
    """The entry's vectors are written to their places a stretch of the index's rows at a time and each list's
    CRC-32 taken as they go by: the same bytes and sums as the list-ordered copy made at once, whatever the
    lists' sizes against the stretches (empty lists, a stretch of one row, one stretch for everything)."""
    from ragtui.core.search import ivf_cache
    from ragtui.core.search.ivf import _group
    from ragtui.core.search.ivf_cache import _list_sums, _packed_placer

    monkeypatch.setattr(ivf_cache, "_PLACE_BYTES", stretch_rows * 3 * 4)
    n = sum(sizes)
    rng = np.random.default_rng(len(sizes) + stretch_rows)
    v = rng.standard_normal((n, 3)).astype(np.float32)
    labels = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))
    offsets, rows = _group(labels, len(sizes))
    assert np.diff(offsets).tolist() == sizes
    sums = np.zeros(len(sizes), dtype=np.uint32)
    with open(tmp_path / "packed", "wb") as f:
        f.write(b"head")
        f.flush()
        assert _packed_placer(v, rows, offsets, sums)(f.fileno(), 4) == v.nbytes
    assert (tmp_path / "packed").read_bytes() == b"head" + v[rows].tobytes()
    assert sums.tolist() == _list_sums(v[rows], offsets).tolist()


@pytest.mark.parametrize("stretch_rows", [1, 3, 64, 10_000])
@pytest.mark.parametrize("picked", [[], [0], [4, 5, 6], [0, 63, 64, 127, 199], list(range(200))])
def test_a_gather_a_stretch_at_a_time_is_the_whole_gather(picked, stretch_rows, tmp_path, monkeypatch):
    """The training rows are copied out of the mapped vectors a stretch at a time, each stretch's pages let go:
    the same rows as one gather, whatever the stretches against the rows."""
    from ragtui.core.search import ivf

    monkeypatch.setattr(ivf, "_GATHER_BYTES", stretch_rows * 5 * 4)
    v = np.random.default_rng(7).standard_normal((200, 5)).astype(np.float32)
    np.save(tmp_path / "v.npy", v)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    rows = np.array(picked, dtype=np.int64)
    got = ivf.gather_ascending(mapped, rows)
    assert got.dtype == np.float32 and got.shape == (len(picked), 5)
    assert got.tobytes() == v[rows].tobytes()

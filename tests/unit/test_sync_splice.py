"""The incremental publish: after any edits, its four files equal a full rebuild's, byte for byte."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtui.core.index import leb128
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_write import _gaps
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.assemble import fingerprint_keys
from ragtui.core.ingest.sync import IndexWriter, load_state, prepare, sync
from tests.files import write

from .fakes import ChunkCountingEmbedder, HashEmbedder


def whole_layout(post_doc, offsets, post_tf):
    """Each posting's gap and varint bytes over the whole arrays at once: what the stepped layout must equal."""
    gap = _gaps(np.asarray(post_doc, dtype=np.int64), np.asarray(offsets, dtype=np.int64))
    return gap, leb128.sizes(gap) + leb128.sizes(np.asarray(post_tf))

NAMES = ["a.md", "b.txt", "sub/c.md", "sub/deep/d.md", "z.md", "Ωmega.md", "sub/e f.md"]
WORDS = ["cat", "dog", "σοφία", "東京", "mat", "the", "park", "x1", "bird", "ÉCOLE", "zebra", "alpha"]


def run(folder, art, **kw):
    return sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, **kw)


def index_bytes(art: Path, index_id: str) -> dict[str, bytes]:
    base = art / "rag" / index_id
    out = {name: (base / name).read_bytes() for name in ("docs.jsonl", "vectors.f32", "bm25.idx")}
    meta = json.loads((base / "meta.json").read_bytes())
    meta.pop("created_at")
    out["meta.json"] = json.dumps(meta, sort_keys=True).encode()
    return out


def assert_same_as_rebuild(folder: Path, art: Path, scratch: Path) -> None:
    shutil.rmtree(scratch, ignore_errors=True)
    run(folder, scratch)
    assert index_bytes(art, folder.name) == index_bytes(scratch, folder.name)
    # The decoded BM25 arrays the writer left for readers are the file's own decoding.
    cache = art / "rag" / ".cache"
    base = art / "rag" / folder.name
    meta = json.loads((base / "meta.json").read_bytes())
    key = BM25Index.cache_key((base / "bm25.idx").read_bytes(), meta["bm25"]["k1"], meta["bm25"]["b"])
    assert (cache / f"bm25-{folder.name}-{key}" / "complete").is_file(), "the writer left no cache entry for readers"
    data = read_index(base, cache_dir=cache)
    fresh = BM25Index.decode((art / "rag" / folder.name / "bm25.idx").read_bytes(), data.meta.k1, data.meta.b)
    for key, value in fresh.to_arrays().items():
        assert np.array_equal(np.asarray(data.bm25.to_arrays()[key]), value), key


text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=40).map(" ".join)
step = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), text),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("rmdir"), st.just("sub"), st.just("")),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.dictionaries(st.sampled_from(NAMES), text, min_size=1), steps=st.lists(step, min_size=1, max_size=6),
       by_paths=st.booleans(), one_writer=st.booleans())
def test_splice_equals_full_rebuild(tmp_path_factory, start, steps, by_paths, one_writer):
    """``one_writer``: every sync by one IndexWriter, which starts each splice from what it carried."""
    root = tmp_path_factory.mktemp("splice")
    folder, art, scratch = root / "docs", root / "art", root / "scratch"
    for name, body in start.items():
        write(folder / name, body)
    if one_writer:
        writer = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
        writer.sync()
        if by_paths:
            writer.prepare(warm_up=True)
    else:
        run(folder, art)
    for kind, name, arg in steps:
        path = folder / name
        touched = [path]
        if kind == "write":
            write(path, arg)
        elif kind == "delete" and path.exists():
            path.unlink()
        elif kind == "rename" and path.exists() and name != arg:
            (folder / arg).parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, folder / arg)
            touched.append(folder / arg)
        elif kind == "rmdir":
            shutil.rmtree(path, ignore_errors=True)
        paths = touched if by_paths else None
        report = writer.sync(paths) if one_writer else run(folder, art, paths=paths)
        if report.published:
            assert report.incremental
        assert_same_as_rebuild(folder, art, scratch)


def test_one_edit_reuses_everything_else(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(30):
        write(folder / f"f{i:02d}.md", f"document {i} " + "cat dog park " * (i + 3))
    run(folder, art)
    write(folder / "f07.md", "document seven rewritten about zebras")
    emb = ChunkCountingEmbedder()  # the publish's IVF calibration embeds pseudo-queries too: not counted here
    report = sync(folder, artifacts=art, embedder=emb, max_tokens=12, overlap=3, paths=[folder / "f07.md"])
    assert report.incremental and report.changed == ["docs/f07.md"]
    assert emb.embedded == ["document seven rewritten about zebras"]
    assert report.chunks_added == 1 and report.chunks_removed > 0
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")


def test_a_touched_index_file_is_not_spliced(tmp_path):
    """Anything but the writer's own last generation is read and checked in full instead."""
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "alpha cat")
    write(folder / "b.md", "beta dog")
    run(folder, art)
    vectors = art / "rag" / "docs" / "vectors.f32"
    os.utime(vectors, ns=(1, 1))
    write(folder / "b.md", "beta dog edited")
    report = run(folder, art)
    assert report.published and not report.incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")
    # The full publish records the new generation's files, so the next one splices again.
    assert load_state(art, "docs")["index_files"]["vectors.f32"][0] == vectors.stat().st_size
    write(folder / "a.md", "alpha cat edited")
    assert run(folder, art).incremental


def test_a_damaged_previous_index_is_rebuilt_not_carried(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "alpha cat")
    write(folder / "b.md", "beta dog")
    run(folder, art)
    docs = art / "rag" / "docs" / "docs.jsonl"
    raw = docs.read_bytes()
    docs.write_bytes(raw.replace(b"alpha", b"ALPHA"))  # same size, fingerprint now wrong
    write(folder / "b.md", "beta dog edited")
    report = run(folder, art)
    assert report.published and not report.incremental
    assert b"ALPHA" not in docs.read_bytes()


def test_the_next_sync_starts_from_what_this_writer_published(tmp_path, monkeypatch):
    """A writer object keeps the generation it just published (maps, postings, state) for its next sync."""
    from ragtui.core.ingest import state_store as state_module
    from ragtui.core.ingest import writer as writer_module

    opened, read = [], []
    real_open, real_read = writer_module.open_generation, state_module._read
    monkeypatch.setattr(writer_module, "open_generation", lambda *a: opened.append(a[0]) or real_open(*a))
    monkeypatch.setattr(state_module, "_read", lambda *a: read.append(a[0]) or real_read(*a))
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(5):
        write(folder / f"f{i}.md", f"file {i} cat dog " * (i + 2))
    writer = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    writer.sync()
    for i in range(4):
        write(folder / "f2.md", f"edit {i} " + "zebra park " * i)
        report = writer.sync([folder / "f2.md"])
        assert report.incremental
        assert_same_as_rebuild(folder, art, tmp_path / "scratch")
        # What it carries to the next sync: the rows and fingerprint keys of the generation published.
        kept = writer._generation
        assert kept is not None and kept.keys is not None
        assert np.array_equal(kept.keys, fingerprint_keys(kept.fingerprints))
        assert kept.rows.n_rows == kept.fingerprints.size == report.chunks_total
    # The state was read once (before the first build) and the generation opened once (after it, by the
    # first splice): every later sync started from what the one before it published.
    assert read.count(art) == 1 and opened.count(art / "rag" / "docs") == 1
    # Lost state on disk: the writer's own copy is not trusted over it.
    (art / "rag" / ".state" / "docs" / "state.bin").unlink()
    write(folder / "f3.md", "rewritten after the state was lost")
    report = writer.sync()
    assert report.published and not report.incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")
    # Another writer publishes in between: this one's memory no longer matches the files, and is not used.
    write(folder / "f1.md", "written by another process")
    assert run(folder, art).incremental
    write(folder / "f4.md", "and then by this writer again")
    assert writer.sync([folder / "f4.md"]).incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")


def test_prepare_opens_an_index_another_process_published(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "alpha cat")
    write(folder / "b.md", "beta dog")
    run(folder, art)  # another writer
    writer = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    assert writer._generation is None
    assert prepare(art, "docs")
    assert writer.prepare(warm_up=True) and writer._generation is not None
    write(folder / "b.md", "beta dog edited")
    assert writer.sync([folder / "b.md"]).incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")
    assert not prepare(tmp_path / "nowhere", "docs")
    nowhere = IndexWriter(folder, artifacts=tmp_path / "nowhere", embedder=HashEmbedder())
    assert not nowhere.prepare()


def test_prepare_skips_the_warm_up_when_work_is_waiting(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "alpha cat")
    run(folder, art)
    busy = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    assert busy.prepare(warm_up=True, should_stop=lambda: True)
    assert busy._generation is not None and busy._generation.keys is None  # opened, not warmed
    idle = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    assert idle.prepare(warm_up=True, should_stop=lambda: False)
    assert idle._generation is not None and idle._generation.keys is not None


def test_the_warm_up_builds_the_tokenizers_document_tables(tmp_path):
    """The first save after start used to build them (0.4 s with wordllama's tokenizer) inside its chunk step."""
    from ragtui.core.embedders.wordllama import WordLlamaEmbedder

    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "alpha cat")
    embedder = WordLlamaEmbedder()
    embedder.tokenizer._splitter_ready = False  # as in a new process (the loaded tokenizer is shared)
    embedder.tokenizer._splitter = None
    run(folder, art)
    writer = IndexWriter(folder, artifacts=art, embedder=embedder)
    assert writer.prepare(warm_up=True)
    assert embedder.tokenizer._splitter_ready and embedder.tokenizer._splitter is not None


def _file_backed(a: object) -> bool:
    """Whether an array's memory is a map of a file (its base chain ends in an mmap)."""
    import mmap

    while a is not None:
        if isinstance(a, mmap.mmap):
            return True
        a = a.obj if isinstance(a, memoryview) else getattr(a, "base", None)
    return False


def test_a_long_running_writer_keeps_maps_of_the_files_it_wrote(tmp_path):
    """Between saves the writer holds maps of bm25.idx and of the readers' cache entry, not their bytes in memory."""
    import mmap


    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(6):
        write(folder / f"f{i}.md", f"file {i} cat dog " * (i + 2))
    writer = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    writer.sync()
    write(folder / "f2.md", "edited zebra park")
    assert writer.sync([folder / "f2.md"]).incremental
    gen = writer._generation
    assert gen is not None and gen.intact() and gen.cached
    assert isinstance(gen.bm25_raw, mmap.mmap)
    assert bytes(gen.bm25_raw) == (art / "rag" / "docs" / "bm25.idx").read_bytes()
    for name, value in gen.data.bm25.to_arrays().items():
        assert name == "scalars" or _file_backed(value), name
    write(folder / "f3.md", "and another edit")
    assert writer.sync([folder / "f3.md"]).incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")


def test_a_cache_file_swapped_under_the_writer_is_not_spliced_from(tmp_path, monkeypatch):
    """A file of the cache entry the writer maps, replaced (a FIFO, another inode) or changed: the writer opens the
    published generation again instead of splicing from what it mapped."""
    from ragtui.core.ingest import writer as writer_module

    opened = []
    real_open = writer_module.open_generation
    monkeypatch.setattr(writer_module, "open_generation", lambda *a: opened.append(a[0]) or real_open(*a))
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(4):
        write(folder / f"f{i}.md", f"file {i} cat dog " * (i + 2))
    writer = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    writer.sync()
    for i, swap in enumerate(("fifo", "inode", "in place")):
        write(folder / "f1.md", f"edit {i} zebra")
        assert writer.sync([folder / "f1.md"]).incremental
        gen = writer._generation
        assert gen is not None and gen.intact()
        path = Path(next(p for p, _ in gen.cached if p.endswith("post_doc.npy")))
        content = path.read_bytes()
        if swap == "in place":
            # Zeros over every posting's chunk number, in the file mapped (a splice from it would be wrong);
            # its mtime set to another time, as a coarse clock might have left it.
            with open(path, "r+b") as f:
                f.seek(len(content) - 4 * gen.data.bm25.post_doc.size)
                f.write(bytes(4 * gen.data.bm25.post_doc.size))
            os.utime(path, ns=(1, 1))
        else:
            path.unlink()
            if swap == "fifo":
                os.mkfifo(path)
            else:
                path.write_bytes(content)
        assert not writer._generation.intact()
        before = len(opened)
        write(folder / "f2.md", f"and then {i} a second edit")
        assert writer.sync([folder / "f2.md"]).incremental
        assert len(opened) == before + 1
        assert_same_as_rebuild(folder, art, tmp_path / "scratch")


def test_the_warm_up_holds_a_few_bytes_a_chunk(tmp_path):
    """The warm-up reads the pages a splice reads and works out the fingerprints' keys: its peak is the keys (8 bytes
    a chunk), not a splice's temporaries (tens of bytes a posting) nor anything a posting."""
    import random
    import tracemalloc

    from ragtui.core.ingest import splice

    rng = random.Random(5)
    folder, art = tmp_path / "docs", tmp_path / "art"
    vocab = [f"w{i}" for i in range(3000)]
    for i in range(400):
        write(folder / f"f{i}.md", " ".join(rng.choice(vocab) for _ in range(400)))
    run(folder, art)
    writer = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    assert writer.prepare(warm_up=False)
    gen = writer._generation
    n_post, n_chunks = int(gen.data.bm25.post_doc.size), gen.data.n_chunks
    assert n_post > 100_000
    tracemalloc.start()
    try:
        splice.warm(gen)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert gen.keys is not None and gen.keys.size == n_chunks
    assert peak < 40 * n_chunks < 5 * n_post, (peak, n_chunks, n_post)  # the layout kept was 5 bytes a posting
    write(folder / "f7.md", "an edit after the warm-up")
    assert writer.sync([folder / "f7.md"]).incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")


def test_posting_bytes_equal_the_whole_layout_by_stretch_and_by_position():
    from ragtui.core.index.bm25_splice import PostingBytes
    from ragtui.core.index.bm25_write import build_postings

    rng = np.random.default_rng(3)
    docs = [[f"t{int(x)}" for x in rng.integers(0, 40, size=int(rng.integers(0, 30)))] for _ in range(300)]
    docs[7] = ["far"] * 200  # a tf that takes two varint bytes
    docs[290] = ["t1"]  # a gap of hundreds of chunks: two varint bytes
    p = build_postings(docs)
    gap, size = whole_layout(p.post_doc, p.offsets, p.post_tf)
    for post_doc in (np.asarray(p.post_doc, dtype=np.uint32), np.asarray(p.post_doc, dtype=np.int64)):
        layout = PostingBytes(post_doc, p.offsets, p.post_tf)
        n = layout.n
        for lo, hi in [(0, n), (0, 1), (n - 1, n), (5, 5), *((int(a), int(b)) for a, b in np.sort(
                rng.integers(0, n + 1, size=(40, 2)), axis=1))]:
            assert np.array_equal(layout.gaps(lo, hi).astype(np.int64), gap[lo:hi]), (lo, hi)
            assert np.array_equal(layout.sizes(lo, hi), size[lo:hi]) and layout.sizes(lo, hi).dtype == np.uint8
        at = rng.integers(0, n, size=500)
        assert np.array_equal(layout.gap_at(at), gap[at]) and np.array_equal(layout.size_at(at), size[at])
        firsts = np.asarray(p.offsets[:-1], dtype=np.int64)
        assert np.array_equal(layout.gap_at(firsts), np.asarray(post_doc)[firsts].astype(np.int64))


def _resident_kib(path: str) -> int:
    """The resident KiB of this process's maps of the file ``path`` (/proc/self/smaps)."""
    total, mine = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:
                mine = len(head) >= 6 and head[5] == path
            elif mine and line.startswith("Rss:"):
                total += int(head[1])
    return total


def test_a_writer_warmed_up_for_its_next_save_holds_none_of_the_mapped_pages_resident(tmp_path):
    """The warm-up reads every page a splice reads into the page cache, then lets the process's maps of them go:
    between saves a long-running writer is not the size of its index's postings."""
    import mmap
    import random

    if not os.path.exists("/proc/self/smaps"):
        pytest.skip("reads the process's maps from /proc")
    rng = random.Random(3)
    words = [f"w{i}" for i in range(4000)]
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(400):
        write(folder / f"d{i:03d}.md", " ".join(rng.choice(words) for _ in range(600)))
    writer = IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=64, overlap=8,
                         derive_behind=True)
    writer.sync()
    writer.wait_derived()
    writer._generation = None  # as a writer just started: it opens the generation and warms it up
    assert writer.prepare(warm_up=True)
    gen = writer._generation
    assert gen is not None and gen.cached, "the writer maps the readers' cache entry of its BM25 arrays"
    files = [p for p, _ in gen.cached if p.endswith(("post_doc.npy", "post_tf.npy"))]
    files.append(os.path.join(gen.stamp.dir, "bm25.idx"))
    assert len(files) == 3 and all(os.path.getsize(p) > 256 * 1024 for p in files)
    assert all(_resident_kib(p) <= 64 for p in files), [_resident_kib(p) for p in files]
    # Let go, not lost: the values read again are the entry's, mapped back.
    assert np.array_equal(np.asarray(gen.data.bm25.post_doc), np.load(files[0]))
    assert _resident_kib(files[0]) * 1024 >= os.path.getsize(files[0]) - 2 * mmap.PAGESIZE

"""Derived structures stored by the writer at publish time: the document-level BM25 a fresh reader maps.

Every comparison is exact: the hits and scores of the mapped entry equal
those of the arrays built in the process (no cache at all).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.index import verified
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.sync import sync
from ragtui.core.search import docaware, stemmed
from ragtui.core.search.docaware import DocLexical, doc_groups_of, doclex_key
from ragtui.core.search.retriever import Retriever

from .fakes import HashEmbedder
from .test_stem_blocks import StemBuilds

QUERIES = ("cats and dogs", "otters river", "document 3", "the quick fox", "nothing matches zzz")
MODES = ("bm25doc", "bm25stem", "hybrid")


@pytest.fixture(autouse=True)
def writer_waits(monkeypatch):
    """A tiny index saves a reader too little for the writer to wait for a non-racy verified entry: make it wait."""
    monkeypatch.setattr(verified, "reader_saving_ns", lambda *sizes: 10**9)


def embedder() -> HashEmbedder:
    return HashEmbedder()


def run(folder: Path, art: Path):
    return sync(folder, artifacts=art, embedder=embedder(), max_tokens=12, overlap=3)


def make_docs(folder: Path, n: int = 9, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        words = "cats and dogs" if i % 2 else "otters by the river and a quick fox"
        (folder / f"d{i}.md").write_text(f"document {i} about {words} {extra} " * (i + 2), encoding="utf-8")


@pytest.fixture()
def published(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    make_docs(folder)
    run(folder, art)
    return folder, art / "rag" / "docs", art / "rag" / ".cache"


def doclex_entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.name.startswith("doclex-docs-"))


def results(r: Retriever, modes: tuple[str, ...] = MODES) -> dict[tuple[str, str], list[tuple[int, float]]]:
    return {(m, q): [(h.row, h.score) for h in r.search(q, mode=m, k=20)] for m in modes for q in QUERIES}


def rebuilt(link: Path) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """The results with nothing cached: every derived array built in this process."""
    return results(Retriever.open(link, embedder=embedder(), cache_dir=None))


class Builds:
    """How often the document-level BM25 was built and docs.jsonl grouped into documents in this process."""

    def __init__(self, monkeypatch) -> None:
        self.builds = self.groupings = 0
        real_build, real_groups = DocLexical.build.__func__, docaware.doc_groups_of

        def build(cls, *a, **kw):
            self.builds += 1
            return real_build(cls, *a, **kw)

        def groups(*a):
            self.groupings += 1
            return real_groups(*a)

        monkeypatch.setattr(DocLexical, "build", classmethod(build))
        monkeypatch.setattr(docaware, "doc_groups_of", groups)


def test_the_writer_stores_the_entry_a_fresh_reader_maps_with_identical_results(published, monkeypatch):
    folder, link, cache = published
    for round_ in range(2):  # the full publish above, then an incremental one
        (entry,) = [e for e in doclex_entries(cache) if e.name.endswith(read_index(link, full=False, cache_dir=cache)
                                                                          .stats["doclex_key"])]
        with monkeypatch.context() as patch:
            builds = Builds(patch)
            reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
            lex = reader.doc_lexical()
        assert builds.builds == 0 and builds.groupings == 0, "built or grouped although the writer stored it"
        assert isinstance(lex.docs.weights, np.memmap) and isinstance(lex.doc_of_row, np.memmap)
        assert lex.key is not None and entry.name.endswith(lex.key)
        want = rebuilt(link)
        assert results(reader) == want
        fresh = DocLexical.build(reader.data.bm25, doc_groups_of(reader.data.records))
        for name in ("doc_len", "df", "offsets", "post_doc", "post_tf", "weights", "term_blob", "term_key"):
            assert np.array_equal(getattr(lex.docs, name), getattr(fresh.docs, name)), name
        assert lex.docs.avgdl == fresh.docs.avgdl and lex.docs.n_docs == fresh.docs.n_docs
        if round_ == 0:
            (folder / "d2.md").write_text("fresh words about otters and the river " * 4, encoding="utf-8")
            report = run(folder, link.parent.parent)
            assert report.incremental and "derive" in report.seconds


def test_without_the_writer_s_record_the_reader_finds_the_entry_by_its_key(published, monkeypatch):
    """No verified entry (racy, or gone): the reader groups docs.jsonl, computes the key, maps the entry."""
    _, link, cache = published
    for p in cache.iterdir():
        if p.name.startswith("verified-"):
            shutil.rmtree(p)
    with monkeypatch.context() as patch:
        builds = Builds(patch)
        reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
        assert reader.data.stats["doclex_key"] is None
        lex = reader.doc_lexical()
    assert builds.builds == 0 and builds.groupings == 1
    assert isinstance(lex.docs.weights, np.memmap)
    assert results(reader) == rebuilt(link)


def test_a_reader_without_any_entry_builds_it_once_and_stores_it(published, monkeypatch):
    _, link, cache = published
    for p in doclex_entries(cache):
        shutil.rmtree(p)
    modes = ("bm25doc",)  # (hybrid defaults to the stemmed arm, which builds a document-level BM25 of its own)
    want = results(Retriever.open(link, embedder=embedder(), cache_dir=None), modes)
    builds = Builds(monkeypatch)
    first = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    assert results(first, modes) == want and builds.builds == 1
    assert len(doclex_entries(cache)) == 1
    second = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    assert results(second, modes) == want and builds.builds == 1


@pytest.mark.parametrize("damage", ["cut", "missing", "rows", "marker", "weights-shape", "foreign"])
def test_a_damaged_entry_is_built_again_never_read(published, damage):
    _, link, cache = published
    want = rebuilt(link)
    (entry,) = doclex_entries(cache)
    if damage == "cut":
        raw = (entry / "weights.npy").read_bytes()
        (entry / "weights.npy").write_bytes(raw[: len(raw) - 16])
    elif damage == "missing":
        (entry / "post_doc.npy").unlink()
    elif damage == "rows":  # the documents of another grouping: they no longer hash to the key
        rows = np.load(entry / "rows.npy")
        rows[-1] = rows[-1] + 1
        np.save(entry / "rows.npy", rows)
    elif damage == "marker":
        (entry / "complete").unlink()
    elif damage == "weights-shape":
        np.save(entry / "weights.npy", np.zeros(3, dtype=np.float64))
    else:  # another index's entry under this key: its arrays do not fit these chunks
        np.save(entry / "offsets.npy", np.zeros(2, dtype=np.int64))
    reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    assert results(reader) == want, damage
    # The damaged entry was replaced by a sound one: the next reader maps it.
    again = Retriever.open(link, embedder=embedder(), cache_dir=cache).doc_lexical()
    assert isinstance(again.docs.weights, np.memmap)
    assert results(Retriever.open(link, embedder=embedder(), cache_dir=cache)) == want


def test_a_changed_index_file_never_reuses_the_entry(published, monkeypatch):
    """bm25.idx rewritten with other content: another chunk key, so another document-level key."""
    folder, link, cache = published
    before = read_index(link, full=False, cache_dir=cache).stats
    (folder / "d4.md").write_text("otters " * 30, encoding="utf-8")
    run(folder, link.parent.parent)
    after = read_index(link, full=False, cache_dir=cache).stats
    assert after["bm25_key"] != before["bm25_key"] and after["doclex_key"] != before["doclex_key"]
    reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    assert reader.doc_lexical().key == after["doclex_key"]
    assert results(reader) == rebuilt(link)


def test_the_key_covers_the_chunk_index_and_the_documents():
    rows = np.array([0, 0, 1, 2, 2], dtype=np.int64)
    key = doclex_key("v1k-" + "a" * 40, rows)
    assert key != doclex_key("v1k-" + "b" * 40, rows)
    assert key != doclex_key("v1k-" + "a" * 40, np.array([0, 1, 1, 2, 2], dtype=np.int64))
    assert key == doclex_key("v1k-" + "a" * 40, rows.copy())


def test_the_stemmed_arm_is_found_without_hashing_its_arrays(published, monkeypatch):
    _, link, cache = published
    want = Retriever.open(link, embedder=embedder(), cache_dir=None).search("otters rivers", mode="bm25stem", k=20)
    Retriever.open(link, embedder=embedder(), cache_dir=cache).stem_lexical()  # builds and stores the arm
    hashed = []
    real = stemmed.cache_key
    monkeypatch.setattr(stemmed, "cache_key", lambda *a: hashed.append(1) or real(*a))
    reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    arm = reader.stem_lexical()
    assert hashed == [] and isinstance(arm.chunks.weights, np.memmap)
    got = reader.search("otters rivers", mode="bm25stem", k=20)
    assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in want]


def test_entries_are_evicted_and_removed_with_the_index(published):
    from ragtui.core.ingest.remove import remove_index

    folder, link, cache = published
    for i in range(3):
        make_docs(folder, 9, f"round{i}")
        run(folder, link.parent.parent)
    entries = doclex_entries(cache)
    current = read_index(link, full=False, cache_dir=cache).stats["doclex_key"]
    assert len(entries) == 2 and any(e.name.endswith(current) for e in entries)
    Retriever.open(link, embedder=embedder(), cache_dir=cache).stem_lexical()
    remove_index(link.parent.parent, "docs")
    assert [p.name for p in cache.iterdir() if p.name.startswith(("doclex-", "stem-", "bm25-", "verified-"))] == []


def test_what_killed_writers_and_readers_left_in_the_cache_goes_with_the_index(tmp_path):
    """Entries written before their key was known, by a process killed before it named them, are the index's
    too; another index's, whose name starts the same, are not."""
    from ragtui.core.ingest.remove import cache_entries

    cache = tmp_path / "rag" / ".cache"
    mine = ["bm25-docs-streamed.tmp41", "bm25-docs-decoded140213.tmp41", "doclex-docs-streamed.tmp7",
            "stem-docs-streamed.tmp7", "ivf-docs-" + "a" * 32 + ".tmp9"]
    theirs = ["bm25-docs-2-streamed.tmp41", "stem-docs-2-decoded3.tmp7", "bm25-docs-streamed",
              "bm25-docs-decoded.tmp41", "doclex-docs-streamed.tmpx"]
    for name in mine + theirs:
        (cache / name).mkdir(parents=True)
    assert [p.name for p in cache_entries(tmp_path, "docs")] == sorted(mine)


def test_an_unwritable_cache_costs_the_reader_time_not_the_publish(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    make_docs(folder)
    (art / "rag").mkdir(parents=True)
    (art / "rag" / ".cache").write_text("not a folder")
    report = run(folder, art)
    assert report.published
    link = art / "rag" / "docs"
    reader = Retriever.open(link, embedder=embedder(), cache_dir=art / "rag" / ".cache")
    assert results(reader) == rebuilt(link)
    assert os.path.isfile(art / "rag" / ".cache")


def long_running_writer(tmp_path: Path):
    """The folder, the index's link and cache, and a writer as the watch agent holds it, after its first save."""
    from ragtui.core.ingest.writer import IndexWriter

    folder, art = tmp_path / "docs", tmp_path / "art"
    make_docs(folder)
    writer = IndexWriter(folder, artifacts=art, embedder=embedder(), max_tokens=12, overlap=3, derive_behind=True)
    writer.sync()
    writer.wait_derived()
    return folder, art / "rag" / "docs", art / "rag" / ".cache", writer


def test_a_long_running_writer_stores_the_stemmed_arm_once_a_reader_used_it(tmp_path, monkeypatch):
    folder, link, cache, writer = long_running_writer(tmp_path)
    assert not [p for p in cache.iterdir() if p.name.startswith("stem-")]  # nobody used it: not built
    Retriever.open(link, embedder=embedder(), cache_dir=cache).search("otters", mode="hybrid", k=5)
    (folder / "d5.md").write_text("rivers full of otters " * 5, encoding="utf-8")
    writer.sync()
    writer.wait_derived()
    # The publish's Derivation (which holds the chunk index's arrays as built in memory) is let go once done.
    import gc

    from ragtui.core.ingest.derive import Derivation

    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, Derivation)]
    builds = StemBuilds(monkeypatch)
    reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    got = reader.search("otters rivers", mode="bm25stem", k=20)
    assert (builds.whole, builds.blocks) == (0, 0) and isinstance(reader.stem_lexical().chunks.weights, np.memmap)
    monkeypatch.undo()
    want = Retriever.open(link, embedder=embedder(), cache_dir=None).search("otters rivers", mode="bm25stem", k=20)
    assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in want]


def test_a_long_running_writer_keeps_the_two_newest_stemmed_entries(tmp_path):
    """Each save stores a stemmed entry once a reader used the arm; the entries of older generations go."""
    folder, link, cache, writer = long_running_writer(tmp_path)
    Retriever.open(link, embedder=embedder(), cache_dir=cache).search("otters", mode="bm25stem", k=5)
    counts = []
    for i in range(5):
        (folder / "d1.md").write_text(f"round {i} of otters and rivers " * 5, encoding="utf-8")
        assert writer.sync().published
        writer.wait_derived()
        counts.append(len([p for p in cache.iterdir() if p.name.startswith("stem-docs-")]))
    assert max(counts) <= 3 and counts[-1] >= 1
    reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    assert isinstance(reader.stem_lexical().chunks.weights, np.memmap)  # the newest generation's entry is kept


def test_a_long_running_writer_derives_behind_and_the_newest_generation_gets_its_entry(tmp_path):
    from ragtui.core.ingest.writer import IndexWriter

    folder, art = tmp_path / "docs", tmp_path / "art"
    make_docs(folder)
    writer = IndexWriter(folder, artifacts=art, embedder=embedder(), max_tokens=12, overlap=3, derive_behind=True)
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    for i in range(3):  # saves one after another, each published while the last one's entries may still be building
        (folder / "d1.md").write_text(f"round {i} of otters and cats " * 5, encoding="utf-8")
        assert writer.sync().published
    writer.wait_derived()
    key = read_index(link, full=False, cache_dir=cache).stats["doclex_key"]
    assert key is not None and (cache / f"doclex-docs-{key}" / "complete").is_file()
    assert len(doclex_entries(cache)) <= 2 and not [p for p in cache.iterdir() if ".tmp" in p.name]
    reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    assert isinstance(reader.doc_lexical().docs.weights, np.memmap)
    assert results(reader) == rebuilt(link)


def _entry_arrays(cache: Path, kind: str, key: str) -> dict[str, np.ndarray]:
    return {p.stem: np.load(p) for p in (cache / f"{kind}-docs-{key}").glob("*.npy")}


def test_a_long_running_writers_entries_equal_whole_builds_array_for_array(tmp_path, monkeypatch):
    """Edits that add, replace and remove chunks, documents and words: at every save the writer writes the
    document-level and stemmed entries a block at a time (never a whole build in memory), and each equals, array
    for array, what a whole build from the generation's own files gives."""
    from ragtui.core.ingest.writer import IndexWriter

    folder, art = tmp_path / "docs", tmp_path / "art"
    make_docs(folder)
    writer = IndexWriter(folder, artifacts=art, embedder=embedder(), max_tokens=12, overlap=3)
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    writer.sync()
    Retriever.open(link, embedder=embedder(), cache_dir=cache).search("otters", mode="hybrid", k=5)  # the arm in use
    (folder / "d2.md").write_text("a first edit of otters " * 3, encoding="utf-8")
    writer.sync()
    builds = Builds(monkeypatch)
    real_stem = stemmed.StemLexical.build.__func__
    stem_builds = StemBuilds(monkeypatch)
    edits = [
        ("d3.md", "otters otters and a river " * 9),  # more chunks: every later row moves
        ("d0.md", "documents made shorter"),  # fewer chunks
        ("new1.md", "a new document of zebras and quokkas " * 4),  # a document and words never seen
        ("d5.md", None),  # a document gone, with the words only it had
        ("d8.md", "cats and dogs and the quick fox " * 6),
    ]
    for name, text in edits:
        if text is None:
            (folder / name).unlink()
        else:
            (folder / name).write_text(text, encoding="utf-8")
        builds.builds = stem_builds.whole = stem_builds.blocks = 0
        assert writer.sync().published
        # Written in blocks, not built whole (the whole builds below are the test's).
        assert builds.builds == 0 and (stem_builds.whole, stem_builds.blocks) == (0, 1)
        data = read_index(link, full=True, cache_dir=None)
        groups = doc_groups_of(data.records)
        built = DocLexical.build(data.bm25, groups)
        key = doclex_key(data.bm25.cache_key(Path(link, "bm25.idx").read_bytes(), data.bm25.k1, data.bm25.b), groups)
        assert read_index(link, full=False, cache_dir=cache).stats["doclex_key"] == key
        stored = _entry_arrays(cache, "doclex", key)
        for n, a in built.to_arrays().items():
            assert stored[n].dtype == a.dtype and np.array_equal(stored[n], a), n
        stem_built = real_stem(stemmed.StemLexical, data.bm25, groups)
        stem_stored = _entry_arrays(cache, "stem", stemmed.source_cache_key(key, stemmed.DEFAULT_STEM_K1,
                                                                            stemmed.DEFAULT_STEM_B))
        want = {f"c_{n}": a for n, a in stem_built.chunks.to_arrays().items()}
        want.update({f"d_{n}": a for n, a in stem_built.docs.docs.to_arrays().items()})
        assert set(stem_stored) == set(want)
        for n, a in want.items():
            assert stem_stored[n].dtype == a.dtype and np.array_equal(stem_stored[n], a), n
    assert results(Retriever.open(link, embedder=embedder(), cache_dir=cache)) == rebuilt(link)


def test_a_reader_waits_for_the_entries_a_writer_is_making_instead_of_building_them(published, monkeypatch):
    """While a writer holds the index's lexical lock (from the rename until its entries are stored), a reader that
    misses the entry waits for it, then maps it: one build in all."""
    from ragtui.core.index.arraycache import BuildLock

    from .lockwait import waiting_reader

    folder, link, cache = published
    for p in doclex_entries(cache):
        shutil.rmtree(p)
    held = BuildLock.take(cache, docaware.lexical_lock("docs"))
    assert held.held and not BuildLock.take(cache, docaware.lexical_lock("docs")).held
    builds = Builds(monkeypatch)
    # The reader misses the entry and waits for the lock.
    reader, got = waiting_reader(monkeypatch, lambda: Retriever.open(
        link, embedder=embedder(), cache_dir=cache).search("otters", mode="bm25doc", k=5))
    # The "writer": it makes the entry, stores it, and lets go; the reader then finds it.
    data = read_index(link, full=False, cache_dir=cache)
    DocLexical.build(data.bm25, doc_groups_of(data.records), data.stats["doclex_key"]).store(cache, "docs")
    assert builds.builds == 1
    held.release()
    reader.join()
    assert builds.builds == 1 and got and got[0]


def test_a_writer_that_cannot_store_the_stemmed_entry_builds_nothing_in_memory(tmp_path, monkeypatch):
    """The arm is made for readers: when its entry cannot be written, the writer leaves it to them rather than
    build the whole arm in memory and drop it."""
    folder, link, cache, writer = long_running_writer(tmp_path)
    Retriever.open(link, embedder=embedder(), cache_dir=cache).search("otters", mode="bm25stem", k=5)
    (cache / f"stem-docs-streamed.tmp{os.getpid()}").write_text("in the way of the entry's temporary folder")
    builds = StemBuilds(monkeypatch)
    (folder / "d4.md").write_text("rivers and otters again " * 4, encoding="utf-8")
    assert writer.sync().published
    writer.wait_derived()
    assert builds.whole == 0 and builds.blocks == 0
    key = read_index(link, full=False, cache_dir=cache).stats["doclex_key"]
    assert (cache / f"doclex-docs-{key}" / "complete").is_file()  # the document-level entry is made as before
    monkeypatch.undo()
    got = Retriever.open(link, embedder=embedder(), cache_dir=cache).search("otters rivers", mode="bm25stem", k=20)
    assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in Retriever.open(
        link, embedder=embedder(), cache_dir=None).search("otters rivers", mode="bm25stem", k=20)]


def test_one_lexical_entry_that_cannot_be_built_does_not_keep_the_other_from_its_readers(tmp_path, monkeypatch):
    """The stemmed arm is built beside the document-level BM25: a failure of one leaves the other's entry whole."""
    folder, link, cache, writer = long_running_writer(tmp_path)
    Retriever.open(link, embedder=embedder(), cache_dir=cache).search("otters", mode="hybrid", k=5)

    def no_room(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(DocLexical, "build_into", classmethod(no_room))
    (folder / "d5.md").write_text("rivers full of otters " * 5, encoding="utf-8")
    assert writer.sync().published
    writer.wait_derived()
    key = read_index(link, full=False, cache_dir=cache).stats["doclex_key"]
    assert key is not None and not (cache / f"doclex-docs-{key}").exists()
    stems = [p for p in cache.iterdir() if p.name.startswith("stem-docs-") and (p / "complete").is_file()]
    assert stems and not [p for p in cache.iterdir() if ".tmp" in p.name]
    monkeypatch.undo()
    builds = StemBuilds(monkeypatch)
    reader = Retriever.open(link, embedder=embedder(), cache_dir=cache)
    reader.search("otters rivers", mode="bm25stem", k=5)
    assert (builds.whole, builds.blocks) == (0, 0)  # the stemmed arm was there for the reader


def test_a_reader_that_knows_the_key_waits_for_the_writer_s_entry_without_grouping_docs_jsonl(published, monkeypatch):
    """Right after a save the writer holds the lexical lock while it makes the entry it recorded the key of: a
    reader that misses the entry waits for it and maps it, rather than read docs.jsonl to group the rows."""
    from ragtui.core.index.arraycache import BuildLock, StreamedEntry
    from ragtui.core.search.docaware import DOCLEX_KIND, lexical_lock

    from .lockwait import waiting_reader

    _, link, cache = published
    data = read_index(link, full=False, cache_dir=cache)
    key = data.stats["doclex_key"]
    assert isinstance(key, str) and data.stats["verified_entry"]
    want = results(Retriever.open(link, embedder=embedder(), cache_dir=cache), ("bm25doc",))
    groups = doc_groups_of(data.records)
    for entry in doclex_entries(cache):
        shutil.rmtree(entry)
    held = BuildLock.take(cache, lexical_lock("docs"))
    assert held.held
    builds = Builds(monkeypatch)
    reader, got = waiting_reader(monkeypatch, lambda: results(
        Retriever.open(link, embedder=embedder(), cache_dir=cache), ("bm25doc",)))
    # The "writer": it writes the entry under the lock it holds, then lets go.
    entry = StreamedEntry(cache, DOCLEX_KIND, "docs")
    DocLexical.build_into(entry, data.bm25, groups)
    assert entry.place(key)
    held.release()
    reader.join()
    assert got == [want]
    assert (builds.builds, builds.groupings) == (0, 0)

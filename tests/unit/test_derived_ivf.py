"""Which derived entries a publish makes, and that a fresh reader then builds nothing.

A one-shot publish (``sync``, ``ragtui ingest``) makes every entry: the first query of a fresh reader in every
mode writes nothing to the cache. A long-running writer (the watch agent) makes the stemmed arm and the IVF lists
only once a reader has searched that way, in one thread of its own, and a build of a generation that a newer one
replaced stops. While a writer makes a generation's lists, a reader that misses them waits instead of building
them beside it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from ragtui.core.index import verified
from ragtui.core.index.arraycache import BuildLock, used_marker
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.remove import remove_index
from ragtui.core.ingest.sync import IndexWriter, sync
from ragtui.core.search import ivf_cache
from ragtui.core.search.ivf import BuildStopped
from ragtui.core.search.ivf_cache import ivf_lock, warm_ivf_cache
from ragtui.core.search.retriever import Retriever

from .fakes import HashEmbedder
from .lockwait import waiting_reader
from .test_ivf_cache import Spy

MODES = ("bm25", "bm25doc", "bm25stem", "flat", "ivf", "hybrid")


@pytest.fixture(autouse=True)
def writer_waits(monkeypatch):
    """A tiny index saves a reader too little for the writer to wait for a non-racy record: make it wait."""
    monkeypatch.setattr(verified, "reader_saving_ns", lambda *sizes: 10**9)


def write_folder(folder: Path, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    topics = ["cats purr and sleep", "rust borrow checker lifetimes", "tar extracts gzip archives",
              "python asyncio event loop", "bread dough rises with yeast", "comets orbit the sun"]
    for i in range(60):
        words = " ".join(f"{topics[(i + j) % len(topics)]} note{i} part{j}" for j in range(8))
        (folder / f"d{i:02d}.md").write_text(words + (f" {extra}" if i == 0 else ""), encoding="utf-8")


def ivf_entries(cache: Path) -> list[str]:
    return sorted(n for n in os.listdir(cache) if n.startswith("ivf-docs-") and ".tmp" not in n)


def listing(cache: Path) -> dict[str, int]:
    """Every file under the cache (build locks and use notes aside) and its modification time."""
    out = {}
    for root, _, files in os.walk(cache):
        for name in files:
            if not name.startswith((".build-", ".used-")):
                path = os.path.join(root, name)
                out[os.path.relpath(path, cache)] = os.stat(path).st_mtime_ns
    return out


def long_running(folder: Path, art: Path) -> IndexWriter:
    return IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, derive_behind=True)


def test_after_a_one_shot_publish_a_fresh_reader_builds_nothing_in_any_mode(tmp_path, monkeypatch):
    folder, art = tmp_path / "docs", tmp_path / "art"
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    write_folder(folder)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    kinds = {name.split("-")[0] for name in os.listdir(cache) if not name.startswith(".")}
    assert {"bm25", "doclex", "stem", "ivf", "ivfcal", "verified"} <= kinds
    before = listing(cache)
    spy = Spy(monkeypatch)
    for mode in MODES:  # a process of its own for each mode's first query
        hits = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).search("gzip archives", mode=mode, k=5)
        assert hits, mode
    assert spy.builds == 0
    assert listing(cache) == before  # nothing written: every entry was there, and none was rewritten


def test_a_long_running_writer_makes_the_lists_once_a_reader_used_them(tmp_path, monkeypatch):
    folder, art = tmp_path / "docs", tmp_path / "art"
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    write_folder(folder)
    writer = long_running(folder, art)
    writer.sync()
    writer.wait_derived()
    assert ivf_entries(cache) == [] and not [n for n in os.listdir(cache) if n.startswith("stem-")]
    Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).ivf()  # a reader searches IVF once
    first = ivf_entries(cache)
    assert len(first) == 1 and used_marker(cache, "ivf", "docs").is_file()

    write_folder(folder, "a new closing word")
    writer.sync()
    writer.wait_derived()
    assert len(set(ivf_entries(cache)) - set(first)) == 1  # the new generation's lists, stored by the writer

    spy = Spy(monkeypatch)
    lists = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).ivf()
    assert spy.builds == 0 and lists.from_cache and lists.calibration_method == "spans"


def test_a_long_running_writer_makes_no_lists_nobody_searched_even_after_a_one_shot_publish_made_some(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    cache = art / "rag" / ".cache"
    write_folder(folder)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    made = ivf_entries(cache)
    assert len(made) == 1
    writer = long_running(folder, art)
    for i in range(2):
        write_folder(folder, f"save {i}")
        assert writer.sync().published
    writer.wait_derived()
    assert ivf_entries(cache) == made  # only the one-shot publish's: no reader searched IVF


def test_a_build_of_a_replaced_generation_stops_and_leaves_nothing(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    write_folder(folder)
    IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, derive_all=False).sync()
    asked = []

    def replaced() -> bool:
        asked.append(1)
        return len(asked) > 1  # wanted when the build starts, replaced right after

    with pytest.raises(BuildStopped):
        warm_ivf_cache(link, cache, embedder=HashEmbedder(), should_stop=replaced)
    assert ivf_entries(cache) == [] and not [n for n in os.listdir(cache) if n.startswith("ivf") or ".tmp" in n]


def test_a_reader_waits_for_the_lists_a_writer_is_making_instead_of_building_them(tmp_path, monkeypatch):
    folder, art = tmp_path / "docs", tmp_path / "art"
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    write_folder(folder)
    IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, derive_all=False).sync()
    held = BuildLock.take(cache, ivf_lock("docs"))  # as a writer holds it from the rename until its lists are stored
    assert held.held
    spy = Spy(monkeypatch)
    # The reader misses the lists and waits for the lock.
    reader, got = waiting_reader(monkeypatch, lambda: Retriever.open(
        link, embedder=HashEmbedder(), cache_dir=cache).search("gzip archives", mode="ivf", k=5))
    # The "writer": it makes the lists of the generation, stores them, and lets go; the reader then maps them.
    warm_ivf_cache(read_index(link, full=False, cache_dir=cache), cache, embedder=HashEmbedder())
    assert spy.builds == 1
    held.release()
    reader.join(60)
    assert spy.builds == 1 and got and got[0]


def test_rm_removes_the_notes_of_use_with_the_entries(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    write_folder(folder)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    reader = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache)
    reader.search("gzip", mode="hybrid", k=3)
    reader.ivf()
    assert used_marker(cache, "ivf", "docs").is_file() and used_marker(cache, "stem", "docs").is_file()
    del reader
    report = remove_index(art, "docs")
    assert {n.split("-")[0] for n in report.cache_entries} >= {"ivf", "ivfcal", "stem"}
    assert not [n for n in os.listdir(cache) if not n.startswith(".build-")]


def test_the_one_shot_lists_are_those_a_reader_would_build(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    write_folder(folder)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    stored = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).ivf()
    built = Retriever.open(link, embedder=HashEmbedder(), cache_dir=None).ivf()
    assert stored.from_cache and not built.from_cache
    assert (stored.centroids.tobytes(), stored.rows.tobytes(), stored.offsets.tobytes()) == (
        built.centroids.tobytes(), built.rows.tobytes(), built.offsets.tobytes())
    assert stored.calibration == built.calibration and stored.calibration_method == built.calibration_method
    assert ivf_cache.entry_name("docs") == "docs"


def test_a_long_running_writer_builds_every_generation_s_entries_in_one_thread_of_its_own(tmp_path, monkeypatch):
    """The memory a build frees stays in its thread's arena for the next build, rather than one arena per save."""
    from ragtui.core.ingest import derive

    threads: list[int] = []
    real = derive.Derivation.after_swap

    def spy(self, *a, **kw):
        threads.append(threading.get_ident())
        return real(self, *a, **kw)

    monkeypatch.setattr(derive.Derivation, "after_swap", spy)
    folder, art = tmp_path / "docs", tmp_path / "art"
    write_folder(folder)
    writer = long_running(folder, art)
    for i in range(4):
        write_folder(folder, f"save {i}")
        assert writer.sync().published
    writer.wait_derived()
    assert len(threads) == 4 and len(set(threads)) == 1 and threads[0] != threading.get_ident()
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    key = read_index(link, full=False, cache_dir=cache).stats["doclex_key"]
    assert (cache / f"doclex-docs-{key}" / "complete").is_file()  # the newest generation got its entry


class HeldDerive:
    """A long-running writer with overlays over ``write_folder``'s folder, published once with its entries made;
    from then on each publish's document-level BM25 build waits for ``go``."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from ragtui.core.ingest import derive

        self.folder, self.art = tmp_path / "docs", tmp_path / "art"
        self.link, self.cache = self.art / "rag" / "docs", self.art / "rag" / ".cache"
        write_folder(self.folder)
        self.writer = IndexWriter(self.folder, artifacts=self.art, embedder=HashEmbedder(), max_tokens=12,
                                  overlap=3, derive_behind=True, overlay=True)
        self.writer.sync()
        self.writer.wait_derived()
        self.go = threading.Event()
        real = derive.Derivation._doclex

        def held(derivation: derive.Derivation) -> None:
            assert self.go.wait(60)
            real(derivation)

        monkeypatch.setattr(derive.Derivation, "_doclex", held)


def test_a_save_searchable_through_its_overlay_is_published_once_the_entries_it_is_layered_over_are_stored(
        tmp_path, monkeypatch):
    """A long-running writer with overlays: the publish of a save waits for the lexical entries of the generation
    its overlay lies over (readers' hybrid and document-level searches of the save use them), and the IVF lists of
    that generation, which the publish would make useless, stop instead of being made first."""
    from ragtui.core.index.index_format import generation_of

    held = HeldDerive(tmp_path, monkeypatch)
    folder, art, link, cache, writer, go = held.folder, held.art, held.link, held.cache, held.writer, held.go
    Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).ivf()  # a reader searched IVF: lists wanted
    lists = ivf_entries(cache)
    write_folder(folder, "first save")
    assert writer.sync().published  # its entries are now being derived, held at the document-level BM25
    second = generation_of(link)
    key = read_index(link, full=False, cache_dir=cache).stats["doclex_key"]

    write_folder(folder, "second save")
    done: list = []
    saving = threading.Thread(target=lambda: done.append(writer.sync()))
    saving.start()
    for _ in range(6000):  # the second save's overlay is written, and its publish waits
        if writer._publish_waiting or not saving.is_alive():
            break
        threading.Event().wait(0.01)
    assert writer._publish_waiting and saving.is_alive()
    assert generation_of(link) == second
    assert any(n.endswith(".overlay") for n in os.listdir(art / "rag" / ".gen" / "docs"))
    go.set()
    saving.join(60)
    report = done[0]
    assert report.published and generation_of(link) != second
    assert "derived_wait" in report.seconds
    assert (cache / f"doclex-docs-{key}" / "complete").is_file()  # stored before the publish that replaced it
    writer.wait_derived()
    # The first save's lists were given up for the publish; the second save's were made after it.
    assert len(ivf_entries(cache)) == len(lists) + 1


def test_a_caller_may_abandon_a_save_while_its_publish_waits_for_the_entries(tmp_path, monkeypatch):
    """The wait tells the progress callback of itself (stage ``derived``): a watch agent stopping abandons the
    sync there, as before any write; nothing is published, and the save stays searchable through its overlay."""
    from ragtui.core.index.index_format import generation_of

    held = HeldDerive(tmp_path, monkeypatch)
    folder, art, link, writer, go = held.folder, held.art, held.link, held.writer, held.go
    write_folder(folder, "first save")
    assert writer.sync().published
    published = generation_of(link)

    class Stopping(Exception):
        pass

    def tick(stage: str, done: int, total: int) -> None:
        if stage == "derived":
            raise Stopping

    write_folder(folder, "second save")
    try:
        with pytest.raises(Stopping):
            writer.sync(progress=tick)
        assert generation_of(link) == published and not writer._publish_waiting
        reader = Retriever.open(link, embedder=HashEmbedder(), cache_dir=art / "rag" / ".cache")
        assert reader.data is not reader.published  # the overlay written before the wait
        assert [h.doc_id for h in reader.search("second", mode="bm25", k=1)] == ["docs/d00.md"]
    finally:
        go.set()
    writer.wait_derived()
    assert writer.sync().published and generation_of(link) != published

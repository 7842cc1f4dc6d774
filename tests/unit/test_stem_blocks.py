"""The stemmed arm written into its cache entry a block of whole stems at a time (``StemLexical.build_into``).

Every comparison is of bytes: the files ``build_into`` writes, at any block size, are the files of the whole
build's arrays (``StemLexical.build``) saved as they are. Readers and writers make the entry that way under the
index's lexical lock; a reader maps it, and builds in memory only when the cache cannot be written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.index import verified
from ragtui.core.index.arraycache import BuildLock, StreamedEntry, store_arrays
from ragtui.core.index.bm25 import BM25Index, Postings
from ragtui.core.index.bm25_write import build_postings
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.sync import sync
from ragtui.core.search import stemmed
from ragtui.core.search.docaware import doc_groups, doc_groups_of, lexical_lock
from ragtui.core.search.retriever import Retriever
from ragtui.core.search.stemmed import STEM_KIND, StemLexical, source_cache_key, stem_dictionary, stem_terms

from .fakes import HashEmbedder
from .lockwait import waiting_reader

INDEX = "docs"
BASES = ["run", "cat", "study", "connect", "generaliz", "relat", "operat", "happ", "argu", "mutat", "form", "walk",
         "nation", "care", "use", "class", "sing", "hope", "build", "read"]
SUFFIXES = ["", "s", "ing", "ed", "er", "ers", "ation", "ations", "ive", "ness", "ies", "y", "ily", "ful", "e", "es"]
WORDS = [b + s for b in BASES for s in SUFFIXES] + ["naïve", "café", "ΣΊΣΥΦΟΣ", "x2y", "abc_def", "42", "İstanbul"]


@pytest.fixture(autouse=True)
def writer_waits(monkeypatch):
    """A tiny index saves a reader too little for the writer to wait for a non-racy record: make it wait."""
    monkeypatch.setattr(verified, "reader_saving_ns", lambda *sizes: 10**9)


def whole_files(chunks: BM25Index, groups: np.ndarray, k1: float = stemmed.DEFAULT_STEM_K1,
                b: float = stemmed.DEFAULT_STEM_B) -> dict[str, bytes]:
    """The files of the whole build's cache entry: its arrays saved as they are."""
    built = StemLexical.build(chunks, groups, k1, b)
    arrays = {f"c_{n}": a for n, a in built.chunks.to_arrays().items()}
    arrays.update({f"d_{n}": a for n, a in built.docs.docs.to_arrays().items()})
    with tempfile.TemporaryDirectory() as tmp:
        assert store_arrays(Path(tmp), STEM_KIND, "whole", "k", arrays)
        return files(Path(tmp) / f"{STEM_KIND}-whole-k")


def block_files(chunks: BM25Index, groups: np.ndarray, block: int | None, k1: float = stemmed.DEFAULT_STEM_K1,
                b: float = stemmed.DEFAULT_STEM_B) -> dict[str, bytes]:
    """The files ``build_into`` writes at ``block``."""
    with tempfile.TemporaryDirectory() as tmp:
        entry = StreamedEntry(Path(tmp), STEM_KIND, "blocks")
        StemLexical.build_into(entry, chunks, groups, k1, b, block=block)
        assert entry.ok and entry.place("k")
        return files(Path(tmp) / f"{STEM_KIND}-blocks-k")


def files(entry: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(entry.iterdir())}


def blocks_of(chunks: BM25Index, block: int) -> list[tuple[int, int, int]]:
    """(first stem, stem after the last, chunk postings merged) of each block ``build_into`` takes."""
    stem_of, _, starts = stem_dictionary(chunks)
    df = np.diff(chunks.offsets)
    per_stem = np.bincount(stem_of, weights=df, minlength=starts.size - 1)
    return [(lo, hi, int(per_stem[lo:hi].sum())) for lo, hi, *_ in stemmed._merged(chunks, stem_of, starts.size - 1, block)]


def write_folder(folder: Path, seed: int = 0, n: int = 40) -> None:
    """Documents of inflected words (many stems of several terms, some terms of one stem in one chunk)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), int(rng.integers(5, 120)))]
        (folder / f"d{i:02d}.md").write_text(" ".join(words), encoding="utf-8")


@pytest.fixture()
def published(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write_folder(folder)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    return folder, art / "rag" / INDEX, art / "rag" / ".cache"


def stem_entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.name.startswith(f"{STEM_KIND}-{INDEX}-") and ".tmp" not in p.name)


class StemBuilds:
    """How often this process built the stemmed arm whole (``build``) and into an entry (``build_into``)."""

    def __init__(self, monkeypatch) -> None:
        self.whole = self.blocks = 0
        real_build, real_into = StemLexical.build.__func__, StemLexical.build_into.__func__

        def build(cls, *a, **kw):
            self.whole += 1
            return real_build(cls, *a, **kw)

        def build_into(cls, *a, **kw):
            self.blocks += 1
            return real_into(cls, *a, **kw)

        monkeypatch.setattr(StemLexical, "build", classmethod(build))
        monkeypatch.setattr(StemLexical, "build_into", classmethod(build_into))


# -- the bytes ------------------------------------------------------------------------------------------------------


def test_on_an_ingested_index_every_block_size_writes_the_whole_builds_bytes(published):
    _, link, cache = published
    reader = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache)
    chunks, groups = reader.data.bm25, reader.doc_lexical().doc_of_row
    assert isinstance(chunks.post_doc, np.memmap)  # mapped from the cache, as a reader and the writer have it
    n_post, n_stems = int(chunks.offsets[-1]), int(stem_dictionary(chunks)[2].size - 1)
    assert n_stems < chunks.n_terms and n_post > 1000  # terms share stems
    want = whole_files(chunks, groups)
    assert len(want) == 21  # 2 x 10 arrays and the complete marker
    largest = max(size for *_, size in blocks_of(chunks, n_post))
    for block in (1, 2, 7, 100, largest - 1, largest, 1000, n_post - 1, n_post, 10 * n_post, None):
        assert block_files(chunks, groups, block) == want, block
    assert len(blocks_of(chunks, 1)) == n_stems  # one stem a block
    # A stem of more postings than a block is taken whole, alone; other blocks hold at most a block's postings.
    for lo, hi, size in blocks_of(chunks, 100):
        assert size <= 100 or hi == lo + 1
    assert any(size > 100 for *_, size in blocks_of(chunks, 100))
    assert len(blocks_of(chunks, 10 * n_post)) == 1


def test_other_parameters_write_the_whole_builds_bytes(published):
    _, link, cache = published
    reader = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache)
    chunks, groups = reader.data.bm25, reader.doc_lexical().doc_of_row
    for k1, b in ((1.2, 0.75), (0.9, 0.4), (2.0, 0.0), (0.0, 1.0)):
        assert block_files(chunks, groups, 33, k1, b) == whole_files(chunks, groups, k1, b), (k1, b)


def index_of(chunk_terms: list[list[str]], doc_ids: list[str]) -> tuple[BM25Index, np.ndarray]:
    return BM25Index.from_postings(build_postings(chunk_terms), 1.2, 0.75), doc_groups(doc_ids)


@pytest.mark.parametrize("chunk_terms", [
    [],  # no chunk at all
    [[], []],  # chunks without a term
    [["cats"]],  # one term
    [["cats"], ["cats"], [], ["cats"]],
    [["runs", "running", "run"], ["run", "runs"], ["running"]],  # all terms one stem, some in one chunk
    [["runs", "runner", "running"], ["runner"], ["running", "runs"]],  # "runner" between two terms of "run"
    [["studies", "study", "naïve", "naive", "ΣΊΣΥΦΟΣ"], ["İstanbul", "istanbul", "studying"]],
])
def test_edge_cases_write_the_whole_builds_bytes(chunk_terms):
    docs = [f"d{i // 2}" for i in range(len(chunk_terms))]
    chunks, groups = index_of(chunk_terms, docs)
    want = whole_files(chunks, groups)
    for block in (1, 2, 3, 1000, None):
        assert block_files(chunks, groups, block) == want, block


def test_a_stem_split_between_blocks_by_its_postings_is_taken_whole():
    # "run" has 9 postings over three terms (rows 0-4 of "runs", 3-6 of "running"); a block of 4 would end inside it.
    chunk_terms = [["cat", "runs"], ["runs"], ["runs"], ["runs", "running"], ["runs", "running", "zebra"],
                   ["running"], ["running", "cats"]]
    chunks, groups = index_of(chunk_terms, ["a", "a", "b", "b", "b", "c", "c"])
    run = stem_dictionary(chunks)[0][chunks.lookup("runs")]
    assert run == stem_dictionary(chunks)[0][chunks.lookup("running")]
    blocks = blocks_of(chunks, 4)
    (alone,) = [(lo, hi, size) for lo, hi, size in blocks if lo <= run < hi]
    assert alone[:2] == (run, run + 1) and alone[2] == 9
    want = whole_files(chunks, groups)
    for block in range(1, 12):
        assert block_files(chunks, groups, block) == want, block
    # The row of both terms holds one posting of their tfs summed.
    arm = StemLexical.build(chunks, groups)
    lo, hi = int(arm.chunks.offsets[run]), int(arm.chunks.offsets[run + 1])
    assert arm.chunks.post_doc[lo:hi].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert arm.chunks.post_tf[lo:hi].tolist() == [1, 1, 1, 2, 2, 1, 1]


terms = st.sampled_from(["runs", "running", "runner", "run", "cats", "cat", "study", "studies", "the", "generalize",
                         "generalization", "naïve", "naive", "ΣΊΣΥΦΟΣ", "x2y", "happily", "happy", "happiness"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(terms, max_size=8), max_size=12), st.lists(st.integers(0, 3), min_size=1, max_size=12),
       st.integers(1, 40), st.sampled_from([(1.2, 0.75), (1.5, 0.9), (0.5, 0.0)]))
def test_any_postings_at_any_block_write_the_whole_builds_bytes(chunk_terms, sizes, block, params):
    doc_ids = [f"d{i}" for i, n in enumerate(sizes) for _ in range(n + 1)][: len(chunk_terms)]
    doc_ids += [doc_ids[-1] if doc_ids else "d0"] * (len(chunk_terms) - len(doc_ids))
    chunks, groups = index_of(chunk_terms, doc_ids)
    assert block_files(chunks, groups, block, *params) == whole_files(chunks, groups, *params)
    # The whole build is BM25 over the stemmed terms themselves.
    want = BM25Index.from_postings(build_postings([stem_terms(c) for c in chunk_terms]), *params)
    got = StemLexical.build(chunks, groups, *params).chunks
    assert np.array_equal(got.weights, want.weights) and np.array_equal(got.term_blob, want.term_blob)


# -- readers and the writer --------------------------------------------------------------------------------------------


def test_a_reader_without_the_entry_writes_it_in_blocks_and_the_next_reader_maps_it(published, monkeypatch):
    _, link, cache = published
    want = Retriever.open(link, embedder=HashEmbedder(), cache_dir=None).search("running cats", mode="bm25stem", k=20)
    for p in stem_entries(cache):
        shutil.rmtree(p)
    builds = StemBuilds(monkeypatch)
    first = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache)
    got = first.search("running cats", mode="bm25stem", k=20)
    assert (builds.whole, builds.blocks) == (0, 1)
    assert isinstance(first.stem_lexical().chunks.weights, np.memmap)  # mapped from what it wrote, not held
    assert len(stem_entries(cache)) == 1 and not [p for p in cache.iterdir() if ".tmp" in p.name]
    second = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache)
    again = second.search("running cats", mode="bm25stem", k=20)
    assert (builds.whole, builds.blocks) == (0, 1) and isinstance(second.stem_lexical().chunks.weights, np.memmap)
    assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in want] == [(h.row, h.score) for h in again]
    data = second.data
    assert files(stem_entries(cache)[0]) == whole_files(data.bm25, doc_groups_of(data.records))


def test_a_damaged_entry_is_written_again_in_blocks(published, monkeypatch):
    _, link, cache = published
    want = Retriever.open(link, embedder=HashEmbedder(), cache_dir=None).search("happy study", mode="bm25stem", k=20)
    (entry,) = stem_entries(cache)
    raw = (entry / "d_weights.npy").read_bytes()
    (entry / "d_weights.npy").write_bytes(raw[: len(raw) - 16])
    builds = StemBuilds(monkeypatch)
    got = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).search("happy study", mode="bm25stem", k=20)
    assert (builds.whole, builds.blocks) == (0, 1)
    assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in want]
    assert (entry / "d_weights.npy").read_bytes() == raw  # replaced by a sound one
    Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).stem_lexical()
    assert (builds.whole, builds.blocks) == (0, 1)


def test_an_unwritable_cache_builds_the_arm_in_memory(published, monkeypatch, tmp_path):
    _, link, _ = published
    want = Retriever.open(link, embedder=HashEmbedder(), cache_dir=None).search("relations", mode="bm25stem", k=20)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    builds = StemBuilds(monkeypatch)
    reader = Retriever.open(link, embedder=HashEmbedder(), cache_dir=blocked)
    got = reader.search("relations", mode="bm25stem", k=20)
    assert builds.whole == 1 and not isinstance(reader.stem_lexical().chunks.weights, np.memmap)
    assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in want]


def test_a_reader_waits_for_the_writer_making_the_entry_and_maps_it(published, monkeypatch):
    """While the writer holds the index's lexical lock, a reader that misses the entry waits, then maps what the
    writer wrote: one build in all."""
    _, link, cache = published
    for p in stem_entries(cache):
        shutil.rmtree(p)
    writer = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache)
    doclex = writer.doc_lexical()  # the document level is there, keyed as the writer recorded it
    assert doclex.key is not None
    held = BuildLock.take(cache, lexical_lock(INDEX))
    assert held.held
    builds = StemBuilds(monkeypatch)
    reader, got = waiting_reader(monkeypatch, lambda: Retriever.open(
        link, embedder=HashEmbedder(), cache_dir=cache).search("walking", mode="bm25stem", k=5))
    # The "writer": it writes the entry under the lock it holds, then lets go.
    StemLexical.load(writer.data.bm25, doclex.doc_of_row, cache, INDEX, source_key=doclex.key, wait=False)
    assert (builds.whole, builds.blocks) == (0, 1)
    held.release()
    reader.join()
    assert (builds.whole, builds.blocks) == (0, 1) and got and got[0]


def test_a_one_shot_publish_writes_the_arm_in_blocks_at_any_size(tmp_path, monkeypatch):
    folder, art = tmp_path / "docs", tmp_path / "art"
    link, cache = art / "rag" / INDEX, art / "rag" / ".cache"
    write_folder(folder, seed=1, n=60)
    monkeypatch.setattr(stemmed, "BUILD_BLOCK", 5)  # many blocks, some stems alone in theirs
    builds = StemBuilds(monkeypatch)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    assert (builds.whole, builds.blocks) == (0, 1)
    data = read_index(link, full=True, cache_dir=None)
    groups = doc_groups_of(data.records)
    key = source_cache_key(read_index(link, full=False, cache_dir=cache).stats["doclex_key"],
                           stemmed.DEFAULT_STEM_K1, stemmed.DEFAULT_STEM_B)
    (entry,) = stem_entries(cache)
    assert entry.name == f"{STEM_KIND}-{INDEX}-{key}"
    reader = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache)
    assert reader.search("careful readers", mode="hybrid", k=5)
    assert (builds.whole, builds.blocks) == (0, 1) and isinstance(reader.stem_lexical().chunks.weights, np.memmap)
    monkeypatch.undo()
    assert files(entry) == whole_files(data.bm25, groups)


# -- memory -------------------------------------------------------------------------------------------------------------


def synthetic_index(cache: Path, seed: int = 0) -> tuple[int, np.ndarray]:
    """A chunk index of some 6 million postings, stored as a reader's cache entry (``BM25Index.store``'s
    arrays, mapped by ``load_entry``): 60,000 chunks of about 100 distinct terms out of 36,000, many of them
    terms of one stem. Returns its postings and the document of each chunk (four chunks a document)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnoprstuvw"))
    bases = sorted({"".join(rng.choice(letters, int(rng.integers(4, 8)))) for _ in range(3000)})
    vocabulary = sorted({base + suffix for base in bases for suffix in SUFFIXES[:12]}, key=lambda t: t.encode())
    n_chunks, per_chunk = 60_000, 110
    # Zipf-like term frequencies: a few terms in most chunks, most terms in few.
    weights = 1.0 / np.arange(1, len(vocabulary) + 1) ** 0.8
    picks = rng.choice(len(vocabulary), size=n_chunks * per_chunk, p=weights / weights.sum())
    key = np.unique(picks.astype(np.int64) * n_chunks + np.repeat(np.arange(n_chunks), per_chunk))
    term, row = np.divmod(key, n_chunks)
    tf = rng.integers(1, 4, key.size).astype(np.uint32)
    offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(np.bincount(term, minlength=len(vocabulary)), out=offsets[1:])
    raw = [t.encode() for t in vocabulary]
    starts = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=starts[1:])
    doc_len = np.bincount(row, weights=tf, minlength=n_chunks).astype(np.uint32)
    postings = Postings(doc_len, np.frombuffer(b"".join(raw), dtype=np.uint8), starts, offsets, row.astype(np.uint32),
                        tf)
    assert store_arrays(cache, "bm25", INDEX, "k", BM25Index.from_postings(postings, 1.2, 0.75).to_arrays())
    groups = np.arange(n_chunks, dtype=np.int64) // 4
    np.save(cache / "groups.npy", groups)
    return int(key.size), groups


_MEASURE = r"""
import json, sys
from pathlib import Path
import numpy as np
from ragtui.core.index.arraycache import StreamedEntry, load_entry, store_arrays
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_write import build_postings
from ragtui.core.search.stemmed import StemLexical
from tests.unit.peakmem import peak_kib

cache, how, block = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
chunks = BM25Index.from_arrays(load_entry(cache, "bm25", "docs", "k"))
groups = np.load(cache / "groups.npy")
# Warm up on three chunks, both ways: the stemmer, the modules and their tables are not what is measured.
tiny = BM25Index.from_postings(build_postings([["runs", "running"], ["cats"], ["naïve", "run"]]), 1.2, 0.75)
warm = StreamedEntry(cache, "stem", "warm")
StemLexical.build_into(warm, tiny, np.array([0, 0, 1]))
warm.discard()
StemLexical.build(tiny, np.array([0, 0, 1]))
Path("/proc/self/clear_refs").write_text("5")
before = peak_kib()
if how == "blocks":
    entry = StreamedEntry(cache, "stem", "docs")
    StemLexical.build_into(entry, chunks, groups, block=block or None)
    assert entry.place("blocks")
else:
    built = StemLexical.build(chunks, groups)
    arrays = {f"c_{n}": a for n, a in built.chunks.to_arrays().items()}
    arrays.update({f"d_{n}": a for n, a in built.docs.docs.to_arrays().items()})
    assert store_arrays(cache, "stem", "docs", "whole", arrays)
print(json.dumps({"grown": (peak_kib() - before) << 10}))
"""


def measure(cache: Path, how: str, block: int = 0) -> int:
    """What the peak resident size of a fresh process grew by (bytes) while it built the arm ``how``."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(cache), how, str(block)], cwd=root,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))})
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout.strip().splitlines()[-1])["grown"])


def test_the_build_in_blocks_holds_a_few_bytes_a_posting_where_the_whole_build_holds_dozens(tmp_path):
    # The whole build holds every posting's stem, row and tf in int64 and their sorted copies, then the arm's
    # arrays (about 80 bytes a posting). The build in blocks holds the stemmed dictionary, the per-chunk lengths
    # and one block's temporaries (some 40 bytes a posting of the block), and gives back the pages of the mapped
    # chunk postings as it goes. Blocks far below the index's size: what grows with it is measured, not a block.
    cache = tmp_path / "cache"
    n_post, _ = synthetic_index(cache)
    assert n_post > 5_000_000
    blocks = measure(cache, "blocks", 1 << 17)
    whole = measure(cache, "whole")
    assert blocks < 6 * n_post, f"the build in blocks grew the peak by {blocks / n_post:.1f} bytes a posting"
    assert blocks < whole / 10, f"the build in blocks grew the peak by {blocks >> 20} MiB, the whole build by {whole >> 20}"
    assert files(cache / "stem-docs-blocks") == files(cache / "stem-docs-whole")

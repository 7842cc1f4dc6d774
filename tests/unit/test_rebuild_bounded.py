"""The full rebuild's bounded memory (ingest/rebuild.py, texts.py, bm25_write.PostingsBuilder's spill): the texts
read past a bound and the batches' postings wait in nameless files of the state folder, bm25.idx and the readers'
decoded arrays are written a block at a time, and the bytes are those of making everything at once."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.errors import EmbeddingError
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.arraycache import drop_pages, load_entry, store_arrays
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_write import build_postings, encode_postings
from ragtui.core.index.index_format import BM25, DOCS, META, VECTORS, read_index
from ragtui.core.index.records import encode_docs, encode_vectors
from ragtui.core.ingest import rebuild, texts
from ragtui.core.ingest.publish import state_dir
from ragtui.core.ingest.sync import sync
from ragtui.core.search.docaware import DOCLEX_KIND, DocLexical, doc_groups_of_rows
from tests.files import write

from .fakes import HashEmbedder
from .test_rebuild_stream import _text

INDEX = "docs"


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    for i in range(60):
        write(docs / f"d{i:02d}.md", _text(i, 10 + 17 * (i % 5)))
    write(docs / "a-twin.md", _text(7, 49))
    write(docs / "z-twin.md", _text(7, 49))
    write(docs / "empty.md", "")
    write(docs / "unicode.md", "naïve café — ünïcödé 雪 text with words " * 9)
    return docs


def _bounded(monkeypatch, hold: int = 200) -> None:
    """Batches of a few documents, every text past ``hold`` characters in the file, bm25.idx in pieces of a
    few postings."""
    monkeypatch.setattr(rebuild, "DOCS_BATCH", 3)
    monkeypatch.setattr(rebuild, "TEXT_BATCH", 300)
    monkeypatch.setattr(rebuild, "ROWS_BATCH", 4)
    monkeypatch.setattr(rebuild, "BM25_STEP", 5)
    monkeypatch.setattr(texts, "HOLD", hold)


def _run(folder: Path, art: Path, emb: HashEmbedder | None = None):
    return sync(folder, artifacts=art, embedder=emb or HashEmbedder(), max_tokens=16, overlap=4)


def _entry(art: Path, kind: str) -> dict[str, bytes]:
    """The files of the one complete cache entry of ``kind``."""
    cache = art / "rag" / ".cache"
    found = [p for p in cache.iterdir() if p.name.startswith(f"{kind}-{INDEX}-") and ".tmp" not in p.name]
    assert len(found) == 1, found
    return {p.name: p.read_bytes() for p in sorted(found[0].iterdir())}


def _spill_files(art: Path) -> list[str]:
    """What this process holds open, or what is on disk, in the state folder besides the writer's own files."""
    folder = state_dir(art, INDEX)
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder) + "/"):
            held.append(target)
    names = [p.name for p in folder.iterdir() if p.name.startswith(("postings-", "texts-"))] if folder.exists() else []
    return held + names


def test_a_bounded_rebuild_writes_the_bytes_and_cache_entries_of_making_everything_at_once(folder, tmp_path,
                                                                                          monkeypatch):
    _bounded(monkeypatch)
    spooled = []
    close = texts.Texts.close

    def watch(self):
        spooled.append(self.spooled)
        close(self)

    monkeypatch.setattr(texts.Texts, "close", watch)
    art = tmp_path / "art"
    report = _run(folder, art)
    assert report.published and max(spooled) > 10  # most texts went through the file
    data = read_index(art / "rag" / INDEX)
    records = list(data.records)
    gen = art / "rag" / INDEX
    # The four files: those of encoding the whole index at once.
    assert (gen / DOCS).read_bytes() == encode_docs(records)
    assert (gen / VECTORS).read_bytes() == encode_vectors(np.asarray(data.vectors))
    postings = build_postings([analyze(r.text) for r in records])
    whole = encode_postings(postings)
    assert (gen / BM25).read_bytes() == whole
    assert json.loads((gen / META).read_bytes())["n_chunks"] == len(records)
    # The readers' decoded arrays: the entry BM25Index.store writes for the whole decoded index.
    reference = tmp_path / "reference"
    decoded = BM25Index.from_postings(postings, data.meta.k1, data.meta.b)
    key = decoded.store(whole, reference, INDEX)
    assert key is not None
    want = {p.name: p.read_bytes() for p in sorted((reference / f"bm25-{INDEX}-{key}").iterdir())}
    assert _entry(art, "bm25") == want
    # The document-level BM25 derived from it: the entry of a build from the decoded index in memory.
    spans, lo = [], 0
    for n in [sum(1 for r in records if r.doc_id == d) for d in dict.fromkeys(r.doc_id for r in records)]:
        spans.append((lo, lo + n))
        lo += n
    doclex = DocLexical.build(decoded, doc_groups_of_rows(spans, len(records)))
    arrays = doclex.to_arrays()
    store_arrays(reference, DOCLEX_KIND, INDEX, "x", arrays)
    want = {p.name: p.read_bytes() for p in sorted((reference / f"{DOCLEX_KIND}-{INDEX}-x").iterdir())}
    assert _entry(art, DOCLEX_KIND) == want
    # Nothing of the spill is left, on disk or open, and no temporary cache entry.
    assert _spill_files(art) == []
    assert [p.name for p in (art / "rag" / ".cache").iterdir() if ".tmp" in p.name] == []


def test_a_bounded_rebuild_gives_the_index_a_rebuild_in_one_batch_gives(folder, tmp_path, monkeypatch):
    one = tmp_path / "one"
    _run(folder, one)
    _bounded(monkeypatch)
    many = tmp_path / "many"
    _run(folder, many)
    for name in (DOCS, VECTORS, BM25):
        assert (many / "rag" / INDEX / name).read_bytes() == (one / "rag" / INDEX / name).read_bytes()
    assert _entry(many, "bm25") == _entry(one, "bm25")
    assert _entry(many, DOCLEX_KIND) == _entry(one, DOCLEX_KIND)


class _FailsAfter(HashEmbedder):
    """Answers ``calls`` calls, then fails; notes what the state folder holds when it does."""

    def __init__(self, calls: int, art: Path) -> None:
        super().__init__()
        self.calls, self.art = calls, art
        self.spilling: list[str] = []

    def embed(self, texts):
        if self.calls == 0:
            self.spilling = _spill_files(self.art)
            raise EmbeddingError("the embedder went away")
        self.calls -= 1
        return super().embed(texts)


def test_a_bounded_rebuild_that_fails_leaves_no_spill_and_the_next_one_publishes(folder, tmp_path, monkeypatch):
    _bounded(monkeypatch)
    art = tmp_path / "art"
    failing = _FailsAfter(6, art)
    with pytest.raises(EmbeddingError, match="went away"):
        _run(folder, art, failing)
    # While it ran, the texts and the postings were in two files of the state folder, open but nameless
    # (nameless files show in /proc as "<folder>/#<inode> (deleted)").
    assert len(failing.spilling) == 2 and all(f.endswith("(deleted)") for f in failing.spilling), failing.spilling
    assert _spill_files(art) == []
    assert not (art / "rag" / INDEX).exists()
    cache = art / "rag" / ".cache"
    assert not cache.exists() or [p.name for p in cache.iterdir() if ".tmp" in p.name] == []
    report = _run(folder, art)
    assert report.published and _spill_files(art) == []
    fresh = tmp_path / "fresh"
    monkeypatch.setattr(texts, "HOLD", 1 << 24)
    _run(folder, fresh)
    for name in (DOCS, VECTORS, BM25):
        assert (art / "rag" / INDEX / name).read_bytes() == (fresh / "rag" / INDEX / name).read_bytes()


def test_texts_past_the_bound_read_back_as_they_were(tmp_path):
    kept = texts.Texts(tmp_path, hold=10)
    values = {"a": "short", "b": "a text past the bound", "c": "", "d": "naïve 雪 \U0001f600 text", "e": "x" * 1000}
    for doc_id, text in values.items():
        kept[doc_id] = text
    assert kept.spooled == 3 and dict(kept) == values
    assert [kept.chars(d) for d in values] == [len(t) for t in values.values()]
    assert kept.pop("b") == values["b"] and "b" not in kept and len(kept) == 4
    kept.close()
    assert len(kept) == 0 and list(tmp_path.iterdir()) == []


_MEASURE = """
import json, sys
from pathlib import Path
from ragtui.core.ingest import rebuild, texts
from ragtui.core.search import docaware
from tests.unit.fakes import HashEmbedder
from tests.unit.peakmem import rebuild_alone

class Quiet(HashEmbedder):
    def embed(self, batch):
        out = super().embed(batch)
        self.embedded.clear()  # the fake keeps every text it embedded: not what is measured
        return out

# Bounds far below the corpus's size, so that what grows with it is what is measured, not one batch.
rebuild.TEXT_BATCH, rebuild.VECTOR_BYTES, rebuild.BM25_STEP = 1 << 17, 1 << 16, 1 << 14
texts.HOLD = docaware.BUILD_BLOCK = 1 << 17
docs, art = Path(sys.argv[1]), Path(sys.argv[2])
emb = Quiet(dim=8)
print(json.dumps(rebuild_alone(docs, art, emb)))
"""


def test_a_full_rebuild_holds_neither_the_texts_nor_the_postings(tmp_path):
    # 1,500 documents of 1,300 words from a wide vocabulary: 13 MiB of text, about 1.9 million postings, most
    # words in one chunk of a document. Holding the texts until chunked, the batches' postings (10 bytes a
    # posting) while they are laid out, the readers' decoded arrays (16 bytes a posting) or the document-level
    # sums and weights (about 20 bytes a posting here) grows the peak by 36 bytes a posting or more; the bounded
    # rebuild holds the postings laid out (6 bytes a posting) and then reads the readers' arrays mapped from the
    # cache (8 bytes a posting of them), beyond a block of each stage.
    docs = tmp_path / "docs"
    rng = np.random.default_rng(0)
    vocabulary = np.array([f"w{i:05d}" for i in range(30000)])
    total = 0
    for i in range(1500):
        text = " ".join(vocabulary[rng.integers(0, vocabulary.size, 1300)]) + "\n"
        total += len(text)
        write(docs / f"{i // 100:02d}" / f"d{i:04d}.md", text)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(docs), str(tmp_path / "art")], cwd=root,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    n_post = BM25Index.decode((tmp_path / "art" / "rag" / "docs" / BM25).read_bytes(), 1.2, 0.75).post_doc.size
    assert got["chunks"] > 10000 and n_post > 1_000_000
    grown = got["grown"] << 10
    assert grown < 24 * n_post, (f"the peak grew by {grown >> 10} KiB for {n_post:,} postings "
                                 f"({grown / n_post:.1f} bytes a posting) and {total >> 10} KiB of text")


def test_the_digests_embedded_find_what_a_dict_would():
    rng = np.random.default_rng(1)
    kept, model = rebuild.Digests(), {}
    pool = [bytes(rng.integers(0, 256, 32, dtype=np.uint8)) for _ in range(3000)]
    pool += [b"\0" * 32, b"\0" * 31 + b"\1", b"\1" + b"\0" * 31, b"\xff" * 32]  # trailing zero bytes count
    row = 0
    for size in [0, 1, 5, 1, 300, 2, 40, 1000, 7, 3, 600]:
        fresh = [d for d in dict.fromkeys(pool[i] for i in rng.integers(0, len(pool), size)) if d not in model]
        kept.add(np.array(fresh, dtype="S32"), np.arange(row, row + len(fresh), dtype=np.int64))
        model.update(zip(fresh, range(row, row + len(fresh))))
        row += len(fresh)
        asked = np.array(pool, dtype="S32")
        assert kept.find(asked).tolist() == [model.get(d, -1) for d in pool]
    assert len(kept) == len(model) and kept.find(np.zeros(0, dtype="S32")).size == 0


def test_pages_of_a_mapped_array_given_back_read_the_same(tmp_path):
    values = np.arange(3_000_000, dtype=np.uint32) * 7
    store_arrays(tmp_path, "k", "n", "x", {"a": values})
    mapped = load_entry(tmp_path, "k", "n", "x")["a"]
    assert int(mapped.sum(dtype=np.int64)) == int(values.sum(dtype=np.int64))
    drop_pages(mapped, mapped.size)
    drop_pages(mapped[12345:], 99)  # a view: pages of the same map
    drop_pages(values, values.size)  # in memory: nothing to give back
    assert np.array_equal(mapped, values) and np.array_equal(mapped[12345:], values[12345:])


def test_the_map_behind_an_indexs_vectors_is_found_and_a_range_given_back_reads_the_same(tmp_path):
    from ragtui.core.index.arraycache import _map_of
    from ragtui.core.index.index_format import read_index

    from .indexgen import build

    path, _, vectors = build(tmp_path, "docs", {f"d{i}.md": [f"chunk {i}"] * 40 for i in range(60)}, dim=64)
    data = read_index(path, full=False)
    # vectors.f32 is mapped and viewed through a memoryview: the map is still found behind it.
    assert isinstance(_map_of(data.vectors), mmap.mmap)
    v = data.vectors
    for lo, hi in ((0, 10), (7, 1000), (1000, v.size), (v.size - 3, v.size + 50), (5, 5), (9, 2)):
        drop_pages(v, hi, lo)
        drop_pages(v[100:], hi, lo)  # a view of the rows: offsets counted from its own first value
    assert np.array_equal(v, vectors)
    assert _map_of(np.ones(3)) is None

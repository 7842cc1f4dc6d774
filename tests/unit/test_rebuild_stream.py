"""The full rebuild made a batch of documents at a time (ingest/rebuild.py): the bytes of encoding the whole index
at once, each text embedded once, nothing written when the bytes are the published ones, a bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.errors import EmbeddingError
from ragtui.core.index.index_format import BM25, DOCS, META, VECTORS, read_index
from ragtui.core.ingest import rebuild
from ragtui.core.ingest.publish import encode_index, state_dir
from ragtui.core.ingest.sync import sync
from tests.files import write

from .fakes import ChunkCountingEmbedder, HashEmbedder
from .test_sync import tree_snapshot

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def _text(i: int, words: int = 40) -> str:
    return " ".join(WORDS[(i * 7 + k * (i % 5 + 1)) % len(WORDS)] + str(k % (i % 9 + 2)) for k in range(words)) + "\n"


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    for i in range(40):
        write(docs / f"d{i:02d}.md", _text(i, 10 + 13 * (i % 4)))
    write(docs / "a-twin.md", _text(7, 49))  # the same text as z-twin.md, far from it in index order
    write(docs / "z-twin.md", _text(7, 49))
    write(docs / "empty.md", "")
    return docs


def _small_batches(monkeypatch, docs: int = 3, text: int = 300, rows: int = 4) -> None:
    monkeypatch.setattr(rebuild, "DOCS_BATCH", docs)
    monkeypatch.setattr(rebuild, "TEXT_BATCH", text)
    monkeypatch.setattr(rebuild, "ROWS_BATCH", rows)


def _run(folder: Path, art: Path, emb: HashEmbedder | None = None, **kw):
    return sync(folder, artifacts=art, embedder=emb or HashEmbedder(), max_tokens=16, overlap=4, **kw)


def _files(art: Path) -> dict[str, object]:
    gen = art / "rag" / "docs"
    meta = json.loads((gen / META).read_bytes())
    meta.pop("created_at")
    return {META: meta, **{name: (gen / name).read_bytes() for name in (DOCS, VECTORS, BM25)}}


def test_a_rebuild_in_many_batches_writes_the_bytes_of_encoding_the_index_at_once(folder, tmp_path, monkeypatch):
    whole = ChunkCountingEmbedder()  # the publish's IVF calibration embeds pseudo-queries too: not counted here
    one = _run(folder, tmp_path / "one", whole)
    _small_batches(monkeypatch)
    batched = ChunkCountingEmbedder()
    many = _run(folder, tmp_path / "many", batched)
    assert many.published and _files(tmp_path / "many") == _files(tmp_path / "one")
    assert (many.chunks_total, many.chunks_added, many.chunks_embedded, many.bytes_written) == (
        one.chunks_total, one.chunks_added, one.chunks_embedded, one.bytes_written)
    # The twins' chunks are embedded once, though they are in different batches.
    assert sorted(batched.embedded) == sorted(whole.embedded) and len(set(batched.embedded)) == len(batched.embedded)
    data = read_index(tmp_path / "many" / "rag" / "docs")
    files = encode_index(data.meta, list(data.records), np.asarray(data.vectors))
    for name in (DOCS, VECTORS, BM25):
        assert files[name] == _files(tmp_path / "many")[name]


def test_a_rebuild_takes_the_previous_generations_vectors_in_every_batch(folder, tmp_path, monkeypatch):
    art = tmp_path / "art"
    _run(folder, art)
    (state_dir(art, "docs") / "state.bin").unlink()  # the next sync rebuilds against the published index
    write(folder / "d05.md", "an edited document about something else entirely\n")
    (folder / "d31.md").unlink()
    _small_batches(monkeypatch)
    emb = ChunkCountingEmbedder()
    report = _run(folder, art, emb)
    assert report.published and report.chunks_added == 1 and report.chunks_removed >= 1
    assert emb.embedded == ["an edited document about something else entirely"]
    fresh = tmp_path / "fresh"
    _run(folder, fresh)
    assert _files(art) == _files(fresh)


@pytest.mark.parametrize("where", ["first", "last", "none"])
def test_a_rebuild_compared_with_the_published_generation_writes_only_what_differs(folder, tmp_path, monkeypatch,
                                                                                     where):
    art = tmp_path / "art"
    _run(folder, art)
    (state_dir(art, "docs") / "state.bin").unlink()
    if where != "none":  # a difference in the first batch, or only in the last one
        write(folder / ("a-twin.md" if where == "first" else "z-twin.md"), "a new text\n")
    before = tree_snapshot(art / "rag" / ".gen")
    _small_batches(monkeypatch)
    report = _run(folder, art)
    if where == "none":
        assert not report.published and tree_snapshot(art / "rag" / ".gen") == before
        return
    assert report.published and report.chunks_added == 1
    fresh = tmp_path / "fresh"
    _run(folder, fresh)
    assert _files(art) == _files(fresh)


class _FailsAfter(HashEmbedder):
    """Answers ``calls`` calls, then fails."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.calls = calls

    def embed(self, texts):
        if self.calls == 0:
            raise EmbeddingError("the embedder went away")
        self.calls -= 1
        return super().embed(texts)


def test_a_rebuild_that_fails_in_a_later_batch_keeps_the_index_and_what_it_embedded(folder, tmp_path, monkeypatch):
    art = tmp_path / "art"
    write(folder / "d00.md", "the first version\n")
    _run(folder, art)
    old = _files(art)
    for i in range(40):
        write(folder / f"d{i:02d}.md", _text(i + 100, 20))
    (state_dir(art, "docs") / "state.bin").unlink()
    _small_batches(monkeypatch)
    failing = _FailsAfter(4)
    with pytest.raises(EmbeddingError, match="went away"):
        _run(folder, art, failing)
    assert _files(art) == old  # the previous generation stays current, and nothing of the new one is left
    assert [p.name for p in (art / "rag" / ".gen" / "docs").iterdir() if p.name.endswith(".tmp")] == []
    emb = ChunkCountingEmbedder()
    report = _run(folder, art, emb)
    assert report.published
    # The vectors the failed run had embedded were kept: only the rest is asked for.
    assert set(emb.embedded).isdisjoint(failing.embedded) and len(failing.embedded) >= 4
    fresh = tmp_path / "fresh"
    _run(folder, fresh)
    assert _files(art) == _files(fresh)


_MEASURE = """
import json, sys
from pathlib import Path
from tests.unit.fakes import HashEmbedder
from tests.unit.peakmem import rebuild_alone

docs, art = Path(sys.argv[1]), Path(sys.argv[2])
emb = HashEmbedder(dim=2048)
print(json.dumps(rebuild_alone(docs, art, emb)))
"""


def test_a_full_rebuild_never_holds_every_vector(tmp_path):
    # 6,000 one-chunk documents with 2,048-dimensional vectors: vectors.f32 is 48 MiB. Building the whole matrix
    # (or the file's bytes) would grow the peak by at least that; a batch at a time holds a few MiB of it.
    # Measured in a process of its own: in one that ran other tests first, how much of a new allocation the
    # heap's free pages absorb depends on those tests.
    docs = tmp_path / "docs"
    for i in range(6000):
        write(docs / f"{i // 100:02d}" / f"d{i:04d}.md", f"document {i} " + _text(i, 8))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(docs), str(tmp_path / "art")], cwd=root,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    size = (tmp_path / "art" / "rag" / "docs" / VECTORS).stat().st_size
    grown = got["grown"]
    assert got["chunks"] == 6000 and size == 6000 * 2048 * 4
    assert grown < (size >> 10) // 2, f"the peak grew by {grown} KiB for a {size >> 10} KiB vectors.f32"

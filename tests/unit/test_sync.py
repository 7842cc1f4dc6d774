"""Ingest: the no-write rule, reuse of vectors, deletion, rename, skip reasons, publishing under a reader."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from ragtui.core.errors import LockedError, UsageError
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.publish import IndexLock
from ragtui.core.ingest.sync import load_state, sync
from ragtui.core.ingest.walk import WalkRules
from tests.files import write

from .fakes import ChunkCountingEmbedder, HashEmbedder, WordTokenizer


def tree_snapshot(root: Path) -> dict[str, tuple]:
    """Every path under root with (inode, size, mtime_ns) — to prove nothing was written."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[p] = (st.st_ino, st.st_size, st.st_mtime_ns, os.readlink(p) if os.path.islink(p) else None)
    return out


@pytest.fixture()
def docs(tmp_path):
    folder = tmp_path / "docs"
    write(folder / "a.md", "# Alpha\n\nCats sit on mats. " * 20)
    write(folder / "sub" / "b.txt", "Beta document about dogs and parks.\n" * 5)
    write(folder / "c.rst", "Gamma: reStructuredText about birds.")
    return folder


def run(folder, art, emb=None, **kw):
    return sync(folder, artifacts=art, embedder=emb or HashEmbedder(), max_tokens=16, overlap=4, **kw)


def test_first_ingest_builds_a_valid_index(docs, tmp_path):
    art = tmp_path / "art"
    report = run(docs, art)
    assert report.published and report.added == ["docs/a.md", "docs/c.rst", "docs/sub/b.txt"]
    data = read_index(art / "rag" / "docs")
    assert data.meta.index_id == "docs" and data.meta.max_tokens == 16
    assert {r.doc_id for r in data.records} == {"docs/a.md", "docs/c.rst", "docs/sub/b.txt"}
    source = (docs / "a.md").read_text()
    for r in data.records:
        if r.doc_id == "docs/a.md":
            assert r.text in source
        assert 1 <= r.n_tokens <= 16
    assert load_state(art, "docs")["root"] == str(tmp_path)


def test_nothing_changed_writes_nothing(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    before = tree_snapshot(art)
    report = run(docs, art)
    assert not report.published and report.unchanged == 3 and report.chunks_embedded == 0
    assert tree_snapshot(art) == before


def test_touch_and_same_bytes_save_do_not_rewrite_the_index(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    index_before = tree_snapshot(art / "rag" / ".gen")
    os.utime(docs / "a.md", ns=(1, 1))
    (docs / "c.rst").write_text((docs / "c.rst").read_text())
    emb = HashEmbedder()
    report = run(docs, art, emb)
    assert not report.published and emb.embedded == []
    assert tree_snapshot(art / "rag" / ".gen") == index_before
    # The new stamps were remembered: a third sync reads nothing and writes nothing at all.
    before = tree_snapshot(art)
    assert not run(docs, art).published
    assert tree_snapshot(art) == before


def test_one_change_embeds_only_new_chunks(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    old = read_index(art / "rag" / "docs")
    write(docs / "c.rst", "Gamma: now about whales instead.")
    emb = ChunkCountingEmbedder()  # the publish's IVF calibration embeds pseudo-queries too: not counted here
    report = run(docs, art, emb)
    assert report.published and report.changed == ["docs/c.rst"] and report.unchanged == 2
    assert emb.embedded == ["Gamma: now about whales instead."]
    new = read_index(art / "rag" / "docs")
    old_vecs = {r.fingerprint: old.vectors[i] for i, r in enumerate(old.records)}
    for i, r in enumerate(new.records):
        if r.fingerprint in old_vecs:
            assert (new.vectors[i] == old_vecs[r.fingerprint]).all()


def test_delete_and_rename(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    (docs / "c.rst").unlink()
    report = run(docs, art)
    assert report.removed == ["docs/c.rst"]
    assert "docs/c.rst" not in {r.doc_id for r in read_index(art / "rag" / "docs").records}
    os.rename(docs / "a.md", docs / "renamed.md")
    emb = ChunkCountingEmbedder()
    report = run(docs, art, emb)
    assert report.removed == ["docs/a.md"] and report.added == ["docs/renamed.md"]
    assert emb.embedded == []  # same text, same fingerprints: vectors reused
    ids = [r.doc_id for r in read_index(art / "rag" / "docs").records]
    assert "docs/a.md" not in ids and "docs/renamed.md" in ids


def test_skip_reasons(docs, tmp_path):
    art = tmp_path / "art"
    write(docs / "bin.txt", b"\x00\x01\x02binary")
    write(docs / "latin1.txt", "caf\xe9".encode("latin-1"))
    write(docs / "big.md", "x" * 5000)
    write(docs / "empty.md", "")
    os.mkfifo(docs / "pipe.md")
    outside = write(tmp_path / "outside.md", "secret outside the folder")
    os.symlink(outside, docs / "link-out.md")
    os.symlink(docs / "loop.md", docs / "loop.md")
    write(docs / ".hidden" / "h.md", "hidden folder")
    write(docs / "node_modules" / "n.md", "vendored")
    write(docs / "a.md.swp", "swap file")
    write(docs / "notes.md~", "backup file")
    write(docs / "with-bom.md", "\ufeffBOM text\r\nwith CRLF\r\n")
    report = run(docs, art, rules=WalkRules(max_bytes=4000))
    reasons = {Path(p).name: r for p, r in report.skipped}
    assert reasons["bin.txt"].startswith("binary")
    assert reasons["latin1.txt"].startswith("not UTF-8")
    assert "limit" in reasons["big.md"]
    assert "regular file" in reasons["pipe.md"]
    assert "outside" in reasons["link-out.md"]
    assert "loop" in reasons["loop.md"]
    ids = {r.doc_id for r in read_index(art / "rag" / "docs").records}
    assert ids == {"docs/a.md", "docs/c.rst", "docs/sub/b.txt", "docs/with-bom.md"}
    bom = [r for r in read_index(art / "rag" / "docs").records if r.doc_id == "docs/with-bom.md"]
    assert bom[0].text.startswith("BOM text\r\nwith")
    assert all("secret" not in r.text for r in read_index(art / "rag" / "docs").records)


def test_artifacts_inside_the_folder_are_not_indexed(docs):
    art = docs / "artifacts"
    run(docs, art)
    before = tree_snapshot(art)
    report = run(docs, art)
    assert not report.published
    assert tree_snapshot(art) == before


def test_changed_settings_rebuild(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    emb = ChunkCountingEmbedder(model="other-model")
    report = sync(docs, artifacts=art, embedder=emb, max_tokens=16, overlap=4)
    assert report.published and "embedding_model" in report.rebuilt
    assert read_index(art / "rag" / "docs").meta.embedding_model == "other-model"
    # Every distinct chunk text is embedded again with the new model, once.
    distinct = {r.fingerprint for r in read_index(art / "rag" / "docs").records}
    assert len(emb.embedded) == len(distinct) == report.chunks_embedded


def test_partial_sync_by_paths(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    write(docs / "c.rst", "changed gamma text")
    write(docs / "new" / "d.md", "a new folder with a doc")
    (docs / "sub" / "b.txt").unlink()
    report = run(docs, art, paths=[docs / "c.rst", docs / "new", docs / "sub" / "b.txt"])
    assert report.changed == ["docs/c.rst"] and report.added == ["docs/new/d.md"] and report.removed == ["docs/sub/b.txt"]
    full = run(docs, art)
    assert not full.published  # the partial sync left nothing for a full one to find


def test_lost_state_still_writes_nothing(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    (art / "rag" / ".state" / "docs" / "state.bin").unlink()
    gen = tree_snapshot(art / "rag" / ".gen")
    report = run(docs, art)
    assert not report.published
    assert tree_snapshot(art / "rag" / ".gen") == gen


def test_bad_folder_and_lock(docs, tmp_path):
    with pytest.raises(UsageError, match="not a folder"):
        run(tmp_path / "nope", tmp_path / "art")
    with IndexLock(tmp_path / "art", "docs"):
        with pytest.raises(LockedError):
            run(docs, tmp_path / "art")


def _reader(index_path, stop_path, out_q):
    """Search in a loop while another process publishes; report any inconsistency."""
    from ragtui.core.errors import RagtuiError
    from ragtui.core.index.index_format import read_index

    errors, reads = [], 0
    while not os.path.exists(stop_path) or reads < 5:
        try:
            data = read_index(index_path)
            gens = {r.text.split()[1] for r in data.records}
            if len(gens) != 1:
                errors.append(f"mixed generations {sorted(gens)}")
            reads += 1
        except RagtuiError as e:
            errors.append(str(e))
        if reads > 5000:
            break
    out_q.put((reads, errors))


def test_reader_in_another_process_never_sees_a_mix(tmp_path):
    folder = tmp_path / "docs"
    art = tmp_path / "art"
    for i in range(5):
        write(folder / f"f{i}.md", f"generation 0 file {i}")
    run(folder, art)
    stop = tmp_path / "stop"
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_reader, args=(str(art / "rag" / "docs"), str(stop), q))
    proc.start()
    try:
        for gen in range(1, 30):
            for i in range(5):
                write(folder / f"f{i}.md", f"generation {gen} file {i}")
            assert run(folder, art).published
    finally:
        stop.touch()
        reads, errors = q.get(timeout=120)
        proc.join(timeout=60)
    assert errors == [] and reads >= 5


class _TextOnly:
    """The wordllama embedder seen without embed_ids (nor its tokenizer's encode_docs): every chunk
    is counted and embedded from its text, the plain path ingest took before ids were shared."""

    def __init__(self, inner):
        self._inner = inner
        self.model, self.dim = inner.model, inner.dim

        class Tok:
            name = inner.tokenizer.name
            count = staticmethod(inner.tokenizer.count)
            spans = staticmethod(inner.tokenizer.spans)
            count_many = staticmethod(inner.tokenizer.count_many)

        self.tokenizer = Tok()

    def embed(self, texts):
        return self._inner.embed(texts)

    def close(self):
        pass


def test_shared_token_ids_leave_the_index_bytes_unchanged(tmp_path):
    # Ingest tokenizes each document once and slices the chunks' ids from it: the four files must be
    # the bytes of counting and embedding every chunk from its own text (created_at aside).
    pytest.importorskip("tokenizers")
    from ragtui.core.embedders import make_embedder
    from ragtui.core.errors import EmbeddingError
    from tests.conftest import shared_data

    try:
        emb = make_embedder("wordllama")
    except EmbeddingError as exc:
        pytest.skip(f"wordllama is not installed: {exc}")
    folder = tmp_path / "docs"
    for path in sorted(shared_data("corpora", "python-docs").rglob("*.txt"))[5::60]:
        write(folder / path.name, path.read_text(encoding="utf-8"))
    write(folder / "odd.txt", "  indented  start\n\tx😀y  naïve 漢字 <s> ▁marker\r\n" * 300 + "z" * 9000)
    write(folder / "long.txt", ("word " * 60 + "\n") * 5000)  # past LONG_DOCUMENT_CHARS: tokenized part by part
    reports = {}
    for name, e in (("shared", emb), ("plain", _TextOnly(emb))):
        reports[name] = sync(folder, artifacts=tmp_path / name, embedder=e, max_tokens=64, overlap=8)
    assert reports["shared"].chunks_total == reports["plain"].chunks_total > 300
    for f in ("docs.jsonl", "vectors.f32", "bm25.idx"):
        assert (tmp_path / "shared" / "rag" / "docs" / f).read_bytes() == (tmp_path / "plain" / "rag" / "docs" / f).read_bytes(), f
    metas = [json.loads((tmp_path / n / "rag" / "docs" / "meta.json").read_text()) for n in ("shared", "plain")]
    for m in metas:
        m.pop("created_at")
    assert metas[0] == metas[1] and metas[0]["tokenizer"] == emb.tokenizer.name


def test_a_tokenizer_failing_on_a_later_batch_fails_the_sync_cleanly(tmp_path):
    # Ingest tokenizes the next batch of documents in a background thread: its error must reach the
    # caller as the same EmbeddingError, with nothing published and no thread left behind.
    import threading

    from ragtui.core.errors import EmbeddingError
    from ragtui.core.ingest.assemble import CHUNK_BATCH

    class Failing(WordTokenizer):
        def __init__(self):
            self.calls = 0

        def spans_many(self, texts):
            self.calls += 1
            if self.calls == 3:
                raise EmbeddingError("tokenizer gave up on batch 3")
            return [self.spans(t) for t in texts]

    emb = HashEmbedder()
    emb.tokenizer = Failing()
    folder = tmp_path / "docs"
    for i in range(3 * CHUNK_BATCH):
        write(folder / f"d{i:03}.txt", f"document {i} about things\n")
    before = set(threading.enumerate())
    with pytest.raises(EmbeddingError, match="batch 3"):
        run(folder, tmp_path / "art", emb)
    assert not (tmp_path / "art" / "rag" / "docs").exists()
    assert set(threading.enumerate()) <= before
    emb.tokenizer.calls = -100  # and with the tokenizer well again, the next run builds it
    report = run(folder, tmp_path / "art", emb)
    assert report.published and report.chunks_total == 3 * CHUNK_BATCH

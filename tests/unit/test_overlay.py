"""The overlay of a generation: what the watch agent's writer writes before a publish, and how readers read it.

The key property: the base generation's rows arranged by the overlay's segments are the next generation's
docs.jsonl and vectors.f32, byte for byte. The reader ignores any damaged or forged overlay (None, with a
reason), never raises, and never allocates more than the file's real size.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.fsops import FsOps
from ragtui.core.index.index_format import read_index
from ragtui.core.index.overlay import (
    MAX_HEADER_BYTES,
    OverlayContent,
    generation_dir_of,
    load_overlay,
    overlay_identity,
    overlay_path,
    read_overlay,
    read_overlay_of,
    write_overlay,
)
from ragtui.core.index.records import ChunkRecord, encode_docs, fingerprint
from ragtui.core.ingest import publish as publish_mod
from ragtui.core.ingest.publish import remove_stale_generations
from ragtui.core.ingest.remove import remove_index
from ragtui.core.ingest.sync import IndexWriter
from tests.files import write
from tests.unit.publishfaults import save_unpublished

from .fakes import HashEmbedder

WORDS = ["cat", "dog", "σοφία", "東京", "mat", "the", "park", "x1", "bird", "ÉCOLE", "zebra", "alpha", "fjord"]
NAMES = ["a.md", "b.txt", "sub/c.md", "sub/deep/d.md", "z.md", "Ωmega.md", "sub/e f.md", "m.txt", "q.md"]


class KeepingOps(FsOps):
    """The publish's filesystem calls, except that nothing is removed: the tidy after a publish then leaves the
    generation it spliced from, and its overlay, for the test to compare with the generation published."""

    def unlink(self, path: Path) -> None:
        raise PermissionError(errno.EPERM, "kept for the test", str(path))

    def rmdir(self, path: Path) -> None:
        raise PermissionError(errno.EPERM, "kept for the test", str(path))


@pytest.fixture
def keep_old(monkeypatch):
    monkeypatch.setattr(publish_mod, "OS_OPS", KeepingOps())


def writer(folder: Path, art: Path, overlay: bool = True) -> IndexWriter:
    return IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, overlay=overlay)


def some_text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 45)))


def edit(folder: Path, rng: random.Random) -> list[Path]:
    """A few random edits: write (add or change), delete, rename; the paths they touched."""
    touched = []
    for _ in range(rng.randint(1, 4)):
        path = folder / rng.choice(NAMES)
        touched.append(path)
        if rng.random() < 0.3 and path.exists():
            path.unlink()
        elif rng.random() < 0.2 and path.exists():
            to = folder / rng.choice(NAMES)
            to.parent.mkdir(parents=True, exist_ok=True)
            path.rename(to)
            touched.append(to)
        else:
            write(path, some_text(rng))
    return touched


def layered(base: Path, ov: OverlayContent) -> tuple[bytes, bytes]:
    """docs.jsonl and vectors.f32 of the next generation, made from the base's files and the overlay alone."""
    lines = (base / "docs.jsonl").read_bytes().splitlines(keepends=True)
    vectors = np.fromfile(base / "vectors.f32", dtype="<f4").reshape(-1, ov.dim)
    starts = np.concatenate([[0], ov.line_ends + 1])
    docs, rows = [], []
    for source, lo, hi in ov.segments:
        if source == "old":
            docs.append(b"".join(lines[lo:hi]))
            rows.append(vectors[lo:hi])
        else:
            docs.append(ov.docs_lines[int(starts[lo]) : int(starts[hi])])
            rows.append(ov.vectors[lo:hi])
    out = np.concatenate(rows) if rows else np.zeros((0, ov.dim), dtype="<f4")
    return b"".join(docs), out.astype("<f4").tobytes()


def overlays(art: Path, index_id: str) -> list[str]:
    gens = art / "rag" / ".gen" / index_id
    return sorted(name for name in os.listdir(gens) if ".overlay" in name)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_base_arranged_by_the_overlay_is_the_next_generation(tmp_path, keep_old, seed):
    rng = random.Random(seed)
    folder, art = tmp_path / "docs", tmp_path / "art"
    for name in rng.sample(NAMES, 5):
        write(folder / name, some_text(rng))
    w = writer(folder, art)
    w.sync()
    link = art / "rag" / "docs"
    checked = 0
    for step in range(8):
        base = Path(os.path.realpath(link))
        before = read_index(link)
        touched = edit(folder, rng)
        report = w.sync(touched if step % 2 else None)  # as the watch agent syncs: the paths its events named
        if not report.published:
            assert not overlay_path(base).exists()
            continue
        assert report.incremental and "overlay" in report.seconds
        nxt = Path(os.path.realpath(link))
        assert nxt != base
        reasons: list[str] = []
        ov = read_overlay(base, base_chunks=before.n_chunks, dim=before.meta.dim, reasons=reasons)
        assert ov is not None, reasons
        assert ov.n_chunks == report.chunks_total == read_index(link).n_chunks
        docs, vectors = layered(base, ov)
        assert docs == (nxt / "docs.jsonl").read_bytes()
        assert vectors == (nxt / "vectors.f32").read_bytes()
        # Read with the base's records too (whole documents in every run, documents ascending at every boundary).
        with_base = read_overlay_of(before, reasons)
        assert with_base is not None, reasons
        assert with_base.segments == ov.segments and with_base.records == ov.records
        assert generation_dir_of(before) == base
        checked += 1
        # The real tidy: the base and its overlay go, the new generation has none.
        remove_stale_generations(art, "docs", ops=FsOps())
        assert not overlay_path(base).exists() and not base.exists()
        assert overlays(art, "docs") == []
    assert checked >= 3


def test_ingest_writes_no_overlay(tmp_path, keep_old):
    rng = random.Random(7)
    folder, art = tmp_path / "docs", tmp_path / "art"
    for name in NAMES[:5]:
        write(folder / name, some_text(rng))
    w = writer(folder, art, overlay=False)
    w.sync()
    for _ in range(3):
        write(folder / rng.choice(NAMES), some_text(rng) + " fresh")
        report = w.sync()
        assert report.published and report.incremental and "overlay" not in report.seconds
    assert overlays(art, "docs") == []


def test_the_watch_agent_saves_with_an_overlay(tmp_path, keep_old):
    from ragtui.watch.agent import WatchAgent

    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "cat dog")
    write(folder / "b.md", "bird zebra")
    agent = WatchAgent(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    agent.run_once()
    base = Path(os.path.realpath(art / "rag" / "docs"))
    write(folder / "b.md", "bird zebra park")
    report = agent.run_once()
    agent._writer.wait_derived()
    assert report.published and "overlay" in report.seconds
    ov = read_overlay(base, base_chunks=2, dim=HashEmbedder().dim)
    assert ov is not None and [r.text for r in ov.records] == ["bird zebra park"]
    assert ov.segments == (("old", 0, 1), ("new", 0, 1))


def test_tidy_after_the_next_publish_removes_the_stale_overlay(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "cat dog park")
    write(folder / "b.md", "bird zebra")
    w = writer(folder, art)
    w.sync()
    base = Path(os.path.realpath(art / "rag" / "docs"))
    # What a writer killed while writing an overlay leaves, and an overlay of a generation.
    write(overlay_path(base).with_name(overlay_path(base).name + ".4242.tmp"), b"half")
    write(art / "rag" / ".gen" / "docs" / "g0-stale.overlay", b"old")
    write(folder / "a.md", "cat dog park mat")
    report = w.sync()
    assert report.published and "overlay" in report.seconds
    assert overlays(art, "docs") == []
    assert os.listdir(art / "rag" / ".gen" / "docs") == [os.path.basename(os.path.realpath(art / "rag" / "docs"))]


def test_the_next_sync_drops_the_overlay_of_a_save_never_published(tmp_path):
    """A publish that fails after the overlay leaves the overlay (it describes the files saved); the next sync
    removes it before anything else, so a folder edited back to the base is not described by it."""
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "cat dog park")
    w = writer(folder, art)
    w.sync()
    base = Path(os.path.realpath(art / "rag" / "docs"))
    before = read_index(art / "rag" / "docs")
    write(folder / "a.md", "cat dog park mat")
    save_unpublished(w)
    assert Path(os.path.realpath(art / "rag" / "docs")) == base
    ov = read_overlay_of(before)
    assert ov is not None and [r.text for r in ov.records] == ["cat dog park mat"]
    write(folder / "a.md", "cat dog park")  # the edit undone: the folder holds the base's content again
    report = w.sync()
    assert not report.published
    assert not overlay_path(base).exists()


def test_remove_index_removes_overlays_and_their_temporary_names(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "cat dog park")
    writer(folder, art).sync()
    base = Path(os.path.realpath(art / "rag" / "docs"))
    write(overlay_path(base), b"an overlay")
    write(overlay_path(base).with_name(overlay_path(base).name + ".99.tmp"), b"half")
    report = remove_index(art, "docs")
    assert report.generations == 1  # the generation directory, not the overlay files
    assert not (art / "rag" / ".gen" / "docs").exists()


# -- the file on its own -----------------------------------------------------------------------------------


DIM = 4
MAX_TOKENS = 12


def rec(doc_id: str, k: int, text: str) -> ChunkRecord:
    return ChunkRecord(f"{doc_id}#{k}", doc_id, "file", doc_id, text, len(text.split()), fingerprint(text))


def unit_rows(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


NEW = [rec("b.md", 0, "bird zebra"), rec("b.md", 1, "zebra mat"), rec("d.md", 0, "the park")]
SEGMENTS = [("old", 0, 2), ("new", 0, 2), ("old", 3, 5), ("new", 2, 3), ("old", 6, 7)]
BASE_CHUNKS = 7


def make(gen: Path, **kw) -> Path:
    gen.mkdir(parents=True, exist_ok=True)
    args = dict(base_chunks=BASE_CHUNKS, dim=DIM, segments=SEGMENTS, docs_lines=encode_docs(NEW),
                vectors=unit_rows(len(NEW)))
    args.update(kw)
    return write_overlay(gen, **args)


def read(gen: Path, reasons: list[str] | None = None) -> OverlayContent | None:
    return read_overlay(gen, base_chunks=BASE_CHUNKS, dim=DIM, max_tokens=MAX_TOKENS, reasons=reasons)


def forge(header: dict, docs: bytes, vectors: bytes, *, version: int = 1, magic: bytes = b"TLOV") -> bytes:
    """An overlay's bytes made by hand, with a correct checksum of whatever they hold."""
    head_json = json.dumps(header).encode()
    out = magic + version.to_bytes(4, "little") + len(head_json).to_bytes(8, "little") + head_json + docs + vectors
    return out + hashlib.sha256(out).digest()


def good_header(**kw) -> dict:
    docs = encode_docs(NEW)
    h = {"n_chunks": 8, "dim": DIM, "base_chunks": BASE_CHUNKS, "segments": [list(s) for s in SEGMENTS],
         "n_new": 3, "docs_bytes": len(docs), "vectors_bytes": 3 * DIM * 4}
    h.update(kw)
    return h


def test_round_trip(tmp_path):
    gen = tmp_path / ".gen" / "docs" / "g1"
    vectors = unit_rows(3)
    path = make(gen, vectors=vectors)
    assert path == tmp_path / ".gen" / "docs" / "g1.overlay"
    ov = read(gen)
    assert ov is not None
    assert ov.segments == tuple(SEGMENTS) and ov.n_chunks == 8 and ov.n_new == 3 and ov.base_chunks == 7
    assert ov.records == NEW and ov.docs_lines == encode_docs(NEW)
    assert np.array_equal(ov.vectors, vectors) and not ov.vectors.flags.writeable
    assert ov.starts() == [0, 2, 4, 6, 7]
    assert ov.identity == overlay_identity(gen)
    assert os.listdir(gen.parent) == ["g1", "g1.overlay"]  # no temporary name left


def test_hand_made_bytes_read_as_written(tmp_path):
    gen = tmp_path / "g1"
    vectors = unit_rows(3, seed=5)
    raw = forge(good_header(), encode_docs(NEW), vectors.astype("<f4").tobytes())
    write(overlay_path(gen), raw)
    ov = read(gen)
    assert ov is not None and ov.records == NEW and np.array_equal(ov.vectors, vectors)
    # And the writer writes exactly those bytes (its header spelled compactly).
    make(gen, vectors=vectors)
    head_len = int.from_bytes(overlay_path(gen).read_bytes()[8:16], "little")
    assert json.loads(overlay_path(gen).read_bytes()[16 : 16 + head_len]) == good_header()


def test_a_later_save_of_the_same_base_replaces_it(tmp_path):
    gen = tmp_path / "g1"
    make(gen)
    make(gen, segments=[("new", 0, 3)], base_chunks=BASE_CHUNKS)
    ov = read(gen)
    assert ov is not None and ov.segments == (("new", 0, 3),) and ov.n_chunks == 3


def test_no_overlay_is_none_with_a_reason(tmp_path):
    reasons: list[str] = []
    assert read(tmp_path / "g1", reasons) is None
    assert reasons == ["absent"]


def test_the_reader_checks_the_base_it_is_given(tmp_path):
    gen = tmp_path / "g1"
    make(gen)
    for kw in ({"base_chunks": 8}, {"dim": 5}):
        reasons: list[str] = []
        args = {"base_chunks": BASE_CHUNKS, "dim": DIM, "max_tokens": MAX_TOKENS, **kw}
        assert read_overlay(gen, reasons=reasons, **args) is None and reasons
    reasons = []
    assert read_overlay(gen, base_chunks=BASE_CHUNKS, dim=DIM, max_tokens=1, reasons=reasons) is None
    assert "n_tokens" in reasons[0]


def test_truncated_anywhere_is_ignored(tmp_path):
    gen = tmp_path / "g1"
    raw = make(gen).read_bytes()
    cuts = sorted({*range(0, len(raw), 3), *range(len(raw) - 40, len(raw))})
    for cut in cuts:
        overlay_path(gen).write_bytes(raw[:cut])
        reasons: list[str] = []
        assert read(gen, reasons) is None, cut
        assert len(reasons) == 1 and reasons[0]


def test_any_flipped_byte_is_ignored(tmp_path):
    gen = tmp_path / "g1"
    raw = make(gen).read_bytes()
    for at in range(len(raw)):
        damaged = bytearray(raw)
        damaged[at] ^= 0x20 if at % 2 else 0x01
        overlay_path(gen).write_bytes(bytes(damaged))
        reasons: list[str] = []
        assert read(gen, reasons) is None, at
        assert reasons[0]


def test_a_header_claiming_huge_counts_allocates_nothing_large(tmp_path):
    gen = tmp_path / "g1"
    docs, vectors = encode_docs(NEW), unit_rows(3).tobytes()
    huge = 1 << 40
    for header in (
        good_header(n_new=huge, docs_bytes=huge, vectors_bytes=huge * DIM * 4, n_chunks=huge,
                    segments=[["new", 0, huge]]),
        good_header(docs_bytes=huge),
        good_header(n_chunks=(1 << 32) + 5, segments=[["old", 0, 2], ["new", 0, 3], ["old", 2, 7], ["new", 3, (1 << 32)]]),
    ):
        write(overlay_path(gen), forge(header, docs, vectors))
        reasons: list[str] = []
        tracemalloc.start()
        try:
            assert read(gen, reasons) is None
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20, peak
        assert reasons[0]
    # A header length past the bound is refused before the header is read.
    raw = b"TLOV" + (1).to_bytes(4, "little") + (MAX_HEADER_BYTES + 1).to_bytes(8, "little") + b"{}" * 10
    write(overlay_path(gen), raw + hashlib.sha256(raw).digest())
    reasons = []
    assert read(gen, reasons) is None and "header" in reasons[0]


@pytest.mark.parametrize("segments, why", [
    ([["old", 0, 2], ["new", 0, 2], ["old", 1, 4], ["new", 2, 3], ["old", 6, 7]], "overlap"),
    ([["old", 0, 2], ["new", 0, 2], ["old", 3, 5], ["new", 2, 3], ["old", 6, 8]], "outside"),
    ([["old", 3, 5], ["new", 0, 2], ["old", 0, 2], ["new", 2, 3], ["old", 6, 7]], "back"),
    ([["old", 0, 2], ["new", 1, 3], ["old", 3, 5], ["new", 0, 1], ["old", 5, 7]], "follow"),
    ([["old", 0, 2], ["new", 0, 1], ["old", 3, 5], ["new", 2, 3], ["old", 5, 7]], "follow"),  # a gap in the new rows
    ([["old", 0, 2], ["new", 0, 2], ["old", 3, 3], ["new", 2, 3], ["old", 3, 7]], "empty"),
    ([["old", 0, 2], ["new", 2, 0], ["old", 3, 7], ["new", 0, 3]], "empty"),
    ([["old", 0, 2], ["mid", 0, 2], ["old", 3, 5], ["new", 2, 3], ["old", 6, 7]], "segment"),
    ([["old", 0, 2, 9], ["new", 0, 3], ["old", 3, 5]], "segment"),
    ([["old", 0, 2], ["new", 0, 3], ["old", 3, 5]], "segments hold"),  # the header says 8 rows
    ([["old", -1, 2], ["new", 0, 3], ["old", 3, 5]], "rows 0"),
    ([["old", True, 2], ["new", 0, 3], ["old", 3, 5]], "segment"),
])
def test_bad_segments_are_ignored(tmp_path, segments, why):
    gen = tmp_path / "g1"
    write(overlay_path(gen), forge(good_header(segments=segments), encode_docs(NEW), unit_rows(3).tobytes()))
    reasons: list[str] = []
    assert read(gen, reasons) is None
    assert why in reasons[0], reasons


def test_the_writer_refuses_what_a_reader_would_ignore(tmp_path):
    gen = tmp_path / "g1"
    with pytest.raises(ValueError):
        make(gen, segments=[("old", 0, 2), ("old", 1, 3), ("new", 0, 3)])
    with pytest.raises(ValueError):
        make(gen, vectors=unit_rows(2))
    assert not overlay_path(gen).exists()


@pytest.mark.parametrize("lines, why", [
    ([rec("b.md", 0, "bird"), rec("b.md", 2, "zebra"), rec("d.md", 0, "park")], "chunk_id"),
    ([rec("d.md", 0, "bird"), rec("d.md", 1, "zebra"), rec("b.md", 0, "park")], "order"),
    ([rec("b.md", 1, "bird"), rec("b.md", 2, "zebra"), rec("d.md", 0, "park")], "chunk_id"),
    ([rec("b.md", 0, "bird"), rec("b.md", 1, "zebra"), rec("d.md", 1, "park")], "chunk_id"),
    # Whole documents per new run: the second run may not start inside b.md.
    ([rec("b.md", 0, "bird"), rec("b.md", 1, "zebra"), rec("b.md", 2, "park")], "whole documents"),
])
def test_new_lines_are_checked_as_docs_lines(tmp_path, lines, why):
    gen = tmp_path / "g1"
    docs = encode_docs(lines)
    write(overlay_path(gen), forge(good_header(docs_bytes=len(docs)), docs, unit_rows(3).tobytes()))
    reasons: list[str] = []
    assert read(gen, reasons) is None
    assert why in reasons[0], reasons


def test_a_line_whose_fingerprint_is_wrong_is_ignored(tmp_path):
    gen = tmp_path / "g1"
    docs = encode_docs(NEW).replace(b"bird zebra", b"bird zebrA")
    write(overlay_path(gen), forge(good_header(docs_bytes=len(docs)), docs, unit_rows(3).tobytes()))
    reasons: list[str] = []
    assert read(gen, reasons) is None and "fingerprint" in reasons[0]


@pytest.mark.parametrize("value", [np.nan, np.inf, 3.0, 0.0])
def test_vectors_must_be_finite_unit_rows(tmp_path, value):
    gen = tmp_path / "g1"
    rows = unit_rows(3)
    rows[1] = value
    write(overlay_path(gen), forge(good_header(), encode_docs(NEW), rows.astype("<f4").tobytes()))
    reasons: list[str] = []
    assert read(gen, reasons) is None and "row 1" in reasons[0]


def test_unknown_version_or_magic_is_ignored(tmp_path):
    gen = tmp_path / "g1"
    for kw, why in (({"version": 2}, "version"), ({"magic": b"TLBM"}, "TLOV")):
        write(overlay_path(gen), forge(good_header(), encode_docs(NEW), unit_rows(3).tobytes(), **kw))
        reasons: list[str] = []
        assert read(gen, reasons) is None and why in reasons[0]


def test_header_fields_of_the_wrong_type_are_ignored(tmp_path):
    gen = tmp_path / "g1"
    for header in (good_header(n_new=3.0), good_header(dim="4"), good_header(segments={"a": 1}),
                   {k: v for k, v in good_header().items() if k != "n_new"}, [1, 2]):
        write(overlay_path(gen), forge(header, encode_docs(NEW), unit_rows(3).tobytes()))
        reasons: list[str] = []
        assert read(gen, reasons) is None and reasons[0]


def test_not_a_regular_file_is_never_opened(tmp_path):
    gen = tmp_path / "g1"
    path = overlay_path(gen)
    os.mkfifo(path)  # opened for reading, a FIFO would block
    reasons: list[str] = []
    assert read(gen, reasons) is None and "FIFO" in reasons[0]
    path.unlink()
    path.mkdir()
    reasons = []
    assert read(gen, reasons) is None and "directory" in reasons[0]
    path.rmdir()
    path.symlink_to("/dev/zero")
    reasons = []
    assert read(gen, reasons) is None and "symbolic link" in reasons[0]
    path.unlink()
    path.symlink_to(make(tmp_path / "other"))  # even a link to a sound overlay
    reasons = []
    assert read(gen, reasons) is None and "symbolic link" in reasons[0]


def test_max_tokens_comes_from_the_base_meta_when_not_given(tmp_path):
    """Without ``max_tokens``, the bound is the base's own meta.json's (read bounded and checked)."""
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "cat dog park")
    write(folder / "b.md", "bird zebra")
    writer(folder, art).sync()
    data = read_index(art / "rag" / "docs")
    gen = generation_dir_of(data)
    long_text = " ".join(["cat"] * (data.meta.max_tokens + 1))
    for records, sound in (([rec("docs/c.md", 0, "the mat")], True), ([rec("docs/c.md", 0, long_text)], False)):
        docs = encode_docs(records)
        header = {"n_chunks": data.n_chunks + 1, "dim": data.meta.dim, "base_chunks": data.n_chunks,
                  "segments": [["old", 0, data.n_chunks], ["new", 0, 1]], "n_new": 1, "docs_bytes": len(docs),
                  "vectors_bytes": data.meta.dim * 4}
        row = np.zeros(data.meta.dim, dtype="<f4")
        row[0] = 1
        write(overlay_path(gen), forge(header, docs, row.tobytes()))
        reasons: list[str] = []
        got = read_overlay(gen, base_chunks=data.n_chunks, dim=data.meta.dim, reasons=reasons)
        assert (got is not None) == sound, reasons
        # With the base's records: a new document sorting before an old one it follows is refused.
        assert (read_overlay_of(data, reasons) is not None) == sound, reasons
    docs = encode_docs([rec("0.md", 0, "the mat")])
    header = {"n_chunks": data.n_chunks + 1, "dim": data.meta.dim, "base_chunks": data.n_chunks,
              "segments": [["old", 0, data.n_chunks], ["new", 0, 1]], "n_new": 1, "docs_bytes": len(docs),
              "vectors_bytes": data.meta.dim * 4}
    write(overlay_path(gen), forge(header, docs, row.tobytes()))
    assert read_overlay(gen, base_chunks=data.n_chunks, dim=data.meta.dim) is not None  # alone it cannot tell
    reasons = []
    assert read_overlay_of(data, reasons) is None and "ascend" in reasons[0]


def test_load_overlay_raises_what_read_overlay_reports(tmp_path):
    from ragtui.core.index.overlay import OverlayError

    with pytest.raises(OverlayError) as e:
        load_overlay(tmp_path / "g1", base_chunks=1, dim=DIM, max_tokens=MAX_TOKENS)
    assert e.value.reason == "absent"


class Recording(FsOps):
    """The overlay's filesystem calls, recorded; ``fail`` (an operation name) raises EIO at its first call."""

    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail
        self.paths: dict[int, str] = {}

    def _call(self, op: str, what: str) -> None:
        self.calls.append((op, what))
        if op == self.fail:
            raise OSError(errno.EIO, os.strerror(errno.EIO), what)

    def open(self, path, flags, mode=0o644):
        self._call("open", os.path.basename(path))
        fd = super().open(path, flags, mode)
        self.paths[fd] = os.path.basename(path)
        return fd

    def write(self, fd, data):
        self._call("write", self.paths[fd])
        return super().write(fd, data)

    def fsync(self, fd):
        self._call("fsync", self.paths[fd])
        super().fsync(fd)

    def close(self, fd):
        name = self.paths.pop(fd)
        try:
            self._call("close", name)
        finally:
            os.close(fd)

    def rename(self, src, dst):
        self._call("rename", f"{os.path.basename(src)} -> {os.path.basename(dst)}")
        super().rename(src, dst)

    def unlink(self, path):
        self._call("unlink", os.path.basename(path))
        super().unlink(path)


def test_written_in_the_durability_order(tmp_path):
    """A temporary name written, flushed, closed; renamed over the overlay; then the directory flushed."""
    gen = tmp_path / "gens" / "g1"
    ops = Recording()
    make(gen, ops=ops)
    tmp = f"g1.overlay.{os.getpid()}.tmp"
    calls = [c for c in ops.calls if c[0] != "write"]
    assert calls == [("unlink", tmp), ("open", tmp), ("fsync", tmp), ("close", tmp),
                     ("rename", f"{tmp} -> g1.overlay"), ("open", "gens"), ("fsync", "gens"), ("close", "gens")]
    assert [c for c in ops.calls if c[0] == "write"]


@pytest.mark.parametrize("op", ["open", "write", "fsync", "close", "rename"])
def test_a_failed_write_leaves_the_overlay_there_as_it_was(tmp_path, op):
    gen = tmp_path / "gens" / "g1"
    before = make(gen).read_bytes()
    with pytest.raises(OSError):
        make(gen, segments=[("new", 0, 3)], ops=Recording(fail=op))
    assert overlay_path(gen).read_bytes() == before
    assert sorted(os.listdir(gen.parent)) == ["g1", "g1.overlay"]


def test_a_save_whose_overlay_cannot_be_written_is_published_all_the_same(tmp_path, monkeypatch):
    from ragtui.core import fsops

    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "cat dog park")
    w = writer(folder, art)
    w.sync()
    monkeypatch.setattr(fsops, "OS_OPS", Recording(fail="fsync"))  # the overlay's calls only: publish has its own
    write(folder / "a.md", "cat dog park mat")
    report = w.sync()
    assert report.published and any("overlay" in line for line in report.warnings)
    assert [r.text for r in read_index(art / "rag" / "docs").records] == ["cat dog park mat"]
    assert overlays(art, "docs") == []


def test_an_index_read_without_a_generation_has_no_overlay(tmp_path):
    import dataclasses

    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "cat dog park")
    writer(folder, art).sync()
    data = dataclasses.replace(read_index(art / "rag" / "docs"), generation="")
    reasons: list[str] = []
    assert read_overlay_of(data, reasons) is None and reasons


def test_a_layout_past_the_header_bound_is_refused_by_the_writer(tmp_path):
    n = 40_000  # runs alternate: 80,000 segments, over 1 MiB of header
    records = [rec(f"d{i:06d}.md", 0, "cat") for i in range(n)]
    segments = [s for i in range(n) for s in (("old", i, i + 1), ("new", i, i + 1))]
    rows = np.zeros((n, DIM), dtype=np.float32)
    rows[:, 0] = 1
    with pytest.raises(ValueError, match="header"):
        write_overlay(tmp_path / "g1", base_chunks=n, dim=DIM, segments=segments, docs_lines=encode_docs(records),
                      vectors=rows)
    assert not overlay_path(tmp_path / "g1").exists()

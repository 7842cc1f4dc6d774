"""The Seekite v2 export: writer, strict reader, BM25F, titles/headings/URLs, writing a folder safely."""

from __future__ import annotations

import json
import math
import os
import struct

import numpy as np
import pytest

from ragtui.core.errors import IndexFormatError, UsageError
from ragtui.core.export import seekite as sk
from ragtui.core.export.reader import read_export
from ragtui.core.export.structure import chunk_url, document_places, overlap_length
from ragtui.core.export.writer import export_files, export_to, is_previous_export
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.chunker import chunk_text
from ragtui.core.search.quant import quantize_rows
from tests.unit.fakes import WordTokenizer
from tests.unit.indexgen import build

DOCS = {
    "docs/guide.md": ["# Guide\n\nIntro about installing things.", "## Install\n\nRun pip install ragtui.",
                      "### Linux\n\nUse apt to install python3."],
    "docs/notes.txt": ["plain notes without headings, install twice install"],
    "docs/ref.rst": ["Reference\n=========\n\nThe reference.", "Options\n-------\n\nEvery option is listed."],
    "docs/book.adoc": ["= Book\n\n== Chapter one\n\nText of the chapter."],
    "docs/日本.md": ["# 日本語\n\nテキスト Zürich café"],
}
STAMP = "2026-01-01T00:00:00Z"


@pytest.fixture
def index(tmp_path):
    path, _, _ = build(tmp_path / "art", "docs", DOCS, dim=8)
    return read_index(path, full=True)


def write(tmp_path, index, **kw):
    return export_to(tmp_path / "site", export_files(index, generated_at=STAMP, **kw))


# -- titles, headings, URLs -------------------------------------------------------------------------


def test_titles_headings_and_urls(tmp_path, index):
    corpus = next(iter(read_export(write(tmp_path, index)).corpora.values()))
    rows = dict(zip(corpus.ids, zip(corpus.titles, corpus.headings, corpus.urls)))
    assert rows["docs/guide.md#0"] == ("Guide", "Guide", "docs/guide.md#L1")
    assert rows["docs/guide.md#1"][1] == "Guide > Install"
    assert rows["docs/guide.md#2"][1] == "Guide > Install > Linux"
    assert rows["docs/notes.txt#0"] == ("notes.txt", "", "docs/notes.txt#L1")
    assert rows["docs/ref.rst#1"][:2] == ("Reference", "Reference > Options")
    assert rows["docs/book.adoc#0"][:2] == ("Book", "Book")
    assert rows["docs/日本.md#0"][2] == "docs/%E6%97%A5%E6%9C%AC.md#L1"


def test_line_anchors_match_the_document_when_chunks_overlap():
    """Real text, chunked for real with overlap: every chunk's line is the line its text starts on."""
    lines = [f"Line {i}: " + " ".join(f"w{i}x{j}" for j in range(i % 7 + 1)) for i in range(400)]
    doc = "# Title\n\n" + "\n".join(lines) + "\n\n## End\n\nlast words here"
    chunks = chunk_text(doc, WordTokenizer(), max_tokens=40, overlap=8)
    assert len(chunks) > 10
    title, places = document_places("d.md", [c.text for c in chunks])
    assert title == "Title"
    end_line = doc[: doc.index("## End")].count("\n") + 1
    for chunk, place in zip(chunks, places):
        assert place.line == doc.count("\n", 0, chunk.start) + 1
        assert place.headings == (("Title", "End") if place.line >= end_line else ("Title",))
    # Chunks that do not overlap: the gap counts as a paragraph break; a heading opening a chunk is its own.
    _, places = document_places("d.md", ["# Title\n\nabc", "## End\n\nlast"])
    assert places[1].line == 5 and places[1].headings == ("Title", "End")


def test_headings_inside_a_code_fence_do_not_count():
    title, places = document_places("a.md", ["```\n# not a heading\n```\n\ntext", "## Real\n\nmore"])
    assert title == "Real" and places[0].headings == () and places[1].headings == ("Real",)


def test_overlap_length():
    assert overlap_length("abc def ghi", "def ghi jkl") == 7
    assert overlap_length("abc", "xyz") == 0
    assert overlap_length("aaaa", "aaab") == 3
    assert chunk_url("a b/c#d?.md", 3) == "a%20b/c%23d%3F.md#L3"


# -- determinism and round trip ---------------------------------------------------------------------


def test_same_index_same_bytes(index):
    a = export_files(index, generated_at=STAMP)
    b = export_files(index, generated_at=STAMP)
    assert a == b
    c = export_files(index, generated_at="2027-05-05T05:05:05Z")
    assert {k for k in a if a[k] != c[k]} == {"search/manifest.json"}


def test_generated_at_is_checked(index):
    for bad in ("2026-01-01", "2026-13-01T00:00:00Z", "now", "2026-01-01T00:00:00+00:00"):
        with pytest.raises(UsageError):
            export_files(index, generated_at=bad)


def test_layout_and_manifest(tmp_path, index):
    out = write(tmp_path, index)
    manifest = json.loads((out / "search" / "manifest.json").read_text())
    entry = manifest["corpora"]["docs"]
    assert manifest["format"] == "seekite" and manifest["version"] == 2 and manifest["generatedAt"] == STAMP
    assert entry["chunks"] == index.meta.n_chunks and entry["vectors"] == {"file": "vectors.bin", "dtype": "i8"}
    assert entry["embedding"]["dimensions"] == 8 and entry["analyzer"] == {"folding": True, "stemmer": None}
    assert (out / "index.html").read_bytes().startswith(b"<!DOCTYPE html>")
    assert sorted(p.name for p in (out / "search" / "docs").iterdir()) == ["content", "corpus.json", "lexical",
                                                                          "vectors.bin"]


@pytest.mark.parametrize("dtype", ["i8", "f32", "none"])
def test_vectors_round_trip(tmp_path, index, dtype):
    corpus = next(iter(read_export(write(tmp_path, index, vectors=dtype)).corpora.values()))
    vectors = np.asarray(index.vectors)
    if dtype == "none":
        assert corpus.vectors is None
    elif dtype == "f32":
        assert np.array_equal(corpus.vectors, vectors)
    else:
        scales, codes = quantize_rows(vectors)
        assert np.allclose(corpus.vectors, codes.astype(np.float32) * scales[:, None])
        assert np.abs(corpus.vectors - vectors).max() <= scales.max() / 2 + 1e-7


def test_postings_hold_every_field(tmp_path, index):
    export = read_export(write(tmp_path, index))
    export.verify_text()
    corpus = export.corpora["docs"]
    chunks, title, heading, body = corpus.postings[corpus.terms["install"]]
    row = corpus.ids.index("docs/guide.md#1")
    at = list(chunks).index(row)
    assert (title[at], heading[at], body[at]) == (0, 1, 2)  # "Guide > Install" / "## Install ... pip install"


def test_bm25f_against_a_plain_reference(tmp_path, index):
    corpus = read_export(write(tmp_path, index)).corpora["docs"]
    for query in ("install", "install install guide", "café zürich", "option listed reference", "nothing-here"):
        got = {h.chunk: h.score for h in corpus.search(query, 100)}
        want = {}
        n = corpus.n_chunks
        fields = [[analyze(corpus.titles[c]), analyze(corpus.headings[c]), analyze(corpus.content(c))]
                  for c in range(n)]
        avg = [sum(len(fields[c][f]) for c in range(n)) / n for f in range(3)]
        terms = []
        for t in analyze(query):
            if t not in terms:
                terms.append(t)
        for c in range(n):
            score, hit = 0.0, False
            for t in terms:
                df = sum(1 for d in range(n) if any(t in fields[d][f] for f in range(3)))
                tfs = [fields[c][f].count(t) for f in range(3)]
                if not any(tfs):
                    continue
                hit = True
                pseudo = sum(sk.FIELD_WEIGHTS[f] * tfs[f] / (1 - 0.75 + 0.75 * len(fields[c][f]) / avg[f])
                             for f in range(3))
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * analyze(query).count(t) * pseudo / (1.2 + pseudo)
            if hit:
                want[c] = score
        assert got.keys() == want.keys()
        for c in want:
            assert got[c] == pytest.approx(want[c], rel=1e-6)
        ranked = corpus.search(query, 100)
        assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True)


# -- hand-made bytes --------------------------------------------------------------------------------


def _v(x: int) -> bytes:
    out = bytearray()
    while True:
        if x < 0x80:
            return bytes(out + bytes([x]))
        out.append(x & 0x7F | 0x80)
        x >>= 7


def handmade(root):
    """Two chunks; terms "apple" (title of chunk 0, body of chunk 1) and "apples" (front-coded, body of 0)."""
    folder = root / "search" / "c"
    (folder / "lexical").mkdir(parents=True)
    (folder / "content").mkdir()
    manifest = {"format": "seekite", "version": 2, "generatedAt": STAMP, "corpora": {"c": {
        "name": "c", "path": "c", "chunks": 2, "format": 2, "corpus": "corpus.json",
        "lexical": {"dictionary": "lexical/dictionary.bin", "shards": 1},
        "content": {"prefix": "content/content-", "shards": 1},
        "analyzer": {"folding": True, "stemmer": None}}}}
    (root / "search" / "manifest.json").write_text(json.dumps(manifest))
    corpus = {"version": 2, "name": "c", "documents": ["a", "b"],
              "chunks": {"id": ["a#0", "b#0"], "document": [0, 1], "url": ["a#L1", "b#L1"],
                         "title": ["Apple", ""], "heading": ["", ""], "content": [[0, 0], [0, 1]],
                         "filters": {}}, "facets": {}}
    (folder / "corpus.json").write_text(json.dumps(corpus))
    (folder / "content" / "content-000.json").write_text(json.dumps(
        {"version": 2, "chunks": [{"content": "apples", "metadata": {}}, {"content": "apple", "metadata": {}}]}))
    # "apple": 2 postings: chunk 0 (title 1), chunk 1 (body 1); "apples": chunk 0 (body 1).
    apple = _v(2) + _v(0) + _v(1) + _v(0) + _v(0) + _v(1) + _v(0) + _v(0) + _v(1)
    apples = _v(1) + _v(0) + _v(0) + _v(0) + _v(1)
    shard = apple + apples
    (folder / "lexical" / "postings-000.bin").write_bytes(shard)
    d = b"SKDX" + struct.pack("<HHB", 2, 0, 3) + _v(2) + struct.pack("<3f", 0.5, 0.0, 1.0)
    d += _v(1) + _v(0) + _v(0) + _v(0) + _v(1) + _v(1)  # title lengths, heading lengths, body lengths
    d += _v(2)
    d += _v(0) + _v(5) + b"apple" + _v(2) + _v(0) + _v(0)
    d += _v(5) + _v(1) + b"s" + _v(1) + _v(0) + _v(len(apple))
    d += _v(1) + _v(len(shard))
    (folder / "lexical" / "dictionary.bin").write_bytes(d)
    return folder


def test_handmade_export_is_read_and_scored(tmp_path):
    handmade(tmp_path)
    export = read_export(tmp_path)
    export.verify_text()
    corpus = export.corpora["c"]
    assert sorted(corpus.terms) == ["apple", "apples"]
    hits = corpus.search("apple")
    idf = math.log(1 + (2 - 2 + 0.5) / (2 + 0.5))
    title_only = 3.0 * 1 / (0.25 + 0.75 * (1 / 0.5))
    body_only = 1.0 * 1 / (0.25 + 0.75 * (1 / 1.0))
    want = {0: idf * title_only / (1.2 + title_only), 1: idf * body_only / (1.2 + body_only)}
    assert [h.chunk for h in hits] == [0, 1]
    assert {h.chunk: h.score for h in hits} == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("damage, problem", [
    (lambda d: b"SKDY" + d[4:], "unknown magic"),
    (lambda d: d[:4] + struct.pack("<H", 3) + d[6:], "unknown version"),
    (lambda d: d[:-1], "truncated"),
    (lambda d: d + b"\0", "after the last field"),
    (lambda d: d.replace(_v(5) + _v(1) + b"s", _v(6) + _v(1) + b"s"), "shares 6 bytes"),
    (lambda d: d.replace(_v(5) + _v(1) + b"s", _v(4) + _v(1) + b"a"), "not after the term before it"),
    (lambda d: d.replace(b"SKDX" + struct.pack("<HHB", 2, 0, 3) + _v(2), b"SKDX" + struct.pack("<HHB", 2, 0, 3) + _v(3)),
     "chunkCount is 3"),
])
def test_handmade_dictionary_damage_is_named(tmp_path, damage, problem):
    folder = handmade(tmp_path)
    path = folder / "lexical" / "dictionary.bin"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(IndexFormatError) as e:
        read_export(tmp_path)
    assert e.value.path == str(path) and problem in e.value.problem


def test_postings_offsets_and_counts_are_checked(tmp_path):
    folder = handmade(tmp_path)
    path = folder / "lexical" / "postings-000.bin"
    data = path.read_bytes()
    path.write_bytes(_v(3) + data[1:])  # postingCount 3, documentFrequency 2
    with pytest.raises(IndexFormatError, match="postings-000.bin.*documentFrequency is 2"):
        read_export(tmp_path)


def test_text_check_finds_postings_that_lie(tmp_path):
    folder = handmade(tmp_path)
    shard = folder / "content" / "content-000.json"
    shard.write_text(json.dumps({"version": 2, "chunks": [{"content": "pears", "metadata": {}},
                                                           {"content": "apple", "metadata": {}}]}))
    export = read_export(tmp_path)  # structurally sound
    with pytest.raises(IndexFormatError, match="content-000.json: chunk 0's body holds the term 'pears', which the dictionary"):
        export.verify_text()


def test_a_link_out_of_the_export_is_refused(tmp_path):
    folder = handmade(tmp_path / "site")
    outside = tmp_path / "outside.json"
    (folder / "corpus.json").rename(outside)
    os.symlink(outside, folder / "corpus.json")
    with pytest.raises(IndexFormatError, match="outside the export"):
        read_export(tmp_path / "site")


# -- writing a folder -------------------------------------------------------------------------------


def test_refuses_a_folder_that_is_not_an_export(tmp_path, index):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match="not empty"):
        export_to(out, export_files(index, generated_at=STAMP))
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_replaces_a_previous_export_and_fills_an_empty_folder(tmp_path, index):
    out = tmp_path / "site"
    out.mkdir()
    export_to(out, export_files(index, generated_at=STAMP))
    assert is_previous_export(out)
    (out / "search" / "docs" / "stale.bin").write_bytes(b"x")
    export_to(out, export_files(index, generated_at="2027-01-01T00:00:00Z"))
    assert not (out / "search" / "docs" / "stale.bin").exists()
    assert read_export(out).generated_at == "2027-01-01T00:00:00Z"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art", "site"]


def test_a_file_in_place_of_the_folder_is_refused(tmp_path, index):
    (tmp_path / "site").write_text("x")
    with pytest.raises(UsageError, match="not a folder"):
        export_to(tmp_path / "site", export_files(index, generated_at=STAMP))


def test_text_check_finds_a_frequency_that_lies(tmp_path):
    folder = handmade(tmp_path)
    shard = folder / "content" / "content-000.json"
    shard.write_text(json.dumps({"version": 2, "chunks": [{"content": "apple", "metadata": {}},
                                                           {"content": "apple", "metadata": {}}]}))
    with pytest.raises(IndexFormatError, match="content-000.json: chunk 0's body holds the term 'apple' 1 times, "
                                               "but the postings say 0"):
        read_export(tmp_path).verify_text()


def test_an_empty_index_exports_and_reads_back(tmp_path):
    path, _, _ = build(tmp_path / "art", "empty", {}, dim=4)
    out = export_to(tmp_path / "site", export_files(read_index(path, full=True), generated_at=STAMP))
    export = read_export(out)
    export.verify_text()
    assert export.corpora["empty"].n_chunks == 0 and export.search("anything") == []


@pytest.mark.parametrize("replacing", [False, True])
def test_every_file_and_folder_is_on_disk_before_the_export_takes_its_place(tmp_path, monkeypatch, replacing):
    """fsync of each file and each folder of the new export before the rename (or swap) that makes it the export,
    then of the folder that holds it: after a crash the export is a whole one."""
    from ragtui.core.export import writer
    from ragtui.core.fsops import OS_OPS

    out = tmp_path / "site"
    if replacing:  # a previous export there (what check_target lets an export replace)
        export_to(out, {"index.html": b"old", "search/manifest.json": b'{"format": "seekite"}'})
    events: list[tuple[str, str]] = []
    real_fsync, real_rename, real_exchange = os.fsync, os.rename, OS_OPS.exchange

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def rename(a, b, *rest, **kw):
        events.append(("rename", os.fspath(b)))
        return real_rename(a, b, *rest, **kw)

    def exchange(a, b):
        events.append(("rename", os.fspath(b)))
        return real_exchange(a, b)

    monkeypatch.setattr(writer.os, "fsync", fsync)
    monkeypatch.setattr(writer.os, "rename", rename)
    monkeypatch.setattr(OS_OPS, "exchange", exchange)
    export_to(out, {"index.html": b"new", "docs/a/b.md": b"text", "docs/c.md": b"more"})
    made = [i for i, e in enumerate(events) if e == ("rename", os.fspath(out))]
    assert len(made) == 1
    before = {path for kind, path in events[: made[0]] if kind == "fsync"}
    temp = next(p for p in before if os.path.basename(p).startswith(".site.export-"))
    want = {temp, *(os.path.join(temp, rel) for rel in ("index.html", "docs", "docs/a", "docs/a/b.md", "docs/c.md"))}
    assert want <= before
    assert ("fsync", os.fspath(tmp_path)) in events[made[0]:]
    assert (out / "docs" / "a" / "b.md").read_bytes() == b"text"

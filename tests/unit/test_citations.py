"""Citations: resolving references to source lines, freshness verdicts, safety, parsing."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.citations import (
    Citation,
    Resolver,
    parse_refs,
    resolve,
    resolve_many,
    resolver,
    source_root,
    split_ref,
)
from ragtui.core.errors import IndexFormatError, NotFoundError, UsageError
from ragtui.core.index.index_format import read_index
from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint
from ragtui.core.ingest.chunker import chunk_text
from ragtui.core.ingest.publish import encode_index
from ragtui.core.ingest.sync import sync
from tests.files import write

from .fakes import HashEmbedder, WordTokenizer

PROSE = "".join(f"Paragraph {i} talks about topic number {i} in some detail.\n\n" for i in range(12))




def build(folder: Path, art: Path):
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    return read_index(art / "rag" / folder.name)


def rows_of(data, doc_id: str) -> list[int]:
    return [i for i, r in enumerate(data.records) if r.doc_id == doc_id]


def lines_of(text: str, start: int, end: int) -> tuple[int, int]:
    """A plain reference for line numbers: count newlines before the offsets."""
    return text[:start].count("\n") + 1, text[: end - 1].count("\n") + 1


@pytest.fixture()
def corpus(tmp_path):
    folder = tmp_path / "docs"
    write(folder / "a.md", PROSE)
    write(folder / "notes#1.md", "Hash in the file name.\nSecond line of the note.\n" * 6)
    write(folder / "c#2" / "x.txt", "A folder whose name holds a hash sign, with a few words in it.\n")
    write(folder / "résumé" / "日本語.md", "Ünïcödé text: 東京 is a city. Straße and naïve café words.\n" * 5)
    write(folder / "crlf.txt", b"first line of windows text\r\nsecond line here\r\n\r\nthird one after a blank\r\n" * 4)
    write(folder / "bom.md", "\ufeffStarts with a byte order mark and then some plain words.\nMore words.\n" * 3)
    write(folder / "repeat.md", "Cats sit on mats. " * 30)
    art = tmp_path / "art"
    return folder, art, build(folder, art)


# -- fresh: every chunk of an untouched corpus ----------------------------------------------


def test_every_chunk_of_an_unchanged_corpus_is_fresh_and_exact(corpus):
    folder, _art, data = corpus
    resolver = Resolver(data)
    for row, rec in enumerate(data.records):
        c = resolver.resolve(rec.chunk_id)
        assert (c.row, c.status, c.index_id, c.record) == (row, "fresh", "docs", rec)
        assert c.path == folder.parent / rec.doc_id
        source = resolver.source_text(c)
        assert source[c.start_char : c.end_char] == rec.text
        assert (c.start_line, c.end_line) == lines_of(source, c.start_char, c.end_char)


def test_chunk_ids_with_hash_in_the_path_and_non_ascii_paths(corpus):
    folder, _art, data = corpus
    for doc_id in ("docs/notes#1.md", "docs/c#2/x.txt", "docs/résumé/日本語.md"):
        rows = rows_of(data, doc_id)
        assert rows, doc_id
        c = resolve(data, f"{doc_id}#{len(rows) - 1}")
        assert c.row == rows[-1] and c.status == "fresh" and c.path == folder.parent / doc_id


def test_crlf_lines_count_each_crlf_once(corpus):
    folder, _art, data = corpus
    raw = (folder / "crlf.txt").read_bytes().decode()
    for row in rows_of(data, "docs/crlf.txt"):
        c = resolve(data, data.records[row].chunk_id)
        assert raw[c.start_char : c.end_char] == c.record.text
        # The same lines an editor shows: the file split at CRLF.
        shown = raw.split("\r\n")
        first, last = c.start_line - 1, c.end_line - 1
        assert c.record.text.split("\r\n")[0] in shown[first]
        assert c.record.text.split("\r\n")[-1] in shown[last]
        assert last - first == c.record.text.count("\r\n")


def test_bom_is_dropped_from_character_offsets(corpus):
    _folder, _art, data = corpus
    c = resolve(data, "docs/bom.md#0")
    assert c.start_char == 0 and c.start_line == 1 and c.record.text.startswith("Starts")


def test_repeated_passages_keep_the_chunks_in_order(corpus):
    _folder, _art, data = corpus
    cites = resolve_many(data, [data.records[r].chunk_id for r in rows_of(data, "docs/repeat.md")])
    starts = [c.start_char for c in cites]
    ends = [c.end_char for c in cites]
    assert all(c.status == "fresh" for c in cites)
    assert starts == sorted(set(starts)) and ends == sorted(set(ends))


# -- edited after indexing: each verdict ----------------------------------------------------


def test_text_inserted_above_shifts_lines_and_stays_fresh(corpus):
    folder, _art, data = corpus
    before = resolve(data, "docs/a.md#3")
    write(folder / "a.md", "A new first line.\nAnd a second.\n" + PROSE)
    after = resolve(data, "docs/a.md#3")
    assert after.status == "fresh"
    assert (after.start_line, after.end_line) == (before.start_line + 2, before.end_line + 2)


def test_swapped_sections_are_moved_with_their_new_lines(corpus):
    folder, _art, data = corpus
    rows = rows_of(data, "docs/a.md")
    last = data.records[rows[-1]]
    # The last chunk's passage moved to the top: it now comes before chunk 0's.
    reordered = last.text + "\n\n" + PROSE.replace(last.text, "The end.")
    write(folder / "a.md", reordered)
    c = resolve(data, last.chunk_id)
    assert c.status == "moved"
    assert reordered[c.start_char : c.end_char] == last.text
    assert c.start_line == 1


def test_edited_chunk_is_changed_and_the_others_stay_fresh(corpus):
    folder, _art, data = corpus
    rows = rows_of(data, "docs/a.md")
    target = data.records[rows[1]]
    word = target.text.split()[len(target.text.split()) // 2]
    edited = PROSE.replace(target.text, target.text.replace(word, "EDITED", 1), 1)
    write(folder / "a.md", edited)
    cites = resolve_many(data, [data.records[r].chunk_id for r in rows])
    assert cites[1].status == "changed" and cites[1].start_line is None and cites[1].start_char is None
    assert cites[1].path == folder / "a.md"
    # Chunks not touched by the edit are still found in order after it.
    assert cites[-1].status == "fresh"


def test_deleted_document_is_missing(corpus):
    folder, _art, data = corpus
    (folder / "a.md").unlink()
    c = resolve(data, "docs/a.md#0")
    assert c.status == "missing" and c.path == folder / "a.md"
    assert (c.start_line, c.end_line, c.start_char, c.end_char) == (None, None, None, None)


def test_a_document_no_longer_text_is_changed(corpus):
    folder, _art, data = corpus
    write(folder / "a.md", b"\xff\xfe binary now")
    assert resolve(data, "docs/a.md#0").status == "changed"


# -- references -----------------------------------------------------------------------------


def test_short_form_names_a_row_of_the_index(corpus):
    _folder, _art, data = corpus
    for row in (0, 5, len(data.records) - 1):
        c = resolve(data, f"docs#{row}")
        assert c.row == row and c.record == data.records[row] and c.ref == f"docs#{row}"


def test_short_form_out_of_range_and_unknown_ids_are_not_found(corpus):
    _folder, _art, data = corpus
    with pytest.raises(NotFoundError, match="no chunk"):
        resolve(data, f"docs#{len(data.records)}")
    with pytest.raises(NotFoundError, match="docs/nope.md#0"):
        resolve(data, "docs/nope.md#0")
    with pytest.raises(NotFoundError, match="short form is docs#<n>"):
        resolve(data, "other#3")


@pytest.mark.parametrize("ref", ["", "docs/a.md", "docs/a.md#", "#3", "docs/a.md#x", "docs/a.md#01", "docs/a.md#-1",
                                 "docs/a.md#٣", "docs/a\0.md#1"])
def test_malformed_references_are_usage_errors(corpus, ref):
    _folder, _art, data = corpus
    with pytest.raises(UsageError, match="malformed reference"):
        resolve(data, ref)


def test_split_ref_splits_at_the_last_hash():
    assert split_ref("docs/notes#1.md#12") == ("docs/notes#1.md", 12)
    assert split_ref("docs#0") == ("docs", 0)


def test_source_root_and_resolving_from_another_directory(corpus, tmp_path, monkeypatch):
    folder, art, data = corpus
    assert source_root(art, "docs") == folder.parent
    assert source_root(art, "absent") is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert resolve(data, "docs/a.md#0").status == "fresh"


def test_source_root_follows_a_reingest_from_elsewhere(corpus, tmp_path):
    folder, art, _data = corpus
    assert source_root(art, "docs") == folder.parent
    new_parent = tmp_path / "moved"
    new_parent.mkdir()
    folder.rename(new_parent / "docs")
    data = build(new_parent / "docs", art)
    assert source_root(art, "docs") == new_parent
    assert resolve(data, "docs/a.md#0").path == new_parent / "docs" / "a.md"


def test_root_given_explicitly_finds_a_moved_tree(corpus, tmp_path):
    folder, _art, data = corpus
    new_parent = tmp_path / "moved"
    new_parent.mkdir()
    folder.rename(new_parent / "docs")
    assert resolve(data, "docs/a.md#0").status == "missing"
    c = resolve(data, "docs/a.md#0", root=new_parent)
    assert c.status == "fresh" and c.path == new_parent / "docs" / "a.md"


def test_resolve_many_reads_each_document_once(corpus, monkeypatch):
    _folder, _art, data = corpus
    reads: list[str] = []
    real = resolver.read_file
    monkeypatch.setattr(resolver, "read_file", lambda p, n, **k: reads.append(p) or real(p, n, **k))
    refs = [data.records[r].chunk_id for r in rows_of(data, "docs/a.md")] + ["docs/crlf.txt#0", "docs#0"]
    cites = resolve_many(data, refs)
    assert [c.ref for c in cites] == refs and all(isinstance(c, Citation) for c in cites)
    assert len(reads) == 2


def test_citation_json_has_every_field(corpus):
    _folder, _art, data = corpus
    obj = resolve(data, "docs#0").to_json()
    assert set(obj) == {"ref", "index_id", "row", "chunk_id", "doc_id", "source", "uri", "text", "n_tokens",
                        "fingerprint", "path", "status", "start_line", "end_line", "start_char", "end_char", "positional"}


# -- safety: nothing outside the indexed folder is read -------------------------------------


def hand_made_index(art: Path, index_id: str, doc_ids: list[str], text: str):
    """An index whose docs.jsonl names ``doc_ids`` (as a hand edit would), one chunk each."""
    records = [ChunkRecord(f"{d}#0", d, "file", d, text, 3, fingerprint(text))
               for d in sorted(doc_ids, key=lambda d: d.encode())]
    meta = IndexMeta(index_id, "2026-01-01T00:00:00Z", len(records), 4, "m", "t", 16, 4)
    vectors = np.tile(np.array([1, 0, 0, 0], dtype=np.float32), (len(records), 1))
    target = art / "rag" / index_id
    target.mkdir(parents=True)
    for name, blob in encode_index(meta, records, vectors).items():
        (target / name).write_bytes(blob)
    return read_index(target)


@pytest.mark.parametrize("doc_id", ["../secret.txt", "docs/../../secret.txt", "docs/./a.txt", "docs//a.txt", "docs"])
def test_doc_ids_escaping_the_folder_are_refused_before_any_read(tmp_path, monkeypatch, doc_id):
    write(tmp_path / "root" / "docs" / "a.txt", "inside words here")
    write(tmp_path / "secret.txt", "secret words here")
    data = hand_made_index(tmp_path / "art", "evil", [doc_id], "secret words here")
    monkeypatch.setattr(resolver, "read_file", lambda *a, **k: pytest.fail("read a file"))
    with pytest.raises(IndexFormatError, match="outside the indexed folder"):
        resolve(data, f"{doc_id}#0", root=tmp_path / "root")


def test_absolute_doc_id_is_refused(tmp_path, monkeypatch):
    secret = write(tmp_path / "secret.txt", "secret words here")
    data = hand_made_index(tmp_path / "art", "evil", [str(secret)], "secret words here")
    monkeypatch.setattr(resolver, "read_file", lambda *a, **k: pytest.fail("read a file"))
    with pytest.raises(IndexFormatError, match="outside the indexed folder"):
        resolve(data, "evil#0", root=tmp_path)


def test_a_link_leading_out_of_the_folder_is_never_followed(corpus, tmp_path):
    folder, _art, data = corpus
    outside = write(tmp_path / "outside.md", PROSE)  # the very text that was indexed
    (folder / "a.md").unlink()
    (folder / "a.md").symlink_to(outside)
    c = resolve(data, "docs/a.md#0")
    assert c.path is None and c.status == "missing" and c.start_line is None


def test_a_link_to_a_file_inside_the_folder_is_followed(corpus):
    folder, _art, data = corpus
    (folder / "a.md").rename(folder / "real.md")
    (folder / "a.md").symlink_to(folder / "real.md")
    assert resolve(data, "docs/a.md#2").status == "fresh"


def test_a_link_loop_is_missing_and_not_followed(corpus):
    folder, _art, data = corpus
    (folder / "a.md").unlink()
    (folder / "a.md").symlink_to(folder / "loop.md")
    (folder / "loop.md").symlink_to(folder / "a.md")
    c = resolve(data, "docs/a.md#0")
    assert c.status == "missing" and c.path is None


def test_a_folder_or_fifo_where_the_file_was_is_missing_and_never_opened(corpus):
    folder, _art, data = corpus
    (folder / "a.md").unlink()
    os.mkfifo(folder / "a.md")  # opening it for reading would block without O_NONBLOCK
    assert resolve(data, "docs/a.md#0").status == "missing"


# -- parse_refs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, refs",
    [
        ("[docs/a.md#2][docs/b.md#0]", ["docs/a.md#2", "docs/b.md#0"]),
        ('["docs/a.md#2", "docs#0"]', ["docs/a.md#2", "docs#0"]),
        ("docs/a.md#2  docs#0\n docs/b.md#1", ["docs/a.md#2", "docs#0", "docs/b.md#1"]),
        ("Cats sit on mats [docs/a.md#2]. See [the guide](http://x) and [1]; dogs [docs/my notes#1.md#0].",
         ["docs/a.md#2", "docs/my notes#1.md#0"]),
        ("  \n", []),
        ("[]", []),
    ],
)
def test_parse_refs_accepts_every_input_form(text, refs):
    assert parse_refs(text) == refs


def test_parse_refs_rejects_a_json_list_of_non_strings():
    with pytest.raises(UsageError):
        parse_refs("[1, 2]")


# -- the ordered search agrees with the chunker ---------------------------------------------


class _Records(list):
    def find(self, chunk_id):
        if len(getattr(self, "rows", ())) != len(self):
            self.rows = {r.chunk_id: i for i, r in enumerate(self)}
        return self.rows.get(chunk_id, -1)


def chunked(index_dir: Path, texts: dict[str, str], window: tuple[int, int]):
    """An in-memory stand-in for an index of ``texts`` (what the resolver reads), and each doc's chunks."""
    records, chunks = _Records(), {}
    for doc_id in sorted(texts, key=lambda d: d.encode()):
        chunks[doc_id] = chunk_text(texts[doc_id], WordTokenizer(), *window)
        records.extend(ChunkRecord(f"{doc_id}#{k}", doc_id, "file", doc_id, c.text, 1, fingerprint(c.text))
                       for k, c in enumerate(chunks[doc_id]))

    class Data:
        path = index_dir
        meta = IndexMeta(index_dir.name, "", len(records), 1, "m", "t", *window)

    Data.records = records
    return Data, chunks


def agree(data, chunks, root: Path) -> None:
    """Every chunk is fresh, at exactly the chunker's own offsets."""
    cites = resolve_many(data, [r.chunk_id for r in data.records], root=root)
    assert {c.status for c in cites} <= {"fresh"}
    got: dict[str, list] = {}
    for c in cites:
        got.setdefault(c.doc_id, []).append((c.start_char, c.end_char))
    for doc_id, doc_chunks in chunks.items():
        assert got.get(doc_id, []) == [(ch.start, ch.end) for ch in doc_chunks], doc_id


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.sampled_from(["a", "bb", "c.", "d\n", "\n\n", "é", "東京", "x\r\n", "z!"]),
                   min_size=1, max_size=60),
    window=st.sampled_from([(3, 0), (4, 1), (8, 3), (16, 4)]),
)
def test_ordered_search_finds_every_chunk_of_an_unchanged_document(tmp_path_factory, words, window):
    """Each chunk is found in order, with exactly its text at the offsets, in increasing order."""
    text = " ".join(words)
    root = tmp_path_factory.mktemp("prop")
    write(root / "docs" / "d.txt", text)
    data, chunks = chunked(root / "art" / "rag" / "docs", {"docs/d.txt": text}, window)
    cites = resolve_many(data, [r.chunk_id for r in data.records], root=root)
    assert all(c.status == "fresh" for c in cites)
    assert all(text[c.start_char : c.end_char] == c.record.text for c in cites)
    assert [c.start_char for c in cites] == sorted({c.start_char for c in cites})
    assert [c.end_char for c in cites] == sorted({c.end_char for c in cites})


@pytest.mark.parametrize("window", [(256, 32), (64, 8)])
def test_every_chunk_of_a_real_corpus_is_found_where_the_chunker_put_it(tmp_path, window):
    """On real documents the ordered search reports the chunker's own offsets for every chunk."""
    from ragtui.core.documents.text import decode_document
    from tests.conftest import shared_data

    folder = shared_data("corpora", "python-docs")
    texts = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            text, _ = decode_document(path.read_bytes())
            if text is not None:
                texts[path.relative_to(folder.parent).as_posix()] = text
    data, chunks = chunked(tmp_path / "rag" / folder.name, texts, window)
    agree(data, chunks, folder.parent)

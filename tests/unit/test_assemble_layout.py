"""The assembly step's layout against a plain walk over every document, and DocRows against a dict."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.index.records import ChunkRecord, fingerprint
from ragtui.core.ingest.assemble import Previous, assemble
from ragtui.core.ingest.chunker import Chunk
from ragtui.core.ingest.doc_rows import DocRows

NAMES = [f"d{i:02d}" for i in range(30)] + ["a/b", "a/é", "z", "Ω"]


def chunks_of(doc: str, n: int, version: int) -> list[Chunk]:
    return [Chunk(0, 1, f"{doc} chunk {k} v{version}", 3) for k in range(n)]


def previous(old: dict[str, int], dim: int, reusable: bool = True) -> Previous:
    ids = sorted(d for d, n in old.items() if n)
    rows = DocRows.of_counts(ids, [old[d] for d in ids])
    texts = [f"{d} chunk {k} v0" for d in ids for k in range(old[d])]
    fps = np.array([fingerprint(t).encode("ascii") for t in texts], dtype="S64")
    vectors = np.arange(len(texts) * dim, dtype=np.float32).reshape(len(texts), dim)

    def records(lo: int, hi: int) -> list[ChunkRecord]:
        return [ChunkRecord(f"x#{i}", texts[i].split()[0], "file", texts[i].split()[0], texts[i], 3, fingerprint(texts[i]))
                for i in range(lo, hi)]

    return Previous(rows, fps, vectors, records, reusable)


def layout(asm, prev: Previous | None) -> list[str]:
    """Each row of the next generation, as the text it holds."""
    out: list[str] = []
    for seg in asm.segments:
        if seg.source == "old":
            assert prev is not None
            out.extend(r.text for r in prev.records(seg.lo, seg.hi))
        else:
            out.extend(r.text for r in asm.records[seg.lo : seg.hi])
    return out


@settings(max_examples=300, deadline=None)
@given(
    old=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 4), max_size=20),
    now=st.dictionaries(st.sampled_from(NAMES), st.one_of(st.none(), st.integers(0, 4)), max_size=20),
    tell=st.booleans(),
    reusable=st.booleans(),
)
def test_layout_equals_a_walk_over_every_document(old, now, tell, reusable):
    """``now``: the documents there now, None for one unchanged (if it was there), else its new chunk count."""
    docs = set(now) | {d for d in old if d not in now and hash(d) % 3}  # some old ones stay untouched
    # A changed document's chunks: some keep an old chunk's text (its vector is found), some are new text.
    new_chunks = {d: chunks_of(d, 1 if n is None else n, 0 if n == 2 else 1)
                  for d, n in now.items() if n is not None or d not in old}
    prev = previous(old, 2, reusable)
    touched = (set(old) ^ docs) | set(new_chunks) if tell else None
    asm = assemble(docs, new_chunks, prev, 2, touched)

    want: list[str] = []
    want_rows: dict[str, tuple[int, int]] = {}
    for d in sorted(docs):
        if d in new_chunks:
            texts = [c.text for c in new_chunks[d]]
        else:
            texts = [f"{d} chunk {k} v0" for k in range(old.get(d, 0))]
        if texts:
            want_rows[d] = (len(want), len(want) + len(texts))
        want.extend(texts)
    assert layout(asm, prev) == want
    assert asm.n_rows == len(want) and asm.rows.n_rows == len(want)
    assert dict(asm.rows.items()) == want_rows and list(asm.rows) == sorted(want_rows)
    for d, chunks in new_chunks.items():
        assert asm.counts[d] == len(chunks)
    # Each old row maps to the row holding it now (or -1), and the segments are as long as they can be.
    for seg in asm.segments:
        if seg.source == "old":
            assert asm.row_map[seg.lo : seg.hi].tolist() == list(range(seg.at, seg.at + seg.n))
    assert int((asm.row_map >= 0).sum()) == sum(s.n for s in asm.segments if s.source == "old")
    for a, b in zip(asm.segments, asm.segments[1:]):
        assert not (a.source == b.source == "new")
        assert not (a.source == b.source == "old" and a.hi == b.lo)
    # Every new record found its vector where the previous generation held the same text, else waits for one.
    assert sum(len(v) for v in asm.pending.values()) == sum(
        1 for r in asm.records if not reusable or r.fingerprint.encode("ascii") not in set(prev.fingerprints.tolist()))


def test_no_previous_generation_lays_out_every_document_anew():
    new_chunks = {"b": chunks_of("b", 2, 1), "a": chunks_of("a", 1, 1), "c": []}
    asm = assemble({"a", "b", "c", "d"}, new_chunks, None, 2)
    assert layout(asm, None) == ["a chunk 0 v1", "b chunk 0 v1", "b chunk 1 v1"]
    assert dict(asm.rows.items()) == {"a": (0, 1), "b": (1, 3)} and asm.counts == {"a": 1, "b": 2, "c": 0}


@given(spans=st.dictionaries(st.sampled_from(NAMES), st.integers(1, 5), max_size=15),
       gone=st.lists(st.sampled_from(NAMES), max_size=5),
       put=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 5), max_size=5))
def test_doc_rows_behave_as_the_dict_they_replace(spans, gone, put):
    ids = sorted(spans)
    rows = DocRows.of_counts(ids, [spans[d] for d in ids])
    plain, at = {}, 0
    for d in ids:
        plain[d] = (at, at + spans[d])
        at += spans[d]
    assert dict(rows.items()) == plain and len(rows) == len(plain) and rows.n_rows == at
    assert all((d in rows) == (d in plain) for d in NAMES)
    with pytest.raises(KeyError):
        rows["not a document"]
    counts = {d: n for d, n in spans.items() if d not in gone}
    counts.update(put)
    after = rows.replaced(gone, put)
    kept = sorted(d for d, n in counts.items() if n)
    assert dict(after.items()) == dict(DocRows.of_counts(kept, [counts[d] for d in kept]).items())
    assert DocRows.of_spans(plain).ids == rows.ids

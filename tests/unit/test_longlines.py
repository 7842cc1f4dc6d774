"""Long single-line documents: linear work, bounded memory, unchanged chunks.

Work is measured by what the tokenizer is handed (characters and calls) and
what the chunker's regular expressions scan, never by the clock.
"""

from __future__ import annotations

import gc
import re
import tracemalloc
import zlib
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragtui.core.ingest.chunker as chunker
from ragtui.core.ingest.chunker import chunk_text
from tests.reliability.helpers_longlines import (
    CountingTokenizer,
    check_chunks,
    json_line,
    prose_line,
    wordllama_tokenizer,
)
from tests.unit.test_chunker import TOKENIZERS, RegexTokenizer, check_invariants, docs, params, reference_chunks

# --- tokenizers made for these tests -----------------------------------------


class PrefixTokenizer(RegexTokenizer):
    """Like SentencePiece on text without spaces: counting a text on its own costs one
    more token when it starts with a letter (the "▁" a Llama tokenizer prepends), so a
    window that starts inside a word does not fit and must shrink, window after window."""

    def __init__(self) -> None:
        super().__init__(r"[A-Za-z]{1,4}|\d|[^\w\s]|\s+", "prefix")

    def count(self, text: str) -> int:
        return super().count(text) + (1 if text[:1].isalpha() else 0)


class Parts:
    """``tok`` with ``iter_spans``: its spans, produced lazily ``size`` tokens at a time."""

    def __init__(self, tok, size: int) -> None:
        self.tok, self.size, self.name = tok, size, tok.name
        self.parts_taken = 0

    def spans(self, text):
        return self.tok.spans(text)

    def count(self, text):
        return self.tok.count(text)

    def count_many(self, texts):
        return self.tok.count_many(texts)

    def iter_spans(self, text):
        spans = self.tok.spans(text)
        for lo in range(0, len(spans), self.size):
            self.parts_taken += 1
            yield spans[lo : lo + self.size]


@contextmanager
def streaming():
    """Every document takes the part-by-part path, with plans of 1 to 4 windows."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chunker, "LONG_DOCUMENT_CHARS", 0)
        mp.setattr(chunker, "_PLAN_FIRST", 2)
        mp.setattr(chunker, "_PLAN_MAX", 4)
        yield


# --- linear work --------------------------------------------------------------


class CoinTokenizer(RegexTokenizer):
    """Counting a text on its own costs one more token for about half of all texts
    (a checksum bit): like real BPE, which window must shrink is unpredictable, and
    a shrunk window shifts every later one by a token."""

    def __init__(self) -> None:
        super().__init__(r"[A-Za-z]{1,4}|\d|[^\w\s]|\s+", "coin")

    def count(self, text: str) -> int:
        return super().count(text) + (zlib.crc32(text.encode()) & 1)


def work(doc: str, tok, max_tokens: int, overlap: int, monkeypatch) -> tuple[CountingTokenizer, int]:
    """The tokenizer's work, and the windows the chunker planned (each one a cut)."""
    planned = [0]
    cut = chunker._Chunker._cut

    def counting_cut(self, a):
        planned[0] += 1
        return cut(self, a)

    monkeypatch.setattr(chunker._Chunker, "_cut", counting_cut)
    counting = CountingTokenizer(tok)
    chunks = chunk_text(doc, counting, max_tokens, overlap)
    monkeypatch.undo()
    assert chunks == reference_chunks(doc, tok, max_tokens, overlap)
    return counting, planned[0]


@pytest.mark.parametrize("tok", [CoinTokenizer(), PrefixTokenizer()], ids=["coin", "prefix"])
@pytest.mark.parametrize("make", [json_line, prose_line], ids=["json", "prose"])
def test_work_grows_linearly(make, tok, monkeypatch):
    # Before the fix every window that had to shrink re-planned the rest of the
    # line: planned windows grew 16-18 times for 4 times the text, and the
    # tokenizer saw up to 17 characters per character.
    small, big = make(6_000, seed=1), make(24_000, seed=1)
    w_small, planned_small = work(small, tok, 16, 4, monkeypatch)
    w_big, planned_big = work(big, tok, 16, 4, monkeypatch)
    assert w_big.chars <= 4.5 * w_small.chars
    assert w_big.calls <= 4.5 * w_small.calls
    assert planned_big <= 4.5 * planned_small
    assert w_big.chars <= 5 * len(big)  # a constant per character, not only a ratio


def test_windows_that_always_shrink_cost_a_constant_each():
    doc = json_line(40_000, seed=2)
    tok = PrefixTokenizer()
    counting = CountingTokenizer(tok)
    chunks = chunk_text(doc, counting, 32, 8)
    check_invariants(doc, tok, chunks, 32, 8)
    # One batch count and at most a recount or two per chunk, however many shrink.
    assert counting.calls <= 4 * len(chunks) + 2 * chunker._PLAN_FIRST


class ScanCounter:
    """Wraps a compiled pattern and adds up the characters its searches may scan."""

    def __init__(self, pattern: re.Pattern) -> None:
        self.pattern, self.scanned = pattern, 0

    def search(self, s, pos=0, endpos=None):
        m = self.pattern.search(s, pos) if endpos is None else self.pattern.search(s, pos, endpos)
        self.scanned += (m.end() if m else len(s)) - pos
        return m

    def finditer(self, s, pos=0, endpos=None):
        end = len(s) if endpos is None else endpos
        self.scanned += max(0, end - pos)
        return self.pattern.finditer(s, pos, end)


def test_a_long_blank_run_is_scanned_a_bounded_number_of_times(monkeypatch):
    # Every blank is a token, so hundreds of windows lie inside the run; each used
    # to search to the end of the run for the next text: quadratic in its length.
    non_space, breaks = ScanCounter(chunker._NON_SPACE), ScanCounter(chunker._BREAK_RUN)
    monkeypatch.setattr(chunker, "_NON_SPACE", non_space)
    monkeypatch.setattr(chunker, "_BREAK_RUN", breaks)
    chars = RegexTokenizer(r"(?s).", "char")
    doc = "alpha beta. " + " \t " * 20_000 + "\n\ngamma delta"
    chunks = chunk_text(doc, chars, 16, 4)
    assert [c.text for c in chunks][-1].endswith("delta")
    assert non_space.scanned + breaks.scanned <= 8 * len(doc)
    monkeypatch.undo()
    for doc in ("alpha beta. " + " \t " * 300 + "\n\ngamma delta", "x" + "\n" * 500 + "y z" + " " * 99):
        for p in ((16, 4), (5, 0), (8, 7)):  # the plain reference is itself quadratic here: short runs
            assert chunk_text(doc, chars, *p) == reference_chunks(doc, chars, *p)


# --- the part-by-part path: same chunks, bounded tokens held -----------------------


@pytest.mark.parametrize("tok_name", sorted(TOKENIZERS))
@settings(max_examples=100, deadline=None)
@given(doc=docs, p=params(), size=st.integers(1, 7))
def test_part_by_part_agrees_with_reference(tok_name, doc, p, size):
    tok = TOKENIZERS[tok_name]()
    with streaming():
        got = chunk_text(doc, Parts(tok, size), *p)
    assert got == reference_chunks(doc, tok, *p)


@settings(max_examples=60, deadline=None)
@given(doc=st.lists(st.sampled_from(["ab", "c", "1", ",", '":', "{", "x!"]), max_size=300).map("".join),
       p=params(), size=st.integers(1, 9))
def test_part_by_part_single_lines_agree_with_reference(doc, p, size):
    tok = PrefixTokenizer()
    with streaming():
        got = chunk_text(doc, Parts(tok, size), *p)
    assert got == reference_chunks(doc, tok, *p)


def test_part_by_part_holds_a_bounded_number_of_tokens(monkeypatch):
    held = []
    more = chunker._Chunker._more

    def recording_more(self):
        out = more(self)
        held.append(len(self.spans))
        return out

    monkeypatch.setattr(chunker._Chunker, "_more", recording_more)
    doc = json_line(1_200_000, seed=3)
    tok = Parts(RegexTokenizer(r"[A-Za-z]{1,4}|\d|[^\w\s]"), 4096)
    total = len(tok.spans(doc))
    chunks = chunk_text(doc, tok, 64, 8)
    assert tok.parts_taken == -(-total // 4096)
    # Tokens ahead for the largest plan, plus a part or two: not the document's.
    bound = (chunker._PLAN_MAX + 1) * 64 + 3 * 4096
    assert total > 4 * bound and max(held) <= bound
    assert chunks[-1].end == len(doc) and not check_chunks(doc, chunks, tok, 64, every=500)


# --- the real default tokenizer ------------------------------------------------------


@pytest.fixture(scope="module")
def wordllama():
    tok = wordllama_tokenizer()
    if tok is None:
        pytest.skip("wordllama's tokenizer is not installed")
    return tok


@pytest.fixture(scope="module")
def plain():
    from ragtui.core.embedders.hf_tokenizer import HFTokenizer
    from ragtui.core.embedders.wordllama import MODEL_NAME, bundled_files

    return HFTokenizer.from_file(bundled_files()[1], MODEL_NAME, split_long_texts=False)


def test_wordllama_work_grows_linearly_on_minified_json(wordllama):
    small, big = json_line(100_000, seed=4), json_line(400_000, seed=4)
    w_small, w_big = CountingTokenizer(wordllama), CountingTokenizer(wordllama)
    chunk_text(small, w_small)
    chunks = chunk_text(big, w_big)
    assert w_big.chars <= 4.5 * w_small.chars and w_big.calls <= 4.5 * w_small.calls
    assert w_big.chars <= 4 * len(big)
    assert check_chunks(big, chunks, wordllama, 256) == []


def test_wordllama_long_line_matches_reference(wordllama):
    # Over LONG_DOCUMENT_CHARS: spans come part by part (iter_spans), the chunks
    # are those of the plain reference over the whole document's spans.
    doc = json_line(chunker.LONG_DOCUMENT_CHARS + 30_000, seed=5)
    assert chunk_text(doc, wordllama) == reference_chunks(doc, wordllama, 256, 32)
    doc = prose_line(chunker.LONG_DOCUMENT_CHARS + 30_000, seed=5)
    assert chunk_text(doc, wordllama, 64, 16) == reference_chunks(doc, wordllama, 64, 16)


def _status_kib(key: str) -> int:
    """A line of /proc/self/status in KiB (``VmRSS``, ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/self/status")


def test_wordllama_long_line_memory_grows_by_a_few_bytes_per_character(wordllama):
    # What chunking a long line costs this process at its peak (VmHWM: Python and the
    # tokenizer's own allocations alike), the chunks with their ids included, as ingest
    # asks for them. Measured: 18 MiB for 2 MB of minified JSON (30 MiB for 10 MB).
    # Holding the whole document's spans instead (one tok.spans call, what the chunker
    # does below LONG_DOCUMENT_CHARS) costs 128 MiB here, 67 bytes per character.
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the high-water mark")
    doc = json_line(2_000_000, seed=9)
    wordllama.count(doc[:20_000])  # the long-text splitter is built once per tokenizer, not per line
    gc.collect()
    # Writing 5 resets the high-water mark to the current resident size (Linux >= 4.0): what
    # this process held before does not count.
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    chunks = chunk_text(doc, wordllama, keep_ids=True)
    growth = (_status_kib("VmHWM") - before) << 10
    assert len(chunks) > 4000 and chunks[-1].end == len(doc)
    assert sum(c.ids is not None for c in chunks) > len(chunks) // 2
    assert growth <= (16 << 20) + 12 * len(doc), f"{growth >> 20} MiB for {len(doc):,} characters"


def test_splitter_cuts_minified_json_exactly(wordllama, plain):
    doc = json_line(300_000, seed=6)
    splitter = wordllama.long_text_splitter()
    cuts = splitter.cuts(doc)
    assert len(cuts) > 60 and max(b - a for a, b in zip(cuts, cuts[1:])) < 2 * splitter.segment
    parts = list(wordllama.iter_spans(doc))
    assert len(parts) > 1
    for part in parts:  # each part tiles its own stretch of the text
        assert all(e0 == s1 for (_, e0), (s1, _) in zip(part, part[1:]))
    assert [s for part in parts for s in part] == wordllama.spans(doc) == plain.spans(doc)
    assert wordllama.count(doc) == plain.count(doc)
    assert wordllama.count_many([doc, "x", doc[:9000]]) == [plain.count(t) for t in (doc, "x", doc[:9000])]
    assert wordllama.ids_many([doc, "y"]) == plain.ids_many([doc, "y"])


@pytest.fixture(scope="module")
def tiny(wordllama):
    """Cuts every two characters where safe, seven characters per encode_batch."""
    from ragtui.core.embedders._spm_split import SpmSplitter

    return SpmSplitter.build(wordllama._tk, segment=2, max_gap=1 << 16, group=7)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab1{}":,.é漢😀▁\t\n ')) | st.characters(codec="utf-8"),
               min_size=1, max_size=80))
def test_cuts_anywhere_safe_match_plain(plain, tiny, text):
    from ragtui.core.embedders.base import tile_spans

    assert tile_spans(tiny.raw_offsets(text), len(text)) == plain.spans(text)
    parts = list(tiny.iter_spans(text))  # tiled part by part, seven characters a part
    assert [s for part in parts for s in part] == plain.spans(text)
    assert all(part[0][0] == prev[-1][1] for prev, part in zip(parts, parts[1:]))
    assert tiny.count(text) == plain.count(text)
    assert [i for part in tiny.iter_ids(text) for i in part] == plain.ids_many([text])[0]


def test_a_stretch_with_no_safe_cut_is_cut_anyway(wordllama):
    from ragtui.core.embedders._spm_split import SpmSplitter
    from ragtui.core.embedders.base import tile_spans

    splitter = SpmSplitter.build(wordllama._tk, segment=1000, max_gap=5000)
    text = "a" * 40_000  # "aa" is a merge: no boundary is safe
    cuts = splitter.cuts(text)
    assert cuts == list(range(0, 40_000, 6000))
    spans = tile_spans(splitter.raw_offsets(text), len(text))
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(e0 == s1 for (_, e0), (s1, _) in zip(spans, spans[1:]))
    assert splitter.count(text) == len(spans)


def test_splitter_falls_back_to_spaces_when_merges_cannot_be_read():
    from tokenizers import Tokenizer as T
    from tokenizers import models, normalizers

    from ragtui.core.embedders._spm_split import SpmSplitter

    def spm(vocab, merges, **kw):
        tk = T(models.BPE(vocab=vocab, merges=merges, **kw))
        tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        return tk

    vocab = {"<unk>": 0, "a": 1, "b": 2, "▁": 3, "ab": 4, "▁a": 5}
    merges = [("a", "b"), ("▁", "a")]
    joined = SpmSplitter.build(spm(vocab, merges))._joined
    assert {"ab", "▁a", " a"} <= joined and "ba" not in joined
    # Unknown characters fuse into one <unk>: only cuts before spaces are safe.
    unk = SpmSplitter.build(spm(vocab, merges, unk_token="<unk>", fuse_unk=True))
    assert unk._joined is None
    text = "ab" * 10 + " ab" * 10
    cuts = SpmSplitter.build(spm(vocab, merges, unk_token="<unk>", fuse_unk=True), segment=5).cuts(text)
    assert cuts[:2] == [0, 20] and all(text[c] == " " for c in cuts[1:])
    assert SpmSplitter.build(spm(vocab, merges), segment=5).cuts(text)[:2] == [0, 6]  # "ab" | "ab" is not safe


# --- the embedder pools a long text in bounded memory --------------------------------


def test_embedder_pools_long_text_in_blocks_with_the_same_floats(wordllama):
    from ragtui.core.embedders.wordllama import WordLlamaEmbedder

    emb = WordLlamaEmbedder()
    text = json_line(400_000, seed=7)
    ids = emb.tokenizer._tk.encode(text, add_special_tokens=False).ids
    assert len(ids) > 50 * 4096
    expect = np.sum(emb._table[ids], axis=0, dtype=np.float32)  # the one-shot gather-and-sum
    expect /= np.linalg.norm(expect)
    tracemalloc.start()
    try:
        got = emb.embed(["short", text, text[:9000]])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got[1], expect)
    np.testing.assert_array_equal(got[0], emb.embed(["short"])[0])
    np.testing.assert_array_equal(emb.embed_ids([ids])[0], expect)
    assert peak < 64 << 20  # the gather alone would be len(ids) KB (over 200 MB)


def test_helpers_generate_single_lines():
    for make in (json_line, prose_line):
        doc = make(50_000, seed=8)
        assert len(doc) == 50_000 or len(doc) == 50_000 - 1
        assert "\n" not in doc and "\r" not in doc
    assert " " not in json_line(10_000)
    assert list(islice(Parts(RegexTokenizer(), 2).iter_spans("a b c"), 5)) == [[(0, 1), (2, 3)], [(4, 5)]]

"""The chunker: its invariants, its break rule, and a plain reference (spec/chunker.md)."""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from bisect import bisect_right
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.errors import EmbeddingError, UsageError
from ragtui.core.ingest.chunker import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, Chunk, chunk_text
from tests.unit.fakes import WordTokenizer

# --- tokenizers made for the tests -------------------------------------------


class RegexTokenizer:
    """Tokens are the matches of a pattern; counting a text recounts its matches."""

    def __init__(self, pattern: str = r"\w+|[^\w\s]", name: str = "regex") -> None:
        self.pattern = re.compile(pattern)
        self.name = name
        self.spans_calls = 0

    def spans(self, text: str) -> list[tuple[int, int]]:
        self.spans_calls += 1
        return [m.span() for m in self.pattern.finditer(text)]

    def count(self, text: str) -> int:
        return sum(1 for _ in self.pattern.finditer(text))

    def count_many(self, texts):
        return [self.count(t) for t in texts]


class PieceTokenizer(RegexTokenizer):
    """Imitates BPE's awkward parts: a word carries its leading space (' word'),
    a piece with a character beyond the BMP is four byte pieces sharing one span,
    and counting a text charges one more token per '!' than its spans show, so
    recounts can exceed span counts and some single tokens cannot fit at all."""

    def __init__(self) -> None:
        super().__init__(r" ?\w+| ?[^\w\s]|\s", "piece")

    def spans(self, text: str) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for span in super().spans(text):
            astral = any(ord(ch) > 0xFFFF for ch in text[span[0] : span[1]])
            out.extend([span] * (4 if astral else 1))
        return out

    def count(self, text: str) -> int:
        pieces = [m.group() for m in self.pattern.finditer(text)]
        return sum(4 if any(ord(ch) > 0xFFFF for ch in p) else 1 for p in pieces) + text.count("!")


class TiledTokenizer(PieceTokenizer):
    """PieceTokenizer with its spans made to tile the text, as the project's
    embedders report them: a token starts where its raw offset does (never
    before the previous start) and ends where the next starts, so whitespace
    joins the token before it and byte pieces become empty spans."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "tiled"

    def spans(self, text: str) -> list[tuple[int, int]]:
        raw = super().spans(text)
        if not raw:  # the empty text: no token, nothing to tile
            return []
        starts = [0] + [s for s, _ in raw[1:]]
        for i in range(1, len(starts)):
            starts[i] = max(starts[i], starts[i - 1])
        return list(zip(starts, starts[1:] + [len(text)]))


TOKENIZERS = {
    "regex": lambda: RegexTokenizer(),
    "char": lambda: RegexTokenizer(r"(?s).", "char"),
    "piece": PieceTokenizer,
    "tiled": TiledTokenizer,
    # Tokens that swallow whitespace, line breaks included: breaks inside a token
    # are not cut points.
    "pairs": lambda: RegexTokenizer(r"\S+(?:\s+\S+)?", "pairs"),
}


def _wordllama_tokenizer_file() -> Path | None:
    spec = importlib.util.find_spec("wordllama")
    if spec is None or spec.origin is None or importlib.util.find_spec("tokenizers") is None:
        return None
    path = Path(spec.origin).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
    return path if path.is_file() else None


class HFTokenizer:
    """wordllama's Llama-2 SentencePiece BPE through `tokenizers`, no special tokens."""

    name = "wordllama"

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(path))
        self.tok.no_padding()
        self.tok.no_truncation()

    def spans(self, text: str) -> list[tuple[int, int]]:
        return list(self.tok.encode(text, add_special_tokens=False).offsets)

    def count(self, text: str) -> int:
        return len(self.tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts):
        return [len(e.ids) for e in self.tok.encode_batch(list(texts), add_special_tokens=False)]


@pytest.fixture(scope="module")
def wordllama() -> HFTokenizer:
    path = _wordllama_tokenizer_file()
    if path is None:
        pytest.skip("wordllama's tokenizer file (or the tokenizers package) is not installed")
    return HFTokenizer(path)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "b", "é", "1", " ", "\n", "\t", "\u3000", "!"]), max_size=40))
@pytest.mark.parametrize("make", [WordTokenizer, TiledTokenizer], ids=["fake-embedder", "tiled"])
def test_the_tokenizers_standing_for_an_embedders_tile_the_text(make, text):
    """The ``Tokenizer`` contract (core/embedders/base.py): the spans tile the text (the first starts at 0,
    each ends where the next starts, the last ends at its end), and for the fake embedder's tokenizer
    ``count`` is the number of spans (a word with the whitespace after it; no word, one token)."""
    tok = make()
    spans = tok.spans(text)
    starts, ends = [s for s, _ in spans], [e for _, e in spans]
    if text:
        assert starts[0] == 0 and ends[-1] == len(text) and starts[1:] == ends[:-1], spans
        assert all(s <= e for s, e in spans)
    else:
        assert spans == []
    if make is WordTokenizer:
        assert all(s < e for s, e in spans)
        assert tok.count(text) == len(spans) and tok.count_many([text, text]) == [len(spans)] * 2
        words = text.split()
        assert [text[s:e].strip() for s, e in spans] == (words or ([""] if text else []))


# --- the reference: spec/chunker.md, transcribed plainly ---------------------


def reference_chunks(doc: str, tok, max_tokens: int, overlap: int) -> list[Chunk]:
    spans = tok.spans(doc)
    n = len(spans)

    def content_start(i: int) -> int:
        k = spans[i][0]
        while k < len(doc) and doc[k].isspace():
            k += 1
        return k

    def content_end(i: int, start: int) -> int:
        r = spans[i][1]
        while r > start and doc[r - 1].isspace():
            r -= 1
        return r

    def word_start(j: int) -> int:
        p = content_start(j)
        if p >= len(doc):
            return 0
        if p == 0 or doc[p - 1].isspace():
            return 2
        return 1 if doc[p].isalnum() and not doc[p - 1].isalnum() else 0

    def kind(j: int, start: int) -> int:
        e = spans[j][1]
        if e <= start:
            return 0
        r = e
        while r > 0 and doc[r - 1].isspace():
            r -= 1
        q = e
        while q < len(doc) and doc[q].isspace():
            q += 1
        run = doc[r:q]
        if not run:
            return 0
        breaks = len(re.findall(r"\r\n|\r|\n", run))
        if breaks:
            return 3 if breaks >= 2 else 2
        return 1 if doc[r - 1] in ".!?" else 0

    def clean(j: int) -> bool:
        e = spans[j][1]
        joins = e < len(doc) and (doc[e] == "\u200d" or unicodedata.category(doc[e])[0] == "M")
        return e <= spans[j + 1][0] and not joins and not (e > 0 and doc[e - 1] == "\u200d")

    def cut(a: int) -> int:
        b = a + max_tokens
        if b >= n:
            return n - 1
        lo, start = b - 1 - max_tokens // 4, content_start(a)
        best = max(range(lo, b), key=lambda j: (kind(j, start), j))
        if kind(best, start) > 0:
            return best
        return next((j for j in range(b - 1, lo - 1, -1) if clean(j)), b - 1)

    chunks: list[Chunk] = []
    a, prev_end = 0, 0
    while a < n:
        c, start = cut(a), content_start(a)
        while True:
            end = content_end(c, start)
            if end <= max(start, prev_end):
                a = max(c + 1, a + 1)
                break
            count = tok.count(doc[start:end])
            if count < 1:
                a = max(c + 1, a + 1)
                break
            if count <= max_tokens:
                chunks.append(Chunk(start, end, doc[start:end], count))
                prev_end = end
                a_next = max(c + 1 - overlap, a + 1)
                while a_next < n and content_start(a_next) <= start:
                    a_next += 1
                # The first start after whitespace, else the first after punctuation.
                best = max(range(a_next, c + 1), key=lambda j: (word_start(j), -j), default=None)
                a = best if best is not None and word_start(best) > 0 else a_next
                break
            if c == a:
                a += 1
                break
            c = max(a, c - max(1, count - max_tokens))
    return chunks


# --- invariants --------------------------------------------------------------


def check_invariants(doc: str, tok, chunks: list[Chunk], max_tokens: int, overlap: int) -> None:
    for ch in chunks:
        assert ch.text == doc[ch.start : ch.end]
        assert ch.text and not ch.text[0].isspace() and not ch.text[-1].isspace()
        assert 1 <= ch.n_tokens <= max_tokens
        assert ch.n_tokens == tok.count(ch.text)
    for prev, nxt in zip(chunks, chunks[1:]):
        assert prev.start < nxt.start and prev.end < nxt.end
    spans = tok.spans(doc)
    starts = [ch.start for ch in chunks]
    for s, e in spans:
        part = doc[s:e]
        if not part.strip():
            continue
        s2, e2 = s + len(part) - len(part.lstrip()), s + len(part.rstrip())
        i = bisect_right(starts, s2) - 1
        if i >= 0 and chunks[i].end >= e2:
            continue
        # Uncovered is allowed only for a token that cannot fit on its own.
        assert tok.count(doc[s2:e2]) > max_tokens, (s, e, part)
    # Word-aligned starts: a chunk that does not open a word had no word start
    # among the tokens it shares with the chunk before it.
    def opens_word(p: int) -> int:  # 2 after whitespace, 1 after punctuation, else 0
        if p == 0 or doc[p - 1].isspace():
            return 2
        return 1 if doc[p].isalnum() and not doc[p - 1].isalnum() else 0

    content_starts = sorted({s + len(doc[s:]) - len(doc[s:].lstrip()) for s, _ in spans})
    for prev, nxt in zip(chunks, chunks[1:]):
        if opens_word(nxt.start) == 2:
            continue
        shared = [p for p in content_starts if nxt.start <= p < prev.end]
        assert max(map(opens_word, shared), default=0) <= opens_word(nxt.start), (prev, nxt)
    disjoint = all(s < e for s, e in spans) and all(
        e <= s2 for (_, e), (s2, _) in zip(spans, spans[1:])
    )
    if disjoint:
        span_starts = [s for s, _ in spans]
        for prev, nxt in zip(chunks, chunks[1:]):
            lo = bisect_right(span_starts, nxt.start - 1)
            shared = 0
            for _s, e in spans[lo:]:
                if e > prev.end:
                    break
                shared += 1
            assert shared <= overlap


PIECES = [
    "a", "bc", "Def", "42", " ", " ", "  ", "\n", "\n\n", "\r\n", "\r", "\t", ".", "!", "?",
    ",", "é", "e\u0301", "漢", "字", "😀", "👨\u200d👩", "\u00a0", "\u3000", "x!",
]  # fmt: skip
docs = st.lists(st.sampled_from(PIECES), max_size=160).map("".join)


@st.composite
def params(draw):
    max_tokens = draw(st.integers(1, 24))
    return max_tokens, draw(st.integers(0, max_tokens - 1))


@pytest.mark.parametrize("tok_name", sorted(TOKENIZERS))
@settings(max_examples=150, deadline=None)
@given(doc=docs, p=params())
def test_invariants_hold_for_any_text(tok_name, doc, p):
    tok = TOKENIZERS[tok_name]()
    chunks = chunk_text(doc, tok, *p)
    check_invariants(doc, tok, chunks, *p)


@pytest.mark.parametrize("tok_name", sorted(TOKENIZERS))
@settings(max_examples=150, deadline=None)
@given(doc=docs, p=params())
def test_fast_path_agrees_with_reference(tok_name, doc, p):
    tok = TOKENIZERS[tok_name]()
    assert chunk_text(doc, tok, *p) == reference_chunks(doc, tok, *p)


@settings(max_examples=50, deadline=None)
@given(doc=docs, p=params())
def test_deterministic_and_one_spans_call(doc, p):
    tok = RegexTokenizer()
    first = chunk_text(doc, tok, *p)
    assert tok.spans_calls == (1 if doc.strip() else 0)
    assert chunk_text(doc, tok, *p) == first


# --- break preference (tokens are whitespace-separated words) ----------------


def words_doc(seps: dict[int, str], n: int = 20) -> str:
    """w0 .. w{n-1}, each followed by seps.get(i, ' ')."""
    return "".join(f"w{i}" + seps.get(i, " ") for i in range(n))


def first_chunk_last_word(doc: str) -> str:
    # max 16, tail 4: a cut may follow w11 .. w15; w15 is the hard cut.
    return chunk_text(doc, RegexTokenizer(r"\S+"), 16, 0)[0].text.split()[-1]


@pytest.mark.parametrize(
    ("seps", "last"),
    [
        ({}, "w15"),  # no break: cut at max_tokens
        ({11: "\n", 12: ". "}, "w11"),  # a line break beats a later sentence end
        ({11: "\n\n", 14: "\n"}, "w11"),  # a paragraph beats a later line break
        ({12: "\n", 14: "\n"}, "w14"),  # of equal kinds, the later
        ({10: "\n\n"}, "w15"),  # a break before the last quarter is ignored
        ({13: "\r\n \t\r\n"}, "w13"),  # CRLF, with blanks on the empty line
        ({12: "\r\r"}, "w12"),  # lone CRs count as line breaks
    ],
)
def test_break_preference(seps, last):
    assert first_chunk_last_word(words_doc(seps)).rstrip(".") == last


def test_sentence_end_needs_whitespace_after_it():
    doc = words_doc({12: ". "}).replace("w14 ", "w14.x ")
    assert first_chunk_last_word(doc) == "w12."


def test_paragraphs_cut_at_blank_lines():
    paragraphs = [" ".join(f"p{i}w{k}" for k in range(5)) + "." for i in range(40)]
    doc = "\n\n".join(paragraphs)
    for overlap in (0, 3, 7):
        chunks = chunk_text(doc, RegexTokenizer(), 24, overlap)
        check_invariants(doc, RegexTokenizer(), chunks, 24, overlap)
        for ch in chunks[:-1]:
            assert doc[ch.end : ch.end + 2] == "\n\n"
        assert chunks[-1].end == len(doc)


def test_overlap_is_exact_without_breaks():
    doc = " ".join(f"w{i}" for i in range(100))
    chunks = chunk_text(doc, RegexTokenizer(), 10, 3)
    for prev, nxt in zip(chunks, chunks[1:]):
        assert prev.text.split()[-3:] == nxt.text.split()[:3]


# --- edge cases --------------------------------------------------------------


def test_chunks_start_at_words_when_the_overlap_holds_one():
    # Tokens are pieces of at most 3 letters, so most windows would begin mid-word.
    doc = " ".join(f"word{i:03d}xyz" for i in range(200))
    tok = RegexTokenizer(r"[a-z]{1,3}|\d{1,3}")
    chunks = chunk_text(doc, tok, 24, 8)
    assert len(chunks) > 10
    assert all(c.start == 0 or doc[c.start - 1] == " " for c in chunks)
    check_invariants(doc, tok, chunks, 24, 8)
    assert chunks == reference_chunks(doc, tok, 24, 8)


def test_no_word_start_in_the_overlap_keeps_the_overlap():
    # One long word: there is no word start to move to; windows overlap exactly.
    doc = "x" * 300
    tok = RegexTokenizer(r"x{1,3}")
    chunks = chunk_text(doc, tok, 10, 4)
    assert [c.start for c in chunks[:3]] == [0, 18, 36]


@pytest.mark.parametrize("doc", ["", " ", "\n\n\t \r\n", "\u3000\u00a0"])
def test_blank_documents_give_no_chunks(doc):
    assert chunk_text(doc, RegexTokenizer()) == []
    chars = RegexTokenizer(r"(?s).")  # whitespace tokens: still no chunks, shortcut or not
    assert chunk_text(doc, chars) == reference_chunks(doc, chars, 8, 2) == []


def test_giant_token_less_runs():
    doc = "alpha" + " " * 200_000 + "beta"
    assert [c.text for c in chunk_text(doc, RegexTokenizer(), 1, 0)] == ["alpha", "beta"]
    [only] = chunk_text(doc, RegexTokenizer(), 2, 1)
    assert (only.start, only.end, only.n_tokens) == (0, len(doc), 2)
    letters = RegexTokenizer(r"[a-z]+")  # digits are never tokens
    doc = "abc" + "1" * 100_000 + "def"
    assert [c.text for c in chunk_text(doc, letters, 1, 0)] == ["abc", "def"]
    assert chunk_text(doc, letters, 2, 0)[0].text == doc


def test_crlf_cuts_like_lf():
    lf = "\n\n".join(" ".join(f"p{i}w{k}" for k in range(6)) for i in range(30))
    crlf = lf.replace("\n", "\r\n")
    a = [c.text for c in chunk_text(lf, RegexTokenizer(), 16, 4)]
    b = [c.text for c in chunk_text(crlf, RegexTokenizer(), 16, 4)]
    assert [t.replace("\n", "\r\n") for t in a] == b
    assert all("\r" not in t[-1:] + t[:1] for t in b)


def test_non_ascii_emoji_cjk():
    doc = "漢字かな交じり文。😀 emoji 👨\u200d👩 family — naïve café e\u0301\n\n" * 20
    for name, tok in TOKENIZERS.items():
        for p in ((1, 0), (7, 2), (32, 31)):
            chunks = chunk_text(doc, tok(), *p)
            check_invariants(doc, tok(), chunks, *p)
            assert chunks == reference_chunks(doc, tok(), *p), name


def test_hard_cuts_keep_combining_sequences_whole():
    doc = "e\u0301" * 60
    chunks = chunk_text(doc, RegexTokenizer(r"(?s)."), 5, 0)
    assert chunks and all(unicodedata.category(doc[c.start])[0] != "M" for c in chunks)
    assert all(c.end == len(doc) or doc[c.end] == "e" for c in chunks)


def test_max_tokens_one_gives_one_token_each():
    doc = "alpha beta, gamma.\n"
    assert [c.text for c in chunk_text(doc, RegexTokenizer(), 1, 0)] == [
        "alpha", "beta", ",", "gamma", ".",
    ]  # fmt: skip


def test_largest_overlap_still_advances():
    doc = " ".join(f"w{i}" for i in range(200))
    chunks = chunk_text(doc, RegexTokenizer(), 8, 7)
    assert len(chunks) == 200 - 8 + 1
    assert [c.text.split()[0] for c in chunks] == [f"w{i}" for i in range(193)]


def test_a_token_too_long_to_count_alone_is_skipped():
    tok = PieceTokenizer()  # each '!' is one span that counts 2
    chunks = chunk_text("ok !!! fine", tok, 1, 0)
    assert [c.text for c in chunks] == ["ok", "fine"]


def test_text_that_counts_zero_tokens_is_skipped():
    class Blind(RegexTokenizer):  # spans see digits, count() does not
        def count(self, text):
            return len(re.findall(r"[a-z]+", text))

    doc = "abc 123 def 456"
    assert [c.text for c in chunk_text(doc, Blind(), 1, 0)] == ["abc", "def"]
    assert reference_chunks(doc, Blind(), 1, 0) == chunk_text(doc, Blind(), 1, 0)


def test_recounts_over_the_window_shrink_the_chunk():
    doc = " ".join(["w!"] * 50)  # each ' w', '!' pair counts 3 when recounted
    chunks = chunk_text(doc, PieceTokenizer(), 10, 2)
    check_invariants(doc, PieceTokenizer(), chunks, 10, 2)
    assert max(c.n_tokens for c in chunks) <= 10


def test_defaults_and_frozen_chunks():
    assert (DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP) == (256, 32)
    with pytest.raises(AttributeError):
        Chunk(0, 1, "x", 1).start = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("max_tokens", "overlap"),
    [(0, 0), (-1, 0), (4, -1), (4, 4), (4, 9), (1.5, 0), (True, 0), (4, None)],
)
def test_bad_parameters_raise_usage_error(max_tokens, overlap):
    with pytest.raises(UsageError):
        chunk_text("some text", RegexTokenizer(), max_tokens, overlap)


def test_byte_offsets_are_refused():
    class ByteOffsets(RegexTokenizer):
        def spans(self, text):
            data = text.encode()
            return [m.span() for m in re.finditer(rb"\S+", data)]

    with pytest.raises(EmbeddingError, match="character offsets"):
        chunk_text("café olé", ByteOffsets())


# --- the real default tokenizer ----------------------------------------------


def test_wordllama_offsets_are_character_offsets(wordllama):
    text = "naïve 漢字 café\r\nx😀y"
    enc = wordllama.tok.encode(text, add_special_tokens=False)
    for i, (token, (s, e)) in enumerate(zip(enc.tokens, enc.offsets)):
        assert 0 <= s <= e <= len(text)
        piece = token.replace("\u2581", " ")
        if i == 0:
            piece = piece.removeprefix(" ")  # the normalizer's prepended marker
        if not token.startswith("<0x"):  # byte pieces share their character's span
            assert piece == text[s:e]
    assert [text[s:e] for s, e in enc.offsets].count("😀") == 4


@settings(max_examples=100, deadline=None)
@given(doc=docs, p=params())
def test_wordllama_agrees_with_reference_on_any_text(wordllama, doc, p):
    # Real BPE quirks: a leading-space marker overlapping the first character,
    # byte pieces sharing a span, recounts that differ from span counts.
    chunks = chunk_text(doc, wordllama, *p)
    check_invariants(doc, wordllama, chunks, *p)
    assert chunks == reference_chunks(doc, wordllama, *p)


def _python_docs() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    for data in (root.parent / "shared" / "data", Path("/work/shared/data")):
        if (data / "corpora" / "python-docs").is_dir():
            return data / "corpora" / "python-docs"
    return None


def test_wordllama_on_python_docs(wordllama):
    corpus = _python_docs()
    if corpus is None:
        pytest.skip("shared/data/corpora/python-docs is not present beside the repository")
    files = sorted(corpus.rglob("*.txt"))[::25]
    assert files
    for path in files:
        doc = path.read_text(encoding="utf-8")
        chunks = chunk_text(doc, wordllama)
        check_invariants(doc, wordllama, chunks, DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP)
        assert chunks == reference_chunks(doc, wordllama, DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP)
    doc = "Intro line.\n\n" + files[0].read_text(encoding="utf-8")[:4000] + "\n\u3000 \n"
    for p in ((1, 0), (16, 15), (48, 8)):
        chunks = chunk_text(doc, wordllama, *p)
        check_invariants(doc, wordllama, chunks, *p)
        assert chunks == reference_chunks(doc, wordllama, *p)
    assert chunk_text(" \n\t\n ", wordllama) == []


@pytest.fixture(scope="module")
def wordllama_embedder():
    pytest.importorskip("tokenizers")
    from ragtui.core.embedders import make_embedder
    from ragtui.core.errors import EmbeddingError as Missing

    try:
        return make_embedder("wordllama")
    except Missing as exc:
        pytest.skip(f"wordllama is not installed: {exc}")


@settings(max_examples=80, deadline=None)
@given(doc=docs, p=params())
def test_kept_ids_are_the_chunks_own_tokens_and_embed_the_same(wordllama_embedder, doc, p):
    # Ingest counts windows from their ids and hands them to the embedder: the chunks must be the same
    # as without ids, the ids those of tokenizing the chunk's text, and embed_ids equal to embed.
    tok = wordllama_embedder.tokenizer
    plain = chunk_text(doc, tok, *p)
    kept = chunk_text(doc, tok, *p, keep_ids=True)
    assert kept == plain
    with_ids = [c for c in kept if c.ids is not None]
    assert all(c.ids is None for c in plain)
    for c in with_ids:
        assert c.ids.tolist() == tok.ids_many([c.text])[0]
        assert len(c.ids) == c.n_tokens
    if with_ids:
        by_ids = wordllama_embedder.embed_ids([c.ids for c in with_ids])
        by_text = wordllama_embedder.embed([c.text for c in with_ids])
        assert by_ids.tobytes() == by_text.tobytes()
    # Ingest's path: the document tokenized once, windows' ids sliced from it where proven.
    sliced = chunk_text(doc, tok, *p, keep_ids=True, tokens=tok.encode_docs([doc])[0])
    assert sliced == plain
    for c in sliced:
        assert c.ids is None or c.ids.tolist() == tok.ids_many([c.text])[0]


def test_document_ids_sliced_on_python_docs(wordllama_embedder):
    corpus = _python_docs()
    if corpus is None:
        pytest.skip("shared/data/corpora/python-docs is not present beside the repository")
    tok = wordllama_embedder.tokenizer
    texts = [p.read_text(encoding="utf-8") for p in sorted(corpus.rglob("*.txt"))[3::30]]
    n = 0
    for doc, tokens in zip(texts, tok.encode_docs(texts)):
        for p in ((256, 32), (64, 16)):
            chunks = chunk_text(doc, tok, *p, keep_ids=True, tokens=tokens)
            assert chunks == chunk_text(doc, tok, *p)
            own = tok.ids_many([c.text for c in chunks])
            assert all(c.ids is not None and c.ids.tolist() == ids for c, ids in zip(chunks, own))
            n += len(chunks)
    assert n > 500


def test_keep_ids_without_ids_many_counts_as_before():
    tok = RegexTokenizer()
    doc = "One two three. Four five six seven.\n\nEight nine ten eleven twelve."
    assert chunk_text(doc, tok, 4, 1, keep_ids=True) == chunk_text(doc, tok, 4, 1)
    assert all(c.ids is None for c in chunk_text(doc, tok, 4, 1, keep_ids=True))

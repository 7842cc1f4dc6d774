"""The embedded default embedder (wordllama l2_supercat 256) and its tokenizer."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.embedders import Tokenizer, empty_text_vector, make_embedder, tile_spans
from ragtui.core.embedders.wordllama import MODEL_NAME, WordLlamaEmbedder, bundled_files
from ragtui.core.errors import UsageError
from tests.helpers.imports import UI_LIBRARIES, loaded_by_import


def implements_embedder(obj) -> bool:
    """The Embedder protocol's members exist, found without running properties."""
    members = ("model", "dim", "tokenizer", "embed", "close")
    return all(inspect.getattr_static(obj, m, None) is not None for m in members)


SAMPLES = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "naïve café, Ünïcödé façade — «quotes» and ½ fractions",
    "日本語のテキストと中文文本",
    "emoji 😀 ok 👩\u200d👩\u200d👧 family, flags 🇫🇷, skin 👍🏽",
    "windows\r\nline\r\nendings\r\n",
    "\ttabs\tand  double  spaces \n\n paragraphs ",
    "x\u0301 combining and \ufeff BOM and \u00a0 nbsp",
    "a <s> b </s> c <unk>",
    "▁literal sentencepiece marker",
    " leading space",
    "\nleading newline",
    "🙂",
    " ",
]


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def check_spans(text: str, spans: list[tuple[int, int]]) -> None:
    """The tiling contract of embedders.base."""
    if not text:
        assert spans == []
        return
    assert spans, "non-empty text has tokens (byte fallback covers everything)"
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)
    for (_s0, e0), (s1, _e1) in zip(spans, spans[1:]):
        assert e0 == s1
    for s, e in spans:
        assert 0 <= s <= e <= len(text)
    # A character shared by several tokens belongs to the last of them, so
    # the last token always holds text.
    assert spans[-1][1] > spans[-1][0]


def check_spans_are_exact(embedder: WordLlamaEmbedder, text: str) -> None:
    """Each non-empty span is exactly the text of its token and the zero-width ones before it.

    Compared in the tokenizer's own alphabet: its normaliser writes spaces as
    "▁" and prefixes one "▁" to the text; "<0xNN>" tokens are single bytes.
    """
    enc = embedder.tokenizer.encode(text)
    spans = embedder.tokenizer.spans(text)
    pending = b""
    for i, ((s, e), tok) in enumerate(zip(spans, enc.tokens)):
        if len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
            pending += bytes([int(tok[3:5], 16)])
        else:
            pending += tok.encode()
        if s == e:
            continue
        expected = text[s:e].replace(" ", "▁")
        if s == 0:
            expected = "▁" + expected
        assert pending == expected.encode(), (text, i, s, e, pending)
        pending = b""
    assert pending == b""


# --- loading ---------------------------------------------------------------------

def test_bundled_files_are_in_the_wheel():
    weights, tokenizer = bundled_files()
    assert weights.is_file() and weights.name == "l2_supercat_256.safetensors"
    assert tokenizer.is_file() and tokenizer.name == "l2_supercat_tokenizer_config.json"


def test_loads_offline_with_sockets_forbidden(tmp_path):
    """A fresh interpreter with every socket call refused and the hub marked offline."""
    code = textwrap.dedent(
        """
        import socket, sys
        def refuse(*a, **k):
            raise RuntimeError("network access attempted")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from ragtui.core.embedders import make_embedder
        e = make_embedder("wordllama")
        v = e.embed(["offline embedding works", ""])
        assert v.shape == (2, 256), v.shape
        assert e.tokenizer.count("offline") > 0
        assert "wordllama" not in sys.modules, "importing wordllama configures root logging"
        print("ok", e.model)
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"ok {MODEL_NAME}"
    assert not (tmp_path / ".cache" / "wordllama").exists()


def test_make_embedder_default_and_protocols(embedder):
    e = make_embedder()
    assert isinstance(e, WordLlamaEmbedder)
    assert implements_embedder(e) and isinstance(e.tokenizer, Tokenizer)
    assert e.model == MODEL_NAME == e.tokenizer.name
    assert e.dim == 256
    e.close()


def test_make_embedder_rejects_unknown_kind_and_options():
    with pytest.raises(UsageError, match="unknown embedder kind 'bert'"):
        make_embedder("bert")
    with pytest.raises(UsageError, match="wordllama embedder"):
        make_embedder("wordllama", dims=512)
    with pytest.raises(UsageError, match="batch_size"):
        make_embedder("wordllama", batch_size=0)
    with pytest.raises(UsageError, match="http embedder"):
        make_embedder("http")  # base_url and model are required


@pytest.mark.parametrize("module", [
    "ragtui.core.embedders",
    "ragtui.core.embedders.wordllama",
    "ragtui.core.embedders.http",
])
def test_embedders_load_no_ui_and_no_wordllama_package(module):
    """Every exported name resolves; none loads a UI library, watchdog, or the wordllama package itself."""
    assert loaded_by_import(module, (*UI_LIBRARIES, "watchdog", "wordllama"), resolve_all=True) == set()


# --- embeddings --------------------------------------------------------------------

def test_shape_dtype_normalisation(embedder):
    v = embedder.embed(SAMPLES)
    assert v.shape == (len(SAMPLES), 256)
    assert v.dtype == np.float32 and v.flags.c_contiguous
    assert np.isfinite(v).all()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    assert (np.abs(v).max(axis=1) > 0).all()


def test_empty_input_and_empty_text(embedder):
    assert embedder.embed([]).shape == (0, 256)
    v = embedder.embed(["", "word", ""])
    expected = empty_text_vector(256)
    np.testing.assert_array_equal(v[0], expected)
    np.testing.assert_array_equal(v[2], expected)
    assert np.isclose(np.linalg.norm(expected), 1.0)
    assert not np.allclose(v[1], expected)


def test_single_str_and_non_str_are_refused(embedder):
    with pytest.raises(TypeError):
        embedder.embed("one text")
    with pytest.raises(TypeError, match=r"texts\[0\] is NoneType"):
        embedder.embed([None])


def test_deterministic_and_independent_of_batch(embedder):
    a = embedder.embed(SAMPLES)
    b = WordLlamaEmbedder(batch_size=3).embed(SAMPLES)
    c = np.vstack([embedder.embed([t]) for t in SAMPLES])
    d = embedder.embed(list(reversed(SAMPLES)))[::-1]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(a, d)


def test_embed_ids_matches_embed(embedder):
    ids = embedder.tokenizer.ids_many(SAMPLES)
    np.testing.assert_array_equal(embedder.embed_ids(ids), embedder.embed(SAMPLES))


def reference_embed(embedder: WordLlamaEmbedder, texts: list[str]) -> np.ndarray:
    """The plain definition: mean of the token rows, L2-normalised, one text at a time."""
    table = embedder._table.astype(np.float64)
    rows = []
    for t in texts:
        ids = embedder.tokenizer.encode(t).ids
        if not ids:
            rows.append(empty_text_vector(embedder.dim).astype(np.float64))
            continue
        v = table[ids].mean(axis=0)
        rows.append(v / np.linalg.norm(v))
    return np.array(rows)


def test_fast_path_matches_plain_reference(embedder):
    texts = SAMPLES + ["", "word " * 300, "".join(chr(c) for c in range(0x20, 0x2FF))]
    np.testing.assert_allclose(embedder.embed(texts), reference_embed(embedder, texts), atol=2e-6)


def test_matches_wordllama_own_embed(embedder):
    """wordllama's own pooling, built from the same bundled files (its load() would download)."""
    from safetensors import safe_open
    from tokenizers import Tokenizer as HFLibTokenizer
    from wordllama.inference import WordLlamaInference

    weights, tok_path = bundled_files()
    with safe_open(str(weights), framework="np") as f:
        table = f.get_tensor("embedding.weight")
    theirs = WordLlamaInference(table, HFLibTokenizer.from_file(str(tok_path)))
    # Texts without special-token text (they tokenise "<s>" as the control token; we do not).
    texts = [t for t in SAMPLES if "<" not in t] + ["word " * 600]
    expected = theirs.embed(texts, norm=True)
    np.testing.assert_allclose(embedder.embed(texts), expected, atol=1e-5)


def test_no_truncation_long_text_uses_every_token(embedder):
    head = "alpha beta gamma " * 200  # ~600 tokens, past any 512 default
    tail = " zebra quantum harbour" * 50
    a, b = embedder.embed([head, head + tail])
    assert float(a @ b) < 0.999  # the tail changed the vector: it was not cut off
    assert embedder.tokenizer.count(head + tail) > 512


def test_special_token_text_is_plain_text(embedder):
    tok = embedder.tokenizer
    ids = tok.encode("<s></s><unk>").ids
    assert 0 not in ids and 1 not in ids and 2 not in ids
    assert tok.count("<s>") == 3


def test_embedding_is_semantic(embedder):
    q, near, far = embedder.embed(["how to install the package",
                                   "installation instructions for the library",
                                   "a recipe for chocolate cake"])
    assert q @ near > q @ far


# --- tokenizer -------------------------------------------------------------------------

@pytest.mark.parametrize("text", SAMPLES)
def test_spans_tile_and_are_exact(embedder, text):
    spans = embedder.tokenizer.spans(text)
    check_spans(text, spans)
    check_spans_are_exact(embedder, text)
    assert embedder.tokenizer.count(text) == len(spans)


def test_emoji_bytes_share_one_character(embedder):
    text = "a😀b"
    spans = embedder.tokenizer.spans(text)
    # "▁a", four byte tokens for the emoji, "b": the last byte token owns it.
    assert spans == [(0, 1), (1, 1), (1, 1), (1, 1), (1, 2), (2, 3)]
    # The prefix "▁" of a text that starts with a byte token stands for nothing.
    assert embedder.tokenizer.spans("\tx") == [(0, 0), (0, 1), (1, 2)]


def test_crlf_offsets(embedder):
    text = "one\r\ntwo\r\n"
    spans = embedder.tokenizer.spans(text)
    pieces = [text[s:e] for s, e in spans]
    assert "".join(pieces) == text
    assert "\r" in pieces and "\n" in pieces


def test_spans_many_matches_spans(embedder):
    texts = SAMPLES + ["", "long " * 3000, "😀 " * 5000]
    assert embedder.tokenizer.spans_many(texts) == [embedder.tokenizer.spans(t) for t in texts]
    assert embedder.tokenizer.spans_many([]) == []


def test_long_text_spans(embedder):
    text = ("Ünïcödé 😀 line\r\n" * 3000) + "end"
    spans = embedder.tokenizer.spans(text)
    check_spans(text, spans)
    assert len(spans) == embedder.tokenizer.count(text) > 30000


def test_count_many_matches_count(embedder):
    tok = embedder.tokenizer
    assert tok.count_many(SAMPLES + [""]) == [tok.count(t) for t in SAMPLES + [""]]
    assert tok.count_many([]) == []
    assert tok.count("") == 0 and tok.spans("") == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_spans_property(embedder, text):
    spans = embedder.tokenizer.spans(text)
    check_spans(text, spans)
    check_spans_are_exact(embedder, text)
    assert embedder.tokenizer.count(text) == len(spans)


def test_tile_spans_rules():
    assert tile_spans([], 0) == []
    assert tile_spans([(0, 2), (2, 5)], 5) == [(0, 2), (2, 5)]  # already tiling: unchanged
    assert tile_spans([(0, 1), (0, 8)], 8) == [(0, 0), (0, 8)]  # a prefix token overlaps the next
    assert tile_spans([(0, 1), (1, 2), (1, 2), (2, 3)], 3) == [(0, 1), (1, 1), (1, 2), (2, 3)]
    assert tile_spans([(1, 2), (3, 4)], 5) == [(0, 3), (3, 5)]  # gaps go to the previous / first token


# --- the parallel split path for long texts (a fast path with the plain one beside it) -------

@pytest.fixture(scope="module")
def plain():
    """The same tokenizer without the split path: the plain reference."""
    from ragtui.core.embedders.hf_tokenizer import HFTokenizer

    return HFTokenizer.from_file(bundled_files()[1], MODEL_NAME, split_long_texts=False)


@pytest.fixture(scope="module")
def tiny_splitter(embedder):
    from ragtui.core.embedders._spm_split import SpmSplitter

    splitter = SpmSplitter.build(embedder.tokenizer._tk, segment=3)
    assert splitter is not None
    return splitter


def test_wordllama_tokenizer_qualifies_for_splitting(embedder):
    assert embedder.tokenizer.long_text_splitter() is not None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab ▁\t\n😀é<s>")) | st.characters(codec="utf-8"),
               max_size=60))
def test_split_path_matches_plain(embedder, plain, tiny_splitter, text):
    if not text:
        return
    assert tile_spans(tiny_splitter.raw_offsets(text), len(text)) == plain.spans(text)
    assert tiny_splitter.count(text) == plain.count(text)


def test_split_path_on_long_text(embedder, plain):
    text = ("Ünïcödé  😀 words ▁marker  \r\n\tindent " * 2000) + " end  "
    assert len(text) > 8192
    assert embedder.tokenizer.spans(text) == plain.spans(text)
    assert embedder.tokenizer.count(text) == plain.count(text)


def test_split_path_on_real_documents(embedder, plain):
    from tests.conftest import shared_data

    docs = sorted(shared_data("corpora", "python-docs").rglob("*.txt"))
    docs = sorted(docs, key=lambda p: p.stat().st_size)[-12:]  # the longest, ~100-200 KB each
    for path in docs:
        text = path.read_text(encoding="utf-8")
        assert embedder.tokenizer.spans(text) == plain.spans(text), path.name


def test_splitter_declines_unsafe_tokenizers():
    from tokenizers import Tokenizer as T
    from tokenizers import models, normalizers

    from ragtui.core.embedders._spm_split import SpmSplitter

    def spm(vocab):
        tk = T(models.BPE(vocab=vocab, merges=[], byte_fallback=True))
        tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        return tk

    assert SpmSplitter.build(spm({"a": 0, "▁": 1, "▁a": 2})) is not None
    assert SpmSplitter.build(spm({"a": 0, "▁": 1, "a▁": 2})) is None  # a merge could cross a cut
    other = spm({"a": 0})
    other.normalizer = normalizers.NFKC()
    assert SpmSplitter.build(other) is None


# --- a document tokenized once (ingest): encode_docs and the windows that are slices of it ---------


def _windows(text):
    """Every (start, end) a chunk could have: from a non-blank character to just after one."""
    marks = [i for i, ch in enumerate(text) if not ch.isspace()]
    return [(s, e + 1) for s in marks for e in marks if e >= s]


def _check_doc_tokens(tok, plain, text, dt):
    assert dt.spans == plain.spans(text)
    assert dt.ids.dtype == np.int32
    if len(text) < 8192:
        assert dt.ids.tolist() == plain.ids_many([text])[0]


def _check_windows(tok, plain, text, dt, pairs):
    for start, end in pairs:
        got = dt.window(start, end)
        if got is None:
            continue
        head_end, tail = got
        assert start <= head_end < end
        ids = plain.ids_many([text[start:head_end]])[0] if head_end > start else []
        own = plain.ids_many([text[start:end]])[0]
        assert ids + tail.tolist() == own, (text, start, end)
        assert dt.window_ids(start, end).tolist() == own  # the head tokenized in this thread
        assert tok.ids_one(text[start:end]) == own


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab ▁\t\n.😀é<s>\u0301")) | st.characters(codec="utf-8"),
               max_size=40))
def test_encode_docs_gives_the_spans_ids_and_window_ids_of_plain_tokenizing(embedder, plain, text):
    # The word-splitting tokenizer on text normalised in Python, spans from the tokens' lengths, and every
    # window the proof answers for: each must equal what the plain tokenizer says of the text alone.
    tok = embedder.tokenizer
    dt, by_offsets = tok.encode_docs([text])[0], tok._encode_docs_offsets([text], tok.long_text_splitter())[0]
    _check_doc_tokens(tok, plain, text, dt)
    _check_doc_tokens(tok, plain, text, by_offsets)
    assert by_offsets.ids.tolist() == dt.ids.tolist()
    _check_windows(tok, plain, text, dt, _windows(text)[:200])


def test_encode_docs_on_real_and_long_documents(embedder, plain):
    from tests.conftest import shared_data

    tok = embedder.tokenizer
    paths = sorted(shared_data("corpora", "python-docs").rglob("*.txt"))
    texts = [p.read_text(encoding="utf-8") for p in paths[::40]]
    texts += ["", "   ", "x" * 20000, ("Ünïcödé  😀 words ▁marker  \r\n\tindent " * 400) + " end  "]
    docs = tok.encode_docs(texts)
    assert len(docs) == len(texts)
    answered = 0
    for text, dt in zip(texts, docs):
        _check_doc_tokens(tok, plain, text, dt)
        marks = [m.start() for m in re.finditer(r"(?<!\S)\S", text)][:60]  # word starts, as chunks begin
        ends = [m.end() for m in re.finditer(r"\S(?!\S)", text)][:60]
        pairs = [(s, e) for s in marks for e in ends if s < e and e - s < 3000][:400]
        _check_windows(tok, plain, text, dt, pairs)
        answered += sum(dt.window(s, e) is not None for s, e in pairs)
    assert answered > 1000  # the proof holds for most windows of prose


def test_window_refuses_what_it_cannot_prove(embedder):
    from ragtui.core.embedders.doc_tokens import DocTokens

    tok = embedder.tokenizer
    text = "alpha beta gamma"
    dt = tok.encode_docs([text])[0]
    assert dt.window(6, 10) is not None and dt.window(6, 10)[0] == 6  # after a space: a plain slice
    assert dt.window(0, 3) is None  # ends mid-word: a merge may cross the cut
    assert dt.window(1, 5) is None  # starts mid-word, no safe cut before the end
    forced = DocTokens(text, dt.spans, dt.ids, tok.long_text_splitter(), forced=[8])
    assert forced.window(6, 10) is None  # the document's tokens were cut without proof there
    assert DocTokens(text, dt.spans, dt.ids, None).window(6, 10) is None  # no proof for this tokenizer
    with pytest.raises(ValueError):
        DocTokens(text, dt.spans, dt.ids[:1], None)


def test_encode_docs_without_the_split_path_proves_nothing(plain):
    texts = ["", "alpha beta gamma", "x" * 9000 + " y"]
    docs = plain.encode_docs(texts)
    for text, dt in zip(texts, docs):
        assert dt.spans == plain.spans(text)
        assert dt.ids.tolist() == (plain.ids_many([text])[0] if text else [])
    assert docs[1].window(6, 10) is None


def test_a_sync_that_finds_nothing_to_do_reads_no_model_file(tmp_path):
    """The table and the tokenizer are read on first use: a no-op `ragtui ingest` never pays for them
    (0.4 s of a 100k-file re-sync), and the first sync that has something to cut does."""
    from ragtui.core.ingest.sync import sync

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Cats sit on mats.\n")
    sync(docs, artifacts=tmp_path / "art", embedder=WordLlamaEmbedder())
    fresh = WordLlamaEmbedder()
    report = sync(docs, artifacts=tmp_path / "art", embedder=fresh)
    assert not report.published and fresh._loaded is None
    assert fresh.tokenizer_name == MODEL_NAME and fresh.model == MODEL_NAME and fresh.dim == 256
    (docs / "b.md").write_text("Dogs chase cats.\n")
    report = sync(docs, artifacts=tmp_path / "art", embedder=fresh)
    assert report.published and fresh._loaded is not None
    assert fresh.tokenizer.name == fresh.tokenizer_name


def test_the_application_layer_warms_the_embedder_unless_told_not_to(tmp_path):
    from ragtui import app
    from ragtui.config import Settings

    settings = Settings(artifacts=tmp_path)
    warm = app.open_embedder(settings)  # the TUI and search: the first query does not wait
    assert warm._quick_ready and warm._quick is not None
    assert warm._loaded is None  # what a query needs is the compact tokenizer and the stored table, not the library
    cold = app.open_embedder(settings, warm=False)  # ingest: only if something changed
    assert not cold._quick_ready and cold._loaded is None

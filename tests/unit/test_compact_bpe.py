"""The library-free tokenizer of the embedded embedder (``compact_bpe``), its cache file and the stored table.

Everything is compared with the libraries it stands in for: the ids with the
``tokenizers`` library's, the vectors with those of the table read by the
``safetensors`` library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtui.core.embedders import compact_bpe
from ragtui.core.embedders.compact_bpe import CompactBPE, Unsupported, build_form, cache_path
from ragtui.core.embedders.wordllama import WordLlamaEmbedder, bundled_files
from tests.conftest import shared_data

WEIGHTS, TOKENIZER = bundled_files()


@pytest.fixture(scope="module")
def library():
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(TOKENIZER))
    tk.encode_special_tokens = True  # as HFTokenizer runs it: "<s>" in a text is plain text
    return tk


@pytest.fixture(scope="module")
def compact(tmp_path_factory) -> CompactBPE:
    return compact_bpe.load(TOKENIZER, tmp_path_factory.mktemp("bpe-cache"))


def library_ids(library, text: str) -> list[int]:
    return library.encode(text, add_special_tokens=False).ids


def reference_vectors(texts: list[str]) -> np.ndarray:
    """The embedding as defined: the library's ids, the safetensors table widened to float32, rows summed
    in order and L2-normalised."""
    from safetensors import safe_open
    from tokenizers import Tokenizer

    with safe_open(str(WEIGHTS), framework="np") as f:
        table = np.ascontiguousarray(f.get_tensor("embedding.weight"), dtype=np.float32)
    tk = Tokenizer.from_file(str(TOKENIZER))
    tk.encode_special_tokens = True
    out = np.empty((len(texts), 256), dtype=np.float32)
    for i, t in enumerate(texts):
        ids = tk.encode(t, add_special_tokens=False).ids
        if ids:
            out[i] = np.add.reduce(table.take(ids, axis=0), axis=0, dtype=np.float32)
        else:
            out[i] = 0.0
    norms = np.linalg.norm(out, axis=1)
    empty = norms == 0
    norms[empty] = 1.0
    out /= norms[:, None]
    out[empty] = np.float32(1 / 16)
    return out


# --- the same ids as the library --------------------------------------------------------------------

_ALPHABET = st.characters(codec="utf-8")  # every code point a str may hold in UTF-8 text: no lone surrogate
_PIECES = st.one_of(
    st.text(_ALPHABET, max_size=40),
    st.text(st.sampled_from(" \t\n\r\u00a0\u3000\u2581"), min_size=1, max_size=12),  # whitespace runs, "▁"
    st.text(st.sampled_from("😀👩\u200d👧🇫🇷🏽"), min_size=1, max_size=6),  # emoji, joiners, flags, modifiers
    st.text(st.sampled_from("e\u0301\u0302\u0323\u20dd"), min_size=1, max_size=10),  # combining marks
    st.text(st.characters(categories=["Cc", "Cf", "Co", "Cn"]), min_size=1, max_size=8),  # control, format, unassigned
    st.text(st.sampled_from("abcdefghij"), min_size=30, max_size=400),  # very long words
    st.sampled_from(["<s>", "</s>", "<unk>", "<0x41>", "▁the", " the", "ing", "tion"]),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=8).map("".join))
def test_the_same_ids_as_the_library_for_any_text(compact, library, text):
    assert compact.ids(text) == library_ids(library, text)


@pytest.mark.parametrize("text", [
    "", " ", "  ", "a", "▁", "▁▁", "\n", "\x00", "\x7f\x80", "😀", "a <s> b </s> c <unk>",
    "x\u0301 combining", "\ufeffBOM", "tab\there", "windows\r\nline", "日本語のテキストと中文文本",
    "a" * 5000, "😀" * 500, "\U0010ffff\U000e0001", " leading and trailing ",
])
def test_the_same_ids_on_edge_cases(compact, library, text):
    assert compact.ids(text) == library_ids(library, text)


def test_the_same_ids_on_real_queries(compact, library):
    queries = [json.loads(line)["text"] for line in
               shared_data("eval", "scifact", "queries.jsonl").read_text("utf-8").splitlines() if line.strip()]
    for name in ("cisi/CISI.QRY", "cranfield", "adi"):
        path = shared_data("eval").joinpath(*name.split("/"))
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())[:4]
        for f in files:
            queries += [q for q in f.read_text("utf-8", "replace").split("\n.") if len(q) < 2000][:200]
    assert len(queries) > 500
    for q in queries:
        assert compact.ids(q) == library_ids(library, q), q


def test_the_same_ids_on_real_chunk_texts(compact, library):
    from ragtui.core.ingest.chunker import chunk_text

    tokenizer = WordLlamaEmbedder().tokenizer
    root = shared_data("corpora")
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in {".md", ".rst", ".txt", ".py"})
    assert files
    seen = 0
    for f in files[:: max(1, len(files) // 120)]:
        text = f.read_text("utf-8", "replace")[:20000]
        for chunk in chunk_text(text, tokenizer):
            assert compact.ids(chunk.text) == library_ids(library, chunk.text), (f, chunk.text[:80])
            seen += 1
    assert seen > 100


def test_a_lone_surrogate_is_refused_as_utf8_refuses_it(compact):
    with pytest.raises(UnicodeEncodeError):
        compact.ids("a\udcffb")


# --- what it refuses -----------------------------------------------------------------------------------


def _variant(change) -> bytes:
    spec = json.loads(TOKENIZER.read_bytes())
    change(spec)
    return json.dumps(spec).encode()


@pytest.mark.parametrize("change", [
    lambda s: s.update(pre_tokenizer={"type": "Whitespace"}),
    lambda s: s.update(normalizer={"type": "NFC"}),
    lambda s: s["normalizer"]["normalizers"].append({"type": "Lowercase"}),
    lambda s: s["model"].update(type="WordPiece"),
    lambda s: s["model"].update(dropout=0.1),
    lambda s: s["model"].update(byte_fallback=False),
    lambda s: s["model"].update(continuing_subword_prefix="##"),
    lambda s: s["model"].update(ignore_merges=True),
    lambda s: s["added_tokens"].append({"id": 5, "content": "<0x02>", "special": False}),
    lambda s: s["model"]["merges"].append("▁ nosuchtoken"),
    lambda s: s["model"]["vocab"].pop("<0x41>"),
    lambda s: s["added_tokens"].append({"id": 1, "content": ["<s>"], "special": True}),
    lambda s: s.update(added_tokens=7),
    lambda s: s["model"]["merges"].append({"a": "b"}),
    lambda s: s["model"]["merges"].append("a b c"),
    lambda s: s["model"]["vocab"].update({"zzzz-gap": 40000}),
    lambda s: s.update(model=[]),
])
def test_anything_it_does_not_implement_is_refused(change):
    with pytest.raises(Unsupported):
        build_form(_variant(change))


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2, 70000) | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                     max_leaves=6)
_SMALL = {"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                            {"type": "Replace", "pattern": {"String": " "},
                                                             "content": "▁"}]},
          "pre_tokenizer": None, "added_tokens": [{"id": 0, "content": "<unk>", "special": True}],
          "model": {"type": "BPE", "byte_fallback": True, "merges": ["a b", "▁ ab"],
                    "vocab": {"<unk>": 0, **{f"<0x{b:02X}>": b + 1 for b in range(256)}, "a": 257, "b": 258,
                              "ab": 259, "▁": 260, "▁ab": 261}}}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["normalizer", "pre_tokenizer", "added_tokens", "model", "model.vocab", "model.merges",
                        "model.byte_fallback", "model.type", "normalizer.normalizers"]), _JSON)
def test_any_tokenizer_json_is_taken_or_refused_as_unsupported(where, value):
    spec = json.loads(json.dumps(_SMALL))
    *path, last = where.split(".")
    node = spec
    for key in path:
        node = node[key]
    node[last] = value
    try:
        form = build_form(json.dumps(spec).encode())
    except Unsupported:
        return
    assert form.tokenizer().ids("ab ab") is not None


def test_a_repeated_merge_keeps_its_later_rank_as_the_library_does(tmp_path, library):
    from tokenizers import Tokenizer

    def repeat(spec):
        merges = spec["model"]["merges"]
        merges.append(merges[10])  # an early pair again, now ranked last

    raw = _variant(repeat)
    path = tmp_path / "tokenizer.json"
    path.write_bytes(raw)
    theirs = Tokenizer.from_file(str(path))
    theirs.encode_special_tokens = True
    ours = compact_bpe.load(path, tmp_path / "cache")
    for text in ["the tree at the top", "xt yt zt", "tttt"]:
        assert ours.ids(text) == theirs.encode(text, add_special_tokens=False).ids


# --- the cache file --------------------------------------------------------------------------------------


def test_the_cache_is_written_once_and_then_read(tmp_path, compact):
    folder = tmp_path / "cache"
    first = compact_bpe.load(TOKENIZER, folder)
    where = cache_path(TOKENIZER, folder)
    assert where.is_file() and list(folder.iterdir()) == [where]
    stamp = where.stat().st_mtime_ns
    header = compact_bpe.describe(where)
    assert header["format"] == compact_bpe.FORMAT and header["vocab_size"] == 32000
    again = compact_bpe.load(TOKENIZER, folder)
    assert where.stat().st_mtime_ns == stamp  # read, not rewritten
    assert again.ids("the same ids") == first.ids("the same ids") == compact.ids("the same ids")


def test_the_default_folder_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compact_bpe.default_cache_dir() == tmp_path / "xdg" / "ragtui" / "tokenizers"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert compact_bpe.default_cache_dir() == Path.home() / ".cache" / "ragtui" / "tokenizers"


def _damages(data: bytes) -> dict[str, bytes]:
    n = len(compact_bpe.MAGIC)
    header_len = int.from_bytes(data[n:n + 4], "little")
    return {
        "empty": b"",
        "truncated": data[: len(data) // 2],
        "one byte short": data[:-1],
        "one byte more": data + b"\0",
        "a body byte flipped": data[:-100] + bytes([data[-100] ^ 1]) + data[-99:],
        "the digest flipped": data[:-1] + bytes([data[-1] ^ 1]),
        "a header byte flipped": data[: n + 10] + bytes([data[n + 10] ^ 1]) + data[n + 11:],
        "a huge header length": data[:n] + (1 << 31).to_bytes(4, "little") + data[n + 4:],
        "a header length past the end": data[:n] + (len(data)).to_bytes(4, "little") + data[n + 4:],
        "foreign": b"\x89PNG\r\n\x1a\n" + os.urandom(4000),
        "another magic": b"X" + data[1:],
        "header only": data[: n + 4 + header_len],
    }


@pytest.mark.parametrize("damage", list(_damages(b"\0" * 4096)))
def test_a_damaged_cache_file_is_rebuilt_never_trusted(tmp_path, compact, damage):
    folder = tmp_path / "cache"
    compact_bpe.load(TOKENIZER, folder)
    where = cache_path(TOKENIZER, folder)
    sound = where.read_bytes()
    where.write_bytes(_damages(sound)[damage])
    got = compact_bpe.load(TOKENIZER, folder)
    assert got.ids("rebuilt from the file 😀") == compact.ids("rebuilt from the file 😀")
    assert where.read_bytes() == sound  # written again, whole


def _forged(form, key: str) -> bytes:
    return compact_bpe._encode(form, key)  # a sound digest over wrong contents: the checks must catch it


@pytest.mark.parametrize("wrong", ["char id", "byte id", "merge id", "merge key", "unsorted merges",
                                   "unsorted chars", "surrogate char", "vocab size"])
def test_a_cache_file_with_a_sound_digest_but_wrong_contents_is_rebuilt(tmp_path, compact, wrong):
    folder = tmp_path / "cache"
    compact_bpe.load(TOKENIZER, folder)
    where = cache_path(TOKENIZER, folder)
    sound = where.read_bytes()
    key = compact_bpe.describe(where)["key"]
    form = compact_bpe._decode(sound, key)
    assert form is not None
    arrays = {name: getattr(form, name).copy() for name in ("chars", "char_ids", "byte_ids", "keys", "ranks", "new")}
    if wrong == "char id":
        arrays["char_ids"][3] = 40000
    elif wrong == "byte id":
        arrays["byte_ids"][7] = 1 << 30
    elif wrong == "merge id":
        arrays["new"][5] = 32000
    elif wrong == "merge key":
        arrays["keys"][-1] = np.uint64(32000 << 32 | 5)
    elif wrong == "unsorted merges":
        arrays["keys"][[3, 4]] = arrays["keys"][[4, 3]]
    elif wrong == "unsorted chars":
        arrays["chars"][[3, 4]] = arrays["chars"][[4, 3]]
    elif wrong == "surrogate char":
        arrays["chars"][-1] = 0xDC80
    forged = compact_bpe._Form(10 if wrong == "vocab size" else form.vocab_size, form.prepend, form.pattern,
                               form.content, **arrays)
    where.write_bytes(_forged(forged, key))
    assert compact_bpe._decode(where.read_bytes(), key) is None
    got = compact_bpe.load(TOKENIZER, folder)
    assert got.ids("checked, then rebuilt") == compact.ids("checked, then rebuilt")
    assert where.read_bytes() == sound


def test_a_changed_tokenizer_file_gets_a_new_key(tmp_path, library):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(TOKENIZER.read_bytes())
    folder = tmp_path / "cache"
    compact_bpe.load(path, folder)
    where = cache_path(path, folder)
    first = compact_bpe.describe(where)["key"]
    os.utime(path, ns=(1, 1))  # same bytes, another mtime: another identity
    compact_bpe.load(path, folder)
    second = compact_bpe.describe(where)["key"]
    assert second != first
    # Other bytes of the same size and mtime (a merge dropped, the file padded back): another key, other ids.
    spec = json.loads(path.read_bytes())
    dropped = spec["model"]["merges"].pop(0)  # "▁ t": no "▁t" token any more
    raw = json.dumps(spec).encode()
    size = path.stat().st_size
    assert len(raw) <= size
    raw += b" " * (size - len(raw))
    path.write_bytes(raw)
    os.utime(path, ns=(1, 1))
    got = compact_bpe.load(path, folder)
    assert compact_bpe.describe(where)["key"] not in (first, second)
    from tokenizers import Tokenizer

    theirs = Tokenizer.from_file(str(path))
    theirs.encode_special_tokens = True
    for text in ["t", "the tree", "at top"]:
        assert got.ids(text) == theirs.encode(text, add_special_tokens=False).ids
    assert dropped == "▁ t" and got.ids("t") != library_ids(library, "t")


def test_an_unwritable_cache_folder_builds_in_memory(tmp_path, compact):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    got = compact_bpe.load(TOKENIZER, blocker / "tokenizers")
    assert got.ids("works without a cache") == compact.ids("works without a cache")
    assert blocker.read_text() == "a file where the cache folder would be"


def test_a_link_in_place_of_the_cache_file_is_not_followed(tmp_path, compact):
    folder = tmp_path / "cache"
    folder.mkdir()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"someone else's file")
    cache_path(TOKENIZER, folder).symlink_to(target)
    got = compact_bpe.load(TOKENIZER, folder)
    assert got.ids("not followed") == compact.ids("not followed")
    assert target.read_bytes() == b"someone else's file"
    assert cache_path(TOKENIZER, folder).is_file() and not cache_path(TOKENIZER, folder).is_symlink()


# --- the embedder's vectors ---------------------------------------------------------------------------------


VECTOR_TEXTS = ["how do I list files in a directory", "", "a <s> b", "😀 emoji only", "x\u0301 combining",
                "word " * 1500, "😀" * 2000, "\t\n  spaces  \n"]


def test_a_query_embeds_to_the_very_floats_of_the_library_path():
    fresh = WordLlamaEmbedder()
    got = np.concatenate([fresh.embed([t]) for t in VECTOR_TEXTS])
    assert fresh._loaded is None  # neither the tokenizers library nor the float32 table was needed
    assert got.tobytes() == reference_vectors(VECTOR_TEXTS).tobytes()
    several = fresh.embed(VECTOR_TEXTS[:5])
    assert several.tobytes() == got[:5].tobytes()


def test_a_large_call_takes_the_library_path_with_the_same_floats():
    texts = [f"chunk {i} " * 40 for i in range(64)] + VECTOR_TEXTS
    fresh = WordLlamaEmbedder()
    got = fresh.embed(texts)
    assert fresh._loaded is not None
    assert got.tobytes() == reference_vectors(texts).tobytes()
    # With the library loaded, a query still gives the same floats.
    assert fresh.embed([VECTOR_TEXTS[0]]).tobytes() == got[64:65].tobytes()


def test_the_stored_table_is_the_safetensors_table():
    from safetensors import safe_open

    from ragtui.core.embedders.wordllama import _stored

    with safe_open(str(WEIGHTS), framework="np") as f:
        theirs = f.get_tensor("embedding.weight")
    ours = _stored(WEIGHTS)
    assert ours is not None and ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert ours.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("damage", ["short", "header past the end", "offsets past the end", "wrong size",
                                    "no tensor", "not json", "wrong shape"])
def test_damaged_weights_are_refused_by_name(tmp_path, damage):
    from ragtui.core.embedders.wordllama import _stored
    from ragtui.core.errors import EmbeddingError

    data = WEIGHTS.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])

    def with_header(h: dict) -> bytes:
        raw = json.dumps(h).encode()
        return len(raw).to_bytes(8, "little") + raw + data[8 + n:]

    entry = header["embedding.weight"]
    bad = {
        "short": data[:5],
        "header past the end": (len(data)).to_bytes(8, "little") + data[8:],
        "offsets past the end": with_header({**header, "embedding.weight": {**entry, "data_offsets": [
            0, entry["data_offsets"][1] + 2]}}),
        "wrong size": with_header({**header, "embedding.weight": {**entry, "shape": [31999, 256]}}),
        "no tensor": with_header({"other": entry}),
        "not json": (5).to_bytes(8, "little") + b"{nope" + data[8 + n:],
        "wrong shape": with_header({**header, "embedding.weight": {**entry, "shape": [64000, 128]}}),
    }[damage]
    path = tmp_path / f"{damage}.safetensors"
    path.write_bytes(bad)
    with pytest.raises(EmbeddingError, match="safetensors|embedding.weight|offsets|JSON|shape|header"):
        _stored(path)



@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_weights_that_are_not_a_regular_file_are_refused_without_blocking(tmp_path, fifo_guard, kind):
    from ragtui.core.embedders.wordllama import _stored
    from ragtui.core.errors import EmbeddingError

    path = tmp_path / "l2_supercat_256.safetensors"
    if kind == "fifo":
        fifo_guard(path)  # nobody writes it: a blocking open would wait forever
    else:
        path.symlink_to("/dev/zero")  # read to its end, it never ends
    what = "a FIFO" if kind == "fifo" else "a character device"
    with pytest.raises(EmbeddingError) as e:
        _stored(path)
    assert str(e.value) == f"cannot read wordllama weights {path}: is {what}, not a regular file (never opened)"


def test_weights_cut_short_between_the_stat_and_the_read_are_refused(tmp_path, monkeypatch):
    """The header fits the size the file had when it was opened, but the table ends early: the read
    comes back short and the weights are refused, not used with a hole."""
    from ragtui.core.embedders import wordllama
    from ragtui.core.errors import EmbeddingError

    full = WEIGHTS.stat().st_size
    path = tmp_path / "cut.safetensors"
    path.write_bytes(WEIGHTS.read_bytes()[:full - 4096])
    opened = wordllama.open_regular

    def as_it_was_when_opened(target):
        fd, st = opened(target)
        fields = list(st)
        fields[6] = full  # st_size: the length it had before it was cut
        return fd, os.stat_result(fields)

    monkeypatch.setattr(wordllama, "open_regular", as_it_was_when_opened)
    with pytest.raises(EmbeddingError) as e:
        wordllama._stored(path)
    assert str(e.value) == f"cannot read wordllama weights {path}: changed while it was read (the table is cut short)"


def test_weights_whose_table_is_over_the_bound_are_refused_unread(tmp_path, bounded_memory):
    """A (sparse) file whose header names a table far larger than any wordllama table: refused before
    anything is allocated for it."""
    from ragtui.core.embedders import wordllama
    from ragtui.core.errors import EmbeddingError

    rows = wordllama._MAX_TABLE_BYTES // (256 * 2) + 1
    header = json.dumps({"embedding.weight": {"dtype": "F16", "shape": [rows, 256],
                                              "data_offsets": [0, rows * 256 * 2]}}).encode()
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + rows * 256 * 2)
    with pytest.raises(EmbeddingError, match=f"over the {wordllama._MAX_TABLE_BYTES:,}-byte limit"):
        wordllama._stored(path)


_CUT_AFTER_LOADING = """
import hashlib, os, sys
from pathlib import Path
from ragtui.core.embedders import wordllama

weights = Path(sys.argv[1])
size = weights.stat().st_size
embedder = wordllama.WordLlamaEmbedder()
embedder._files = (weights, embedder._files[1])
query = ["cats sit on mats and purr"]
before = embedder.embed(query)
table = wordllama._stored(weights)
digest = hashlib.sha256(table.tobytes()).hexdigest()
os.truncate(weights, 8)  # a mapped table's rows would now be gone: touching one kills the process (SIGBUS)
assert hashlib.sha256(table.tobytes()).hexdigest() == digest, "the table changed once the file was cut"
assert embedder.embed(query).tobytes() == before.tobytes()
os.truncate(weights, size)  # the same length again, all zeros: a mapped table would now read zeros
assert hashlib.sha256(table.tobytes()).hexdigest() == digest, "the table changed once the file was rewritten"
assert embedder.embed(query).tobytes() == before.tobytes()
print("ok")
"""


def test_the_loaded_table_stays_readable_when_the_weights_file_is_cut_short(tmp_path):
    """A reinstall (or anything else) may truncate or rewrite the weights file while a process that loaded
    it runs: its table keeps the rows it read. In a child process, so that a crash cannot take pytest down."""
    copy = tmp_path / "l2_supercat_256.safetensors"
    copy.write_bytes(WEIGHTS.read_bytes())
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", _CUT_AFTER_LOADING, str(copy)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "ok"


# --- what the query path imports -----------------------------------------------------------------------------


def test_a_cli_search_imports_neither_tokenizers_nor_safetensors(tmp_path):
    """A fresh ``ragtui search`` process in each vector mode: the query is embedded without either library."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text("Cats sit on mats and purr.\n")
    (docs / "dogs.md").write_text("Dogs chase cats around the yard.\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    art = tmp_path / "art"
    done = subprocess.run([sys.executable, "-m", "ragtui", "--artifacts", str(art), "ingest", str(docs),
                           "--index", "pets"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    probe = ("import json, runpy, sys\n"
             "sys.argv = ['ragtui', *sys.argv[1:]]\n"
             "try:\n"
             "    runpy.run_module('ragtui', run_name='__main__')\n"
             "except SystemExit as e:\n"
             "    code = e.code\n"
             "print(json.dumps({'code': code, 'loaded': sorted(m for m in ('tokenizers', 'safetensors') "
             "if m in sys.modules)}), file=sys.stderr)\n")
    for mode in ("flat", "ivf", "hybrid"):
        for _ in range(2):  # the first run builds the tokenizer's cache file, the second reads it
            done = subprocess.run([sys.executable, "-c", probe, "--artifacts", str(art), "--index", "pets", "search",
                                   "cats on mats", "--mode", mode, "--json"],
                                  capture_output=True, text=True, env=env, timeout=300)
            seen = json.loads(done.stderr.strip().splitlines()[-1])
            assert seen == {"code": 0, "loaded": []}, (mode, done.stderr)
            hits = json.loads(done.stdout)
            assert hits and hits[0]["doc_id"] == "docs/cats.md"

"""The wordllama tokenizer's ids without the ``tokenizers`` library, from a compact cached form.

Loading wordllama's ``tokenizer.json`` with the ``tokenizers`` library parses
1.8 MB of JSON (about 0.13 s of CPU) before the first query can be embedded.
``CompactBPE`` computes the same ids in Python from a few arrays, read in a few
milliseconds from a cache file built once from that JSON.

What is supported is exactly what wordllama's file uses, read the way
``HFTokenizer`` runs it (``encode_special_tokens`` on, no special tokens added,
no truncation, no padding):

* normalizer: ``Sequence[Prepend(p), Replace(String s -> c)]``: a non-empty
  text becomes ``(p + text).replace(s, c)``;
* no pre-tokenizer: the whole normalised text is one word;
* model: ``BPE`` without dropout, continuing-subword prefix or end-of-word
  suffix, ``ignore_merges`` off, with byte fallback and every ``<0xXX>``
  token present (so no character is ever unknown);
* added tokens: only special ones, each in the vocabulary under its own id
  (with ``encode_special_tokens`` they are plain text).

Anything else raises ``Unsupported`` and the caller uses the library. The
merge loop is the library's (``Word::merge_all``): a heap of candidate pairs
ordered by merge rank, then by position; a popped pair that no longer stands
is skipped. A pair listed twice in the merges keeps its later rank, as the
library's map does.

The cache: one file per tokenizer file in ``default_cache_dir()``
(``$XDG_CACHE_HOME/ragtui/tokenizers``, ``~/.cache`` when unset), named
``<SHA-256 of the tokenizer file's real path, 32 hex>.bpe``. Its key is the
SHA-256 of the format number, the tokenizer file's size, ``st_mtime_ns``,
``st_ino``, ``st_dev`` and the SHA-256 of its whole content; a file whose key
differs is rebuilt. The file is ``MAGIC``, a little-endian u32 header length,
a JSON header (key, counts, normaliser strings), zero padding to 8 bytes, the
arrays, and the SHA-256 of everything before it. Loading checks all of it —
magic, header fields and types, the exact size the counts imply, the digest,
every id below the vocabulary size, characters and merge keys strictly
increasing — and anything that fails is rebuilt from the JSON, never used.
Writes go to a temporary file renamed into place; a folder that cannot be
written means the form is built in memory every time, never an error.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import json
import os
import struct
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragtui.core.files import read_file, replace_file

__all__ = ["FORMAT", "MAGIC", "CompactBPE", "Unsupported", "cache_path", "default_cache_dir", "describe", "load"]

FORMAT = 1
MAGIC = b"RAGTUI-BPE\x00\x01"
MAX_TOKENIZER_BYTES = 64 << 20
"""A tokenizer.json larger than this is left to the library."""
MAX_CACHE_BYTES = 64 << 20
_MAX_HEADER = 1 << 16
_MAX_VOCAB = 1 << 24
_BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


class Unsupported(ValueError):
    """The tokenizer file uses something ``CompactBPE`` does not implement."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/ragtui/tokenizers`` (``~/.cache`` when the variable is unset or empty)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ragtui" / "tokenizers"


def cache_path(tokenizer_path: str | os.PathLike[str], folder: Path | None = None) -> Path:
    """Where the compact form of ``tokenizer_path`` is kept."""
    real = os.path.realpath(tokenizer_path).encode("utf-8", "surrogateescape")
    return (folder if folder is not None else default_cache_dir()) / f"{hashlib.sha256(real).hexdigest()[:32]}.bpe"


class CompactBPE:
    """Token ids of texts, the same as ``HFTokenizer.ids_many`` gives for the file it was built from."""

    def __init__(self, vocab_size: int, prepend: str, pattern: str, content: str, chars: dict[str, int],
                 byte_ids: list[int], merge_keys: array[int], merge_ranks: array[int], merge_new: array[int]) -> None:
        self.vocab_size = vocab_size
        self._prepend, self._pattern, self._content = prepend, pattern, content
        self._chars = chars
        self._bytes = byte_ids
        self._keys, self._ranks, self._new = merge_keys, merge_ranks, merge_new
        self._memo: dict[int, tuple[int, int] | None] = {}

    def _merge(self, key: int) -> tuple[int, int] | None:
        """(rank, new id) of the pair ``key`` (left id << 32 | right id), or None."""
        memo = self._memo
        if key in memo:
            return memo[key]
        keys = self._keys
        i = bisect.bisect_left(keys, key)
        got = (self._ranks[i], self._new[i]) if i < len(keys) and keys[i] == key else None
        if len(memo) < 1 << 16:
            memo[key] = got
        return got

    def ids(self, text: str) -> list[int]:
        """The ids of ``text``; ``UnicodeEncodeError`` for a lone surrogate (no UTF-8 text holds one)."""
        if not text:
            return []
        word = (self._prepend + text).replace(self._pattern, self._content)
        chars, byte_ids = self._chars, self._bytes
        sym: list[int] = []
        for ch in word:
            got = chars.get(ch)
            if got is not None:
                sym.append(got)
            else:
                sym.extend(byte_ids[b] for b in ch.encode("utf-8"))
        n = len(sym)
        if n < 2:
            return sym
        merge = self._merge
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prev = list(range(-1, n - 1))
        alive = [True] * n
        heap: list[tuple[int, int, int]] = []
        for i in range(n - 1):
            m = merge(sym[i] << 32 | sym[i + 1])
            if m is not None:
                heap.append((m[0], i, m[1]))
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            _rank, pos, new = pop(heap)
            if not alive[pos]:
                continue
            right = nxt[pos]
            if right < 0:
                continue
            m = merge(sym[pos] << 32 | sym[right])
            if m is None or m[1] != new:  # an entry that no longer stands
                continue
            sym[pos] = new
            alive[right] = False
            after = nxt[right]
            nxt[pos] = after
            if after >= 0:
                prev[after] = pos
            before = prev[pos]
            if before >= 0:
                m = merge(sym[before] << 32 | new)
                if m is not None:
                    push(heap, (m[0], before, m[1]))
            if after >= 0:
                m = merge(new << 32 | sym[after])
                if m is not None:
                    push(heap, (m[0], pos, m[1]))
        return [s for s, keep in zip(sym, alive) if keep]

    def ids_many(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.ids(t) for t in texts]


# -- building from tokenizer.json -----------------------------------------------------------------


class _Form:
    """The compact form's parts as arrays (what the cache file holds)."""

    def __init__(self, vocab_size: int, prepend: str, pattern: str, content: str, chars: np.ndarray,
                 char_ids: np.ndarray, byte_ids: np.ndarray, keys: np.ndarray, ranks: np.ndarray,
                 new: np.ndarray) -> None:
        self.vocab_size, self.prepend, self.pattern, self.content = vocab_size, prepend, pattern, content
        self.chars, self.char_ids, self.byte_ids = chars, char_ids, byte_ids
        self.keys, self.ranks, self.new = keys, ranks, new

    def tokenizer(self) -> CompactBPE:
        chars = dict(zip(map(chr, self.chars.tolist()), self.char_ids.tolist()))
        return CompactBPE(self.vocab_size, self.prepend, self.pattern, self.content, chars, self.byte_ids.tolist(),
                          array("Q", self.keys.tobytes()), array("I", self.ranks.tobytes()),
                          array("I", self.new.tobytes()))


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise Unsupported(what)


def build_form(raw: bytes) -> _Form:
    """The compact form of a ``tokenizer.json``; ``Unsupported`` for what it does not implement."""
    try:
        spec = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise Unsupported(f"not JSON: {exc}") from None
    _need(type(spec) is dict, "not a JSON object")
    _need(spec.get("pre_tokenizer") is None, "a pre-tokenizer")
    norm = spec.get("normalizer")
    _need(type(norm) is dict and norm.get("type") == "Sequence", "a normalizer other than Sequence")
    steps = norm.get("normalizers")
    _need(type(steps) is list and len(steps) == 2, "a normalizer sequence other than Prepend, Replace")
    first, second = steps
    _need(type(first) is dict and set(first) == {"type", "prepend"} and first["type"] == "Prepend"
          and type(first["prepend"]) is str, "a first normalizer other than Prepend")
    _need(type(second) is dict and set(second) == {"type", "pattern", "content"} and second["type"] == "Replace"
          and type(second["pattern"]) is dict and set(second["pattern"]) == {"String"}
          and type(second["pattern"]["String"]) is str and second["pattern"]["String"] != ""
          and type(second["content"]) is str, "a second normalizer other than Replace(String)")
    model = spec.get("model")
    _need(type(model) is dict and model.get("type") == "BPE", "a model other than BPE")
    _need(model.get("dropout") is None, "BPE dropout")
    _need(model.get("continuing_subword_prefix") is None, "a continuing-subword prefix")
    _need(model.get("end_of_word_suffix") is None, "an end-of-word suffix")
    _need(model.get("byte_fallback") is True, "BPE without byte fallback")
    _need(model.get("ignore_merges", False) is False, "ignore_merges")
    vocab = model.get("vocab")
    merges = model.get("merges")
    _need(type(vocab) is dict and 0 < len(vocab) <= _MAX_VOCAB, "no vocabulary")
    _need(type(merges) is list, "no merge list")
    size = len(vocab)
    ids = list(vocab.values())
    _need(all(type(i) is int for i in ids) and sorted(ids) == list(range(size)), "vocabulary ids that are not 0..n-1")
    added = spec.get("added_tokens") or []
    _need(type(added) is list, "added tokens that are not a list")
    for tok in added:
        _need(type(tok) is dict and tok.get("special") is True, "a non-special added token")
        content = tok.get("content")
        _need(type(content) is str and vocab.get(content) == tok.get("id"), "an added token outside the vocabulary")
    byte_ids = [vocab.get(t) for t in _BYTE_TOKENS]
    _need(all(b is not None for b in byte_ids), "byte fallback without every <0xXX> token")
    singles = sorted((ord(t), i) for t, i in vocab.items() if len(t) == 1)
    pairs: dict[int, tuple[int, int]] = {}
    get = vocab.get
    for rank, m in enumerate(merges):
        parts = m.split(" ") if type(m) is str else m
        if not (type(parts) is list and len(parts) == 2 and type(parts[0]) is str and type(parts[1]) is str):
            raise Unsupported("a merge that is not two tokens")
        a, b, new = get(parts[0]), get(parts[1]), get(parts[0] + parts[1])
        if a is None or b is None or new is None:
            raise Unsupported("a merge of tokens outside the vocabulary")
        pairs[a << 32 | b] = (rank, new)  # a repeated pair: the later rank, as the library's map keeps it
    keys = np.fromiter(pairs.keys(), dtype=np.uint64, count=len(pairs))
    vals = np.array(list(pairs.values()), dtype=np.uint32).reshape(-1, 2)
    order = np.argsort(keys, kind="stable")
    keys, vals = keys[order], vals[order]
    return _Form(size, first["prepend"], second["pattern"]["String"], second["content"],
                 np.array([c for c, _ in singles], dtype=np.uint32), np.array([i for _, i in singles], dtype=np.uint32),
                 np.array(byte_ids, dtype=np.uint32), keys, np.ascontiguousarray(vals[:, 0]),
                 np.ascontiguousarray(vals[:, 1]))


# -- the cache file ---------------------------------------------------------------------------------


def _encode(form: _Form, key: str) -> bytes:
    header = json.dumps({"format": FORMAT, "key": key, "vocab_size": form.vocab_size, "prepend": form.prepend,
                         "pattern": form.pattern, "content": form.content, "chars": int(form.chars.size),
                         "merges": int(form.keys.size)}, ensure_ascii=True).encode("ascii")
    head = MAGIC + struct.pack("<I", len(header)) + header
    head += b"\0" * (-len(head) % 8)
    body = b"".join(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes() for a in (
        form.keys, form.chars, form.char_ids, form.byte_ids, form.ranks, form.new))
    data = head + body
    return data + hashlib.sha256(data).digest()


def _decode(data: bytes, key: str) -> _Form | None:
    """The form in a cache file's bytes, or None when anything about them is wrong."""
    if len(data) < len(MAGIC) + 4 + 32 or not data.startswith(MAGIC):
        return None
    (n,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    if n > _MAX_HEADER or start + n > len(data):
        return None
    try:
        h = json.loads(data[start:start + n].decode("ascii"))
    except (ValueError, RecursionError):
        return None
    if type(h) is not dict or h.get("format") != FORMAT or h.get("key") != key:
        return None
    vocab, n_chars, n_merges = h.get("vocab_size"), h.get("chars"), h.get("merges")
    strings = [h.get("prepend"), h.get("pattern"), h.get("content")]
    if not (type(vocab) is int and 0 < vocab <= _MAX_VOCAB and type(n_chars) is int and 0 <= n_chars <= vocab
            and type(n_merges) is int and 0 <= n_merges <= MAX_CACHE_BYTES // 16):
        return None
    prepend, pattern, content = strings
    if not (isinstance(prepend, str) and isinstance(pattern, str) and isinstance(content, str) and pattern):
        return None
    body = start + n + (-(start + n) % 8)
    if len(data) != body + 8 * n_merges + 4 * (2 * n_chars + 256 + 2 * n_merges) + 32:
        return None
    if hashlib.sha256(memoryview(data)[:-32]).digest() != data[-32:]:
        return None
    at = body

    def take(dtype: str, count: int) -> np.ndarray:
        nonlocal at
        out = np.frombuffer(data, dtype=dtype, count=count, offset=at)
        at += out.nbytes
        return out

    keys = take("<u8", n_merges)
    chars, char_ids, byte_ids = take("<u4", n_chars), take("<u4", n_chars), take("<u4", 256)
    ranks, new = take("<u4", n_merges), take("<u4", n_merges)
    if n_chars and (int(chars.max()) >= 0x110000 or not (chars[1:] > chars[:-1]).all()
                    or ((chars >= 0xD800) & (chars < 0xE000)).any()):
        return None
    if not (keys[1:] > keys[:-1]).all():
        return None
    for ids in (char_ids, byte_ids, new, keys >> np.uint64(32), keys & np.uint64(0xFFFFFFFF)):
        if ids.size and int(ids.max()) >= vocab:
            return None
    if n_merges and int(ranks.max()) >= 1 << 31:
        return None
    return _Form(vocab, prepend, pattern, content, chars, char_ids, byte_ids, keys, ranks, new)


def _identity_key(raw: bytes, st: os.stat_result) -> str:
    ident = f"{FORMAT}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{st.st_dev}:{hashlib.sha256(raw).hexdigest()}"
    return hashlib.sha256(ident.encode("ascii")).hexdigest()


def _read_tokenizer(path: Path) -> tuple[bytes, os.stat_result]:
    """The file's bytes and a stat that describes exactly them (taken before and after the read)."""
    for _ in range(3):
        before = os.stat(path)
        raw = read_file(path, MAX_TOKENIZER_BYTES)
        after = os.stat(path)
        if (before.st_size, before.st_mtime_ns, before.st_ino) == (after.st_size, after.st_mtime_ns, after.st_ino) \
                and len(raw) == after.st_size:
            return raw, after
    raise Unsupported(f"{path} changed while it was read")


def load(tokenizer_path: str | os.PathLike[str], folder: Path | None = None) -> CompactBPE:
    """The ``CompactBPE`` of ``tokenizer_path``, from the cache when it holds a sound form for exactly
    this file, else built from the file (and stored when the folder can be written).

    ``Unsupported`` when the file uses what this module does not implement; ``OSError`` when it cannot be read.
    """
    path = Path(tokenizer_path)
    raw, st = _read_tokenizer(path)
    key = _identity_key(raw, st)
    where = cache_path(path, folder)
    try:
        cached = read_file(where, MAX_CACHE_BYTES, follow=False)
    except (OSError, ValueError):
        cached = None
    form = _decode(cached, key) if cached is not None else None
    if form is None:
        form = build_form(raw)
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            replace_file(where, _encode(form, key))
        except OSError:
            pass  # an unwritable cache: the form was built in memory and is used as it is
    return form.tokenizer()


def describe(form_path: Path) -> dict[str, Any]:
    """The header of a cache file (for tests and for people looking into the folder); {} when unreadable."""
    try:
        data = read_file(form_path, MAX_CACHE_BYTES, follow=False)
        (n,) = struct.unpack_from("<I", data, len(MAGIC))
        out = json.loads(data[len(MAGIC) + 4:len(MAGIC) + 4 + n])
    except (OSError, ValueError, struct.error):
        return {}
    return out if isinstance(out, dict) else {}

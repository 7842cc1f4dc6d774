"""A ``Tokenizer`` over a Hugging Face ``tokenizer.json`` file, run in-process.

Used by the wordllama embedder (with the file bundled in the wordllama wheel)
and by the HTTP embedder when the server cannot tokenise or cannot give
offsets (``tokenizer_file=...``). Loading reads one local file (a regular
file, to a bound: ``read_tokenizer_file``); nothing is fetched.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from pathlib import Path

import numpy as np
from tokenizers import Encoding
from tokenizers import Tokenizer as _HFTokenizer

from ragtui.core.embedders._spm_split import SpmSplitter
from ragtui.core.embedders.base import tile_spans
from ragtui.core.embedders.doc_tokens import DocTokens
from ragtui.core.errors import UsageError
from ragtui.core.files import read_file

__all__ = ["MAX_TOKENIZER_FILE_BYTES", "HFTokenizer", "read_tokenizer_file"]

MAX_TOKENIZER_FILE_BYTES = 128 << 20
"""The largest tokenizer.json read: published ones reach ~35 MB (a 256k vocabulary); far past that it is not one."""

# Below this many characters one plain encode is as fast as splitting.
_LONG = 8192
# Characters of pieces handed to one encode_batch by encode_docs (bounds its memory).
_DOCS_GROUP = 1 << 20
_BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")


def _grouped(encode: Callable[..., list[Encoding]], pieces: list[str]) -> Iterator[tuple[int, list[Encoding]]]:
    """``(first index, encodings)`` of consecutive groups of about ``_DOCS_GROUP`` characters."""
    lo = 0
    while lo < len(pieces):
        hi, size = lo, 0
        while hi < len(pieces) and (hi == lo or size + len(pieces[hi]) <= _DOCS_GROUP):
            size += len(pieces[hi])
            hi += 1
        yield lo, encode(pieces[lo:hi], add_special_tokens=False)
        lo = hi


def _encode_grouped(tk: _HFTokenizer, pieces: list[str]) -> list[list[int]]:
    """The ids of each piece (no offsets), in parallel groups."""
    encode = getattr(tk, "encode_batch_fast", tk.encode_batch)
    out: list[list[int]] = []
    for _, encs in _grouped(encode, pieces):
        out.extend(e.ids for e in encs)
    return out


def read_tokenizer_file(path: Path) -> bytes:
    """The bytes of the tokenizer file ``path`` for ``Tokenizer.from_buffer``; ``UsageError`` naming it when it
    is not a regular file (a FIFO, a device: refused, never read), is over ``MAX_TOKENIZER_FILE_BYTES`` or unreadable."""
    try:
        return read_file(path, MAX_TOKENIZER_FILE_BYTES, what="a tokenizer file")
    except OSError as exc:
        raise UsageError(f"cannot load tokenizer file {path}: {exc.strerror or exc}") from None


class HFTokenizer:
    """Counts and locates tokens with a local ``tokenizers`` tokenizer.

    Callers may rely on the guarantees listed in ``embedders.base``: no special
    tokens (none added, and special-token text such as ``"<s>"`` in a document
    is tokenised as plain text), spans that tile the text, and
    ``count == len(spans)``. Nothing is ever truncated or padded. Safe to share
    between threads.
    """

    name: str

    def __init__(self, tokenizer: _HFTokenizer, name: str, *, split_long_texts: bool = True) -> None:
        """``split_long_texts``: use the exact parallel path of ``_spm_split`` for long
        texts when this tokenizer qualifies (``False`` forces the plain path)."""
        self.name = name
        self._tk = tokenizer
        # Documents are data, not prompts: "<s>" in a file is four characters,
        # not the BOS control token (llama.cpp's parse_special=false).
        self._tk.encode_special_tokens = True
        self._tk.no_truncation()
        self._tk.no_padding()
        # encode_batch_fast (tokenizers >= 0.21) skips offset tracking, which
        # counting and embedding do not need; older releases only have encode_batch.
        self._encode_batch = getattr(self._tk, "encode_batch_fast", self._tk.encode_batch)
        # Built on the first long text: it costs ~0.3 s, and a process that
        # only embeds queries never needs it.
        self._splitter: SpmSplitter | None = None
        self._splitter_ready = not split_long_texts
        self._splitter_lock = threading.Lock()
        self._lengths: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._lengths_ready = False

    @classmethod
    def from_file(cls, path: str | Path, name: str, *, split_long_texts: bool = True) -> HFTokenizer:
        """Load ``tokenizer.json`` from ``path``; ``UsageError`` if it cannot be read."""
        path = Path(path).expanduser()
        raw = read_tokenizer_file(path)
        try:
            tk = _HFTokenizer.from_buffer(raw)
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise UsageError(f"cannot load tokenizer file {path}: {exc}") from exc
        return cls(tk, name, split_long_texts=split_long_texts)

    def __repr__(self) -> str:
        return f"HFTokenizer(name={self.name!r})"

    @property
    def vocab_size(self) -> int:
        """Number of token ids, added tokens included."""
        return int(self._tk.get_vocab_size(with_added_tokens=True))

    def long_text_splitter(self) -> SpmSplitter | None:
        """The exact parallel path for long texts, or ``None`` when it does not apply."""
        if not self._splitter_ready:
            with self._splitter_lock:
                if not self._splitter_ready:
                    self._splitter = SpmSplitter.build(self._tk)
                    self._splitter_ready = True
        return self._splitter

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        if not text:
            return 0
        if len(text) >= _LONG and (splitter := self.long_text_splitter()) is not None:
            return splitter.count(text)
        return len(self._tk.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``[count(t) for t in texts]``; batched, parallel in the Rust library."""
        if not texts:
            return []
        if any(len(t) >= _LONG for t in texts):  # long ones go through count (split, bounded)
            short = [i for i, t in enumerate(texts) if len(t) < _LONG]
            out = [self.count(t) if len(t) >= _LONG else 0 for t in texts]
            for i, n in zip(short, self.count_many([texts[i] for i in short])):
                out[i] = n
            return out
        encs = self._encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encs]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the tokens of ``text``; they tile the text."""
        if not text:
            return []
        if len(text) >= _LONG and (splitter := self.long_text_splitter()) is not None:
            out: list[tuple[int, int]] = []
            for part in splitter.iter_spans(text):
                out.extend(part)
            return out
        enc = self._tk.encode(text, add_special_tokens=False)
        # The Python binding reports offsets in characters of the original
        # string (normalisers are aligned back); only overlaps need fixing.
        return tile_spans(enc.offsets, len(text))

    def iter_spans(self, text: str) -> Iterator[list[tuple[int, int]]]:
        """``spans(text)`` in consecutive parts of at most a few hundred thousand
        characters each, so a caller that walks the text once holds one part.

        Optional: not part of the ``Tokenizer`` protocol (the chunker looks it up
        with ``getattr``). Without the split path the whole text is one part.
        """
        if len(text) >= _LONG and (splitter := self.long_text_splitter()) is not None:
            yield from splitter.iter_spans(text)
        elif text:
            yield self.spans(text)

    def spans_many(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """``[spans(t) for t in texts]``; short texts batched, parallel in the Rust library.

        Optional: not part of the ``Tokenizer`` protocol (callers look it up with
        ``getattr``). Long texts take ``spans``, which splits them in parallel.
        """
        out: list[list[tuple[int, int]] | None] = [None] * len(texts)
        short = [i for i, t in enumerate(texts) if t and len(t) < _LONG]
        if short:
            encs = self._tk.encode_batch([texts[i] for i in short], add_special_tokens=False)
            for i, enc in zip(short, encs):
                out[i] = tile_spans(enc.offsets, len(texts[i]))
        return [s if s is not None else self.spans(t) for s, t in zip(out, texts)]

    def encode_docs(self, texts: Sequence[str]) -> list[DocTokens]:
        """Each text tokenized once: its spans (``spans(t)``) and ids, and with a
        SentencePiece-style tokenizer the proof of which windows' ids are a slice
        (``DocTokens.window_ids``). Parallel in the Rust library.

        Optional: not part of the ``Tokenizer`` protocol (ingest looks it up with
        ``getattr``). Memory grows with the texts: ingest hands it documents shorter
        than the chunker's ``LONG_DOCUMENT_CHARS``.
        """
        splitter = self.long_text_splitter()
        if splitter is None:
            out: list[DocTokens] = []
            short = [t for t in texts if t and len(t) < _LONG]
            encs = iter(self._tk.encode_batch(short, add_special_tokens=False) if short else [])
            for t in texts:
                if not t:
                    out.append(DocTokens(t, [], np.zeros(0, dtype=np.int32), None))
                    continue
                if len(t) < _LONG:
                    enc = next(encs)
                    spans, ids = tile_spans(enc.offsets, len(t)), enc.ids
                else:  # the plain path splits nothing: one encode, as spans() does
                    enc = self._tk.encode(t, add_special_tokens=False)
                    spans, ids = tile_spans(enc.offsets, len(t)), enc.ids
                out.append(DocTokens(t, spans, np.array(ids, dtype=np.int32), None))
            return out
        normalized = splitter.normalized_tokenizer()
        lengths = self._token_lengths() if normalized is not None else None
        if normalized is None or lengths is None:
            return self._encode_docs_offsets(texts, splitter)
        # Every text is normalised here ("▁" + spaces as "▁", what the normaliser does),
        # cut where the splitter may cut (a short one is one piece), and all pieces go
        # through the word-splitting tokenizer in large parallel batches. The spans come
        # from the ids: each token covers as many characters as its text has (a byte
        # piece: none, but the last of a character's one), the rule tile_spans applies
        # to the library's offsets (tests compare the two).
        pieces: list[str] = []
        plans: list[tuple[int, int, list[int]]] = []  # per text: its pieces, forced cuts
        for t in texts:
            first = len(pieces)
            forced: list[int] = []
            if t:
                cuts, forced = splitter.plan(t)
                norm = "▁" + t.replace(" ", "▁")
                cuts = [c + 1 for c in cuts]
                cuts[0] = 0
                cuts.append(len(norm))
                pieces.extend(norm[lo:hi] for lo, hi in zip(cuts, cuts[1:]))
            plans.append((first, len(pieces), forced))
        ids_of = _encode_grouped(normalized, pieces)
        chars, is_byte, is_cont = lengths
        result: list[DocTokens] = []
        for t, (first, last, forced) in zip(texts, plans):
            flat: list[int] = []
            for k in range(first, last):
                flat.extend(ids_of[k])
                ids_of[k] = []
            doc_ids = np.array(flat, dtype=np.int32)
            if not len(doc_ids):
                result.append(DocTokens(t, [], doc_ids, splitter, forced, self.ids_one))
                continue
            width = chars[doc_ids]
            if (width < 0).any():  # a token whose text is not known (none, in practice)
                result.extend(self._encode_docs_offsets([t], splitter))
                continue
            byte = is_byte[doc_ids]
            if byte.any():
                cont_next = np.zeros(len(doc_ids), dtype=bool)
                cont_next[:-1] = is_cont[doc_ids[1:]]
                width[byte] = ~cont_next[byte]
            ends = np.cumsum(width)
            if ends[-1] != len(t) + 1:  # the tokens' texts do not spell this text: ask for offsets
                result.extend(self._encode_docs_offsets([t], splitter))
                continue
            starts = ends - width - 1  # the prepended ▁ is no character of the text
            starts[0] = 0
            starts_list = starts.tolist()
            ends_list = starts_list[1:]
            ends_list.append(len(t))
            result.append(DocTokens(t, list(zip(starts_list, ends_list)), doc_ids, splitter, forced, self.ids_one,
                                    ends_list))
        return result

    def _encode_docs_offsets(self, texts: Sequence[str], splitter: SpmSplitter) -> list[DocTokens]:
        """``encode_docs`` from the library's offsets (the pieces tokenizer, with its normaliser)."""
        piece_tk = splitter.piece_tokenizer()
        pieces: list[str] = []
        bases: list[int] = []
        plans: list[tuple[int, int, list[int]]] = []  # per text: first piece, end, forced cuts
        for t in texts:
            first = len(pieces)
            forced: list[int] = []
            if t:
                cuts, forced = splitter.plan(t)
                cuts.append(len(t))
                for k, (a, b) in enumerate(zip(cuts, cuts[1:])):
                    pieces.append(" " + t[a:b] if k == 0 else t[a:b])
                    bases.append(a - 1 if k == 0 else a)
            plans.append((first, len(pieces), forced))
        starts_of: list[list[int]] = [[] for _ in pieces]
        ids_of: list[list[int]] = [[] for _ in pieces]
        for lo, encs in _grouped(piece_tk.encode_batch, pieces):
            for k, enc in enumerate(encs, lo):
                base = bases[k]
                starts_of[k] = [s + base for s, _ in enc.offsets]
                ids_of[k] = enc.ids
        result: list[DocTokens] = []
        for t, (first, last, forced) in zip(texts, plans):
            starts = [s for k in range(first, last) for s in starts_of[k]]
            ids = np.array([i for k in range(first, last) for i in ids_of[k]], dtype=np.int32)
            spans: list[tuple[int, int]] = []
            if starts:
                # tile_spans' rule (as SpmSplitter.iter_spans computes it): a token starts
                # where its raw offset does, never before the previous one nor past the end.
                starts[0] = 0
                starts = list(accumulate(starts, max))
                if starts[-1] > len(t):
                    starts = [min(s, len(t)) for s in starts]
                ends = starts[1:]
                ends.append(len(t))
                spans = list(zip(starts, ends))
            result.append(DocTokens(t, spans, ids, splitter, forced, self.ids_one))
        return result

    def _token_lengths(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Per token id: characters of its text (-1: not known), whether it is a byte
        piece, and whether a UTF-8 continuation byte; ``None`` when not every id has a text."""
        if self._lengths_ready:
            return self._lengths
        with self._splitter_lock:
            if not self._lengths_ready:
                vocab = self._tk.get_vocab(with_added_tokens=True)
                size = max(vocab.values(), default=-1) + 1
                chars = np.full(size, -1, dtype=np.int64)
                is_byte = np.zeros(size, dtype=bool)
                is_cont = np.zeros(size, dtype=bool)
                special = {t.content for t in self._tk.get_added_tokens_decoder().values()}
                for token, i in vocab.items():
                    if token in special:
                        continue
                    if m := _BYTE_PIECE.fullmatch(token):
                        is_byte[i] = True
                        is_cont[i] = 0x80 <= int(m.group(1), 16) < 0xC0
                        chars[i] = 0
                    else:
                        chars[i] = len(token)
                self._lengths = (chars, is_byte, is_cont)
                self._lengths_ready = True
        return self._lengths

    def encode(self, text: str) -> Encoding:
        """The library's ``Encoding`` of ``text`` (ids, token strings, raw offsets).

        Raw offsets may overlap; ``spans`` is the tiled view callers should use.
        """
        return self._tk.encode(text, add_special_tokens=False)

    def ids_many(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (no offsets computed); for embedders."""
        if not texts:
            return []
        if any(len(t) >= _LONG for t in texts):
            out: list[list[int]] = []
            for t in texts:
                out.append([i for part in self.iter_ids(t) for i in part] if len(t) >= _LONG else [])
            short = [i for i, t in enumerate(texts) if len(t) < _LONG]
            for i, ids in zip(short, self.ids_many([texts[i] for i in short])):
                out[i] = ids
            return out
        encs = self._encode_batch(list(texts), add_special_tokens=False)
        return [e.ids for e in encs]

    def ids_one(self, text: str) -> list[int]:
        """``ids_many([text])[0]`` for a short text, computed in the calling thread (a batch call
        waits for the library's thread pool, which another thread's batch may be holding)."""
        if not text:
            return []
        if len(text) >= _LONG:
            return self.ids_many([text])[0]
        return self._tk.encode(text, add_special_tokens=False).ids

    def iter_ids(self, text: str) -> Iterator[list[int]]:
        """The ids of ``ids_many([text])[0]`` in consecutive parts (one part unless
        the text is long), so an embedder can pool a long text in bounded memory."""
        if len(text) >= _LONG and (splitter := self.long_text_splitter()) is not None:
            yield from splitter.iter_ids(text)
        elif text:
            yield self._encode_batch([text], add_special_tokens=False)[0].ids

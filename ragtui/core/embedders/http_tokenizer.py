"""A ``Tokenizer`` that asks the embedding server, in one of four dialects.

==========  ==================  ===========================================================
style       default path        request -> answer (spec/embedders.md has the full shapes)
==========  ==================  ===========================================================
native      ``/v1/tokenize``    ``{"model", "input", "return_offsets"}`` -> ``{"tokens", "offsets"}``
llama.cpp   ``/tokenize``       ``{"content", "add_special": false, "parse_special": false,
                                "with_pieces"}`` -> ``{"tokens": [id | {"id", "piece"}]}``
vllm        ``/tokenize``       ``{"model", "prompt", "add_special_tokens": false,
                                "return_token_strs"}`` -> ``{"tokens", "token_strs"}``
tei         ``/tokenize``       ``{"inputs", "add_special_tokens": false}``
                                -> ``[[{"id", "text", "special", "start", "stop"}]]``
==========  ==================  ===========================================================

Answers are read to a bound from the request: ``tokenize_bound(text)`` (a
token per byte of the text at most, each with its id, offsets or piece) and
``detokenize_bound(ids)``; each request has ``timeout`` seconds in all.

``count`` needs only token ids. ``spans`` needs positions: native and tei give
offsets; llama.cpp and vllm give token pieces, which ``align_pieces`` lays over
the text's UTF-8 bytes. When a server gives neither, or its pieces do not fit
the text (a normalising tokenizer: lowercasing, NFKC), ``spans`` raises
``EmbeddingError`` saying so and pointing at ``tokenizer_file``.
"""

from __future__ import annotations

import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ragtui.core.embedders._transport import JSONPoster
from ragtui.core.embedders.base import tile_spans
from ragtui.core.embedders.vocab_cache import SAMPLE, VocabCache, server_identity
from ragtui.core.errors import EmbeddingError

__all__ = ["DEFAULT_TOKENIZE_PATHS", "DETOKENIZE_PATHS", "TOKENIZE_STYLES", "HTTPTokenizer", "align_by_decoding",
           "align_pieces", "detokenize_bound", "tokenize_bound"]

DEFAULT_TOKENIZE_PATHS = {
    "native": "/v1/tokenize",
    "llama.cpp": "/tokenize",
    "llama-cpp-python": "/extras/tokenize",
    "vllm": "/tokenize",
    "tei": "/tokenize",
}
DETOKENIZE_PATHS = {
    "llama.cpp": "/detokenize",
    "llama-cpp-python": "/extras/detokenize",
}
"""Styles whose server can turn ids back into text: spans come from decoding when the ids come without positions."""
MAX_GROUP = 8
"""Tokens decoded together, at most, when one alone is not text (a character split over byte tokens)."""
PIECE_CACHE = 1 << 18
"""Decoded single tokens remembered per tokenizer (a vocabulary is at most a few hundred thousand)."""
SAVE_SECONDS = 2.0
"""How often, at most, newly decoded pieces are written to the vocabulary cache (and once more at exit)."""
TOKENIZE_STYLES = (*DEFAULT_TOKENIZE_PATHS, "none")


def tokenize_bound(text: str) -> int:
    """The most bytes a tokenize answer for ``text`` is read to.

    At most a token per UTF-8 byte (plus a few special ones), and at most 160 bytes of JSON per token: TEI's
    ``{"id", "text", "special", "start", "stop"}`` object with an escaped character is under 100.
    """
    return (len(text.encode("utf-8")) + 16) * 160 + (64 << 10)


def detokenize_bound(ids: Sequence[int]) -> int:
    """The most bytes a detokenize answer for ``ids`` is read to (a token's text, escaped, is far under 2 KiB)."""
    return len(ids) * 2048 + (64 << 10)

_UNAVAILABLE = (
    "token spans are unavailable from this server; configure a local tokenizer "
    "(tokenizer_file=path/to/tokenizer.json, or tokenize_style='native'/'tei' "
    "with a server that returns offsets, or 'llama.cpp'/'llama-cpp-python' with one that detokenizes)"
)
_SPECIAL_SPELLING = re.compile(r"\s*(<[^<>\s]{1,64}>)")
"""How special tokens are written in text (``<s>``, ``<|im_start|>``): what a token that decodes to nothing may stand for."""


class HTTPTokenizer:
    """Counts tokens and finds their spans through the server's tokenize endpoint.

    Same guarantees as every ``Tokenizer`` (``embedders.base``); ``""`` costs no
    request. ``count_many`` sends up to ``concurrency`` requests at once. The
    pieces decoded for spans are kept in the vocabulary cache
    (``core.embedders.vocab_cache``, in ``vocab_dir`` or the user's cache
    folder; ``remember=False``: not at all), so the next run asks only for
    tokens it has not seen.
    """

    def __init__(self, poster: JSONPoster, *, model: str, style: str, path: str,
                 concurrency: int, name: str | None = None, remember: bool = True,
                 vocab_dir: str | os.PathLike[str] | None = None) -> None:
        if style not in DEFAULT_TOKENIZE_PATHS:
            raise ValueError(f"unknown tokenize style {style!r}")
        self.name = name or model
        self._poster = poster
        self._model = model
        self._style = style
        self._path = path
        self._concurrency = concurrency
        self._detokenize_path = DETOKENIZE_PATHS.get(style)
        self._pieces: dict[int, str | None] = {}
        self._groups: dict[tuple[int, ...], str | None] = {}
        """Texts of several tokens decoded together (a character split over byte tokens)."""
        self._remember, self._vocab_dir = remember, vocab_dir
        self._cache: VocabCache | None = None
        self._cache_lock = threading.Lock()
        self._cache_opened = False
        self._saved = {"count": 0, "at": 0.0}
        self.cached_pieces = 0
        """Pieces taken from the vocabulary cache (not asked of the server) when it was opened."""

    def __repr__(self) -> str:
        return f"HTTPTokenizer(name={self.name!r}, style={self._style!r})"

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._ask(text, positions=False)[0])

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if len(texts) <= 1 or self._concurrency == 1:
            return [self.count(t) for t in texts]
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(texts))) as pool:
            return list(pool.map(self.count, texts))

    def spans(self, text: str) -> list[tuple[int, int]]:
        if not text:
            return []
        ids, positions = self._ask(text, positions=True)
        if positions is None and self._detokenize_path is not None:
            return self._spans_by_decoding(text, ids)
        if positions is None:
            raise EmbeddingError(f"{self._where()}: {_UNAVAILABLE}")
        if len(positions) != len(ids):
            raise EmbeddingError(f"{self._where()}: {len(ids)} tokens but {len(positions)} positions")
        return positions

    def _decode(self, ids: list[int]) -> str | None:
        """The server's text for ``ids``, or None when it cannot say (not whole UTF-8 characters)."""
        assert self._detokenize_path is not None
        body: dict[str, Any] = {"tokens": ids}
        if self._style == "llama-cpp-python":
            body["model"] = self._model
        status, answer = self._poster.post_once(self._detokenize_path, body, max_bytes=detokenize_bound(ids))
        if status >= 500:  # llama-cpp-python answers 500 for bytes that are not UTF-8
            return None
        if status >= 300:
            raise EmbeddingError(f"POST {self._poster.display_url(self._detokenize_path)}: HTTP {status}; "
                                 f"is tokenize_style={self._style!r} right for this server? {_UNAVAILABLE}")
        text = answer.get("text" if self._style == "llama-cpp-python" else "content") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise EmbeddingError(f"POST {self._poster.display_url(self._detokenize_path)}: unexpected answer shape")
        return text

    def _decode_group(self, ids: list[int]) -> str | None:
        key = tuple(ids)
        if key not in self._groups:
            text = self._decode(ids)
            if len(self._groups) < PIECE_CACHE:
                self._groups[key] = text
            return text
        return self._groups[key]

    def _piece(self, token: int) -> str | None:
        if token not in self._pieces:
            piece = self._decode([token])
            if len(self._pieces) < PIECE_CACHE:
                self._pieces[token] = piece
            return piece
        return self._pieces[token]

    def _spans_by_decoding(self, text: str, ids: list[int]) -> list[tuple[int, int]]:
        """Spans from decoding the ids back to text, token by token (few at a time where one is no text)."""
        self._open_cache()
        unknown = list(dict.fromkeys(t for t in ids if t not in self._pieces))
        if len(unknown) > 1 and self._concurrency > 1:
            with ThreadPoolExecutor(max_workers=min(self._concurrency, len(unknown))) as pool:
                list(pool.map(self._piece, unknown))
        try:
            spans = align_by_decoding(text, ids, self._piece, self._decode_group)
        except EmbeddingError as exc:
            raise EmbeddingError(f"{self._where()}: {exc}") from None
        if self._cache is not None and len(self._pieces) + len(self._groups) > self._saved["count"] and (
                time.monotonic() - self._saved["at"] >= SAVE_SECONDS):
            _save(self._cache, self._pieces, self._groups, self._saved)
        return spans

    def _open_cache(self) -> None:
        """Take the pieces the vocabulary cache holds for the server's model (once per tokenizer)."""
        with self._cache_lock:
            if self._cache_opened:
                return
            self._cache_opened = True
            if not self._remember or self._detokenize_path is None:
                return
            try:
                identity = server_identity(lambda path: self._poster.get_once(path, max_bytes=1 << 20), self._model)
            except EmbeddingError:
                return  # no identity, no cache: the pieces are asked for as before
            if identity is None:
                return
            cache = VocabCache({"server": self._poster.display_base, "style": self._style, "model": self._model,
                                "detokenize": self._detokenize_path, "identity": identity}, self._vocab_dir)
            stored = cache.load()
            if stored and not self._sample_agrees(stored):
                cache.forget()
                stored = {}
            for ids, piece in list(stored.items())[:PIECE_CACHE]:
                if len(ids) == 1:
                    self._pieces.setdefault(ids[0], piece)
                else:
                    self._groups.setdefault(ids, piece)
            self.cached_pieces = len(stored)
            self._saved.update(count=len(self._pieces) + len(self._groups), at=time.monotonic())
            self._cache = cache
            # What was decoded after the last save is written when the tokenizer goes (at the latest at exit).
            weakref.finalize(self, _save, cache, self._pieces, self._groups, self._saved)

    def _sample_agrees(self, stored: dict[tuple[int, ...], str | None]) -> bool:
        """Whether the server decodes ``SAMPLE`` of the stored pieces (spread over the ids) as stored."""
        known = sorted(ids for ids, piece in stored.items() if piece and len(ids) == 1)
        picks = {known[i * (len(known) - 1) // max(1, SAMPLE - 1)] for i in range(SAMPLE)} if known else set()
        try:
            return all(self._decode(list(ids)) == stored[ids] for ids in sorted(picks))
        except EmbeddingError:
            return False

    def _where(self) -> str:
        return f"{self._style} tokenizer at {self._poster.display_url(self._path)}"

    def _ask(self, text: str, *, positions: bool) -> tuple[list[int], list[tuple[int, int]] | None]:
        build, parse = _DIALECTS[self._style]
        try:
            answer = self._poster.post(self._path, build(self._model, text, positions), max_bytes=tokenize_bound(text))
        except EmbeddingError as exc:
            if "HTTP 404" not in str(exc):
                raise
            raise EmbeddingError(
                f"{exc}. tokenize_style={self._style!r} posts to {self._path}; llama.cpp's server has "
                "/tokenize (tokenize_style='llama.cpp'), llama-cpp-python /extras/tokenize "
                "('llama-cpp-python'), vLLM and TEI /tokenize ('vllm', 'tei'); a server without one needs "
                "tokenize_style='none' and tokenizer_file"
            ) from None
        try:
            return parse(text, answer, positions)
        except EmbeddingError as exc:
            raise EmbeddingError(f"{self._where()}: {exc}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            raise EmbeddingError(
                f"{self._where()}: unexpected answer shape; is tokenize_style={self._style!r} right "
                "for this server?"
            ) from None


# --- dialects: (request builder, answer parser) -----------------------------------------

Parsed = tuple[list[int], list[tuple[int, int]] | None]


def _ids(values: Any) -> list[int]:
    if not isinstance(values, list) or not all(type(v) is int for v in values):
        raise TypeError("tokens")
    return values


def _native_request(model: str, text: str, positions: bool) -> dict[str, Any]:
    return {"model": model, "input": text, "return_offsets": positions}


def _native_parse(text: str, answer: Any, positions: bool) -> Parsed:
    ids = _ids(answer["tokens"])
    if not positions:
        return ids, None
    offsets = answer.get("offsets")
    if offsets is None:
        return ids, None
    raw = []
    for pair in offsets:
        s, e = pair
        if type(s) is not int or type(e) is not int or not 0 <= s <= e <= len(text):
            raise EmbeddingError(f"offset {pair!r} is outside the {len(text)}-character text")
        raw.append((s, e))
    return ids, tile_spans(raw, len(text))


def _llamacpp_request(model: str, text: str, positions: bool) -> dict[str, Any]:
    # parse_special=false: "<s>" in a document is text, as in the local tokenizers.
    return {"content": text, "add_special": False, "parse_special": False, "with_pieces": positions}


def _llamacpp_parse(text: str, answer: Any, positions: bool) -> Parsed:
    tokens = answer["tokens"]
    if not positions or not tokens or not isinstance(tokens[0], dict):
        return _ids(tokens), None
    ids, pieces = [], []
    for tok in tokens:
        ids.append(int(tok["id"]))
        piece = tok["piece"]
        # llama.cpp sends a piece that is not valid UTF-8 as a list of byte values.
        pieces.append([piece.encode("utf-8") if isinstance(piece, str) else bytes(piece)])
    return ids, align_pieces(text, pieces)


def _vllm_request(model: str, text: str, positions: bool) -> dict[str, Any]:
    return {"model": model, "prompt": text, "add_special_tokens": False,
            "return_token_strs": positions}


def _vllm_parse(text: str, answer: Any, positions: bool) -> Parsed:
    ids = _ids(answer["tokens"])
    strs = answer.get("token_strs") if positions else None
    if strs is None:
        return ids, None
    return ids, align_pieces(text, [vocab_piece_candidates(s) for s in strs])


def _tei_request(model: str, text: str, positions: bool) -> dict[str, Any]:
    return {"inputs": text, "add_special_tokens": False}


def _tei_parse(text: str, answer: Any, positions: bool) -> Parsed:
    tokens = [t for t in answer[0] if not t.get("special")]
    ids = [int(t["id"]) for t in tokens]
    if not positions:
        return ids, None
    if any(t.get("start") is None or t.get("stop") is None for t in tokens):
        return ids, None
    raw = [(int(t["start"]), int(t["stop"])) for t in tokens]
    # TEI documents character offsets; some builds report UTF-8 byte offsets.
    # The token's "text" (its slice of the input) tells which.
    if all(0 <= s <= e <= len(text) and text[s:e] == t.get("text", text[s:e])
           for (s, e), t in zip(raw, tokens)):
        return ids, tile_spans(raw, len(text))
    data = text.encode("utf-8")
    if not all(0 <= s <= e <= len(data) for s, e in raw):
        raise EmbeddingError("offsets are outside the text")
    return ids, _bytes_to_char_spans(text, data, raw)


def _llamacpp_python_request(model: str, text: str, positions: bool) -> dict[str, Any]:
    # The server tokenizes as llama.cpp does with special tokens parsed and no BOS
    # added for models that ask for none; it has no options to say otherwise.
    return {"model": model, "input": text}


def _llamacpp_python_parse(text: str, answer: Any, positions: bool) -> Parsed:
    return _ids(answer["tokens"]), None


_DIALECTS: dict[str, tuple[Callable[[str, str, bool], Any], Callable[[str, Any, bool], Parsed]]] = {
    "native": (_native_request, _native_parse),
    "llama.cpp": (_llamacpp_request, _llamacpp_parse),
    "llama-cpp-python": (_llamacpp_python_request, _llamacpp_python_parse),
    "vllm": (_vllm_request, _vllm_parse),
    "tei": (_tei_request, _tei_parse),
}


# --- aligning pieces to text ---------------------------------------------------------

def _gpt2_byte_decoder() -> dict[str, int]:
    # The printable-character alphabet of byte-level BPE (GPT-2, Llama 3, Qwen):
    # printable Latin-1 bytes stand for themselves, the rest map to U+0100 onward.
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(0x100 + extra)] = b
            extra += 1
    return chars


_BYTE_DECODER = _gpt2_byte_decoder()
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def vocab_piece_candidates(piece: str) -> list[bytes]:
    """The byte strings a raw vocabulary token may stand for, likeliest first.

    Covers SentencePiece (``▁`` for space, ``<0xNN>`` byte fallback), byte-level
    BPE (``Ġ`` for space and its byte alphabet) and WordPiece (``##`` prefix).
    """
    m = _BYTE_TOKEN.fullmatch(piece)
    out = [bytes([int(m.group(1), 16)])] if m else []
    out.append(piece.encode("utf-8"))
    if "▁" in piece:
        out.append(piece.replace("▁", " ").encode("utf-8"))
    if piece and all(ch in _BYTE_DECODER for ch in piece):
        out.append(bytes(_BYTE_DECODER[ch] for ch in piece))
    if piece.startswith("##") and len(piece) > 2:
        out.append(piece[2:].encode("utf-8"))
    return list(dict.fromkeys(out))


def align_pieces(text: str, pieces: Sequence[Sequence[bytes]]) -> list[tuple[int, int]]:
    """Lay token pieces over ``text`` left to right; return tiled character spans.

    ``pieces[i]`` lists the byte strings token i may stand for. Tolerated: the
    space a SentencePiece tokenizer prefixes to the text (its first piece then
    carries one space more than the text has; that piece is tried as written
    first, then without the space), whitespace the tokenizer dropped between
    pieces, and whitespace after the last piece. Anything else that does not
    fit raises ``EmbeddingError``.
    """
    try:
        return _align(text, pieces, dummy_prefix=False)
    except EmbeddingError as first:
        if not pieces or not any(c.startswith(b" ") for c in pieces[0]):
            raise
        try:
            return _align(text, pieces, dummy_prefix=True)
        except EmbeddingError:
            raise first from None


def _align(text: str, pieces: Sequence[Sequence[bytes]], *, dummy_prefix: bool) -> list[tuple[int, int]]:
    data = text.encode("utf-8")
    pos = 0
    raw: list[tuple[int, int]] = []
    for i, candidates in enumerate(pieces):
        if i == 0 and dummy_prefix:
            candidates = [c[1:] if c.startswith(b" ") else c for c in candidates]
        match = _match(data, pos, candidates)
        if match is None:
            skip = pos
            while skip < len(data) and data[skip] in b" \t\r\n\f\v":
                skip += 1
            if skip > pos and (match := _match(data, skip, candidates)) is not None:
                pos = skip
        if match is None:
            at = len(data[:pos].decode("utf-8", errors="ignore"))
            shown = candidates[0].decode("utf-8", errors="replace") if candidates else ""
            raise EmbeddingError(
                f"token {i} ({shown!r}) does not match the text at character {at}; "
                f"the server's tokenizer changes the text, so {_UNAVAILABLE}"
            )
        raw.append((pos, pos + len(match)))
        pos += len(match)
    if data[pos:].strip():
        covered = len(data[:pos].decode("utf-8", errors="ignore"))
        raise EmbeddingError(
            f"the tokens cover only {covered} of {len(text)} characters (did the server truncate?)"
        )
    return _bytes_to_char_spans(text, data, raw)


def align_by_decoding(text: str, ids: Sequence[int], piece: Callable[[int], str | None],
                      decode: Callable[[list[int]], str | None]) -> list[tuple[int, int]]:
    """Tiled spans of ``ids`` in ``text``, found by decoding each token back to text.

    ``piece(id)`` is one token's text and ``decode(ids)`` several tokens' text;
    either is None when the server cannot decode them alone (part of a UTF-8
    character). Each token's text must be found exactly where the previous
    one ended, or after whitespace the decoding dropped (SentencePiece drops
    the leading space of a lone token). A token that is no text alone is
    decoded with up to ``MAX_GROUP`` following ones; the group's text goes to
    its last token. A token that decodes to nothing (a special or control
    token) gets a zero-width span, or, where the text spells a special token
    (``<|im_start|>``) there and the next token does not fit, that spelling.
    Anything else raises ``EmbeddingError``.
    """
    raw: list[tuple[int, int]] = []
    pos, i, n = 0, 0, len(ids)
    while i < n:
        alone = piece(ids[i])
        if alone == "":
            raw.append((pos, pos))
            i += 1
            continue
        at = _find(text, pos, alone)
        if at is not None and alone is not None:
            raw.append((at, at + len(alone)))
            pos, i = at + len(alone), i + 1
            continue
        # Decode with the tokens before it that gave no text and up to MAX_GROUP after it.
        g = i
        while g > 0 and raw[g - 1][0] == raw[g - 1][1] == pos:
            g -= 1
        found = None
        for j in range(i + 1, min(n, g + MAX_GROUP) + 1):
            if j == i + 1 and g == i:
                continue  # that is `alone`
            joined = decode(list(ids[g:j]))
            if joined and (at := _find(text, pos, joined)) is not None:
                found = (j, at, joined)
                break
        if found is not None:
            j, at, joined = found
            del raw[g:]
            raw.extend([(at, at)] * (j - 1 - g))
            raw.append((at, at + len(joined)))
            pos, i = at + len(joined), j
            continue
        if g < i and (moved := _spell_specials(text, raw, g, pos)) > pos:
            pos = moved
            continue
        shown = alone if alone is not None else "(part of a character)"
        raise EmbeddingError(
            f"token {i} ({shown!r}) does not match the text at character {pos}; the server's tokenizer "
            f"changes the text, so {_UNAVAILABLE}"
        )
    if text[pos:].strip():
        g = len(raw)
        while g > 0 and raw[g - 1][0] == raw[g - 1][1] == pos:
            g -= 1
        pos = _spell_specials(text, raw, g, pos)
    if text[pos:].strip():
        raise EmbeddingError(f"the tokens cover only {pos} of {len(text)} characters (did the server truncate?)")
    return tile_spans(raw, len(text))


def _spell_specials(text: str, raw: list[tuple[int, int]], g: int, pos: int) -> int:
    """Give the zero-width tokens ``raw[g:]`` (all at ``pos``) the special-token spellings the text has there.

    One spelling each, in order, while the text spells one (``<|im_start|>``);
    returns the position after the last one given (``pos`` if none).
    """
    for k in range(g, len(raw)):
        spelled = _SPECIAL_SPELLING.match(text, pos)
        if spelled is None:
            break
        raw[k] = (spelled.start(1), spelled.end(1))
        pos = spelled.end(1)
    return pos  # zero-width tokens left after the last spelling stay where they were (tile_spans moves them)


def _find(text: str, pos: int, piece: str | None) -> int | None:
    """Where ``piece`` is in ``text``: at ``pos``, or right after whitespace there; else None."""
    if not piece:
        return None
    at = pos
    while True:
        if text.startswith(piece, at):
            return at
        if at >= len(text) or not text[at].isspace():
            return None
        at += 1


def _match(data: bytes, pos: int, candidates: Sequence[bytes]) -> bytes | None:
    for c in candidates:
        if data.startswith(c, pos):
            return c
    return None


def _bytes_to_char_spans(text: str, data: bytes, raw: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    if len(data) == len(text):  # ASCII: bytes are characters
        return tile_spans(raw, len(text))
    # char_of[b] = index of the character that byte b belongs to; a token that
    # starts inside a character (a byte-fallback piece) starts at that character.
    arr = np.frombuffer(data, dtype=np.uint8)
    char_of = np.cumsum((arr & 0xC0) != 0x80) - 1
    starts = [int(char_of[s]) if s < len(data) else len(text) for s, _ in raw]
    return tile_spans([(s, s) for s in starts], len(text))  # tile_spans reads only starts


def _save(cache: VocabCache, pieces: dict[int, str | None], groups: dict[tuple[int, ...], str | None],
          saved: dict[str, float]) -> None:
    """Write what was decoded to ``cache`` if there is more than at the last save (``saved``: its count and time)."""
    if len(pieces) + len(groups) > saved["count"]:
        # Copies first: decoding threads may add to them meanwhile.
        snapshot: dict[tuple[int, ...], str | None] = {(t,): p for t, p in list(pieces.items())}
        snapshot.update(list(groups.items()))
        if cache.save(snapshot):
            saved.update(count=len(snapshot), at=time.monotonic())

"""The embedded default: wordllama's ``l2_supercat`` 256-d static embeddings.

wordllama ships its weights (``weights/l2_supercat_256.safetensors``, a
32000 x 256 float16 table, one row per Llama-2 token) and its tokenizer
(``tokenizers/l2_supercat_tokenizer_config.json``, the Llama-2 SentencePiece
BPE with byte fallback) inside its wheel. ``WordLlama.load()`` nevertheless
looks for the tokenizer in a directory named ``tokenizer`` (singular), misses,
and downloads it from the Hugging Face hub; and importing the ``wordllama``
package calls ``logging.basicConfig(level=INFO)``, which would make every
library log line appear on our stderr. So this module never imports
``wordllama``: it finds the package directory with ``importlib.util.find_spec``
(which does not execute the package) and reads the two files itself.

The embedding of a text is the mean of its tokens' rows, L2-normalised —
exactly what ``WordLlamaInference.embed(texts, norm=True)`` computes (tests
compare the two), with three deliberate differences:

* no truncation and no padding, ever: every token of the text counts;
* special-token text (``"<s>"``) is tokenised as plain characters;
* a text without tokens (``""``) gets ``empty_text_vector(256)`` instead of
  wordllama's NaN row.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragtui.core.embedders.base import check_texts, empty_text_vector
from ragtui.core.errors import EmbeddingError, UsageError
from ragtui.core.files import open_regular

if TYPE_CHECKING:
    from ragtui.core.embedders.compact_bpe import CompactBPE
    from ragtui.core.embedders.hf_tokenizer import HFTokenizer

__all__ = ["MODEL_NAME", "WordLlamaEmbedder", "bundled_files"]

MODEL_NAME = "wordllama-l2_supercat-256"
"""meta.json ``embedding_model`` and ``tokenizer`` for this embedder."""

_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_DIM = 256
# Rows gathered at a time: a text's (tokens, 256) gather would take 1 KB per
# token (6 GB for 10 MB of minified JSON); 4096 rows are 4 MB.
_POOL_BLOCK = 4096
# Texts at least this long are tokenised and pooled part by part.
_LONG_TEXT = 8192
# A call whose texts hold fewer characters than this in all (a query, a few
# short texts) is tokenised by compact_bpe and pooled from the stored table:
# neither the tokenizers library nor the whole float32 table is loaded for it.
_QUICK_CHARS = _LONG_TEXT


def bundled_files() -> tuple[Path, Path]:
    """Paths of the (weights, tokenizer) files inside the installed wordllama wheel.

    Raises ``EmbeddingError`` saying what to install when they are missing.
    """
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            "the embedded embedder needs the 'wordllama' package: pip install 'wordllama>=0.4,<0.5'"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    weights = root.joinpath(*_WEIGHTS)
    tokenizer = root.joinpath(*_TOKENIZER)
    for path in (weights, tokenizer):
        if not path.is_file():
            raise EmbeddingError(
                f"wordllama is installed but {path} is missing; reinstall 'wordllama>=0.4,<0.5'"
            )
    return weights, tokenizer


_Take = Callable[..., np.ndarray]
"""Gathers float32 rows of the table: ``take(ids, axis=0)``."""
_MAX_HEADER = 100 << 20
"""The most bytes a safetensors JSON header may take (the format's own bound)."""
_MAX_TABLE_BYTES = 1 << 30
"""The largest table read into memory: wordllama's is 16 MB (a 128k-token vocabulary at 256-d float16, 64 MB)."""
_DTYPES = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}
"""safetensors dtypes numpy reads as they are; another (BF16) is read with the safetensors library."""


def _weights_error(path: Path, why: str) -> EmbeddingError:
    return EmbeddingError(f"cannot read wordllama weights {path}: {why}")


def _read_exactly(f: io.FileIO, out: memoryview, offset: int) -> int:
    """Read into all of ``out`` from ``offset`` of ``f``; the bytes read (fewer at the end of the file)."""
    f.seek(offset)
    done = 0
    while done < len(out):
        got = f.readinto(out[done:])
        if not got:
            break
        done += got
    return done


@functools.lru_cache(maxsize=4)
def _stored(weights_path: Path) -> np.ndarray | None:
    """``embedding.weight`` as stored (read-only), or None for a dtype numpy cannot read.

    The safetensors layout read here: an 8-byte little-endian header length, that
    many bytes of JSON naming each tensor's dtype, shape and ``data_offsets``
    (from the end of the header), then the data. Every number is checked
    against the file's size, then the table is read into memory (16 MB): the
    file is not mapped, so a weights file truncated or replaced later (a
    reinstall) cannot take rows away from under a running process. Only a
    regular file is read (``core.files.open_regular``).
    """
    try:
        fd, st = open_regular(weights_path)
    except OSError as exc:
        raise _weights_error(weights_path, exc.strerror or str(exc)) from None
    with io.FileIO(fd, "r") as f:
        try:
            size = st.st_size
            head = bytearray(8)
            if _read_exactly(f, memoryview(head), 0) < 8:
                raise _weights_error(weights_path, "shorter than a safetensors header")
            (n,) = struct.unpack("<Q", head)
            if n > min(_MAX_HEADER, size - 8):
                raise _weights_error(weights_path, f"a header of {n:,} bytes in a file of {size:,}")
            raw = bytearray(n)
            if _read_exactly(f, memoryview(raw), 8) < n:
                raise _weights_error(weights_path, "changed while it was read (the header is cut short)")
            try:
                header = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                raise _weights_error(weights_path, f"the header is not JSON ({exc})") from None
            entry = header.get("embedding.weight") if isinstance(header, dict) else None
            if not isinstance(entry, dict):
                raise _weights_error(weights_path, "no tensor 'embedding.weight'")
            dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
            if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)
                    and isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
                raise _weights_error(weights_path, "'embedding.weight' has no valid shape and offsets")
            if len(shape) != 2 or shape[1] != _DIM:
                raise EmbeddingError(f"{weights_path}: expected a (vocab, {_DIM}) table, found shape {tuple(shape)}")
            if dtype not in _DTYPES:
                return None
            item = np.dtype(_DTYPES[dtype])
            begin, end = offsets
            if not 0 <= begin <= end <= size - 8 - n or end - begin != shape[0] * shape[1] * item.itemsize:
                raise _weights_error(weights_path, f"'embedding.weight' offsets {offsets} do not fit the file")
            if end - begin > _MAX_TABLE_BYTES:
                raise _weights_error(weights_path, f"a table of {end - begin:,} bytes, over the "
                                                   f"{_MAX_TABLE_BYTES:,}-byte limit for wordllama weights")
            table = np.empty((shape[0], _DIM), dtype=item)
            if _read_exactly(f, table.data.cast("B"), 8 + n + begin) < end - begin:
                raise _weights_error(weights_path, "changed while it was read (the table is cut short)")
        except OSError as exc:
            raise _weights_error(weights_path, exc.strerror or str(exc)) from exc
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=4)
def _full_table(weights_path: Path) -> np.ndarray:
    """The whole table as float32 (cached: every embedder built in one process shares one 32 MB table)."""
    table = _stored(weights_path)
    if table is None:  # a dtype numpy cannot read as it is stored
        from safetensors import safe_open

        try:
            with safe_open(str(weights_path), framework="np") as f:
                table = f.get_tensor("embedding.weight")
        except Exception as exc:  # safetensors raises its own SafetensorError and OSError
            raise _weights_error(weights_path, str(exc)) from exc
        if table.ndim != 2 or table.shape[1] != _DIM:
            raise EmbeddingError(f"{weights_path}: expected a (vocab, {_DIM}) table, found shape {table.shape}")
    # float32 once: summing float16 rows costs 5x more per chunk.
    table = np.ascontiguousarray(table, dtype=np.float32)
    if not np.isfinite(table).all():
        raise EmbeddingError(f"{weights_path}: the embedding table holds NaN or infinity")
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=4)
def _hf_tokenizer(tokenizer_path: Path, rows: int) -> HFTokenizer:
    from ragtui.core.embedders.hf_tokenizer import HFTokenizer

    tokenizer = HFTokenizer.from_file(tokenizer_path, MODEL_NAME)
    if tokenizer.vocab_size > rows:
        raise EmbeddingError(f"{tokenizer_path} has {tokenizer.vocab_size} tokens but the weights only {rows} rows")
    return tokenizer


@functools.lru_cache(maxsize=4)
def _compact(tokenizer_path: Path, rows: int) -> CompactBPE | None:
    """The library-free tokenizer (``compact_bpe``), or None when it does not apply to this file."""
    from ragtui.core.embedders import compact_bpe

    try:
        tokenizer = compact_bpe.load(tokenizer_path)
    except (compact_bpe.Unsupported, OSError):
        return None
    return tokenizer if tokenizer.vocab_size <= rows else None


class WordLlamaEmbedder:
    """In-process, offline embedder; see the module docstring for what it computes.

    ``model`` is ``"wordllama-l2_supercat-256"``, ``dim`` is 256, ``tokenizer``
    is the Llama-2 tokenizer under the same name. ``embed`` is deterministic: a
    text's vector does not depend on the other texts in the call. Thread-safe.
    Loading never touches the network.
    """

    model: str = MODEL_NAME
    dim: int = _DIM
    tokenizer_name: str = MODEL_NAME
    """``tokenizer.name``, known without loading the tokenizer (``base.tokenizer_name``)."""

    def __init__(self, *, batch_size: int = 256) -> None:
        """``batch_size``: texts tokenised per call into the (parallel) tokenizer."""
        if type(batch_size) is not int or batch_size < 1:
            raise UsageError("wordllama embedder: batch_size must be an integer >= 1")
        self._batch_size = batch_size
        self._files = bundled_files()  # a missing package is said now; reading the files waits for first use
        self._loaded: tuple[np.ndarray, HFTokenizer] | None = None
        self._quick: tuple[np.ndarray, CompactBPE] | None = None
        self._quick_ready = False
        self._load_lock = threading.Lock()

    def _parts(self) -> tuple[np.ndarray, HFTokenizer]:
        """The float32 table and the library's tokenizer, read on first use (0.4 s: a sync that finds
        nothing to do never pays it)."""
        got = self._loaded
        if got is None:
            with self._load_lock:
                if self._loaded is None:
                    table = _full_table(self._files[0])
                    self._loaded = (table, _hf_tokenizer(self._files[1], table.shape[0]))
                got = self._loaded
        return got

    def _quick_parts(self) -> tuple[np.ndarray, CompactBPE] | None:
        """The table as stored and the library-free tokenizer; None when the files need the libraries."""
        if not self._quick_ready:
            with self._load_lock:
                if not self._quick_ready:
                    table = _stored(self._files[0])
                    compact = _compact(self._files[1], table.shape[0]) if table is not None else None
                    self._quick = (table, compact) if table is not None and compact is not None else None
                    self._quick_ready = True
        return self._quick

    def warm(self) -> None:
        """Read what embedding a query needs (the tokenizer's compact form and the stored table, a few
        milliseconds), so the first query does not wait for it; the tokenizers library waits for
        the first large call or the first use of ``tokenizer``."""
        if self._quick_parts() is None:
            self._parts()

    @property
    def tokenizer(self) -> HFTokenizer:
        """The Llama-2 tokenizer (``tokenizer_name``), loaded with the table on first use."""
        return self._parts()[1]

    @property
    def _table(self) -> np.ndarray:
        return self._parts()[0]

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(model={self.model!r}, dim={self.dim})"

    def __enter__(self) -> WordLlamaEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), 256)`` float32 unit rows; ``""`` gives ``empty_text_vector``."""
        texts = check_texts(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if sum(map(len, texts)) < _QUICK_CHARS and (quick := self._quick_parts()) is not None \
                and self._embed_quick(texts, *quick, out):
            return out
        for start in range(0, len(texts), self._batch_size):
            part = texts[start : start + self._batch_size]
            rows = out[start : start + len(part)]
            if all(len(t) < _LONG_TEXT for t in part):
                self._pool(self.tokenizer.ids_many(part), rows)
                continue
            # A long text (a query read from a file, say) is tokenised and summed
            # part by part, so its memory does not grow with its length.
            self._sum_rows(self.tokenizer.ids_many([t if len(t) < _LONG_TEXT else "" for t in part]), rows)
            for i, t in enumerate(part):
                if len(t) >= _LONG_TEXT:
                    self._sum_blocks(self.tokenizer.iter_ids(t), rows[i])
            self._normalize(rows)
        return out

    def _embed_quick(self, texts: list[str], stored: np.ndarray, compact: CompactBPE, out: np.ndarray) -> bool:
        """``embed`` of a few short texts without the libraries: the same ids (``compact_bpe``) and the
        same float32 rows (a float16 row widens exactly), summed as ``_sum_rows`` sums them. False
        when a text cannot be read so (a lone surrogate: the library's path says what is wrong)."""
        try:
            ids = compact.ids_many(texts)
        except UnicodeEncodeError:
            return False
        full = self._loaded[0] if self._loaded is not None else None
        if full is not None:
            self._pool(ids, out, full.take)
            return True

        def take(row_ids: Sequence[int], axis: int = 0) -> np.ndarray:
            rows = stored.take(row_ids, axis=axis).astype(np.float32)
            if not np.isfinite(rows).all():
                raise EmbeddingError(f"{self._files[0]}: the embedding table holds NaN or infinity")
            return rows

        self._pool(ids, out, take)
        return True

    def embed_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Embed already-tokenised texts (the ids ``tokenizer`` produces)."""
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        self._pool(ids, out)
        return out

    def _pool(self, ids: Sequence[Sequence[int]], out: np.ndarray, take: _Take | None = None) -> None:
        self._sum_rows(ids, out, take)
        self._normalize(out)

    def _sum_rows(self, ids: Sequence[Sequence[int]], out: np.ndarray, take: _Take | None = None) -> None:
        """Each text's rows summed into ``out``; ``take`` gathers float32 rows (default: the float32 table's)."""
        # One gather-and-sum per text beats one big gather + reduceat: the
        # 256 x 256 block stays in cache and numpy's pairwise sum is fast.
        # take and add.reduce are what table[ids] and np.sum run, without
        # their Python-level dispatch (the same floats, 17 % less time).
        take = take or self._table.take
        add = np.add.reduce
        for i, row_ids in enumerate(ids):
            if len(row_ids) > _POOL_BLOCK:
                self._sum_blocks([row_ids], out[i], take)
            elif len(row_ids):
                add(take(row_ids, axis=0), axis=0, dtype=np.float32, out=out[i])
            else:
                out[i] = 0.0

    def _sum_blocks(self, parts: Iterable[Sequence[int]], out_row: np.ndarray, take: _Take | None = None) -> None:
        """Sum the rows of ids arriving in parts, ``_POOL_BLOCK`` rows at a time.

        numpy sums axis 0 row after row, so adding the running total into each
        block's first row gives the very floats of one gather-and-sum.
        """
        take = take or self._table.take
        total: np.ndarray | None = None
        for ids in parts:
            for lo in range(0, len(ids), _POOL_BLOCK):
                block = take(ids[lo : lo + _POOL_BLOCK], axis=0)
                if total is not None:
                    block[0] += total
                total = np.asarray(np.sum(block, axis=0, dtype=np.float32))
        out_row[:] = 0.0 if total is None else total

    def _normalize(self, out: np.ndarray) -> None:
        norms = np.linalg.norm(out, axis=1)
        bad = ~(np.isfinite(norms) & (norms > 0.0))
        norms[bad] = 1.0
        out /= norms[:, None]
        # Only a text without tokens can sum to zero in practice (no row of
        # the table is zero); exact cancellation gets the same fixed vector.
        if bad.any():
            out[bad] = empty_text_vector(self.dim)

    def close(self) -> None:
        """Nothing to release (the shared table stays cached for the process)."""

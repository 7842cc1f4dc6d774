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
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ragtui.core.embedders.base import check_texts, empty_text_vector
from ragtui.core.embedders.hf_tokenizer import HFTokenizer
from ragtui.core.errors import EmbeddingError, UsageError

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


@functools.lru_cache(maxsize=4)
def _load(weights_path: Path, tokenizer_path: Path) -> tuple[np.ndarray, HFTokenizer]:
    # Cached: every embedder built in one process shares one 32 MB table.
    from safetensors import safe_open

    try:
        with safe_open(str(weights_path), framework="np") as f:
            table = f.get_tensor("embedding.weight")
    except Exception as exc:  # safetensors raises its own SafetensorError and OSError
        raise EmbeddingError(f"cannot read wordllama weights {weights_path}: {exc}") from exc
    if table.ndim != 2 or table.shape[1] != _DIM:
        raise EmbeddingError(
            f"{weights_path}: expected a (vocab, {_DIM}) table, found shape {table.shape}"
        )
    # float32 once at load: summing float16 rows costs 5x more per chunk.
    table = np.ascontiguousarray(table, dtype=np.float32)
    if not np.isfinite(table).all():
        raise EmbeddingError(f"{weights_path}: the embedding table holds NaN or infinity")
    table.flags.writeable = False
    tokenizer = HFTokenizer.from_file(tokenizer_path, MODEL_NAME)
    vocab = tokenizer.vocab_size
    if vocab > table.shape[0]:
        raise EmbeddingError(
            f"{tokenizer_path} has {vocab} tokens but {weights_path} only {table.shape[0]} rows"
        )
    return table, tokenizer


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
        self._load_lock = threading.Lock()

    def _parts(self) -> tuple[np.ndarray, HFTokenizer]:
        """The table and the tokenizer, read on first use (0.4 s: a sync that finds nothing to do never pays it)."""
        got = self._loaded
        if got is None:
            with self._load_lock:
                if self._loaded is None:
                    self._loaded = _load(*self._files)
                got = self._loaded
        return got

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

    def embed_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Embed already-tokenised texts (the ids ``tokenizer`` produces)."""
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        self._pool(ids, out)
        return out

    def _pool(self, ids: Sequence[Sequence[int]], out: np.ndarray) -> None:
        self._sum_rows(ids, out)
        self._normalize(out)

    def _sum_rows(self, ids: Sequence[Sequence[int]], out: np.ndarray) -> None:
        # One gather-and-sum per text beats one big gather + reduceat: the
        # 256 x 256 block stays in cache and numpy's pairwise sum is fast.
        # take and add.reduce are what table[ids] and np.sum run, without
        # their Python-level dispatch (the same floats, 17 % less time).
        take, add = self._table.take, np.add.reduce
        for i, row_ids in enumerate(ids):
            if len(row_ids) > _POOL_BLOCK:
                self._sum_blocks([row_ids], out[i])
            elif len(row_ids):
                add(take(row_ids, axis=0), axis=0, dtype=np.float32, out=out[i])
            else:
                out[i] = 0.0

    def _sum_blocks(self, parts: Iterable[Sequence[int]], out_row: np.ndarray) -> None:
        """Sum the rows of ids arriving in parts, ``_POOL_BLOCK`` rows at a time.

        numpy sums axis 0 row after row, so adding the running total into each
        block's first row gives the very floats of one gather-and-sum.
        """
        total: np.ndarray | None = None
        for ids in parts:
            for lo in range(0, len(ids), _POOL_BLOCK):
                block = self._table[ids[lo : lo + _POOL_BLOCK]]
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

"""The embedder seam: the ``Tokenizer`` and ``Embedder`` protocols, and the
checks every implementation shares.

What every implementation guarantees (and tests pin):

* ``Tokenizer.count(text) == len(Tokenizer.spans(text))`` and
  ``count_many(texts)[i] == count(texts[i])``; no special tokens are counted
  (BOS/EOS are never added, and text that happens to spell a special token such
  as ``"<s>"`` is tokenised as ordinary text).
* ``Tokenizer.spans(text)`` *tiles* the text: ``spans[0][0] == 0``,
  ``spans[i][1] == spans[i + 1][0]``, ``spans[-1][1] == len(text)``; offsets
  are Python ``str`` indices (Unicode code points). Where several tokens share
  a character (the byte-fallback pieces of an emoji, a SentencePiece prefix
  ``▁`` that stands for no character at all), the character belongs to the
  *last* of them and the others get zero-width spans ``(s, s)`` at its start.
  Characters no token covers (spaces a WordPiece tokenizer drops) belong to
  the preceding token, or to the first token at the start of the text. So a
  non-empty span is exactly the text of its token and of the zero-width tokens
  just before it (plus any dropped whitespace after it), ``text[s:e]`` never
  splits a character, and cutting the text at ``spans[i][0]`` splits no
  token's text unless ``spans[i - 1]`` is zero-width.
* ``Embedder.embed(texts)`` returns a ``(len(texts), dim)`` C-contiguous
  float32 array whose rows are finite, L2-normalised (norm 1 within 1e-6) and
  never all-zero. ``embed([])`` returns shape ``(0, dim)``.
* Text with no tokens (the empty string) embeds to ``empty_text_vector(dim)``:
  every component equal to ``1/sqrt(dim)``. It is a fixed, documented point,
  not a meaningful embedding; chunks always have at least one token, so only
  queries can meet it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import EmbeddingError

__all__ = [
    "Embedder",
    "Tokenizer",
    "check_texts",
    "empty_text_vector",
    "known_dim",
    "normalize_rows",
    "tile_spans",
    "tokenizer_name",
]


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens and locates them in text, without special tokens."""

    name: str
    """Recorded as meta.json ``tokenizer``."""

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character offsets of each token; they tile ``text``."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``[count(t) for t in texts]``, computed faster."""
        ...


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors.

    Deliberately not ``runtime_checkable``: on Python 3.11 ``isinstance``
    reads every member, and reading ``HTTPEmbedder.dim`` may ask the server.
    """

    # Read-only members: an implementation may hold them as attributes or
    # properties (``HTTPEmbedder.dim``), and its tokenizer may be any Tokenizer.
    @property
    def model(self) -> str:
        """Recorded as meta.json ``embedding_model``."""
        ...

    @property
    def dim(self) -> int:
        """Length of every embedding."""
        ...

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer that cuts chunks for this model."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), dim)`` float32, C-contiguous, unit rows, finite, never zero."""
        ...

    def close(self) -> None:
        """Release sockets, threads and memory; the embedder is unusable after."""
        ...


def known_dim(embedder: Embedder) -> int | None:
    """``embedder.dim`` if it is known without asking a backend, else None.

    An embedder whose dimension may cost a request (``HTTPEmbedder``) has a
    ``known_dim`` member (None until configured or learnt); for the others
    reading ``dim`` is free.
    """
    known = getattr(embedder, "known_dim", _ABSENT)
    if known is _ABSENT:
        return embedder.dim
    return known if type(known) is int else None


def tokenizer_name(embedder: Embedder) -> str:
    """``embedder.tokenizer.name``, without loading the tokenizer when the embedder can say it.

    An embedder whose tokenizer is read on first use (``WordLlamaEmbedder``)
    has a ``tokenizer_name`` member, so that a sync finding nothing to do
    (which compares the name with the last sync's) reads no model file.
    """
    name = getattr(embedder, "tokenizer_name", None)
    return name if isinstance(name, str) else embedder.tokenizer.name


_ABSENT = object()


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list; ``TypeError`` for a bare ``str`` or a non-``str`` item.

    A ``None`` would otherwise pass for an empty text and embed silently.
    """
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single str")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
    return texts


def empty_text_vector(dim: int) -> np.ndarray:
    """The embedding of a text without tokens: every component ``1/sqrt(dim)``."""
    return np.full(dim, 1.0 / math.sqrt(dim), dtype=np.float32)


def normalize_rows(matrix: np.ndarray, *, source: str) -> np.ndarray:
    """Check and L2-normalise embeddings that came from outside.

    Returns a new C-contiguous float32 array of unit rows. Raises
    ``EmbeddingError`` naming ``source`` and the first bad row when a row holds
    a non-finite value or is all zeros: such a row would rank silently wrong,
    so it is refused rather than repaired.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2:
        raise EmbeddingError(f"{source}: expected a 2-d array of embeddings, got {m.ndim}-d")
    finite = np.isfinite(m).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise EmbeddingError(f"{source}: embedding {row} of {len(m)} contains NaN or infinity")
    # Scale by the largest magnitude first so huge values cannot overflow the norm.
    scale = np.abs(m).max(axis=1, keepdims=True) if m.size else np.ones((m.shape[0], 1))
    zero = scale[:, 0] == 0.0
    if zero.any():
        row = int(np.flatnonzero(zero)[0])
        raise EmbeddingError(f"{source}: embedding {row} of {len(m)} is all zeros")
    m = m / scale
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return np.ascontiguousarray(m, dtype=np.float32)


def tile_spans(raw: Sequence[tuple[int, int]], text_len: int) -> list[tuple[int, int]]:
    """Turn a tokenizer's raw character offsets into spans that tile the text.

    Raw offsets may overlap (byte-fallback tokens all report the same
    character; a prepended ``▁`` reports the first character) or leave gaps
    (dropped whitespace). The rule, documented in the module docstring: each
    token starts where its raw offset starts, but never before the previous
    token starts; each token ends where the next one starts; the first token
    starts at 0 and the last ends at ``text_len``. Raw offsets that already
    tile are returned unchanged (as the same list when ``raw`` is a list of tuples).
    """
    n = len(raw)
    if n == 0:
        return []
    # Fast path, taken for most text: the offsets already tile. Comparing
    # lists runs in C and no new tuples are built.
    starts = [s for s, _ in raw]
    ends = [e for _, e in raw]
    if starts[0] == 0 and ends[-1] == text_len and starts[1:] == ends[:-1]:
        return raw if isinstance(raw, list) else list(raw)
    starts = [0] * n
    prev = 0
    for i in range(1, n):
        s = raw[i][0]
        if s < prev:
            s = prev
        elif s > text_len:
            s = text_len
        starts[i] = prev = s
    ends = starts[1:]
    ends.append(text_len)
    return list(zip(starts, ends))

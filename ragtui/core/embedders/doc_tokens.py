"""A document tokenized once, and the windows of it whose own tokens are a slice of the document's.

Ingest tokenizes every document once for its token spans (the chunker's
input) and then needs the ids of every chunk's text *alone* (``n_tokens``
and the embedding). For a SentencePiece-style BPE tokenizer (the ones
``_spm_split`` accepts: Llama 2's, wordllama's) the two agree wherever the
chunk's edges are boundaries no merge can cross, so most chunks need not be
tokenized again. The proof, in the normalised string ``D = "▁" + doc`` (every
space written ``▁``) and the chunk's own ``C = "▁" + chunk``:

* ``C`` is a substring of ``D`` when the chunk starts the document (``C`` is
  ``D``'s head) or follows a space (``C`` starts at that space's ``▁``).
  Otherwise (after a line break, a tab, a bracket, or a space after another
  space, which a merge may join) ``C``'s first word is tokenized alone (the
  "head", up to the first safe cut inside the chunk) and the rest of ``C``
  is again a substring of ``D`` between safe cuts.
* BPE of a string cut where no merge rule can join the two characters beside
  the cut is the BPE of the two sides (``_spm_split``'s argument). So when
  both edges of ``C`` inside ``D`` are such cuts (or ends of ``D``), ``D``'s
  tokens between them are exactly ``BPE(C)``.
* The document's own tokens came from pieces cut at safe places too, except
  a forced cut after 64 Ki characters without one; a window that reaches a
  forced cut is left to the tokenizer.

So ``window`` answers either how to assemble the window's own ids or ``None``
(tokenize the text); it never guesses. Tests compare every answer with a tokenization
of the window's text.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ragtui.core.embedders._spm_split import SpmSplitter

__all__ = ["DocTokens"]

_start = itemgetter(0)

HEAD_MAX = 64
"""Characters ``window`` looks at for the end of a window's head before giving up."""


class DocTokens:
    """One document's tiled ``spans`` and ``ids`` (int32, one per span), from one tokenization."""

    __slots__ = ("_encode_one", "_forced", "_splitter", "ends", "ids", "spans", "text")

    def __init__(
        self,
        text: str,
        spans: list[tuple[int, int]],
        ids: np.ndarray,
        splitter: SpmSplitter | None,
        forced: Sequence[int] = (),
        encode_one: Callable[[str], list[int]] | None = None,
        ends: list[int] | None = None,
    ) -> None:
        """``splitter``: the tokenizer's proof of safe cuts; ``None`` means no window is
        provably a slice (``window_ids`` always answers ``None``). ``forced``: the
        places the document's own tokenization was cut without that proof.
        ``encode_one``: the ids of a text alone, computed in the calling thread
        (for heads; without it ``window_ids`` answers only windows without a head).
        ``ends``: ``[e for _, e in spans]``, when the caller has it already."""
        if len(ids) != len(spans):
            raise ValueError(f"{len(ids)} ids for {len(spans)} spans")
        self.text = text
        self.spans = spans
        self.ends = [e for _, e in spans] if ends is None else ends
        """The spans' ends on their own (the chunker bisects them)."""
        self.ids = ids
        self._splitter = splitter
        self._forced = tuple(forced)
        self._encode_one = encode_one

    def window_ids(self, start: int, end: int) -> np.ndarray | None:
        """The ids of tokenizing ``text[start:end]`` alone, when ``window`` proves how
        to get them (its head, if any, tokenized here in the calling thread), else ``None``."""
        got = self.window(start, end)
        if got is None:
            return None
        head_end, tail = got
        if head_end == start:
            return tail
        if self._encode_one is None:
            return None
        head = np.array(self._encode_one(self.text[start:head_end]), dtype=np.int32)
        return np.concatenate((head, tail))

    def window(self, start: int, end: int) -> tuple[int, np.ndarray] | None:
        """How to get the ids of tokenizing ``text[start:end]`` alone without tokenizing
        all of it: ``(head_end, tail)`` such that those ids are the ids of tokenizing
        ``text[start:head_end]`` alone followed by ``tail`` (a slice of ``ids``), or
        ``None`` when that cannot be proven (see the module docstring).

        ``head_end == start`` (nothing to tokenize) when the window starts the document
        or follows a space that a cut may separate from the character before it. Otherwise
        the head runs to the first place after ``start`` that no merge can cross (the end
        of the first word, usually; at most ``HEAD_MAX`` characters): ``"▁" + head``
        is tokenized apart from the rest in the window's own tokenization too.

        ``start`` must be a non-whitespace character and ``end`` follow one (a chunk)."""
        splitter, doc = self._splitter, self.text
        if splitter is None or not 0 <= start < end <= len(doc):
            return None
        if end < len(doc) and not splitter.safe(doc[end - 1], doc[end]):
            return None
        safe = splitter.safe
        if start == 0:
            left = head_end = 0
        elif doc[start - 1] == " " and safe(doc[start - 2] if start >= 2 else "▁", " "):
            # C begins with this space's ▁; the character before it is the
            # document's, or the prepended ▁ when the space opens the document.
            left, head_end = start - 1, start
        else:
            stop = min(end, start + HEAD_MAX)
            head_end = start + 1
            while head_end < stop and not safe(doc[head_end - 1], doc[head_end]):
                head_end += 1
            if head_end >= stop:
                return None
            left = head_end
        if any(left <= f <= end for f in self._forced):
            return None
        spans = self.spans
        i = bisect_left(spans, left, key=_start)
        if i >= len(spans) or spans[i][0] != left:
            return None
        j = bisect_left(spans, end, lo=i, key=_start)
        if j < len(spans) and spans[j][0] != end or j == len(spans) and end != len(doc) or j <= i:
            return None
        return head_end, self.ids[i:j]

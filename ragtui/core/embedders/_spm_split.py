"""Exact, parallel tokenisation of long texts for SentencePiece-style BPE tokenizers.

Why: a tokenizer converted from SentencePiece (Llama 2, Mistral; wordllama's
bundled one) has no pre-tokenizer, so the Rust library runs BPE over a whole
document as one word: single-threaded (``encode`` holds the GIL) and slower
per token as the text grows. ``spans(document)`` is the chunker's one big
tokenisation call, so it dominates ingest.

Why it is exact: such a tokenizer normalises ``text`` to ``"▁" +
text.replace(" ", "▁")`` and merges symbol pairs whose concatenation is in the
vocabulary. If no vocabulary token contains a ``▁`` right after a character
that is not ``▁``, no merge can ever join the symbols on the two sides of such
a position, so BPE of the whole equals the concatenation of BPE of the pieces
cut there. ``SpmSplitter.build`` checks that property (and the exact
normaliser and model shape) on the tokenizer's own JSON and declines when it
does not hold; tests compare the fast path with the plain one on real
documents and random text.

How: cut the text before spaces that follow a character other than space or
``▁``, about every ``segment`` characters; tokenise the pieces with
``encode_batch`` (parallel, GIL released) using a copy of the tokenizer whose
normaliser lacks the ``Prepend``; give the first piece its ``▁`` as a leading
space; shift the offsets back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tokenizers import Tokenizer as _HFTokenizer

__all__ = ["SpmSplitter"]

_PREPEND = {"type": "Prepend", "prepend": "▁"}
_REPLACE = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
_UNSAFE_TOKEN = re.compile("[^▁]▁")


class SpmSplitter:
    """Raw offsets of a long text, computed in parallel pieces; see the module docstring."""

    def __init__(self, piece_tokenizer: _HFTokenizer, segment: int) -> None:
        self._tk = piece_tokenizer
        self.segment = segment

    @classmethod
    def build(cls, tokenizer: _HFTokenizer, segment: int = 4096) -> SpmSplitter | None:
        """A splitter for ``tokenizer``, or ``None`` when splitting would not be exact."""
        spec: dict[str, Any] = json.loads(tokenizer.to_str())
        model = spec.get("model") or {}
        normalizer = spec.get("normalizer") or {}
        if (
            model.get("type") != "BPE"
            or model.get("dropout") not in (None, 0, 0.0)
            or model.get("continuing_subword_prefix")
            or model.get("end_of_word_suffix")
            or spec.get("pre_tokenizer") is not None
            or normalizer.get("type") != "Sequence"
            or normalizer.get("normalizers") != [_PREPEND, _REPLACE]
        ):
            return None
        vocab = model.get("vocab") or {}
        added = [t.get("content", "") for t in spec.get("added_tokens") or []]
        if any(_UNSAFE_TOKEN.search(tok) for tok in (*vocab, *added)):
            return None
        spec["normalizer"] = _REPLACE
        spec["truncation"] = None
        spec["padding"] = None
        piece = _HFTokenizer.from_str(json.dumps(spec))
        piece.encode_special_tokens = True
        return cls(piece, segment)

    def cuts(self, text: str) -> list[int]:
        """Start offsets of the pieces: 0, then safe cut points about ``segment`` apart."""
        out = [0]
        n = len(text)
        pos = self.segment
        while pos < n:
            cut = text.find(" ", pos)
            while cut != -1 and text[cut - 1] in " ▁":
                cut = text.find(" ", cut + 1)
            if cut == -1:
                break
            out.append(cut)
            pos = cut + self.segment
        return out

    def raw_offsets(self, text: str) -> list[tuple[int, int]]:
        """The raw token offsets of ``text`` (before tiling), equal to the plain encode's
        after ``tile_spans``; the first may start at -1 (the prefix ``▁``)."""
        cuts = self.cuts(text)
        ends = cuts[1:] + [len(text)]
        pieces = [text[a:b] for a, b in zip(cuts, ends)]
        pieces[0] = " " + pieces[0]  # the "▁" the Prepend normaliser would add
        encodings = self._tk.encode_batch(pieces, add_special_tokens=False)
        raw: list[tuple[int, int]] = []
        for base, enc in zip(cuts, encodings):
            if base == 0:
                base = -1
            raw.extend([(s + base, e + base) for s, e in enc.offsets])
        return raw

    def count(self, text: str) -> int:
        cuts = self.cuts(text)
        ends = cuts[1:] + [len(text)]
        pieces = [text[a:b] for a, b in zip(cuts, ends)]
        pieces[0] = " " + pieces[0]
        return sum(len(e.ids) for e in self._tk.encode_batch(pieces, add_special_tokens=False))

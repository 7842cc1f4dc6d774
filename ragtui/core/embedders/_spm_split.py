"""Exact, parallel tokenisation of long texts for SentencePiece-style BPE tokenizers.

Why: a tokenizer converted from SentencePiece (Llama 2, Mistral; wordllama's
bundled one) has no pre-tokenizer, so the Rust library runs BPE over a whole
document as one word: single-threaded (``encode`` holds the GIL), slower per
token as the text grows, and about 230 bytes of memory per character (a
10 MB line without spaces takes 2.3 GB and 18 s). ``spans(document)`` is the
chunker's one big tokenisation call, so it dominates ingest.

Why it is exact: such a tokenizer normalises ``text`` to ``"▁" +
text.replace(" ", "▁")`` and applies merge rules ``(left, right)`` to
adjacent symbols. A symbol that spans the boundary between characters ``x``
and ``y`` can only be made by a merge whose ``left`` ends with ``x`` and
whose ``right`` starts with ``y``. If no rule does, nothing ever joins the two
sides, so BPE of the whole equals the concatenation of BPE of the pieces cut
there. ``SpmSplitter.build`` collects those ``(x, y)`` pairs from the merge
rules (and from the added tokens, which are matched as whole strings), checks
the exact normaliser and model shape on the tokenizer's own JSON, and
declines when the property cannot be checked. A boundary before a space that
follows a character other than a space or ``▁`` is always safe in the
tokenizers this accepts (no vocabulary token contains ``▁`` after another
character); with byte fallback, boundaries next to digits, punctuation and
most letter pairs are safe too, so minified JSON cuts every few characters.

The one inexact case: a stretch of more than ``max_gap`` characters (64 Ki)
with no safe boundary at all (``"aaaa…"``). It is cut anyway at a fixed
place, which bounds memory; there a token or two may differ from one plain
``encode`` of the whole. ``count`` and the offsets use the same cuts, so they
still agree with each other.

How: cut the text about every ``segment`` characters at the first safe
boundary; tokenise groups of pieces with ``encode_batch`` (parallel, GIL
released) using a copy of the tokenizer whose normaliser lacks the
``Prepend``; give the first piece its ``▁`` as a leading space; shift the
offsets back. A group holds about ``group`` characters, so memory is bounded
by the group, not the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from tokenizers import Tokenizer as _HFTokenizer

__all__ = ["SpmSplitter"]

_PREPEND = {"type": "Prepend", "prepend": "▁"}
_REPLACE = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
_UNSAFE_TOKEN = re.compile("[^▁]▁")
# Cut before each ▁ that follows another character (the ▁ opens the next word): no merge crosses there.
_WORDS = {"type": "Split", "pattern": {"Regex": "(?<!▁)▁"}, "behavior": "MergedWithNext", "invert": False}
_BYTE_TOKEN = re.compile(r"<0x[0-9A-F]{2}>")

SEGMENT = 4096
"""Characters between cuts, before moving to the next safe boundary."""
MAX_GAP = 1 << 16
"""Characters searched for a safe boundary before cutting anyway."""
GROUP = 1 << 17
"""Characters tokenised per ``encode_batch`` call (the memory bound)."""


class SpmSplitter:
    """Raw offsets of a long text, computed in parallel pieces; see the module docstring."""

    def __init__(
        self,
        piece_tokenizer: _HFTokenizer,
        segment: int = SEGMENT,
        joined: frozenset[str] | None = None,
        *,
        max_gap: int = MAX_GAP,
        group: int = GROUP,
        normalized: _HFTokenizer | None = None,
    ) -> None:
        """``joined``: the two-character strings a merge may join (a space written
        both as ``" "`` and ``"▁"``); ``None`` allows cuts before spaces only.
        ``normalized``: see ``normalized_tokenizer``."""
        self._tk = piece_tokenizer
        self._normalized = normalized
        self.segment = segment
        self.max_gap = max_gap
        self.group = group
        self._joined = joined

    @classmethod
    def build(
        cls, tokenizer: _HFTokenizer, segment: int = SEGMENT, *, max_gap: int = MAX_GAP, group: int = GROUP
    ) -> SpmSplitter | None:
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
        normalized = None
        if all(t.get("special") for t in spec.get("added_tokens") or []):
            # Special tokens are plain text here (encode_special_tokens), so nothing is
            # matched before the normaliser: normalising in Python gives the same string.
            spec["normalizer"] = None
            spec["pre_tokenizer"] = _WORDS
            normalized = _HFTokenizer.from_str(json.dumps(spec))
            normalized.encode_special_tokens = True
        return cls(piece, segment, _joined_pairs(model, vocab, added), max_gap=max_gap, group=group,
                   normalized=normalized)

    def cuts(self, text: str) -> list[int]:
        """Start offsets of the pieces: 0, then safe cut points about ``segment`` apart
        (a cut after ``max_gap`` characters without one; see the module docstring)."""
        return self.plan(text)[0]

    def plan(self, text: str) -> tuple[list[int], list[int]]:
        """``(cuts, forced)``: ``cuts(text)``, and those of them that are not safe
        (made after ``max_gap`` characters without a safe boundary; usually none)."""
        out = [0]
        forced: list[int] = []
        n = len(text)
        pos = self.segment
        while pos < n:
            limit = min(n, pos + self.max_gap)
            cut = self._safe_cut(text, pos, limit)
            if cut < 0:
                if limit >= n:
                    break
                cut = limit
                forced.append(cut)
            out.append(cut)
            pos = cut + self.segment
        return out, forced

    def safe(self, left: str, right: str) -> bool:
        """Whether no merge can join the character ``left`` to the character ``right``
        after it (either may be ``"▁"``, the normaliser's space): BPE of a text cut
        between them is BPE of the two sides."""
        joined = self._joined
        if joined is None:
            return right == " " and left not in " ▁"  # the rule of _safe_cut
        return left + right not in joined

    def normalized_tokenizer(self) -> _HFTokenizer | None:
        """A tokenizer for text already normalised (``"▁" + text.replace(" ", "▁")``,
        or a piece of that cut at a safe place), with no normaliser and a
        pre-tokenizer that cuts before every ``▁`` that follows another character:
        always a safe cut, so its ids are those of the full tokenizer on ``text``,
        and BPE sees words, not a whole document (its word cache then works, and
        nothing has to track how a normaliser moved the characters). Its offsets
        are in the normalised string. ``None`` when a non-special added token
        would have to be matched before normalising."""
        return self._normalized

    def piece_tokenizer(self) -> _HFTokenizer:
        """The tokenizer of the pieces (the normaliser without its ``Prepend``):
        ``encode(" " + text)`` gives the tokens of the full tokenizer's ``encode(text)``."""
        return self._tk

    def _safe_cut(self, text: str, pos: int, limit: int) -> int:
        """The first safe boundary in ``pos .. limit - 1``, or -1."""
        joined = self._joined
        if joined is None:
            cut = text.find(" ", pos, limit)
            while cut != -1 and text[cut - 1] in " ▁":
                cut = text.find(" ", cut + 1, limit)
            return cut
        for i in range(pos, limit):
            if text[i - 1 : i + 1] not in joined:
                return i
        return -1

    def groups(self, text: str) -> Iterator[tuple[int, int, list[str]]]:
        """``(start, end, pieces)`` of consecutive parts of ``text``, each about
        ``group`` characters, the first piece of the first part with its ``▁``."""
        cuts = self.cuts(text)
        cuts.append(len(text))
        lo = 0
        while lo < len(cuts) - 1:
            hi = lo + 1
            while hi < len(cuts) - 1 and cuts[hi + 1] - cuts[lo] <= self.group:
                hi += 1
            pieces = [text[a:b] for a, b in zip(cuts[lo:hi], cuts[lo + 1 : hi + 1])]
            if lo == 0:
                pieces[0] = " " + pieces[0]  # the "▁" the Prepend normaliser would add
            yield cuts[lo], cuts[hi], pieces
            lo = hi

    def iter_raw_offsets(self, text: str) -> Iterator[tuple[int, int, list[tuple[int, int]]]]:
        """``(start, end, raw offsets)`` of each part of ``text`` (see ``groups``);
        together the offsets are ``raw_offsets(text)``."""
        for start, end, pieces in self.groups(text):
            raw: list[tuple[int, int]] = []
            base = start - 1 if start == 0 else start
            for piece, enc in zip(pieces, self._tk.encode_batch(pieces, add_special_tokens=False)):
                raw.extend([(s + base, e + base) for s, e in enc.offsets])
                base += len(piece)
            yield start, end, raw

    def iter_spans(self, text: str) -> Iterator[list[tuple[int, int]]]:
        """The tiled spans of ``text`` (``embedders.base.tile_spans`` of ``raw_offsets``),
        part by part (see ``groups``); each part tiles its own stretch of the text."""
        for start, end, pieces in self.groups(text):
            starts: list[int] = []
            base = start - 1 if start == 0 else start
            for piece, enc in zip(pieces, self._tk.encode_batch(pieces, add_special_tokens=False)):
                starts.extend([s + base for s, _ in enc.offsets])
                base += len(piece)
            if not starts:
                continue
            # tile_spans' rule, computed in C: a token starts where its raw offset
            # does, never before the previous token nor past the end, and ends
            # where the next one starts.
            starts[0] = start
            starts = list(accumulate(starts, max))
            if starts[-1] > end:
                starts = [min(s, end) for s in starts]
            ends = starts[1:]
            ends.append(end)
            yield list(zip(starts, ends))

    def raw_offsets(self, text: str) -> list[tuple[int, int]]:
        """The raw token offsets of ``text`` (before tiling), equal to the plain encode's
        after ``tile_spans``; the first may start at -1 (the prefix ``▁``)."""
        raw: list[tuple[int, int]] = []
        for _, _, part in self.iter_raw_offsets(text):
            raw.extend(part)
        return raw

    def iter_ids(self, text: str) -> Iterator[list[int]]:
        """Token ids of ``text``, part by part (see ``groups``)."""
        encode = getattr(self._tk, "encode_batch_fast", self._tk.encode_batch)
        for _, _, pieces in self.groups(text):
            ids: list[int] = []
            for enc in encode(pieces, add_special_tokens=False):
                ids.extend(enc.ids)
            yield ids

    def count(self, text: str) -> int:
        encode = getattr(self._tk, "encode_batch_fast", self._tk.encode_batch)
        return sum(len(e.ids) for _, _, pieces in self.groups(text) for e in encode(pieces, add_special_tokens=False))


def _joined_pairs(model: dict[str, Any], vocab: dict[str, int], added: list[str]) -> frozenset[str] | None:
    """Every ``x + y`` such that some merge may join a symbol ending in ``x`` to one
    starting with ``y`` (see the module docstring); ``None`` when that set would not
    describe every way two characters can end up in one token."""
    # Characters missing from the vocabulary become byte pieces (or one fused
    # <unk>): safe to cut beside only when byte fallback has every byte token.
    bytes_complete = all(f"<0x{b:02X}>" in vocab for b in range(256))
    if model.get("fuse_unk") and not (model.get("byte_fallback") and bytes_complete):
        return None
    pairs: set[str] = set()
    for rule in model.get("merges") or []:
        if isinstance(rule, str):
            parts = rule.split(" ")
        elif isinstance(rule, list):
            parts = rule
        else:
            return None
        if len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
            return None
        left, right = parts
        if _BYTE_TOKEN.fullmatch(left) or _BYTE_TOKEN.fullmatch(right):
            return None  # merges of byte pieces join characters we cannot see
        pairs.add(left[-1] + right[0])
    for token in added:  # matched as whole strings before BPE: never cut inside one
        pairs.update(token[i : i + 2] for i in range(len(token) - 1))
    # The text holds spaces where the normalised string holds "▁".
    for pair in list(pairs):
        if "▁" in pair:
            x, y = pair[0], pair[1]  # a pair is two characters
            for a in {x, " "} if x == "▁" else {x}:
                for b in {y, " "} if y == "▁" else {y}:
                    pairs.add(a + b)
    return frozenset(pairs)

"""Hybrid's defaults fitted to the embedder: one table, and the lookup the search applies.

How hybrid should fuse depends on the pair (lexical arm, embedder): a weak
static embedder needs a large lexical share, a strong transformer a small
one. ``FITTED`` holds, per shipped embedder (by the ``embedding_model`` an
index's meta.json records), the lexical arm hybrid uses by default and, for
each lexical arm, the fusion chosen leave-one-collection-out over SciFact
train, Cranfield, CISI and ADI (``bench/loco.py``; every figure and its
command in docs/quality.md): on each fold, the setting with the best *worst*
relative gain, over the three other collections and over nDCG@10 and
Recall@100, against the better of its two arms there; the entry is the
setting chosen on all four, with the held-out figures of the folds beside it.

An embedder the table does not know (an HTTP server's model, an ONNX folder)
gets ``UNKNOWN``: the setting whose worst gain over both shipped embedders
and all four collections is best. ``ragtui eval --fit-fusion DATASET`` fits
a table row for it on a labelled collection and prints the ``[search]``
values; values in ``[search]`` (or flags) always win over the table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FITTED", "UNKNOWN", "Fitted", "fill_hybrid", "fitted_for", "fusion_defaults"]


@dataclass(frozen=True)
class Fitted:
    """One (embedder, lexical arm) entry: how hybrid fuses, and what chose it."""

    fusion: str
    """"weighted" or "rrf"."""
    value: float
    """The lexical share (weighted) or rrf_k (rrf)."""
    chunk_weight: float | None = None
    """The lexical arm's chunk_weight (None: the arm takes none, or its default)."""
    evidence: str = ""
    """The held-out nDCG@10 of the four folds (hybrid vs the better arm), as bench/loco.py printed them."""

    def params(self, lexical: str) -> dict[str, object]:
        out: dict[str, object] = {"lexical": lexical, "fusion": self.fusion,
                                  ("rrf_k" if self.fusion == "rrf" else "weight"): self.value}
        if self.chunk_weight is not None and lexical != "bm25":
            out["chunk_weight"] = self.chunk_weight
        return out


_WORDLLAMA = "wordllama-l2_supercat-256"
_BGE_SMALL = "bge-small-en-v1.5-int8@d771a4c250d7"

# `nice python bench/loco.py` (docs/quality.md has every table, the held-out folds among them). Evidence:
# nDCG@10 of the setting on SciFact train / Cranfield / CISI / ADI, then the better of its two arms on each.
FITTED: dict[str, tuple[str, dict[str, Fitted]]] = {
    _WORDLLAMA: ("bm25stem", {
        "bm25stem": Fitted("zscore", 0.6, 0.5, "0.7098 / 0.3709 / 0.4173 / 0.5131; arms 0.6937 / 0.3656 / 0.3779 / 0.4812"),
        "bm25doc": Fitted("zscore", 0.5, 0.25, "0.6824 / 0.3541 / 0.4007 / 0.4648; arms 0.6674 / 0.3306 / 0.3705 / 0.4644"),
        "bm25": Fitted("rrf", 10, None, "0.6523 / 0.3571 / 0.4182 / 0.4777; arms 0.6496 / 0.3325 / 0.3705 / 0.4644"),
    }),
    _BGE_SMALL: ("bm25stem", {
        "bm25stem": Fitted("zscore", 0.3, 1.0, "0.7694 / 0.4169 / 0.4697 / 0.5037; arms 0.7480 / 0.3936 / 0.4372 / 0.4840"),
        "bm25doc": Fitted("weighted", 0.2, 1.0, "0.7614 / 0.4133 / 0.4475 / 0.4928; arms 0.7480 / 0.3936 / 0.4372 / 0.4809"),
        "bm25": Fitted("zscore", 0.2, None, "0.7605 / 0.4141 / 0.4463 / 0.4984; arms 0.7480 / 0.3936 / 0.4372 / 0.4809"),
    }),
}
"""embedding_model (as meta.json records it) -> (hybrid's default lexical arm, {lexical arm: its fitted fusion})."""

UNKNOWN: tuple[str, dict[str, Fitted]] = ("bm25stem", {
    "bm25stem": Fitted("zscore", 0.6, 0.5, "wordllama 0.7098 / 0.3709 / 0.4173 / 0.5131; "
                       "bge-small 0.7511 / 0.4077 / 0.4488 / 0.4926 (flat 0.7480 / 0.3936 / 0.4372 / 0.4809)"),
})
"""The entry of an embedder the table does not know: the setting best on both shipped embedders at once."""


def fitted_for(embedding_model: str) -> tuple[str, dict[str, Fitted]]:
    """The table's entry for ``embedding_model`` (``UNKNOWN`` when it has none)."""
    return FITTED.get(embedding_model, UNKNOWN)


def fusion_defaults(embedding_model: str, lexical_arm: str | None = None) -> dict[str, object]:
    """Hybrid's default ``Retriever.search`` parameters for an index embedded with ``embedding_model``.

    ``lexical_arm`` None: the table's arm for that embedder. An arm the entry
    has no fit for gets the entry's default arm's fusion.
    """
    arm, fits = fitted_for(embedding_model)
    lexical = lexical_arm or arm
    fit = fits.get(lexical) or fits[arm]
    return fit.params(lexical)


def fill_hybrid(embedding_model: str, params: dict[str, object]) -> dict[str, object]:
    """``params`` (hybrid's, as given) with what the caller left unset taken from the table.

    Nothing named: the table's method and value. A method named: its value
    from the table if the table chose that method, else ``fusion``'s module
    default. A weight or rrf_k named without a method: the method it belongs
    to as before the table (weighted, rrf), checked by ``fusion.resolve``.
    The lexical arm and its chunk_weight are filled independently.
    """
    given = {k: v for k, v in params.items() if v is not None}
    lexical = given.get("lexical")
    table = fusion_defaults(embedding_model, lexical if isinstance(lexical, str) else None)
    out = dict(given)
    out.setdefault("lexical", table["lexical"])
    if out["lexical"] != "bm25" and "chunk_weight" in table:
        out.setdefault("chunk_weight", table["chunk_weight"])
    key = "rrf_k" if table["fusion"] == "rrf" else "weight"
    if not any(k in given for k in ("fusion", "weight", "rrf_k")):
        out["fusion"], out[key] = table["fusion"], table[key]
    elif given.get("fusion") == table["fusion"] and "weight" not in given and "rrf_k" not in given:
        out[key] = table[key]
    return out

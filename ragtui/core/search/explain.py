"""Why each hit scored what it did, computed from the very snapshot the search read.

``explain_search(retriever, query, mode, k, **params)`` runs the search once
with a ``SearchTrace`` and explains each hit from what that search computed:

* **bm25**: per query term, its idf, the chunk's tf, the length norm and the
  term's weight in the query (its repetitions), and the contribution
  ``weight × idf × tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))``. The
  contributions are the very per-posting weights the scorer added, in the
  order it added them, so their sum is the hit's score.
* **flat**: the cosine of the chunk's vector and the query's (the score).
* **ivf**: the lists probed (best first), the list that holds the chunk, and
  the cosine.
* **hybrid**: each arm's rank and score among its top ``depth`` (None when
  the chunk is not among them), the part each arm added to the fused score
  (min–max normalised and weighted, or 1/(rrf_k + rank)), and the fused score.

Values are plain numbers and strings (``to_json``), for ``ragtui search
--explain`` and for programs.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ragtui.core.index.analyzer import analyze
from ragtui.core.search.modes import mode_spec
from ragtui.core.search.overlaid import OverlaidData
from ragtui.core.search.query import ParsedQuery
from ragtui.core.search.retriever import Hit, SearchParams, SearchTrace

if TYPE_CHECKING:
    from ragtui.core.index.bm25 import BM25Index
    from ragtui.core.search.retriever import Retriever

__all__ = ["ArmPart", "Explained", "HitExplanation", "TermPart", "bm25_terms", "explain_search"]


@dataclass(frozen=True)
class TermPart:
    """One query term's part in a chunk's BM25 score."""

    term: str
    query_weight: int
    """How many times the query holds the term (its contribution is counted that many times)."""
    df: int
    idf: float
    tf: int
    """Occurrences in the chunk (0: the term is not in it and contributes nothing)."""
    doc_len: int
    contribution: float

    def to_json(self) -> dict[str, object]:
        return {"term": self.term, "query_weight": self.query_weight, "df": self.df, "idf": self.idf, "tf": self.tf,
                "doc_len": self.doc_len, "contribution": self.contribution}


@dataclass(frozen=True)
class ArmPart:
    """One arm of a hybrid search: where the chunk ranked there, its score, and what it added to the fused score."""

    arm: str
    """"bm25" or "flat"."""
    rank: int | None
    """1-based among the arm's top ``depth``; None when the chunk is not among them."""
    score: float | None
    added: float

    def to_json(self) -> dict[str, object]:
        return {"arm": self.arm, "rank": self.rank, "score": self.score, "added": self.added}


@dataclass(frozen=True)
class HitExplanation:
    """Why one hit has its score. Only the fields of the hit's mode are set."""

    hit: Hit
    mode: str
    score: float
    terms: tuple[TermPart, ...] = ()
    """bm25 (and bm25doc, bm25stem, for the chunk's own part): every distinct query term the index knows (bm25stem:
    every stem the stemmed arm knows), in query order."""
    chunk_weight: float | None = None
    """bm25doc: the score is the document's BM25 plus ``chunk_weight`` times the chunk's own (``terms``)."""
    arms: tuple[ArmPart, ...] = ()
    """hybrid: the BM25 arm, then the flat arm."""
    fusion: str = ""
    """hybrid: "weighted 0.6", "zscore 0.7" or "rrf 60"."""
    cosine: float | None = None
    """flat and ivf: the cosine of chunk and query."""
    ivf_list: int | None = None
    """ivf: the list that holds the chunk."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"mode": self.mode, "score": self.score}
        if self.mode in ("bm25", "bm25doc", "bm25stem"):
            out["terms"] = [t.to_json() for t in self.terms]
        if self.chunk_weight is not None:
            chunk = sum(t.contribution for t in self.terms)
            out["chunk_weight"] = self.chunk_weight
            out["chunk_bm25"] = chunk
            out["document_bm25"] = self.score - self.chunk_weight * chunk
        if self.mode == "hybrid":
            out["fusion"] = self.fusion
            out["arms"] = [a.to_json() for a in self.arms]
        if self.cosine is not None:
            out["cosine"] = self.cosine
        if self.ivf_list is not None:
            out["ivf_list"] = self.ivf_list
        return out


@dataclass(frozen=True)
class Explained:
    """A search's hits, each explained, and what holds for all of them."""

    mode: str
    hits: tuple[Hit, ...]
    explanations: tuple[HitExplanation, ...]
    seconds: float
    """The search's own time (the explaining not included)."""
    bm25_params: dict[str, float | int] = field(default_factory=dict)
    """k1, b, avgdl and n_docs of the index's BM25 (bm25 and hybrid)."""
    probed: tuple[int, ...] = ()
    """ivf: the list numbers probed, best first."""
    nlist: int | None = None
    list_sizes: tuple[int, ...] = ()
    """ivf: the number of chunks in each probed list, in ``probed`` order."""
    notes: tuple[str, ...] = ()
    """What the search said a user should know (``Hits.notes``: e.g. a prefix cut to its most frequent terms)."""
    stages: tuple[str, ...] = ()
    """What each step after the ranking did to the hits (``Hits.stages``: a score floor, MMR, merging);
    a front end adds the steps it ran itself (a reranker)."""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"mode": self.mode}
        if self.stages:
            out["stages"] = list(self.stages)
        if self.bm25_params:
            out["bm25"] = self.bm25_params
        if self.nlist is not None:
            out["ivf"] = {"nlist": self.nlist, "probed": list(self.probed), "list_sizes": list(self.list_sizes)}
        return out


def bm25_terms(bm25: BM25Index, query: str, row: int) -> tuple[TermPart, ...]:
    """Each distinct term of ``query`` the index knows, with its part in chunk ``row``'s BM25 score.

    Summed in order (from 0.0), the contributions give exactly the score
    ``BM25Index.scores`` computes for the chunk: the same weights, added in
    the same order.
    """
    parts = []
    dl = int(bm25.doc_len[row]) if 0 <= row < bm25.n_docs else 0
    for term, reps in Counter(analyze(query)).items():
        t = bm25.lookup(term)
        if t < 0:
            continue
        lo, hi = int(bm25.offsets[t]), int(bm25.offsets[t + 1])
        docs = bm25.post_doc[lo:hi]
        at = int(np.searchsorted(docs, row))
        df = int(bm25.df[t])
        idf = math.log(1.0 + (bm25.n_docs - df + 0.5) / (df + 0.5))
        if at < docs.size and int(docs[at]) == row:
            w = float(bm25.weights[lo + at])
            tf = int(bm25.post_tf[lo + at])
            parts.append(TermPart(term, reps, df, idf, tf, dl, w * reps if reps != 1 else w))
        else:
            parts.append(TermPart(term, reps, df, idf, 0, dl, 0.0))
    return tuple(parts)


def explain_search(
    retriever: Retriever, query: str | ParsedQuery, mode: str = "bm25", k: int = 10, *,
    trace: SearchTrace | None = None,
    **params: Unpack[SearchParams],
) -> Explained:
    """Search as ``retriever.search`` does (same hits, same scores) and explain every hit from that search.

    ``trace`` (a new one by default) receives what the search computed, its snapshot included.
    """
    trace = SearchTrace() if trace is None else trace
    # Explained on the generation as published: a save layered over it by its overlay (core.search.overlaid)
    # is explained once published (seconds).
    retriever = retriever.published_snapshot()
    hits = retriever.search(query, mode=mode, k=k, trace=trace, **params)
    # Under the query syntax, the words ranked are the searched ones (phrases and filters only admit).
    words = hits.query.search_text if hits.query is not None else str(query)
    seconds = hits.seconds
    data = trace.data
    assert data is not None and not isinstance(data, OverlaidData)  # the published generation, as searched
    bm25 = data.bm25
    explanations: list[HitExplanation] = []
    bm25_params: dict[str, float | int] = {}
    probed: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()
    nlist: int | None = None
    spec = mode_spec(mode)
    if spec is not None and spec.kind in ("lexical", "fusion"):
        bm25_params = {"k1": bm25.k1, "b": bm25.b, "avgdl": bm25.avgdl, "n_docs": bm25.n_docs}
    if mode == "bm25":
        for h in hits:
            explanations.append(HitExplanation(h, mode, h.score, terms=bm25_terms(bm25, words, h.row)))
    elif mode == "bm25doc":
        from ragtui.core.search.docaware import check_chunk_weight

        cw = check_chunk_weight(params.get("chunk_weight"))
        for h in hits:
            explanations.append(HitExplanation(h, mode, h.score, terms=bm25_terms(bm25, words, h.row), chunk_weight=cw))
    elif mode == "bm25stem":
        from ragtui.core.search.docaware import check_chunk_weight
        from ragtui.core.search.stemmed import DEFAULT_STEM_CHUNK_WEIGHT

        got = params.get("chunk_weight")
        cw = DEFAULT_STEM_CHUNK_WEIGHT if got is None else check_chunk_weight(got)
        stem = retriever._stemlex_for(data)  # the stemmed arm of the search's own generation
        stemmed = stem.query_text(words)
        bm25_params = {"k1": stem.chunks.k1, "b": stem.chunks.b, "avgdl": stem.chunks.avgdl, "n_docs": stem.chunks.n_docs}
        for h in hits:
            explanations.append(HitExplanation(h, mode, h.score, terms=bm25_terms(stem.chunks, stemmed, h.row),
                                               chunk_weight=cw))
    elif mode in ("flat", "ivf"):
        owner = _list_of(trace) if mode == "ivf" else {}
        for h in hits:
            explanations.append(HitExplanation(h, mode, h.score, cosine=h.score, ivf_list=owner.get(h.row)))
        if mode == "ivf" and trace.ivf is not None and trace.probed is not None:
            offsets = trace.ivf.offsets
            nlist = trace.ivf.nlist
            probed = tuple(int(c) for c in trace.probed)
            sizes = tuple(int(offsets[c + 1] - offsets[c]) for c in probed)
    elif mode == "hybrid":
        if trace.arm == "bm25stem":  # the stemmed arm's parameters, not the index's
            stemmed_chunks = retriever._stemlex_for(data).chunks
            bm25_params = {"k1": stemmed_chunks.k1, "b": stemmed_chunks.b, "avgdl": stemmed_chunks.avgdl,
                           "n_docs": stemmed_chunks.n_docs}
        explanations.extend(_hybrid(trace, hits, trace.arm or params.get("lexical") or "bm25doc"))
    else:  # a mode with no explanation of its own yet: its score, as ranked
        explanations.extend(HitExplanation(h, mode, h.score) for h in hits)
    return Explained(mode, tuple(hits), tuple(explanations), seconds, bm25_params, probed, nlist, sizes,
                     tuple(hits.notes), tuple(hits.stages))


def _list_of(trace: SearchTrace) -> dict[int, int]:
    """Row -> the probed list that holds it."""
    if trace.ivf is None or trace.probed is None:
        return {}
    owner: dict[int, int] = {}
    offsets, rows = trace.ivf.offsets, trace.ivf.rows
    for c in trace.probed.tolist():
        for row in rows[offsets[c] : offsets[c + 1]].tolist():
            owner[row] = c
    return owner


def _hybrid(trace: SearchTrace, hits: list[Hit], lexical: str) -> list[HitExplanation]:
    """Each arm's rank, score and share of the fused score, as ``fusion.fuse`` computed them."""
    assert trace.lexical is not None and trace.vector is not None and trace.fusion is not None
    method, weight, rrf_k = trace.fusion
    arms = []
    for name, (rows, scores), share in ((lexical, trace.lexical, weight), ("flat", trace.vector, 1.0 - weight)):
        s = np.asarray(scores, dtype=np.float64)
        if method == "rrf":
            added = 1.0 / (rrf_k + np.arange(1, rows.size + 1, dtype=np.float64))
        elif s.size:
            from ragtui.core.search.fusion import normalise

            added = share * normalise(s, method)
        else:
            added = s
        where = {int(r): i for i, r in enumerate(rows.tolist())}
        arms.append((name, where, s, added))
    label = f"rrf {rrf_k:g}" if method == "rrf" else f"{method} {weight:g}"
    out = []
    for h in hits:
        parts = []
        for name, where, s, added in arms:
            i = where.get(h.row)
            if i is None:
                parts.append(ArmPart(name, None, None, 0.0))
            else:
                parts.append(ArmPart(name, i + 1, float(s[i]), float(added[i])))
        out.append(HitExplanation(h, "hybrid", h.score, arms=tuple(parts), fusion=label))
    return out

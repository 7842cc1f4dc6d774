"""Several indexes searched as one: ``search_many`` ranks their chunks together, each hit naming its index.

The default merge, ``pooled``, ranks as if the indexes were one index holding
their chunks one after another (the first index's chunks first):

* BM25 scores every chunk with the pooled statistics: the number of chunks,
  the average chunk length and each query term's document frequency summed
  over all the indexes (each index keeps its own k1 and b). A BM25 score
  depends on those statistics, so the same passage scores higher in a small
  index than in a large one: merged as they are, the scores of a small index
  would crowd out a large one's (``bench/bench_multi.py`` measures it). With
  pooled statistics, the scores and the order are those of the one index
  (equal to 1e-9; tests/unit/test_multi.py checks it against such an index).
* Vector scores are cosines: comparable across indexes embedded with one
  model, so merged by value (flat gives exactly the one index's top k). When
  the indexes use different models, cosines of two models share no scale:
  the vector lists are then merged by rank (reciprocal rank fusion), and
  ``MultiResult.notes`` says so.
* Hybrid fuses the pooled BM25 list and the merged vector list with the same
  fusion as one index (``core.search.fusion``).

Two other merges take each index's own ranked list, ``depth`` deep: ``rrf``
(by rank: every index's top hit scores the same) and ``score`` (each index's
own scores as they are). They are here to be measured against ``pooled``.

The query syntax (spec/query-syntax.md) applies as for one index: a
``QueryPlan`` per index restricts its rows, and prefixes expand over the
pooled dictionaries, so the pooled merge still equals the one index.

Each index is read from one generation (its retriever's snapshot at the
start of the search) from start to end, as a single-index search is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ragtui.core.errors import UsageError
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.topk import top_k
from ragtui.core.search.modes import mode_spec

if TYPE_CHECKING:
    from ragtui.core.index.bm25 import BM25Index
    from ragtui.core.index.index_format import IndexData
    from ragtui.core.search.query import ParsedQuery
    from ragtui.core.search.retriever import Hit, Retriever

__all__ = ["MERGES", "MultiHit", "MultiResult", "merge_ranked", "pooled_bm25_scores", "search_many"]

MERGES = ("pooled", "rrf", "score")
"""``pooled``: as one index (the default); ``rrf``: by rank; ``score``: each index's own scores."""

DEFAULT_RRF_K = 60.0
"""The usual constant of reciprocal rank fusion: the rank-1 hit scores 1/61."""

DEFAULT_DEPTH = 100
"""Hits taken from each index (and each arm) before merging, unless ``depth`` says otherwise."""


@dataclass(frozen=True)
class MultiHit:
    """One hit of a search over several indexes: the merged rank and score, and the chunk in its index."""

    index_id: str
    hit: Hit
    """The chunk; its ``rank`` and ``score`` are the merged ones, its ``row`` the row in its own index."""

    @property
    def rank(self) -> int:
        return self.hit.rank

    @property
    def score(self) -> float:
        return self.hit.score

    @property
    def chunk_id(self) -> str:
        return self.hit.chunk_id


@dataclass
class MultiResult:
    """The merged hits, and what the merge did that a reader should know."""

    hits: list[MultiHit]
    merge: str
    notes: list[str] = field(default_factory=list)


def _check(merge: str, rrf_k: object, k: int, depth: int) -> float:
    if merge not in MERGES:
        raise UsageError(f"unknown merge {merge!r}: use one of {', '.join(MERGES)}")
    if isinstance(rrf_k, bool) or not isinstance(rrf_k, (int, float)) or not 0 <= rrf_k <= 1e6:
        raise UsageError(f"rrf_k must be a number from 0 to 1000000 (got {rrf_k!r})")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"k must be a whole number of at least 1 (got {k!r})")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise UsageError(f"depth must be a whole number of at least 1 (got {depth!r})")
    return float(rrf_k)


def pooled_bm25_scores(indexes: Sequence[BM25Index], query: str) -> list[np.ndarray]:
    """Dense BM25 scores of every chunk of each index, with the statistics of all of them pooled.

    The operations follow ``bm25._weights`` step by step, so that for indexes
    with equal k1 and b the scores equal those of one index holding all
    their chunks in order.
    """
    n_docs = sum(ix.n_docs for ix in indexes)
    lengths = [ix.doc_len for ix in indexes if ix.n_docs]
    avgdl = float(np.concatenate(lengths).mean(dtype=np.float64)) if lengths else 0.0
    out = [np.zeros(ix.n_docs, dtype=np.float64) for ix in indexes]
    for term, reps in Counter(analyze(query)).items():
        where = [(i, ix.lookup(term)) for i, ix in enumerate(indexes)]
        where = [(i, t) for i, t in where if t >= 0]
        if not where:
            continue
        df = float(sum(int(indexes[i].df[t]) for i, t in where))
        idf = np.log(1.0 + (n_docs - np.float64(df) + 0.5) / (np.float64(df) + 0.5))
        for i, t in where:
            ix = indexes[i]
            lo, hi = int(ix.offsets[t]), int(ix.offsets[t + 1])
            docs = ix.post_doc[lo:hi].astype(np.int64)
            tf = ix.post_tf[lo:hi].astype(np.int64)
            dl = ix.doc_len[docs].astype(np.float64)
            k1, b = ix.k1, ix.b
            norm = k1 * (1.0 - b + b * dl / avgdl) if avgdl > 0 else np.full_like(dl, k1 * (1.0 - b))
            w = (tf.astype(np.float64) * (k1 + 1.0)) / (norm + tf) * idf
            out[i][docs] += w * reps if reps != 1 else w
    return out


def merge_ranked(ranked: Mapping[str, Sequence[Hit]], k: int, *, merge: str = "rrf",
                 rrf_k: float = DEFAULT_RRF_K) -> list[MultiHit]:
    """Merge per-index ranked lists (index id -> hits in rank order) into the top ``k``.

    ``rrf`` scores a hit ``1 / (rrf_k + rank)`` with its rank in its own list;
    ``score`` keeps each hit's own score. Ties go to the index that comes
    first in ``ranked``, then to the lower rank inside it.
    """
    if merge not in ("rrf", "score"):
        raise UsageError(f"merge_ranked merges by 'rrf' or 'score' (got {merge!r})")
    rrf_k = _check(merge, rrf_k, k, k)
    scored: list[tuple[float, int, int, str, Hit]] = []
    for order, (index_id, hits) in enumerate(ranked.items()):
        for pos, hit in enumerate(hits):
            fused = 1.0 / (rrf_k + pos + 1) if merge == "rrf" else float(hit.score)
            scored.append((-fused, order, pos, index_id, hit))
    scored.sort(key=lambda t: (t[0], t[1], t[2]))
    return [MultiHit(index_id, _ranked(hit, i + 1, -neg)) for i, (neg, _, _, index_id, hit) in enumerate(scored[:k])]


def _ranked(hit: Hit, rank: int, score: float) -> Hit:
    from ragtui.core.search.retriever import Hit

    return Hit(rank, score, hit.chunk_id, hit.doc_id, hit.row, hit.text)


def search_many(retrievers: Mapping[str, Retriever], query: str | ParsedQuery, *, mode: str = "bm25", k: int = 10,
                depth: int | None = None, merge: str = "pooled", merge_rrf_k: float = DEFAULT_RRF_K,
                strict: bool = False, **params: Any) -> MultiResult:
    """Search every index in ``retrievers`` (index id -> retriever, in this order) and rank the chunks together.

    ``params`` are the single-index search parameters (``nprobe``; hybrid's
    ``fusion``, ``weight``, ``rrf_k``), checked as ``Retriever.search``
    checks them. ``depth`` (default ``max(k, DEFAULT_DEPTH)``) is how many
    hits each index and each arm contributes. ``merge_rrf_k`` is the
    constant of the merges by rank (``rrf``, and vector lists of different models).
    """
    from ragtui.core.search.query import ParsedQuery
    from ragtui.core.search.retriever import EMPTY_QUERY, check_search

    if not retrievers:
        raise UsageError("no index to search")
    if not (query.text if isinstance(query, ParsedQuery) else query).strip():
        raise UsageError(EMPTY_QUERY)
    if isinstance(query, str):
        from ragtui.core.search.query import parse_query
        from ragtui.core.search.retriever import check_query

        query = parse_query(check_query(query), strict=strict)
    depth = max(k, DEFAULT_DEPTH) if depth is None else depth
    rrf = _check(merge, merge_rrf_k, k, depth)
    if depth < k:
        raise UsageError(f"depth must be at least k ({k}) (got {depth})")
    check_search(mode, params)
    if merge == "pooled":
        # The post-ranking steps (spec/ranking.md) are not applied to a pooled ranking yet.
        asked = [n for n in ("mmr", "min_score") if params.get(n) is not None] + (["merge"] if params.get("merge") else [])
        if asked:
            raise UsageError(f"{', '.join(asked)} is not available when several indexes are pooled: "
                             "use merge 'rrf' or 'score'")
    if merge != "pooled":
        ranked = {i: r.search(query, mode=mode, k=depth, **params) for i, r in retrievers.items()}
        return MultiResult(merge_ranked(ranked, k, merge=merge, rrf_k=rrf), merge)
    return _pooled(retrievers, query, mode, k, depth, rrf, params)


def _pooled(retrievers: Mapping[str, Retriever], query: str | ParsedQuery, mode: str, k: int, depth: int, rrf_k: float,
            params: dict[str, Any]) -> MultiResult:
    from ragtui.core.search.flat import flat_search
    from ragtui.core.search.query import ParsedQuery, parse_query
    from ragtui.core.search.query_plan import QueryPlan
    from ragtui.core.search.retriever import Hit, check_query

    parsed = query if isinstance(query, ParsedQuery) else parse_query(check_query(query))
    check_query(parsed.text)
    ids = list(retrievers)
    # One generation per index, start to end: as published (a save a watch agent has not published yet is
    # pooled once it is).
    datas: list[IndexData] = [retrievers[i].published for i in ids]
    starts = np.cumsum([0] + [d.n_chunks for d in datas])
    result = MultiResult([], "pooled")
    # Query syntax: one plan per index, prefixes expanded over the pooled dictionaries, so that every index
    # scores the same words; each index's filters and text checks restrict its own rows.
    plans = None if parsed.plain else [QueryPlan.bind(parsed, d, pooled=[x.bm25 for x in datas]) for d in datas]
    lexical_text = parsed.text if plans is None else plans[0].lexical_text
    vector_text = parsed.search_text

    if mode == "hybrid":
        from ragtui.core.search.fusion_fit import fill_hybrid

        # What the caller left unset: the fit for the indexes' embedder (when they share one).
        models = {d.meta.embedding_model for d in datas}
        params = fill_hybrid(models.pop() if len(models) == 1 else "", params)
    # bm25doc and bm25stem (and hybrid's lexical side over them): document BM25 with pooled document
    # statistics, so the pooled ranking is still that of one index holding every chunk (spec/ranking.md).
    arm = mode if mode != "hybrid" else params.get("lexical") or "bm25doc"

    def lexical_scores() -> list[np.ndarray]:
        if arm == "bm25stem":
            from ragtui.core.search.docaware import check_chunk_weight
            from ragtui.core.search.stemmed import DEFAULT_STEM_CHUNK_WEIGHT

            stems = [retrievers[i]._stemlex_for(d) for i, d in zip(ids, datas)]
            text = stems[0].query_text(lexical_text)
            got = params.get("chunk_weight")
            weight = DEFAULT_STEM_CHUNK_WEIGHT if got is None else check_chunk_weight(got)
            chunk_scores = pooled_bm25_scores([x.chunks for x in stems], text)
            lexes = [x.docs for x in stems]
        else:
            text = lexical_text
            chunk_scores = pooled_bm25_scores([d.bm25 for d in datas], lexical_text)
            if arm not in ("bm25doc",):
                return chunk_scores
            from ragtui.core.search.docaware import check_chunk_weight

            weight = check_chunk_weight(params.get("chunk_weight"))
            lexes = [retrievers[i]._doclex_for(d) for i, d in zip(ids, datas)]
        out = []
        for own, docs, lex in zip(chunk_scores, pooled_bm25_scores([x.docs for x in lexes], text), lexes):
            combined = docs[lex.doc_of_row] + weight * own
            combined[own <= 0.0] = 0.0
            out.append(combined)
        return out

    def pooled_lexical(n: int) -> tuple[np.ndarray, np.ndarray]:
        rows, scores = [], []
        for i, dense in enumerate(lexical_scores()):
            if plans is None:
                matched = np.flatnonzero(dense > 0.0)
                r, s = top_k(dense[matched], matched, n)
            else:
                r, s = plans[i].lexical(dense, n)
            rows.append(r + starts[i])
            scores.append(s)
        return top_k(np.concatenate(scores), np.concatenate(rows), n)

    def merged_vectors(n: int) -> tuple[np.ndarray, np.ndarray]:
        rows, scores = [], []
        for i, index_id in enumerate(ids):
            r, data = retrievers[index_id], datas[i]
            vec = r.query_vector(vector_text)
            if mode == "ivf" and plans is not None:
                got = plans[i].ivf(r._ivf_for(data), data.vectors, vec, n, params.get("nprobe"))
            elif mode == "ivf":  # the lists of this very generation
                got = r._ivf_for(data).search(vec, n, nprobe=params.get("nprobe"))
            elif plans is not None:
                got = plans[i].flat(data.vectors, vec, n)
            else:
                got = flat_search(data.vectors, vec, n)
            rows.append(np.asarray(got[0], dtype=np.int64) + starts[i])
            scores.append(np.asarray(got[1], dtype=np.float64))
        models = {(d.meta.embedding_model, d.meta.dim) for d in datas}
        if len(models) == 1:
            return top_k(np.concatenate(scores), np.concatenate(rows), n)
        result.notes.append("the indexes use different embedding models, whose cosines share no scale: "
                            "their vector hits are merged by rank (reciprocal rank fusion)")
        fused = np.concatenate([1.0 / (rrf_k + np.arange(1, len(r) + 1, dtype=np.float64)) for r in rows])
        return top_k(fused, np.concatenate(rows), n)

    kind = mode_spec(mode)
    if kind is not None and kind.kind == "lexical":
        rows, scores = pooled_lexical(k)
    elif kind is not None and kind.kind == "vector":
        rows, scores = merged_vectors(k)
    else:
        from ragtui.core.search import fusion

        rows, scores = fusion.fuse(pooled_lexical(depth), merged_vectors(depth), k, method=params.get("fusion"),
                                   weight=params.get("weight"), rrf_k=params.get("rrf_k"))
    result.notes.extend(note for note in parsed.notes if note not in result.notes)
    for plan in plans or ():
        result.notes.extend(note for note in plan.notes if note not in result.notes)
    owner = np.searchsorted(starts, rows, side="right") - 1
    for rank, (row, score, i) in enumerate(zip(rows.tolist(), scores.tolist(), owner.tolist()), 1):
        data = datas[i]
        rec = data.records[row - int(starts[i])]
        result.hits.append(MultiHit(ids[i], Hit(rank, float(score), rec.chunk_id, rec.doc_id,
                                                 row - int(starts[i]), rec.text)))
    return result

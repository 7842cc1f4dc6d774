"""Fit hybrid's fusion to an embedder on a labelled collection (``ragtui eval --fit-fusion``).

For an embedder ``fusion_fit.FITTED`` does not know (an HTTP server's model,
an ONNX folder): every query is searched once per lexical arm (bm25doc,
bm25stem) in hybrid mode, keeping each arm's top ``DEEP`` chunks
(``SearchTrace``); every setting of ``GRID`` is then fused from those lists
exactly as ``Retriever`` fuses them (the top ``DEPTH`` of each arm, extended
from the top ``DEEP``), and scored at document level (a document at its best
chunk). The setting chosen is the one that loses least to the better of its
two arms, alone, in nDCG@10 and Recall@100 (nothing, when it never loses),
then has the best nDCG@10. The shipped table was chosen the same way but
leave-one-collection-out over four collections (bench/loco.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ragtui.core.eval import metrics
from ragtui.core.search import fusion

if TYPE_CHECKING:
    from ragtui.core.eval.datasets import Dataset
    from ragtui.core.search.retriever import Retriever

__all__ = ["ARMS", "GRID", "FitRow", "fit_fusion", "search_table"]

ARMS = ("bm25doc", "bm25stem")
WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
GRID: tuple[tuple[str, float], ...] = (
    *[("weighted", w) for w in WEIGHTS], *[("zscore", w) for w in WEIGHTS], *[("rrf", k) for k in (10, 30, 60, 100)]
)
"""(fusion, weight or rrf_k) settings tried over each arm."""
DEPTH = fusion.DEFAULT_DEPTH
DEEP = 500
"""Chunks kept per arm: Recall@100 counts documents, and a document may have several chunks."""


@dataclass(frozen=True)
class FitRow:
    """One setting's means over the collection's queries."""

    lexical: str
    fusion: str
    value: float
    ndcg: float
    recall: float
    loss: float
    """The worst relative shortfall against the better of its two arms (nDCG@10, Recall@100); 0: none."""

    def params(self) -> dict[str, object]:
        return {"lexical": self.lexical, "fusion": self.fusion,
                ("rrf_k" if self.fusion == "rrf" else "weight"): self.value}


def _docs(rows: list[int], doc_of: Callable[[int], str], n: int) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for r in rows:
        d = doc_of(r)
        if d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) == n:
                break
    return out


def fit_fusion(retriever: Retriever, dataset: Dataset, *, to_doc: Mapping[str, str] | None = None,
               progress: Callable[[str, int, int], None] | None = None) -> tuple[FitRow, list[FitRow], dict[str, tuple[float, float]]]:
    """(the setting chosen, every setting tried, each arm alone's (nDCG@10, Recall@100)) on ``dataset``."""
    from ragtui.core.search.retriever import SearchTrace

    # The generation as published: the fit reads each arm's own ranking from the search's trace, and a save's
    # overlay (searchable for the seconds until its publish) is ranked without one.
    retriever = retriever.published_snapshot()
    data = retriever.data
    records = data.records

    def doc_of(row: int) -> str:
        d = records[row].doc_id
        return to_doc.get(d, d) if to_doc is not None else d

    qids = [q for q in dataset.queries if dataset.qrels.get(q)]
    lists: dict[str, list[tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]]] = {a: [] for a in ARMS}
    for i, q in enumerate(qids):
        for arm in ARMS:
            trace = SearchTrace()
            retriever.search(dataset.queries[q], mode="hybrid", k=1, depth=DEEP, lexical=arm, fusion="rrf",
                             trace=trace)
            assert trace.lexical is not None and trace.vector is not None
            lists[arm].append((trace.lexical, trace.vector))
        if progress is not None:
            progress("fitting fusion: searching", i + 1, len(qids))

    def score(ranked: Callable[[int], list[int]]) -> tuple[float, float]:
        nd, rc = [], []
        for i, q in enumerate(qids):
            docs = _docs(ranked(i), doc_of, 100)
            nd.append(metrics.ndcg(docs, dataset.qrels[q], 10))
            rc.append(metrics.recall(docs, dataset.qrels[q], 100))
        return float(np.mean(nd)) if nd else 0.0, float(np.mean(rc)) if rc else 0.0

    def arm_rows(arm: str, which: int) -> Callable[[int], list[int]]:
        def ranked(i: int) -> list[int]:
            out: list[int] = lists[arm][i][which][0].tolist()
            return out
        return ranked

    alone = {arm: score(arm_rows(arm, 0)) for arm in ARMS}
    alone["flat"] = score(arm_rows(ARMS[0], 1))

    def fused(arm: str, method: str, value: float) -> Callable[[int], list[int]]:
        weight, rrf_k = (None, value) if method == "rrf" else (value, None)

        def ranked(i: int) -> list[int]:
            lex, vec = lists[arm][i]
            top = (lex[0][:DEPTH], lex[1][:DEPTH])
            rows, scores = fusion.fuse(top, (vec[0][:DEPTH], vec[1][:DEPTH]), DEEP, method=method, weight=weight,
                                       rrf_k=rrf_k)
            if rows.size < DEEP:
                deeper = fusion.fuse(lex, vec, DEEP, method=method, weight=weight, rrf_k=rrf_k)
                rows, scores = fusion.extend(rows, scores, deeper, DEEP)
            out: list[int] = rows.tolist()
            return out
        return ranked

    rows: list[FitRow] = []
    for arm in ARMS:
        for method, value in GRID:
            nd, rc = score(fused(arm, method, value))
            best_nd, best_rc = max(alone[arm][0], alone["flat"][0]), max(alone[arm][1], alone["flat"][1])
            loss = min(0.0, nd / best_nd - 1.0 if best_nd else 0.0, rc / best_rc - 1.0 if best_rc else 0.0)
            rows.append(FitRow(arm, method, value, nd, rc, round(loss, 6)))
    chosen = max(rows, key=lambda r: (r.loss, r.ndcg, r.recall))
    return chosen, rows, alone


def search_table(chosen: FitRow, alone: Mapping[str, tuple[float, float]], *, model: str, dataset: str,
                 n_queries: int) -> str:
    """The ``[search]`` table of ragtui.toml for ``chosen``, with the figures that chose it as comments."""
    value = f"{chosen.value:g}"
    key = "rrf_k" if chosen.fusion == "rrf" else "weight"
    lines = [
        f"# hybrid's fusion fitted for {model!r} on {dataset} ({n_queries} queries): nDCG@10 {chosen.ndcg:.4f},"
        f" Recall@100 {chosen.recall:.4f}",
        "# each arm alone: " + ", ".join(f"{a} {nd:.4f} / {rc:.4f}" for a, (nd, rc) in alone.items()),
        "# fitted on one collection: check it on another before relying on it (docs/quality.md)",
        "[search]",
        f'lexical = "{chosen.lexical}"',
        f'fusion = "{chosen.fusion}"',
        f"{key} = {value}",
    ]
    return "\n".join(lines) + "\n"

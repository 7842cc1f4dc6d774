"""Choose the ranking defaults leave-one-collection-out: bm25doc's chunk_weight, hybrid's fusion.

    python bench/loco.py [--artifacts DIR]     # about 5 minutes on 2 shared cores

For each shared collection (SciFact train, Cranfield, CISI, ADI) it indexes
the collection twice through the normal ingest path (256/32 chunks, and
whole documents: 8,192-token windows, no overlap), then scores every
configuration of a grid on every query: documents rank at their best chunk,
as ``ragtui eval`` ranks them. The grid: bm25doc with chunk_weight in
{0, 0.1, 0.25, 0.5, 1, 2}; hybrid over plain BM25 or bm25doc (chunk_weight
0, 0.25, 0.5, 1) with weighted fusion (weight 0.3 .. 0.8) or rrf (rrf_k 10,
30, 60, 100), depth 100.

Leave-one-collection-out: for each collection held out, the configuration
with the best *worst* relative nDCG@10 gain over BM25 on the other three
(maximin: the defaults must beat BM25 everywhere, not on average) is scored
on the held-out one, with the paired randomisation test against BM25. The
same is printed for the mean nDCG@10 criterion. Scoring reuses the search's
own functions (``DocLexical``, ``fusion.fuse``, ``fusion.extend``,
``top_k``); the first queries are checked against ``Retriever.search``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragtui.config import Settings  # noqa: E402
from ragtui.core.eval import metrics  # noqa: E402
from ragtui.core.search import fusion  # noqa: E402
from ragtui.core.topk import top_k  # noqa: E402

EVAL_DATA = ROOT.parent / "shared" / "data" / "eval"
COLLECTIONS = ("scifact", "cranfield", "cisi", "adi")
DEPTH = 100
DEEP = 500  # chunks asked for Recall@100 (ragtui eval asks 5k)


def collect(artifacts: Path) -> dict[str, dict]:
    """Per collection: judgments, and per index (chunk, whole) the dense score arrays of every query."""
    from ragtui.app import open_embedder
    from ragtui.core.eval.datasets import load_dataset
    from ragtui.core.eval.evaluate import prepare_collection
    from ragtui.core.search.retriever import Retriever

    embedder = open_embedder(Settings())
    data: dict[str, dict] = {}
    for name in COLLECTIONS:
        ds = load_dataset(EVAL_DATA / name, split="train")
        entry: dict = {"qrels": ds.qrels}
        for tag, max_tokens, overlap in (("chunk", 256, 32), ("whole", 8192, 0)):
            path, doc_map, _ = prepare_collection(ds, artifacts=artifacts, embedder=embedder,
                                                  index_id=f"loco-{name}-{tag}", max_tokens=max_tokens, overlap=overlap)
            r = Retriever.open(path, embedder=embedder, cache_dir=artifacts / "cache")
            lex = r.doc_lexical()
            records = r.data.records
            qids = list(ds.queries)
            entry[tag] = {
                "retriever": r,
                "queries": [ds.queries[q] for q in qids],
                "qids": qids,
                "docids": [doc_map[records[i].doc_id] for i in range(r.data.n_chunks)],
                "group": lex.doc_of_row,
                "own": [r.data.bm25.scores(ds.queries[q]) for q in qids],
                "doc": [lex.docs.scores(ds.queries[q]) for q in qids],
                "cos": [np.asarray(r.data.vectors) @ r.query_vector(ds.queries[q]) for q in qids],
            }
            print(f"{name} {tag}: {r.data.n_chunks} chunks, {len(qids)} queries", file=sys.stderr, flush=True)
        data[name] = entry
    return data


def lexical(d: dict, i: int, chunk_weight: float | None) -> np.ndarray:
    own = d["own"][i]
    if chunk_weight is None:
        return own
    s = d["doc"][i][d["group"]] + chunk_weight * own
    s[own <= 0.0] = 0.0
    return s


def top(scores: np.ndarray, n: int, positive: bool = True) -> tuple[np.ndarray, np.ndarray]:
    rows = np.flatnonzero(scores > 0.0) if positive else np.arange(scores.size)
    return top_k(scores[rows].astype(np.float64), rows, n)


def ranking(d: dict, i: int, system: tuple) -> np.ndarray:
    """Chunk rows, best first, as Retriever.search ranks them for ``system``."""
    if system[0] == "bm25doc":
        return top(lexical(d, i, system[1]), DEEP)[0]
    if system[0] in ("bm25", "whole"):
        return top(d["own"][i], DEEP)[0]
    if system[0] == "flat":
        return top(d["cos"][i].astype(np.float64), DEEP, positive=False)[0]
    _, chunk_weight, method, weight, rrf_k = system
    lex, cos = lexical(d, i, chunk_weight), d["cos"][i].astype(np.float64)
    kw = {"method": method, "weight": weight if method == "weighted" else None,
          "rrf_k": rrf_k if method == "rrf" else None}
    rows, scores = fusion.fuse(top(lex, DEPTH), top(cos, DEPTH, positive=False), DEEP, **kw)
    if rows.size < DEEP:
        rows, scores = fusion.extend(rows, scores, fusion.fuse(top(lex, DEEP), top(cos, DEEP, positive=False), DEEP,
                                                               **kw), DEEP)
    return rows


def score(entry: dict, system: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = entry["whole" if system[0] == "whole" else "chunk"]
    nd, rc, mr = [], [], []
    for i, q in enumerate(d["qids"]):
        ranked: list[str] = []
        for r in ranking(d, i, system).tolist():
            did = d["docids"][r]
            if did not in ranked:
                ranked.append(did)
                if len(ranked) == 100:
                    break
        rel = entry["qrels"][q]
        nd.append(metrics.ndcg(ranked, rel, 10))
        rc.append(metrics.recall(ranked, rel, 100))
        mr.append(metrics.mrr(ranked, rel, 10))
    return np.array(nd), np.array(rc), np.array(mr)


def name(system: tuple) -> str:
    if system[0] in ("bm25", "flat"):
        return system[0]
    if system[0] == "whole":
        return "bm25, whole documents"
    if system[0] == "bm25doc":
        return f"bm25doc chunk_weight={system[1]:g}"
    lex = "bm25" if system[1] is None else f"bm25doc({system[1]:g})"
    return f"hybrid {lex} {system[2]} " + (f"weight={system[3]:g}" if system[2] == "weighted" else f"rrf_k={system[4]:g}")


def check_against_retriever(data: dict) -> None:
    """The bench's rankings are Retriever.search's (default hybrid and bm25doc), on the first queries."""
    from ragtui.core.search.docaware import DEFAULT_CHUNK_WEIGHT

    for name_ in COLLECTIONS:
        d = data[name_]["chunk"]
        for i in range(min(5, len(d["qids"]))):
            for mode, system in (("bm25doc", ("bm25doc", DEFAULT_CHUNK_WEIGHT)),
                                 ("hybrid", ("hybrid", DEFAULT_CHUNK_WEIGHT, fusion.DEFAULT_FUSION,
                                             fusion.DEFAULT_WEIGHT, None))):
                got = [h.row for h in d["retriever"].search(d["queries"][i], mode=mode, k=50)]
                want = ranking(d, i, system)[:50].tolist()
                assert got == want, (name_, mode, i)


def loco(results: dict, family: list[tuple], criterion: str) -> list[str]:
    base = ("bm25",)

    def value(system: tuple, c: str) -> float:
        return float(results[system][c][0].mean())

    def fit(system: tuple, train: list[str]) -> float:
        gains = [value(system, c) / value(base, c) - 1.0 for c in train]
        return min(gains) if criterion == "maximin" else float(np.mean([value(system, c) for c in train]))

    lines = ["| held out | chosen on the other three | nDCG@10 | bm25 | Δ | p | Recall@100 | bm25 R@100 |",
             "|---|---|---|---|---|---|---|---|"]
    for held in COLLECTIONS:
        train = [c for c in COLLECTIONS if c != held]
        best = max(family, key=lambda s: (fit(s, train), name(s)))
        nd, base_nd = results[best][held][0], results[base][held][0]
        p = metrics.paired_randomization_test(list(base_nd), list(nd), permutations=10_000, seed=0)
        lines.append(f"| {held} | {name(best)} | {nd.mean():.4f} | {base_nd.mean():.4f} | {nd.mean() - base_nd.mean():+.4f}"
                     f" | {p:.4f} | {results[best][held][1].mean():.4f} | {results[base][held][1].mean():.4f} |")
    best = max(family, key=lambda s: (fit(s, list(COLLECTIONS)), name(s)))
    lines.append(f"\nchosen on all four: **{name(best)}**")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--artifacts", type=Path,
                    default=Path(os.environ.get("RAGTUI_ARTIFACTS") or ROOT / "bench" / "out" / "artifacts"))
    args = ap.parse_args(argv)
    data = collect(args.artifacts)
    check_against_retriever(data)
    docaware = [("bm25doc", cw) for cw in (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)]
    hybrid = [("hybrid", cw, "weighted", w, None) for cw in (None, 0.0, 0.25, 0.5, 1.0)
              for w in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)]
    hybrid += [("hybrid", cw, "rrf", None, k) for cw in (None, 0.0, 0.25, 0.5, 1.0) for k in (10, 30, 60, 100)]
    systems = [("bm25",), ("whole",), ("flat",), *docaware, *hybrid]
    results = {s: {c: score(data[c], s) for c in COLLECTIONS} for s in systems}
    print("| system | " + " | ".join(f"{c} nDCG@10" for c in COLLECTIONS) + " |")
    print("|---|" + "---|" * len(COLLECTIONS))
    for s in systems[: 3 + len(docaware)]:
        print(f"| {name(s)} | " + " | ".join(f"{results[s][c][0].mean():.4f}" for c in COLLECTIONS) + " |")
    for family, label in ((docaware, "bm25doc chunk_weight"), (hybrid, "hybrid")):
        for criterion in ("maximin", "mean"):
            print(f"\n### LOCO, {label}, criterion {criterion}\n")
            print("\n".join(loco(results, family, criterion)))


if __name__ == "__main__":
    main()

"""Several indexes at once: is the merge fair when the indexes' BM25 statistics differ?

    python bench/bench_multi.py [--work DIR] [--modes bm25,hybrid]

Two shared collections are indexed apart (their own document frequencies and
lengths). For the queries of collection A, the top 10 documents are ranked
four ways: A's index alone (the ceiling: the other collection holds nothing
relevant to A's queries), and A and B searched together with each merge of
``ragtui.core.search.multi`` (``pooled``, the default: as one index, BM25 with
pooled statistics; ``rrf``: by rank; ``score``: each index's own scores). A fair
merge loses little against A alone; an unfair one lets B's hits crowd A's
out. Reported: nDCG@10 and Recall@10 per pair and mode, and how many of the
top 10 came from the wrong collection (B) on average, with the paired
randomisation test of each merge against A alone.

Needs ../shared/data beside the repository. Indexes are built once under
--work (default /tmp/ragtui-bench-multi) with the embedded embedder.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragtui.core.embedders import make_embedder  # noqa: E402
from ragtui.core.eval import metrics  # noqa: E402
from ragtui.core.eval.datasets import load_dataset  # noqa: E402
from ragtui.core.eval.evaluate import prepare_collection  # noqa: E402
from ragtui.core.search.multi import MERGES, search_many  # noqa: E402
from ragtui.core.search.query import literal  # noqa: E402
from ragtui.core.search.retriever import Retriever  # noqa: E402

EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "eval"
PAIRS = (("cranfield", "cisi"), ("cisi", "cranfield"), ("adi", "cranfield"), ("scifact", "cranfield"),
         ("cranfield", "scifact"))
"""Pairs of collections on unrelated subjects (aeronautics, information science, biomedicine), so that
B's documents are not relevant to A's queries; ADI (82 documents) against Cranfield (1,400) and
SciFact (5,183) against Cranfield differ most in size and statistics. (ADI and CISI share a subject:
CISI's documents answer ADI's questions without being judged, which measures nothing about the merge.)"""
DEPTH = 200  # chunks asked of each index: enough for 10 distinct documents after merging


def docs_of(hits, to_doc, own: str, k: int = 10) -> list[str]:
    """The first ``k`` distinct documents; the other collection's ids are prefixed (both use numbers)."""
    out: list[str] = []
    for index_id, h in hits:
        did = to_doc[index_id][h.doc_id]
        if index_id != own:
            did = f"{index_id}:{did}"
        if did not in out:
            out.append(did)
        if len(out) == k:
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/ragtui-bench-multi"))
    ap.add_argument("--modes", default="bm25,hybrid")
    args = ap.parse_args()
    if not EVAL.exists():
        raise SystemExit(f"{EVAL} is absent: this bench reads ../shared/data beside the repository")
    emb = make_embedder("wordllama")
    names = sorted({n for pair in PAIRS for n in pair})
    data, retrievers, to_doc = {}, {}, {}
    for name in names:
        ds = load_dataset(EVAL / name, split="train") if name == "scifact" else load_dataset(EVAL / name)
        t = time.perf_counter()
        path, doc_map, _ = prepare_collection(ds, artifacts=args.work, embedder=emb, index_id=f"multi-{name}")
        print(f"  {name}: {len(ds.docs or {}):,} docs, {len(ds.queries)} queries, index ready in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
        data[name] = ds
        retrievers[name] = Retriever.open(path, embedder=emb, cache_dir=args.work / "rag" / ".cache")
        to_doc[name] = doc_map
    print("\nnDCG@10 of A's queries; in brackets the share of the top 10 taken by B's documents; "
          "p: paired randomisation test against A alone")
    print("| A (queries) + B | mode | A alone | pooled | rrf | score | p pooled | p rrf | p score |")
    print("|---|---|---|---|---|---|---|---|---|")
    for a, b in PAIRS:
        ds = data[a]
        qids = [q for q in ds.queries if ds.qrels.get(q)]
        for mode in args.modes.split(","):
            per: dict[str, list[float]] = {"alone": [], **{m: [] for m in MERGES}}
            intruders: dict[str, list[float]] = {m: [] for m in MERGES}
            for q in qids:
                text, rel = literal(ds.queries[q]), ds.qrels[q]  # questions are prose, not query syntax
                alone = [(a, h) for h in retrievers[a].search(text, mode=mode, k=DEPTH)]
                per["alone"].append(metrics.ndcg(docs_of(alone, to_doc, a), rel, 10))
                for merge in MERGES:
                    res = search_many({a: retrievers[a], b: retrievers[b]}, text, mode=mode, k=DEPTH,
                                      depth=DEPTH, merge=merge)
                    ranked = docs_of([(m.index_id, m.hit) for m in res.hits], to_doc, a)
                    per[merge].append(metrics.ndcg(ranked, rel, 10))
                    intruders[merge].append(sum(1 for d in ranked if d.startswith(f"{b}:")) / max(1, len(ranked)))
            cells = [f"{statistics.fmean(per[m]):.3f} ({statistics.fmean(intruders[m]):.2f})" for m in MERGES]
            ps = [f"{metrics.paired_randomization_test(per[m], per['alone']):.4f}" for m in MERGES]
            print(f"| {a} + {b} | {mode} | {statistics.fmean(per['alone']):.3f} | {' | '.join(cells)} | "
                  f"{' | '.join(ps)} |", flush=True)


if __name__ == "__main__":
    main()

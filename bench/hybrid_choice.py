"""Choose the hybrid fusion default by measurement on SciFact's train queries.

    python bench/hybrid_choice.py

Writes SciFact's documents as files (title, blank line, text) into a temporary
folder, ingests it through the normal path with the embedded default
embedder, then reports nDCG@10 (documents: a document's best chunk) for BM25,
flat, and every fusion setting tried.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora  # noqa: E402

from ragtui.core.embedders import make_embedder  # noqa: E402
from ragtui.core.eval.metrics import ndcg  # noqa: E402
from ragtui.core.ingest.sync import sync  # noqa: E402
from ragtui.core.search.retriever import Retriever  # noqa: E402


def load_scifact_train():
    base = corpora.need(corpora.SHARED / "eval" / "scifact")
    docs = {}
    with open(base / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            docs[o["_id"]] = f"{o.get('title', '')}\n\n{o.get('text', '')}"
    queries = {}
    with open(base / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            queries[o["_id"]] = o["text"]
    qrels: dict[str, dict[str, float]] = {}
    with open(base / "qrels" / "train.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, did, score = line.split("\t")
            qrels.setdefault(qid, {})[did] = float(score)
    return docs, {q: queries[q] for q in qrels}, qrels


def doc_ranking(hits, k):
    seen, out = set(), []
    for h in hits:
        did = h.doc_id.rsplit("/", 1)[1].removesuffix(".txt")
        if did not in seen:
            seen.add(did)
            out.append(did)
        if len(out) == k:
            break
    return out


def main() -> None:
    docs, queries, qrels = load_scifact_train()
    emb = make_embedder("wordllama")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "scifact"
        folder.mkdir()
        for did, text in docs.items():
            (folder / f"{did}.txt").write_text(text, encoding="utf-8")
        t0 = time.perf_counter()
        report = sync(folder, artifacts=Path(tmp) / "art", embedder=emb)
        print(f"ingest: {report.summary()} ({time.perf_counter() - t0:.1f} s)")
        ret = Retriever.open(Path(tmp) / "art" / "rag" / "scifact", embedder=emb)
        settings = [("bm25", {}), ("flat", {})]
        settings += [("hybrid", {"fusion": "rrf", "rrf_k": rk}) for rk in (10, 30, 60, 100)]
        settings += [("hybrid", {"fusion": "weighted", "weight": w}) for w in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
        print(f"{len(queries)} train queries; nDCG@10 over documents")
        for mode, params in settings:
            total = 0.0
            for qid, q in queries.items():
                hits = ret.search(q, mode=mode, k=50, **params)
                total += ndcg(doc_ranking(hits, 10), qrels[qid], 10)
            label = mode + (" " + " ".join(f"{k}={v}" for k, v in params.items()) if params else "")
            print(f"  {label:34} {total / len(queries):.4f}")


if __name__ == "__main__":
    main()

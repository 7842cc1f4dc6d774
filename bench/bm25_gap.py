"""Why ragtui's BM25 on SciFact differs from the published figures: one change at a time.

    python bench/bm25_gap.py [--artifacts DIR]

Published BM25 nDCG@10 on SciFact: 0.665 (BEIR, Lucene multifield) and 0.679
(Anserini flat), both on the 300-query *test* split, with stemming, stopwords
and k1=0.9, b=0.4. ../shared/data has only the train split (809 queries), so
this measures, on train, each difference between ragtui's default BM25 and a
Lucene-style setup:

1. ragtui as shipped: 256-token chunks (a document ranks at its best chunk), k1=1.2, b=0.75;
2. the same chunks with k1=0.9, b=0.4;
3. whole documents (one chunk each), k1=1.2, b=0.75;
4. whole documents, k1=0.9, b=0.4;
5. the named peer bm25s (Lucene variant) on whole documents with ragtui's analyzer
   and k1=0.9, b=0.4: it should equal row 4 (same scoring, independent code);
6. bm25s as row 5 plus English stopwords;
7. bm25s as row 6 plus the Snowball English stemmer (PyStemmer): the published setup
   but for the split and BEIR's separate title field.

Needs bm25s and PyStemmer (pip install -e '.[bench,eval]') and ../shared/data.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from ragtui.core.embedders import make_embedder
from ragtui.core.eval.datasets import load_dataset
from ragtui.core.eval.evaluate import prepare_collection, run_mode
from ragtui.core.eval.metrics import ndcg
from ragtui.core.index.analyzer import analyze
from ragtui.core.search.retriever import Retriever

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "eval" / "scifact"


def ragtui_row(ds, emb, artifacts: Path, label: str, index_id: str, max_tokens: int, k1: float, b: float) -> None:
    path, doc_map, _ = prepare_collection(ds, artifacts=artifacts, embedder=emb, index_id=index_id,
                                          max_tokens=max_tokens, overlap=min(32, max_tokens // 8), k1=k1, b=b)
    ret = Retriever.open(path, embedder=emb)
    res = run_mode(ret, ds, "bm25", 10, to_doc=doc_map)
    print(f"  {label:62} {res.means()['ndcg']:.4f}   ({ret.data.n_chunks} chunks)")


def bm25s_row(ds, label: str, stopwords: bool, stem: bool) -> None:
    import bm25s

    stop = set(bm25s.stopwords.STOPWORDS_EN) if stopwords else set()
    stemmer = None
    if stem:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")

    def tokens(text: str) -> list[str]:
        terms = [t for t in analyze(text) if t not in stop]
        return stemmer.stemWords(terms) if stemmer else terms

    ids = list(ds.docs)
    retriever = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    retriever.index([tokens(ds.docs[i]) for i in ids], show_progress=False)
    total = 0.0
    for qid, text in ds.queries.items():
        q = tokens(text)
        if not q:
            continue
        docs, scores = retriever.retrieve([q], k=10, show_progress=False)
        ranked = [ids[int(d)] for d, s in zip(docs[0], scores[0]) if s > 0]
        total += ndcg(ranked, ds.qrels[qid], 10)
    print(f"  {label:62} {total / len(ds.queries):.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description="SciFact BM25: ragtui against a Lucene-style setup, one change at a time")
    ap.add_argument("--artifacts", type=Path, help="artifacts root for the three extra indexes (default: a temp dir)")
    args = ap.parse_args()
    if not DATA.exists():
        raise SystemExit(f"{DATA} is absent: this benchmark reads ../shared/data beside the repository")
    ds = load_dataset(DATA, split="train")
    emb = make_embedder("wordllama")
    with tempfile.TemporaryDirectory() as tmp:
        art = args.artifacts or Path(tmp)
        print(f"SciFact train, {len(ds.queries)} queries, BM25 nDCG@10 (published, test split: 0.665 BEIR, 0.679 Anserini)")
        ragtui_row(ds, emb, art, "1. ragtui: 256-token chunks, k1=1.2 b=0.75 (shipped)", "eval-scifact", 256, 1.2, 0.75)
        ragtui_row(ds, emb, art, "2. ragtui: 256-token chunks, k1=0.9 b=0.4", "eval-scifact-k09b04", 256, 0.9, 0.4)
        ragtui_row(ds, emb, art, "3. ragtui: whole documents, k1=1.2 b=0.75", "eval-scifact-whole", 8192, 1.2, 0.75)
        ragtui_row(ds, emb, art, "4. ragtui: whole documents, k1=0.9 b=0.4", "eval-scifact-whole-k09b04", 8192, 0.9, 0.4)
        bm25s_row(ds, "5. bm25s lucene: whole documents, k1=0.9 b=0.4, no stemming", False, False)
        bm25s_row(ds, "6. bm25s: + English stopwords", True, False)
        bm25s_row(ds, "7. bm25s: + stopwords + Snowball English stemmer", True, True)


if __name__ == "__main__":
    main()

"""Where the time goes in the ONNX tier, against the embedded default (wordllama) in the same run.

    python bench/bench_onnx.py [--chunks 120] [--index ~/.cache/ragtui/rag/eval-scifact]

Measures, on chunks of the Python docs (../shared/data/corpora/python-docs) cut
by each embedder's own tokenizer at 256 tokens (the default chunker):

* load time of each embedder and of the cross-encoder;
* embedding throughput (chunks/s, wall, and CPU ms per chunk) of wordllama and
  of bge-small int8, and for bge-small the settings: batch size 1/4/16 (texts
  sorted by length), graph optimisation all/basic/none, runs side by side 2/1
  (each run on one core);
* query latency: embedding one query (with bge's instruction) and, with
  ``--index`` (an index built with bge-small, e.g. by ``ragtui eval``), the
  flat and hybrid search on it: median and p95 over the SciFact queries;
* the cross-encoder: ms per (query, chunk) pair, and reranking 10 and 20
  candidates.

Every figure depends on the machine's load (printed): two cores shared with
other jobs. Needs `pip install -e '.[onnx]'`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def corpus_chunks(tokenizer, n: int, data: Path) -> list[str]:
    from ragtui.core.ingest.chunker import chunk_text

    out: list[str] = []
    for path in sorted((data / "corpora" / "python-docs").rglob("*.txt")):
        for c in chunk_text(path.read_text(encoding="utf-8"), tokenizer, 256, 32):
            out.append(c.text)
            if len(out) == n:
                return out
    return out


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=120, help="chunks per throughput measurement")
    ap.add_argument("--index", type=Path, help="an index embedded with onnx:bge-small, for search latency")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args()

    from ragtui.core.embedders import make_embedder
    from ragtui.core.search.rerank import make_reranker, rerank
    from ragtui.core.search.retriever import Hit, Retriever

    print(f"cores {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.1f} at start")
    rows = []

    t, _, wl = timed(lambda: make_embedder())
    rows.append(("load wordllama", f"{t:.2f} s"))
    t, _, bge = timed(lambda: make_embedder("onnx:bge-small"))
    rows.append(("load bge-small (hash files, session, probe)", f"{t:.2f} s"))
    t, _, ce = timed(lambda: make_reranker())
    rows.append(("load cross-encoder", f"{t:.2f} s"))

    wl_chunks = corpus_chunks(wl.tokenizer, args.chunks * 10, args.data)
    chunks = corpus_chunks(bge.tokenizer, args.chunks, args.data)
    mean_tokens = float(np.mean(bge.tokenizer.count_many(chunks)))
    w, c, _ = timed(lambda: wl.embed(wl_chunks))
    rows.append((f"wordllama embed, {len(wl_chunks)} chunks", f"{len(wl_chunks) / w:,.0f} chunks/s, {c / len(wl_chunks) * 1000:.2f} CPU ms/chunk"))
    base_rate = None
    for label, opts in [
        ("bge-small, batch 1, 2 runs side by side, optimisation all (the default)", {}),
        ("bge-small, batch 4", {"batch_size": 4}),
        ("bge-small, batch 16", {"batch_size": 16}),
        ("bge-small, optimisation basic", {"optimization": "basic"}),
        ("bge-small, optimisation none", {"optimization": "none"}),
        ("bge-small, one run at a time (threads=1)", {"threads": 1}),
    ]:
        emb = bge if not opts else make_embedder("onnx:bge-small", **opts)
        emb.embed(chunks[:2])  # warm-up
        w, c, _ = timed(lambda emb=emb: emb.embed(chunks))
        rate = len(chunks) / w
        base_rate = base_rate or rate
        rows.append((f"{label}, {len(chunks)} chunks of {mean_tokens:.0f} tokens",
                     f"{rate:.1f} chunks/s (x{rate / base_rate:.2f}), {c / len(chunks) * 1000:.0f} CPU ms/chunk"))
    rows.append(("load after the throughput runs", f"{os.getloadavg()[0]:.1f}"))

    queries = [json.loads(line)["text"] for line in
               (args.data / "eval" / "scifact" / "queries.jsonl").read_text(encoding="utf-8").splitlines()[: args.queries]]
    ms = []
    for q in queries:
        w, _, _ = timed(lambda q=q: bge.embed_query([q]))
        ms.append(w * 1000)
    rows.append((f"bge-small embed one query ({len(queries)} SciFact queries)",
                 f"median {statistics.median(ms):.1f} ms, p95 {np.percentile(ms, 95):.1f} ms"))
    ms = [timed(lambda q=q: wl.embed([q]))[0] * 1000 for q in queries]
    rows.append(("wordllama embed one query", f"median {statistics.median(ms):.2f} ms"))
    if args.index:
        from ragtui import literal

        r = Retriever.open(args.index, embedder=bge)
        for mode in ("flat", "hybrid"):
            r.search(literal(queries[0]), mode=mode, k=10)
            # literal: SciFact's prose ("CTLA - 4") is searched as text, not as query syntax
            ms = [timed(lambda q=q, mode=mode: r.search(literal(q), mode=mode, k=10))[0] * 1000 for q in queries]
            rows.append((f"bge-small {mode} search incl. query embedding, {r.meta.n_chunks:,} chunks",
                         f"median {statistics.median(ms):.1f} ms, p95 {np.percentile(ms, 95):.1f} ms"))

    pairs = chunks[:20]
    ce.score(queries[0], pairs[:1])
    for n in (10, 20):
        ms = []
        for q in queries[:8]:
            hits = [Hit(i + 1, 1.0, f"c#{i}", "c", i, t) for i, t in enumerate(pairs[:n])]
            ms.append(timed(lambda q=q, hits=hits, n=n: rerank(q, hits, ce, n))[0] * 1000)
        rows.append((f"rerank {n} candidates of {mean_tokens:.0f} tokens (8 queries)",
                     f"median {statistics.median(ms):.0f} ms ({statistics.median(ms) / n:.0f} ms per pair)"))
    rows.append(("load at the end", f"{os.getloadavg()[0]:.1f}"))
    width = max(len(a) for a, _ in rows)
    for a, b in rows:
        print(f"{a:<{width}}  {b}")


if __name__ == "__main__":
    main()

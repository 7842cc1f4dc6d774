"""IVF recall@10 against flat at the calibrated nprobe, on real queries, and what it costs per query.

    python bench/bench_ivf_recall.py ARTIFACTS [--embedder wordllama] [--indexes scifact,corpora]

ARTIFACTS holds indexes built with that embedder: ``rag/scifact`` (SciFact's
collection, as ``ragtui eval`` builds it), ``rag/cranfield``, ``rag/cisi``, and
``rag/corpora`` (``ragtui ingest ../shared/data/corpora``). Real queries: each
collection's own; for the corpora, the first description line of 310 tldr pages,
318 section titles of the Python docs (both written by people, and both verbatim in
the corpus) and 287 of the labelled collections' queries (off-domain). For each
index: the nprobe the calibration chooses with the sums of three rows (the old
method) and with spans of chunk text (the default now), the real queries' recall
of flat's top 10 at each, and the median IVF query time at each (warm, in-process).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import SHARED, need  # noqa: E402

from ragtui.core.embedders import make_embedder  # noqa: E402
from ragtui.core.eval.datasets import load_dataset  # noqa: E402
from ragtui.core.search.flat import flat_search  # noqa: E402
from ragtui.core.search.ivf import build_ivf, calibration_text  # noqa: E402
from ragtui.core.search.retriever import Retriever  # noqa: E402


def labelled_queries() -> dict[str, list[str]]:
    out = {}
    for name in ("scifact", "cranfield", "cisi", "adi"):
        ds = load_dataset(need(SHARED / "eval" / name), split="train" if name == "scifact" else "test")
        out[name] = list(ds.queries.values())
    return out


def corpora_queries(labelled: dict[str, list[str]]) -> dict[str, list[str]]:
    base = need(SHARED / "corpora")
    desc = []
    for f in sorted((base / "tldr-pages").rglob("*.md")):
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("> ") and not line.startswith("> More info"):
                desc.append(line[2:].strip())
                break
    titles = []
    for f in sorted((base / "python-docs").rglob("*.txt")):
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
        for a, b in zip(lines, lines[1:]):
            if a.strip() and re.fullmatch(r"([=\-~^*])\1{2,}", b.strip()) and not re.fullmatch(r"[=\-~^*]+", a.strip()):
                titles.append(a.strip())
    off = [q for name in ("scifact", "cranfield", "cisi", "adi") for q in labelled[name]][::4]
    return {"tldr-desc": desc[:: max(1, len(desc) // 300)], "doc-titles": titles[:: max(1, len(titles) // 300)],
            "off-domain": off}


def recall_at(ivf, vectors, queries, nprobe: int) -> float:
    found = 0
    for q in queries:
        exact = set(flat_search(vectors, q, 10)[0].tolist())
        found += len(exact & set(ivf.search(q, 10, nprobe=nprobe)[0].tolist()))
    return found / (10 * len(queries))


def median_ms(ivf, queries, nprobe: int) -> float:
    times = []
    for _ in range(3):
        for q in queries[:100]:
            t = time.perf_counter()
            ivf.search(q, 10, nprobe=nprobe)
            times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("artifacts", type=Path)
    ap.add_argument("--embedder", default="wordllama")
    ap.add_argument("--indexes", default="scifact,cranfield,cisi,corpora")
    args = ap.parse_args()
    embedder = make_embedder(args.embedder)
    labelled = labelled_queries()
    print(f"embedder {args.embedder}; load {open('/proc/loadavg').read().split()[:3]}")
    for name in args.indexes.split(","):
        path = args.artifacts / "rag" / name
        if not path.exists():
            print(f"{name}: no index at {path}, skipped")
            continue
        r = Retriever.open(path, embedder=embedder)
        v, index_id = r.data.vectors, r.meta.index_id
        sets = {name: labelled[name]} if name in labelled else corpora_queries(labelled)
        before = build_ivf(v, index_id)  # sums of three rows
        after = build_ivf(v, index_id, texts=calibration_text(r.data, embedder))
        print(f"{name}: {v.shape[0]} chunks, nlist {after.nlist}; nprobe sums {before.default_nprobe} "
              f"(cal {before.calibration[1]:.3f}) -> spans {after.default_nprobe} (cal {after.calibration[1]:.3f})")
        for qname, texts in sets.items():
            qv = np.stack([r.query_vector(t) for t in texts])
            flat_ms = 1000 * statistics.median(
                [_timed(lambda q=q, v=v: flat_search(v, q, 10)) for _ in range(3) for q in qv[:100]])
            rb, ra = (recall_at(after, v, qv, x.default_nprobe) for x in (before, after))
            tb, ta = (median_ms(after, qv, x.default_nprobe) for x in (before, after))
            print(f"  {qname:>10} ({len(texts)} queries): recall@10 vs flat {rb:.3f} -> {ra:.3f}; "
                  f"median query {tb:.2f} -> {ta:.2f} ms (flat {flat_ms:.2f} ms)")
    print(f"load {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()

"""Retrieval quality of each tier on the shared collections, with the paired test against BM25.

Tiers: BM25 and the embedded default (wordllama: flat, hybrid), the ONNX embedder
(bge-small int8: flat, hybrid), and each hybrid reranked by the cross-encoder
(ms-marco-MiniLM-L-12-v2 int8, top 20). Every figure comes from `ragtui eval`
(reports in bench/out/onnx/); every tier is compared with BM25 over the default
index (wordllama's chunks) by `ragtui eval --compare` (10,000 sign flips, seed 0).

    nice python bench/onnx_tiers.py                       # all four collections
    nice python bench/onnx_tiers.py --collections adi,cisi

Reranking costs about a second per query on two cores, so on SciFact (809
train queries) the reranked runs use a fixed subset: every 4th judged query in
id order (--rerank-every 4); the other tiers are compared on the same subset in
that row. Needs `pip install -e '.[onnx,eval]'` and ../shared/data beside the
repository. Prints one markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "eval"
OUT = ROOT / "bench" / "out" / "onnx"
COLLECTIONS = {"scifact": ["--split", "train"], "cranfield": [], "cisi": [], "adi": []}


def ragtui(*args: str, embedder: str, artifacts: Path) -> None:
    env = {**os.environ, "RAGTUI_EMBEDDER": embedder, "HF_HUB_OFFLINE": "1"}
    # eval builds its collections under --cache (never an artifacts root): one folder per embedder.
    cmd = [sys.executable, "-m", "ragtui", *args, "--cache", str(artifacts), "--quiet"]
    print("$", "RAGTUI_EMBEDDER=" + embedder, " ".join(cmd[2:]), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    print(f"  {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def subset(data: Path, name: str, every: int) -> Path:
    """A copy of collection ``name`` judged on every ``every``-th query only (same corpus, same name)."""
    src = data / name
    dst = OUT / f"subset-{every}" / name
    (dst / "qrels").mkdir(parents=True, exist_ok=True)
    for f in ("corpus.jsonl", "queries.jsonl"):
        if not (dst / f).exists():
            (dst / f).symlink_to(src / f)
    lines = (src / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], [ln for ln in lines[1:] if ln.strip()]
    qids = sorted({r.split("\t")[0] for r in rows}, key=lambda q: (len(q), q))
    keep = set(qids[::every])
    (dst / "qrels" / "train.tsv").write_text(
        "\n".join([header, *[r for r in rows if r.split("\t")[0] in keep]]) + "\n", encoding="utf-8")
    return dst


def compare(a: str, b: str) -> dict:
    out = OUT / "cmp.json"
    subprocess.run([sys.executable, "-m", "ragtui", "eval", "--compare", a, b, "--json", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["rows"][0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collections", default=",".join(COLLECTIONS))
    ap.add_argument("--data", type=Path, default=DATA, help=f"the shared collections (default: {DATA})")
    ap.add_argument("--rerank", type=int, default=20)
    ap.add_argument("--rerank-every", type=int, default=4, help="SciFact: rerank every N-th query (1: all)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    art = {"wordllama": OUT / "art-wordllama", "onnx:bge-small": OUT / "art-bge"}
    rows = []
    for name in args.collections.split(","):
        extra = COLLECTIONS[name]
        full = args.data / name
        reports = {}
        for emb, tag in (("wordllama", "wl"), ("onnx:bge-small", "bge")):
            plain = OUT / f"{name}-{tag}.json"
            ragtui("eval", str(full), *extra, "--modes", "bm25,flat,hybrid", "--json", str(plain),
                   embedder=emb, artifacts=art[emb])
            reports[tag] = plain
            ds = subset(args.data, name, args.rerank_every) if (name == "scifact" and args.rerank_every > 1) else full
            rr = OUT / f"{name}-{tag}-rerank.json"
            ragtui("eval", str(ds), *extra, "--modes", "hybrid", "--rerank", str(args.rerank), "--index",
                   f"eval-{name}", "--json", str(rr), embedder=emb, artifacts=art[emb])
            reports[f"{tag}-rr"] = rr
        base = f"{reports['wl']}:bm25"
        tiers = [("wordllama flat", f"{reports['wl']}:flat"), ("wordllama hybrid", f"{reports['wl']}:hybrid"),
                 ("bge-small flat", f"{reports['bge']}:flat"), ("bge-small hybrid", f"{reports['bge']}:hybrid"),
                 (f"wordllama hybrid + rerank {args.rerank}", f"{reports['wl-rr']}:hybrid+rerank"),
                 (f"bge-small hybrid + rerank {args.rerank}", f"{reports['bge-rr']}:hybrid+rerank")]
        for label, ref in tiers:
            row = compare(base, ref)
            lat = json.loads(Path(ref.rsplit(":", 1)[0]).read_text())["modes"][ref.rsplit(":", 1)[1]]["latency_ms"]
            rows.append((name, label, row, lat))
    print("| collection | tier | queries | BM25 nDCG@10 | tier nDCG@10 | Δ | p | median ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, label, row, lat in rows:
        nd = row["ndcg"]
        print(f"| {name} | {label} | {row['n_queries']} | {nd['a']:.4f} | {nd['b']:.4f} | {nd['delta']:+.4f} | "
              f"{row['p_value']:.4f} | {lat['median']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

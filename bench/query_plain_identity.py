"""Plain-text queries give the same hits, score bits included, with and without the query syntax.

Runs one set of queries through ``Retriever.search`` in two source trees (this
one and, say, a checkout of the release before the syntax), in all four modes,
each in its own interpreter, and compares (chunk_id, score as float.hex) of
every hit.

    python bench/query_plain_identity.py --before /path/to/old/tree --index ARTIFACTS/rag/ID [--n 300]

The queries are the shared collections' queries that parse as plain text
(those that read as syntax are counted and left out: ``ragtui eval`` searches
them literally).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
EVAL = HERE.parent / "shared" / "data" / "eval"

_RUN = r"""
import json, sys
from ragtui import Retriever, make_embedder
queries = json.load(sys.stdin)
r = Retriever.open(sys.argv[1], embedder=make_embedder())
out = {}
for q in queries:
    for mode in ("bm25", "flat", "ivf", "hybrid"):
        out[mode + "\t" + q] = [(h.chunk_id, float(h.score).hex()) for h in r.search(q, mode=mode, k=10)]
json.dump(out, sys.stdout)
"""


def _queries(n: int) -> tuple[list[str], int]:
    sys.path.insert(0, str(HERE))
    from ragtui.core.errors import QueryError
    from ragtui.core.eval.datasets import load_dataset
    from ragtui.core.search.query import parse_query

    plain, syntax = [], 0
    for name in ("scifact", "cranfield", "cisi", "adi"):
        ds = load_dataset(EVAL / name, **({"split": "train"} if name == "scifact" else {}))
        for q in ds.queries.values():
            try:
                ok = parse_query(q).plain
            except QueryError:
                ok = False
            if ok:
                plain.append(q)
            else:
                syntax += 1
    return plain[:n], syntax


def _run(tree: Path, index: str, queries: list[str]) -> dict[str, list]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", _RUN, index], input=json.dumps(queries), capture_output=True,
                          text=True, env=env, check=True)
    return json.loads(done.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, type=Path, help="the source tree to compare with")
    ap.add_argument("--index", required=True, help="an index directory both trees can read")
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    queries, syntax = _queries(args.n)
    now = _run(HERE, args.index, queries)
    before = _run(args.before, args.index, queries)
    same = sum(now[key] == before[key] for key in now)
    print(f"{len(queries)} plain queries x 4 modes: {same}/{len(now)} searches identical (hits and score bits); "
          f"{syntax} collection queries read as syntax and were left out")
    for key in now:
        if now[key] != before[key]:
            print("differs:", key.replace("\t", " | ")[:120])
    return 0 if same == len(now) else 1


if __name__ == "__main__":
    raise SystemExit(main())

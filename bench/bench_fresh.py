"""A fresh process's first query in each mode, for two versions of the code taken in turn.

    python bench/bench_fresh.py ARTIFACTS --before CHECKOUT --after CHECKOUT [--index corpus] [--runs 6]

``ARTIFACTS`` holds the index ``--index`` (default ``corpus``, ``bench_scale.py``'s layout). For each
run, each mode (bm25, flat, ivf, hybrid) and each checkout (their order swapped
every other run), two new processes with the checkout on ``PYTHONPATH``: one
times ``Retriever.open`` to its first answer (``bench_scale.py``'s first-answer
figure: the embedder made within the clock, imports apart), one is a whole
``ragtui search QUERY --mode MODE --json`` (wall time); each process's peak RSS
by ``wait4``. One run is made first and left out: it compiles both checkouts'
bytecode and lets whichever reader first needs the IVF lists or the stemmed
arm build them into the readers' cache. Prints each run, then per mode and checkout
the range and median with the load average, and whether every run returned the
same hits. The tokenizer's cache goes to ``--xdg-cache`` (one folder for both).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_scale import FIRST_QUERY  # noqa: E402

MODES = ("bm25", "flat", "ivf", "hybrid")
QUERY = "read a file line by line"


def child(argv: list[str], env: dict[str, str]) -> dict:
    """Run ``argv``; its wall time, stdout and peak RSS (``wait4``: the output goes to files, so the
    wait cannot block on a full pipe)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        s = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise SystemExit(f"{argv[:4]} failed:\n{err.read().decode(errors='replace')[-3000:]}")
        return {"s": s, "out": out.read(), "rss_mib": usage.ru_maxrss / 1024}


def one(art: Path, index: str, checkout: str, mode: str, xdg_cache: str) -> dict:
    env = {**os.environ, "PYTHONPATH": checkout, "XDG_CACHE_HOME": xdg_cache}
    rag = art / "rag"
    load = os.getloadavg()[0]
    first = child([sys.executable, "-c", FIRST_QUERY, str(rag / index), str(rag / ".cache"), mode, QUERY], env)
    got = json.loads(first["out"])
    cli = child([sys.executable, "-m", "ragtui", "search", QUERY, "--mode", mode, "--artifacts", str(art),
                 "--index", index, "--json"], env)
    return {"mode": mode, "load": load, "first_s": got["first_s"], "import_s": got["import_s"],
            "first_rss_mib": first["rss_mib"], "hits": got["hits"], "cli_s": cli["s"], "cli_rss_mib": cli["rss_mib"],
            "cli_hits": [h["chunk_id"] for h in json.loads(cli["out"])]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("artifacts", type=Path)
    ap.add_argument("--before", required=True, help="the checkout measured first in even runs")
    ap.add_argument("--after", required=True)
    ap.add_argument("--index", default="corpus", help="the index under ARTIFACTS (default: corpus)")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--xdg-cache", default="/tmp/bench-fresh-cache")
    ap.add_argument("--json", type=Path, help="write every run here")
    args = ap.parse_args()
    checkouts = {"before": args.before, "after": args.after}
    rows = []
    for i in range(-1, args.runs):  # run -1: compiles, builds what readers build, and is left out
        order = list(checkouts) if i % 2 == 0 else list(checkouts)[::-1]
        for mode in MODES:
            for name in order:
                row = {"run": i, "code": name, **one(args.artifacts, args.index, checkouts[name], mode, args.xdg_cache)}
                print(f"run {i:2} {mode:6} {name:6} first {row['first_s']:.3f} s (+{row['import_s']:.3f} s imports), "
                      f"`ragtui search` {row['cli_s']:.3f} s, load {row['load']:.2f}", flush=True)
                if i >= 0:
                    rows.append(row)
    print(f"\nload {min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f}")
    for mode in MODES:
        for name in checkouts:
            rs = [r for r in rows if r["mode"] == mode and r["code"] == name]
            for key, what in (("first_s", "first answer"), ("cli_s", "ragtui search")):
                v = sorted(r[key] for r in rs)
                print(f"{mode:6} {name:6} {what:13} {v[0]:.3f}-{v[-1]:.3f} s (median {statistics.median(v):.3f}), "
                      f"peak RSS {max(r[key[:-2] + '_rss_mib'] for r in rs):,.0f} MiB")
        ms = [r for r in rows if r["mode"] == mode]
        print(f"{mode:6} the same hits in every run: {all(r['hits'] == ms[0]['hits'] == r['cli_hits'][:10] for r in ms)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

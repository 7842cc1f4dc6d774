"""The first IVF query of a fresh process: its time and what it makes resident.

    python bench/bench_ivf_first.py ARTIFACTS/rag/ID [--warm] [--runs 3]

Each run is a new Python process that opens the index (with ``rag/.cache``
beside it), embeds one query with the default embedder, then runs one IVF
search, timed apart from the open and from importing the IVF module; it prints
one JSON line: the seconds of that search, whether the lists came from the
cache, the nprobe, and the process's resident memory before and after it (anon
and file-backed, which is page cache of mapped files). ``--warm`` first stores
the generation's entry the way a writer's publish hook does (``warm_ivf_cache``,
in its own process, timed). Run it with the code to measure first on PYTHONPATH
(the children run with ``python -P``: the working directory is not searched).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

CHILD = r'''
import json, sys, time
from pathlib import Path

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return round(int(line.split()[1]) / 1024)

link = Path(sys.argv[1])
cache = link.parent / ".cache"
from ragtui.core.embedders import make_embedder
from ragtui.core.search.retriever import Retriever
embedder = make_embedder("wordllama")
t0 = time.perf_counter()
import ragtui.core.search.ivf  # noqa: F401  the module's import, a fixed cost, timed apart
t1 = time.perf_counter()
r = Retriever.open(link, embedder=embedder, cache_dir=cache)
t2 = time.perf_counter()
q = r.query_vector("extract files from a tar archive")
before = status("VmRSS")
t3 = time.perf_counter()
r.search(q, mode="ivf", k=10)
t4 = time.perf_counter()
ivf = r.ivf()
import ragtui
print(json.dumps({"code": ragtui.__file__, "n": r.meta.n_chunks, "import_ivf_s": round(t1 - t0, 3), "open_s": round(t2 - t1, 3),
                  "first_ivf_s": round(t4 - t3, 3), "from_cache": ivf.from_cache, "nlist": ivf.nlist,
                  "nprobe": ivf.default_nprobe, "verified_entry": r.data.stats.get("verified_entry"),
                  "rss_before_mb": before, "rss_after_mb": status("VmRSS"), "anon_mb": status("RssAnon"),
                  "file_mb": status("RssFile"), "peak_mb": status("VmHWM")}))
'''

WARM = r'''
import sys, time
from pathlib import Path
from ragtui.core.embedders import make_embedder
from ragtui.core.search.ivf_cache import warm_ivf_cache
link = Path(sys.argv[1])
t = time.perf_counter()
ivf = warm_ivf_cache(link, link.parent / ".cache", embedder=make_embedder("wordllama"))
print(f"warm_ivf_cache: {time.perf_counter() - t:.2f} s, nlist {ivf.nlist}, nprobe {ivf.default_nprobe} "
      f"({ivf.calibration_method}, recall {ivf.calibration[1] if ivf.calibration else 1.0:.3f})")
'''


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("index", type=Path)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ)
    if args.warm:
        subprocess.run([sys.executable, "-P", "-c", WARM, str(args.index)], check=True, env=env)
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-P", "-c", CHILD, str(args.index)], check=True, env=env,
                             capture_output=True, text=True).stdout
        print(out.strip(), f"load {load()}", flush=True)
        time.sleep(0.1)


if __name__ == "__main__":
    main()

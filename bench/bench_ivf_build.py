"""The IVF entry a writer makes after it publishes: its wall and CPU time, step by step.

    python bench/bench_ivf_build.py ARTIFACTS/rag/ID [--runs 3] [--cache DIR]

Each run is a new Python process that opens the index (full=False, as the writer's
warm step does), makes the default embedder, then builds and stores the IVF entry
and its calibration into an empty cache directory (``build_ivf_cached`` with the
arguments of ``warm_ivf_cache``; a stand-in for the writer's verified key, so that
the vectors are not hashed). It prints one JSON line: wall and CPU seconds of the
build (``getrusage``, every thread), the seconds of its steps (the lists: seeding,
Lloyd, the assignment of every row; storing the entry; the calibration), nlist,
the calibrated nprobe and its recall, a digest of the centroids and lists (equal
digests: the same lists), and the load average before and after. The cache
directory (default: a temporary one) must not be the index's own ``.cache``. Run it
with the code to measure first on PYTHONPATH (the children run with ``python -P``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r'''
import hashlib, json, os, resource, shutil, sys, time
from pathlib import Path
import numpy as np
from ragtui.core.embedders import make_embedder
from ragtui.core.index.index_format import read_index
from ragtui.core.search import ivf, ivf_cache

index_dir, cache = sys.argv[1], Path(sys.argv[2])
shutil.rmtree(cache, ignore_errors=True)
embedder = make_embedder("wordllama")
data = read_index(index_dir, full=False, cache_dir=cache.parent / "bm25")
steps = {}

def timed(owner, name, label):
    f = getattr(owner, name)
    def step(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        try:
            return f(*a, **k)
        finally:
            got = steps.setdefault(label, [0.0, 0.0])
            got[0] += time.perf_counter() - t
            got[1] += time.process_time() - c
    setattr(owner, name, step)

timed(ivf, "seed_centroids", "seed")
timed(ivf, "_lloyd", "lloyd")
timed(ivf, "_group", "group")
timed(ivf_cache, "_lists", "lists")
timed(ivf_cache, "store_streamed", "store")
timed(ivf.IVFIndex, "_calibrate_on", "calibration")
load = " ".join(open("/proc/loadavg").read().split()[:3])
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
index = ivf_cache.build_ivf_cached(data.vectors, data.meta.index_id, None, cache, key_material=data.generation,
                                   texts=ivf.calibration_text(data, embedder),
                                   generation_key=hashlib.sha1(os.path.realpath(index_dir).encode()).hexdigest(),
                                   wait=False)
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
digest = hashlib.sha256()
for a in (index.centroids, index.offsets, index.rows):
    digest.update(np.ascontiguousarray(a).data)
steps["assign"] = [steps["lists"][i] - steps["seed"][i] - steps["lloyd"][i] for i in range(2)]
print(json.dumps({
    "n": int(data.vectors.shape[0]), "wall_s": round(wall, 2),
    "cpu_s": round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 2),
    "steps_wall_cpu_s": {k: [round(x, 2) for x in v] for k, v in steps.items() if k != "group"},
    "nlist": index.nlist, "nprobe": index.default_nprobe, "calibration": index.calibration,
    "method": index.calibration_method, "lists_digest": digest.hexdigest()[:16], "load_before": load,
    "load_after": " ".join(open("/proc/loadavg").read().split()[:3]),
}))
shutil.rmtree(cache, ignore_errors=True)
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("index", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=None, help="a scratch directory (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.cache or Path(scratch)
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, "-P", "-c", CHILD, str(args.index), str(root / "ivf")], check=True,
                                 env=dict(os.environ), capture_output=True, text=True).stdout
            print(out.strip().splitlines()[-1], flush=True)
            time.sleep(0.1)


if __name__ == "__main__":
    main()

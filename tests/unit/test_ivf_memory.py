"""The IVF build's memory is bounded by the training rows, a few bytes a row and fixed blocks.

A writer builds a generation's lists right after it publishes (the watch agent in a thread where the allocator
keeps what it freed for the next save), so what the build allocates at its peak is what such a writer holds
afterwards. Measured with ``tracemalloc`` (numpy reports its arrays to it) in a process of its own, so that
nothing else allocates meanwhile: a count of bytes, not a timing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

_MEASURE = """
import json, sys, tracemalloc
from pathlib import Path
import numpy as np
from ragtui.core.search.ivf_cache import build_ivf_cached

n, dim, cache = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
rng = np.random.default_rng(7)
v = rng.standard_normal((n, dim)).astype(np.float32)
v /= np.linalg.norm(v, axis=1, keepdims=True)
build_ivf_cached(v[:500].copy(), "warm-up", cache_dir=cache / "warm")  # imports and their tables are not measured
tracemalloc.start()
index = build_ivf_cached(v, "docs", cache_dir=cache / "c")
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"peak": peak, "nlist": index.nlist, "train": index.params.train_cap,
                  "mapped": not index._packed.flags.owndata, "calibrated": index.calibration is not None}))
"""


def test_the_build_holds_the_training_rows_a_few_bytes_a_row_and_fixed_blocks(tmp_path):
    n, dim = 20_000, 64
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(n), str(dim), str(tmp_path)], cwd=root,
                          capture_output=True, text=True, timeout=280,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              filter(None, [str(root), os.environ.get("PYTHONPATH")]))})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    nlist, train = got["nlist"], got["train"]
    assert nlist == round(math.sqrt(n)) and train == 64 * nlist and got["mapped"] and got["calibrated"]
    block = 4096  # ivf._BLOCK_ROWS
    queries = min(200, (1 << 23) // n)  # the calibration's pseudo-queries scored at once (ivf._SCORE_BLOCK)
    bound = (
        4 * train * dim  # the training rows, float32
        + 40 * n  # labels, the lists' rows, the calibration's row labels, their sorts (8 bytes a row each)
        + 4 * queries * n  # the calibration's exact scores, float32: a block of rows against every query
        + block * (12 * dim + 12 * nlist)  # a block of rows in float32 and float64, its scores
        + (4 << 20)  # centroids, pseudo-queries, interpreter objects
    )
    # Without the blocks the build held a float64 copy of the training rows (8 bytes a value) and the
    # calibration's scores in float64 too (8 bytes a row per query): 44 MB more here, against a bound of 31 MB.
    assert got["peak"] <= bound, f"the build peaked at {got['peak'] >> 20} MiB, bound {bound >> 20} MiB"

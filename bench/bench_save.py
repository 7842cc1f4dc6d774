"""One save, stage by stage: what a long-running writer (the watch agent's) pays to publish a one-file edit.

    python bench/bench_save.py FOLDER ARTIFACTS FILE [--index corpus] [--saves 6] [--json OUT]

``FOLDER`` is an indexed folder (``bench_scale.py --work DIR`` leaves one at ``DIR/1m/corpus``, its
index at ``DIR/1m/art``), ``FILE`` a text file in it. The writer is an ``IndexWriter`` with
``derive_behind=True``, as ``ragtui watch`` holds it, warmed up first. Each save appends a paragraph
(one, two or three, in turn, so the file's chunk count changes as an edit's would), syncs that path
and then waits for the save's derived entries. The file is put back as it was at the end (and synced).

Per save: the wall and CPU time of the sync, the writer's own stage times (``SyncReport.seconds``), how
much longer its derived entries took (``derive_ms``: the IVF lists too, once a reader has used them),
what ``/proc/vmstat`` counted meanwhile (reclaim stalls, pages scanned, compaction stalls, huge pages
faulted in, page faults), the process's resident memory (anonymous and file-backed) right after the
sync and once its derived entries are made, its peak (VmHWM, which counts mapped files' pages), the
highest anonymous memory seen during the save and during its derive step (read every 10 ms), and the
load average. Compare two checkouts by running the script once with each on the ``PYTHONPATH``, in
turn.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

VMSTAT = ("allocstall_normal", "allocstall_movable", "pgscan_kswapd", "pgscan_direct", "compact_stall",
          "thp_fault_alloc", "pgfault", "pgmajfault")


def vmstat() -> dict[str, int]:
    out = {}
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                key, value = line.split()
                if key in VMSTAT:
                    out[key] = int(value)
    except OSError:
        pass
    return out


def resident() -> dict[str, int]:
    """MiB: resident anonymous and file-backed memory, and the peak (VmHWM)."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":")[0]
                if key in ("RssAnon", "RssFile", "VmHWM"):
                    out[key] = int(line.split()[1]) // 1024
    except OSError:
        out["VmHWM"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return out


class PeakAnon:
    """The highest RssAnon (MiB) seen while it runs, read every ``every`` seconds in a thread.

    VmHWM counts the mapped files' pages too; this is the process's own memory at its highest."""

    def __init__(self, every: float = 0.01) -> None:
        self.every, self.peak = every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, resident().get("RssAnon", 0))
            self._stop.wait(self.every)

    def __enter__(self) -> PeakAnon:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("artifacts", type=Path)
    ap.add_argument("file", help="a text file of the folder, relative to it")
    ap.add_argument("--index", default="corpus", help="the index name (default corpus, bench_scale.py's)")
    ap.add_argument("--saves", type=int, default=6)
    ap.add_argument("--json", type=Path, metavar="OUT", help="write every save's figures as JSON")
    args = ap.parse_args(argv)

    from ragtui.core.embedders import make_embedder
    from ragtui.core.ingest.writer import IndexWriter

    writer = IndexWriter(args.folder, artifacts=args.artifacts, embedder=make_embedder("wordllama"),
                         index_id=args.index, derive_behind=True)
    t = time.perf_counter()
    writer.prepare(warm_up=True)
    print(f"warm-up {time.perf_counter() - t:.2f} s, {resident()}", flush=True)
    path = args.folder / args.file
    original = path.read_bytes()
    saves = []
    try:
        for i in range(args.saves):
            path.write_bytes(original + (f"\n\nA paragraph added by save {i}, for the benchmark.\n" * (i % 3 + 1)).encode())
            with PeakAnon() as peak:
                before, cpu, t = vmstat(), time.process_time(), time.perf_counter()
                report = writer.sync([path])
                wall, cpu = time.perf_counter() - t, time.process_time() - cpu
                after, mem = vmstat(), resident()
            with PeakAnon() as derive_peak:
                t = time.perf_counter()
                writer.wait_derived()
                derive_wall = time.perf_counter() - t
            save = {"wall_ms": round(wall * 1000), "cpu_ms": round(cpu * 1000), "load": os.getloadavg()[0],
                    "derive_ms": round(derive_wall * 1000),
                    "stages_ms": {k: round(v * 1000) for k, v in report.seconds.items()},
                    "vmstat": {k: after[k] - before[k] for k in after if k in before and after[k] != before[k]},
                    "after_save_mib": mem, "after_derive_mib": resident(),
                    "peak_anon_mib": {"save": peak.peak, "derive": derive_peak.peak}}
            saves.append(save)
            stages = " ".join(f"{k}={v}" for k, v in save["stages_ms"].items() if v >= 5)
            print(f"save {i}: {save['wall_ms']} ms (CPU {save['cpu_ms']}) | {stages} | {save['vmstat']} | "
                  f"after it {mem}, once derived {save['after_derive_mib']}, peak anon {peak.peak} in the save, {derive_peak.peak} deriving | derived {save['derive_ms']} ms later | load {save['load']:.1f}", flush=True)
    finally:
        path.write_bytes(original)
        writer.sync([path])
        writer.wait_derived()
    if args.json:
        args.json.write_text(json.dumps({"saves": saves}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

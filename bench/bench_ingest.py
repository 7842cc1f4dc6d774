"""Ingest speed with the embedded embedder.

    python bench/bench_ingest.py [--big] [--files100k [--work DIR]]

1. Full ingest of ../shared/data/corpora/python-docs: chunks/s end to end and
   the share of time in scanning, chunking (tokenizing), embedding, BM25
   analysis and writing.
2. No-op re-sync of ../shared/data/corpora/tldr-pages (7,425 files): seconds,
   and bytes written (every file under the artifacts root is compared).
3. With --big: one changed file in a ~100k-chunk index (tldr-pages and
   python-docs copied several times into one folder, 64-token chunks): time
   to publish and bytes rewritten.
4. With --files100k: no-op re-sync of ~104k files (tldr-pages copied 14
   times). The index is built with a constant embedder (a no-op sync never
   embeds, so the embedder's speed is beside the point and the setup takes
   a minute, not ten); seconds wall and CPU, and bytes written.

Figures are wall-clock seconds; CPU seconds (all threads of the process) are
printed beside them, since on a shared machine the wall clock mostly
measures the other processes.

There is no named peer for ingest: ragtui's own figures are the comparison
across runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora  # noqa: E402

from ragtui.core.embedders import make_embedder  # noqa: E402
from ragtui.core.ingest.sync import sync  # noqa: E402


def snapshot(root: Path) -> dict:
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def shares(seconds: dict) -> str:
    total = seconds["total"]
    parts = [f"{k} {v:.2f} s ({100 * v / total:.0f}%)" for k, v in seconds.items() if k != "total"]
    return ", ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big", action="store_true", help="also the one-change publish at ~100k chunks")
    ap.add_argument("--files100k", action="store_true", help="also the no-op re-sync of ~104k files")
    ap.add_argument("--work", type=Path, metavar="DIR",
                    help="with --files100k: keep the 104k-file tree and its index in DIR (made on the first run, "
                         "reused after: a run then takes seconds, not a minute)")
    args = ap.parse_args()
    emb = make_embedder("wordllama")
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        art = Path(tmp) / "art"
        docs = corpora.need(corpora.SHARED / "corpora" / "python-docs")
        t0, c0 = time.perf_counter(), time.process_time()
        r = sync(docs, artifacts=art, embedder=emb)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"full ingest python-docs: {r.chunks_total:,} chunks in {dt:.2f} s = {r.chunks_total / dt:,.0f} chunks/s"
              f" (CPU {cpu:.2f} s = {r.chunks_total / cpu:,.0f} chunks per CPU-second; load {os.getloadavg()[0]:.1f})")
        print(f"  {shares(r.seconds)}")

        tldr = corpora.need(corpora.SHARED / "corpora" / "tldr-pages")
        sync(tldr, artifacts=art, embedder=emb)
        before = snapshot(art)
        t0 = time.perf_counter()
        r = sync(tldr, artifacts=art, embedder=emb)
        dt = time.perf_counter() - t0
        after = snapshot(art)
        written = sum(v[1] for k, v in after.items() if before.get(k) != v)
        print(f"no-op re-sync tldr-pages ({r.unchanged:,} files): {dt:.3f} s, published={r.published}, "
              f"files changed under artifacts: {sum(1 for k in after if before.get(k) != after[k])}, bytes {written}")

        if args.files100k:
            noop_100k(args.work or Path(tmp), tldr)

        if args.big:
            big = Path(tmp) / "big"
            for i in range(3):
                shutil.copytree(tldr, big / f"tldr{i}")
                shutil.copytree(docs, big / f"py{i}")
            t0 = time.perf_counter()
            r = sync(big, artifacts=art, embedder=emb, max_tokens=64, overlap=8)
            print(f"big index: {r.chunks_total:,} chunks built in {time.perf_counter() - t0:.1f} s")
            target = big / "py0" / "tutorial" / "index.rst.txt"
            target.write_text(target.read_text() + "\nOne more line about benchmarks.\n")
            t0 = time.perf_counter()
            r = sync(big, artifacts=art, embedder=emb, max_tokens=64, overlap=8)
            dt = time.perf_counter() - t0
            print(f"one changed file in {r.chunks_total:,} chunks (full walk): published in {dt:.2f} s, "
                  f"incremental={r.incremental}, {r.chunks_embedded} chunk(s) embedded, "
                  f"{r.bytes_written / 1e6:.1f} MB rewritten")
            print(f"  {shares(r.seconds)}")
            # What the watch agent does: a sync of just the path an event named.
            times = []
            for i in range(5):
                target.write_text(target.read_text() + f"\nAnd line {i}.\n")
                t0 = time.perf_counter()
                r = sync(big, artifacts=art, embedder=emb, max_tokens=64, overlap=8, paths=[target])
                times.append(time.perf_counter() - t0)
            print(f"one changed file, sync of that path only (5 saves): median {statistics.median(times):.2f} s, "
                  f"min {min(times):.2f} s, incremental={r.incremental}")
            print(f"  last: {shares(r.seconds)}")


class ConstantEmbedder:
    """Every text the same unit vector; whitespace-separated words as tokens. For the no-op figure only."""

    model = "bench-constant"
    dim = 8

    class tokenizer:  # noqa: N801 - an attribute holding a class, as an embedder's tokenizer is an object
        name = "bench-words"

        @staticmethod
        def spans(text):
            out, pos = [], 0
            for word in text.split():
                start = text.index(word, pos)
                out.append((start, start + len(word)))
                pos = start + len(word)
            return out

        @staticmethod
        def count(text):
            return len(text.split())

        @staticmethod
        def count_many(texts):
            return [len(t.split()) for t in texts]

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out

    def close(self):
        pass


def noop_100k(tmp: Path, tldr: Path) -> None:
    folder = tmp / "files100k"
    if not folder.exists():
        for i in range(14):
            shutil.copytree(tldr, folder / f"t{i}")
    art = tmp / "art100k"
    emb = ConstantEmbedder()
    t0 = time.perf_counter()
    r = sync(folder, artifacts=art, embedder=emb)
    print(f"files100k: {r.unchanged + len(r.added) + len(r.changed):,} files, {r.chunks_total:,} chunks; first sync "
          f"{time.perf_counter() - t0:.1f} s (constant embedder; published={r.published})")
    before = snapshot(art)
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        r = sync(folder, artifacts=art, embedder=emb)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"no-op re-sync of {r.unchanged:,} files: {dt:.3f} s (CPU {cpu:.3f} s; load {os.getloadavg()[0]:.1f}), "
              f"published={r.published}; {shares(r.seconds)}")
    after = snapshot(art)
    written = sum(v[1] for k, v in after.items() if before.get(k) != v)
    print(f"  files changed under artifacts: {sum(1 for k in after if before.get(k) != after[k])}, bytes {written}")


if __name__ == "__main__":
    main()

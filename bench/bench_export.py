"""The Seekite export: its size against the index's four files, how long it takes, and how soon the page answers.

    python bench/bench_export.py [--chunks 10000,100000] [--browser]
    python bench/bench_export.py --index ART/rag/ID          # an existing index (sizes and times only)
    python bench/bench_export.py --rss                       # also `ragtui export` in a child: peak RSS, time

Data: chunks of real text — the paragraphs of ../shared/data/corpora
(python-docs, tldr-pages), cycled under new document names until there are
enough — with random unit 256-d vectors (vectors.f32 is incompressible noise
either way), written as an index by ragtui's own writer. For each size:
export time (``write_export`` streaming each file into ``export_to``'s folder,
as ``ragtui export`` does), strict verify time
(``read_export`` + ``verify_text``), bytes per file type raw and gzipped
(level 6, what a web server sends) beside the index's four files, and with
--browser the time headless Chromium takes from opening index.html?q=...
to showing the results (a cold page: manifest, corpus.json, dictionary,
postings and content shards fetched from a loopback http.server). With --rss,
``ragtui export`` itself runs in a child process (twice: a first run on a new index
also decodes bm25.idx and stores the decoded arrays in the index's cache, as
the first search of an index does; the second finds them there) and its peak
resident memory (wait4's ru_maxrss) and wall time are printed.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragtui.core.export.reader import read_export  # noqa: E402
from ragtui.core.export.writer import export_to, write_export  # noqa: E402
from ragtui.core.index.index_format import read_index  # noqa: E402
from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint  # noqa: E402
from ragtui.core.ingest.publish import IndexLock, encode_index, publish  # noqa: E402

CORPORA = ROOT.parent / "shared" / "data" / "corpora"
QUERIES = ["list comprehension", "install package pip", "file permissions chmod", "regular expression match",
           "compress archive tar", "exception traceback", "git commit message", "network port listen"]


def paragraphs() -> list[tuple[str, list[str]]]:
    """(relative name, paragraphs) of every text file of the shared corpora, in name order."""
    out = []
    for path in sorted(CORPORA.rglob("*")):
        if path.is_file() and path.suffix in (".txt", ".md", ".rst"):
            text = path.read_text(encoding="utf-8", errors="replace")
            parts = [p.strip() for p in text.split("\n\n") if p.strip()]
            # Chunks of about 1,000 characters, as 256-token windows give.
            chunks, current = [], ""
            for p in parts:
                if current and len(current) + len(p) > 1000:
                    chunks.append(current)
                    current = ""
                current = f"{current}\n\n{p}" if current else p
            if current:
                chunks.append(current)
            if chunks:
                out.append((str(path.relative_to(CORPORA)), chunks))
    return out


def make_index(art: Path, n: int) -> Path:
    docs = paragraphs()
    records: list[ChunkRecord] = []
    round_no = 0
    while len(records) < n:
        for name, chunks in docs:
            doc_id = f"corpus/r{round_no}/{name}"
            for k, text in enumerate(chunks):
                records.append(ChunkRecord(f"{doc_id}#{k}", doc_id, "file", doc_id, text,
                                           max(1, min(256, len(text.split()))), fingerprint(text)))
            if len(records) >= n:
                break
        round_no += 1
    # Whole documents only, in the index's order.
    records.sort(key=lambda r: (r.doc_id.encode("utf-8"), r.k))
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((len(records), 256)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    meta = IndexMeta("corpus", "2026-01-01T00:00:00Z", len(records), 256, "wordllama-l2_supercat-256",
                     "wordllama-l2_supercat-256", 256, 32)
    files = encode_index(meta, records, vectors)
    with IndexLock(art, "corpus"):
        return publish(art, "corpus", files)


def kind(rel: str) -> str:
    if rel.endswith("manifest.json"):
        return "manifest.json"
    if "postings-" in rel:
        return "postings-*.bin"
    if "content-" in rel:
        return "content-*.json"
    return rel.rsplit("/", 1)[-1]


def sizes(files: dict[str, bytes]) -> dict[str, tuple[int, int, int]]:
    """file type -> (count, raw bytes, gzip bytes)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for rel, data in files.items():
        row = out[kind(rel)]
        row[0] += 1
        row[1] += len(data)
        row[2] += len(gzip.compress(data, 6, mtime=0))
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def mib(x: int) -> str:
    return f"{x / 1048576:.2f}"


def browser_first_result(site: Path, repeats: int) -> tuple[list[float], list[float]]:
    """(seconds from opening the page to the first results, per cold page; milliseconds of each later
    query on a loaded page, as the page measures it: postings and content shards fetched, ranked, shown)."""
    sys.path.insert(0, str(ROOT))
    from tests.helpers.browser import chromium, css_string, search, serve

    times, warm = [], []
    with serve(site) as url, chromium() as browser:
        for i in range(repeats):
            query = QUERIES[i % len(QUERIES)]
            context = browser.new_context()  # a cold cache each time
            page = context.new_page()
            started = time.perf_counter()
            page.goto(url + "?q=" + query.replace(" ", "+"))
            page.wait_for_selector(f"#status[data-query={css_string(query)}]", state="attached", timeout=120_000)
            times.append(time.perf_counter() - started)
            for other in QUERIES[i + 1 : i + 4]:
                search(page, other)
                warm.append(float(page.get_attribute("#status", "data-ms")))
            context.close()
    return times, warm


def report(index_path: Path, browser: bool, repeats: int) -> None:
    data = read_index(index_path, full=False)  # as `ragtui export`: its pass over docs.jsonl checks every line
    n = data.meta.n_chunks
    print(f"\n== {n:,} chunks, dim {data.meta.dim} ==")
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        started = time.perf_counter()
        export_to(site, lambda sink: write_export(data, sink, generated_at="2026-01-01T00:00:00Z"))
        seconds = time.perf_counter() - started
        files = {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}
        started = time.perf_counter()
        export = read_export(site)
        read = time.perf_counter() - started
        started = time.perf_counter()
        export.verify_text()
        text = time.perf_counter() - started
        print(f"export {seconds:.2f} s (build and write); strict read {read:.2f} s; "
              f"text check {text:.2f} s")
        widths = [18, 6, 10, 10]
        print("  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(
            zip(["file", "files", "raw MiB", "gzip MiB"], widths))))
        total = [0, 0, 0]
        for name, (count, raw, gz) in sorted(sizes(files).items()):
            print(f"{name:<18}  {count:>6}  {mib(raw):>10}  {mib(gz):>10}")
            if name != "index.html":
                total = [total[0] + count, total[1] + raw, total[2] + gz]
        print(f"{'export (search/)':<18}  {total[0]:>6}  {mib(total[1]):>10}  {mib(total[2]):>10}")
        index_files = {p.name: p.read_bytes() for p in Path(index_path).resolve().iterdir()}
        itotal = [0, 0]
        for name, (count, raw, gz) in sorted(sizes(index_files).items()):
            print(f"{'index ' + name:<18}  {count:>6}  {mib(raw):>10}  {mib(gz):>10}")
            itotal = [itotal[0] + raw, itotal[1] + gz]
        print(f"{'index (4 files)':<18}  {4:>6}  {mib(itotal[0]):>10}  {mib(itotal[1]):>10}")
        print(f"export / index: raw {total[1] / itotal[0]:.2f}, gzip {total[2] / itotal[1]:.2f}")
        if browser:
            times, warm = browser_first_result(site, repeats)
            print(f"browser first result (cold page, open to results shown): median {statistics.median(times):.2f} s,"
                  f" min {min(times):.2f} s, max {max(times):.2f} s over {len(times)} queries")
            print(f"browser later queries (page loaded; shards fetched as needed): median "
                  f"{statistics.median(warm):.0f} ms, max {max(warm):.0f} ms over {len(warm)} queries")


_CHILD = """
import runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_module("ragtui", run_name="__main__")
finally:
    print(*(l for l in open("/proc/self/status") if l.startswith("VmHWM:")), file=sys.stderr, end="")
"""


def child_rss(index_path: Path) -> None:
    """``ragtui export`` of the index in a child process, twice: peak RSS and wall time of each run."""
    index_path = Path(index_path).absolute()  # not resolved: ID is the link, not its generation
    with tempfile.TemporaryDirectory() as tmp:
        for run in ("first", "second"):
            site = Path(tmp) / run
            started = time.perf_counter()
            # The child reports its own VmHWM (reset by exec; wait4's ru_maxrss would count this process's
            # pages, shared with the child between fork and exec).
            argv = ["ragtui", "export", str(site), "--artifacts", str(index_path.parent.parent), "--index",
                    index_path.name, "--generated-at", "2026-01-01T00:00:00Z"]
            child = subprocess.run([sys.executable, "-c", _CHILD, *argv], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            hwm = [line.split()[1] for line in child.stderr.splitlines() if line.startswith("VmHWM:")]
            seconds = time.perf_counter() - started
            if child.returncode:
                raise SystemExit(f"ragtui export failed (exit {child.returncode})")
            print(f"ragtui export, {run} run{' (decodes bm25.idx unless cached)' if run == 'first' else ''}:"
                  f" peak RSS {int(hwm[-1]) / 1024:.0f} MiB, {seconds:.2f} s wall")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", default="10000,100000")
    ap.add_argument("--index", help="measure this existing index instead")
    ap.add_argument("--browser", action="store_true", help="also time the page in headless Chromium")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rss", action="store_true", help="also run `ragtui export` in a child: peak RSS and time")
    args = ap.parse_args()
    if args.index:
        report(Path(args.index), args.browser, args.repeats)
        if args.rss:
            child_rss(Path(args.index))
        return
    for n in (int(x) for x in args.chunks.split(",")):
        tmp = Path(tempfile.mkdtemp())
        try:
            path = make_index(tmp / "art", n)
            report(path, args.browser, args.repeats)
            if args.rss:
                child_rss(path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

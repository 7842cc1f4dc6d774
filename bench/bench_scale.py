"""Scale: how ingest, watch, search and memory grow from ten thousand to a million chunks.

    nice python bench/bench_scale.py [--sizes 10k,100k,1m] [--work DIR] [--json FILE] [--plot PNG]
    nice python bench/bench_scale.py --quick        # ~2k chunks end to end: a smoke run

Corpora. Each size is grown from ../shared/data: the tldr-pages and
python-docs trees of ``corpora/`` and the SciFact abstracts (one file each,
so that SciFact's real queries find their documents). A corpus of N chunks
holds whole copies of that base set and then a part of one more copy, each
copy in its own folder (``c000/``, ``c001/``, ...) with the copy number
woven into every paragraph (`` [c]`` at its end), so no two copies share a
chunk fingerprint and every chunk is embedded. The files of the partial copy
are taken in an order shuffled by ``--seed`` (each copy its own shuffle),
each file only while it keeps the total at or under N; a file's chunk count
is the chunker's own on the base text (ragtui's default 256/32 windows and
the wordllama tokenizer), counted once and kept in ``DIR/chunk-counts-*.json``.
The same seed gives the same bytes. Corpora are written under ``--work``
(default: a temporary directory, removed after) and reused by a later run
with the same work directory and seed; the index is always built afresh.

Figures, for each size, each from the real command where the process is the
contract (``ragtui ingest``, ``ragtui search``, ``ragtui watch`` run as child
processes with no user configuration; peak RSS from ``wait4``'s rusage, the
agent's RSS from /proc):

* ingest: ``ragtui ingest`` wall time and peak RSS; the index (the current
  generation's four files), the readers' cache (rag/.cache) and the writer's
  state (rag/.state) on disk;
* save -> searchable under ``ragtui watch``: one small file saved ``--saves``
  times; from the write to a search in this process (a ``Retriever`` polled
  every 2 ms, as bench/bench_watch.py) returning the new text; median, p95;
  the agent's RSS after its start and after the saves, and its peak;
* one changed file through ``ragtui ingest`` (a walk of the whole folder);
* fresh process: ``ragtui search`` with one real query per mode (bm25,
  bm25doc, flat, ivf, hybrid): wall time and peak RSS, the first run (which
  may fill the readers' cache) and the median of the runs after it; and a
  fresh Python process timing ``Retriever.open`` to its first answer;
* a full read, ``ragtui info`` (every line of docs.jsonl checked), and a
  reader whose cache is empty (it decodes bm25.idx): wall time and peak RSS;
* warm: median and p95 per mode over the real queries (text in, hits out,
  the query embedding included for the vector modes);
* IVF recall@10 against flat at the calibrated nprobe over the same queries;
* BM25 against tantivy (bench/peer_tantivy.py) on the index's own chunk
  texts, in the same run: queries/s, the fastest of ``--rounds`` interleaved
  rounds (bench/bench_bm25.py's method); ragtui's top 10 checked against its
  exhaustive scorer on every query.

Queries: the corpora questions of bench/bench_answer.py and
bench/bench_export.py, then SciFact's real queries of 12 to 60 characters
(those bench/bench_tui.py types), ``--queries`` in all.

The growth table gives each figure per size and the exponent x of n^x
between consecutive sizes (n the chunk count ingested). ``--json`` writes
every figure; ``--plot`` draws the growth (log-log) with the targets.
The load average is printed beside every figure group.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpora import SHARED, need  # noqa: E402

MODES = ("bm25", "bm25doc", "flat", "ivf", "hybrid")
VECTOR_MODES = ("flat", "ivf", "hybrid")
K = 10
MAX_TOKENS, OVERLAP = 256, 32
"""The chunk windows the corpus is sized for: ragtui's defaults, which the benchmark's ingest uses."""
LAYOUT = 1
"""Bumped whenever the bytes a (seed, size) gives change, so an older corpus under --work is rebuilt."""
TARGETS = {"save_median_ms": {10_000: 100, 100_000: 250, 1_000_000: 1000}}
"""save -> searchable median targets by size, drawn on the plot."""


# -- the corpus ----------------------------------------------------------------------------------


def base_documents() -> list[tuple[str, bytes]]:
    """(relative path, bytes) of every base file, in path order."""
    out = []
    corp = need(SHARED / "corpora")
    for sub, pattern in (("tldr-pages", "*.md"), ("python-docs", "*.txt")):
        root = need(corp / sub)
        for p in sorted(root.rglob(pattern)):
            if p.is_file():
                out.append((f"{sub}/{p.relative_to(root).as_posix()}", p.read_bytes()))
    with open(need(SHARED / "eval" / "scifact" / "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            text = f"{obj.get('title', '')}\n\n{obj.get('text', '')}\n"
            out.append((f"scifact/{obj['_id']}.txt", text.encode("utf-8")))
    out.sort(key=lambda item: item[0])
    return out


_PARAGRAPH_BREAK = re.compile(r"(\n[ \t]*\n)")


def weave(text: str, copy: int) -> str:
    """``text`` with `` [copy]`` at the end of every paragraph (blank-line separated); whitespace kept."""
    parts = _PARAGRAPH_BREAK.split(text)
    for i in range(0, len(parts), 2):  # even items are paragraphs, odd ones the breaks between them
        para = parts[i]
        body = para.rstrip()
        if body.strip():
            parts[i] = f"{body} [{copy}]{para[len(body):]}"
    return "".join(parts)


class ChunkCounter:
    """The number of chunks ragtui's chunker cuts from a text, counted once per text and kept on disk."""

    def __init__(self, cache: Path | None) -> None:
        from ragtui.core.embedders import make_embedder

        self.tokenizer = make_embedder("wordllama").tokenizer
        self.cache = cache
        self.known: dict[str, int] = {}
        if cache is not None and cache.exists():
            self.known = json.loads(cache.read_text(encoding="utf-8"))

    @staticmethod
    def key(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()[:24]

    def count(self, items: Sequence[bytes]) -> list[int]:
        from ragtui.core.ingest.chunker import chunk_text

        todo = [d for d in dict.fromkeys(items) if self.key(d) not in self.known]
        for start in range(0, len(todo), 256):
            batch = todo[start : start + 256]
            texts = [d.decode("utf-8", "replace") for d in batch]
            spans_many = getattr(self.tokenizer, "spans_many", None)
            all_spans = spans_many(texts) if spans_many else [None] * len(texts)
            for data, text, spans in zip(batch, texts, all_spans):
                self.known[self.key(data)] = len(chunk_text(text, self.tokenizer, MAX_TOKENS, OVERLAP, spans=spans))
        if todo and self.cache is not None:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.known), encoding="utf-8")
            tmp.replace(self.cache)
        return [self.known[self.key(d)] for d in items]


def plan_corpus(base: Sequence[tuple[str, bytes]], target: int, seed: int,
                counter: ChunkCounter) -> tuple[list[tuple[int, int]], int]:
    """The (copy, base file) pairs of a ``target``-chunk corpus, and its chunk count by the base counts.

    Copy c takes the base files in the order ``Random(f"{seed}:{c}")`` shuffles them, each while
    the total stays at or under ``target``; copies follow until the total reaches 99.8 % of it.
    Files are counted lazily, a batch at a time, so a small corpus counts only what it looks at; a
    file is counted as copy 0 weaves it, and that count stands for every copy (the marker's digits
    seldom move a window's end).
    """
    picks: list[tuple[int, int]] = []
    known: dict[int, int] = {}
    got = 0
    copy = 0
    floor = math.ceil(0.998 * target)
    while got < floor:
        order = list(range(len(base)))
        random.Random(f"{seed}:{copy}").shuffle(order)
        before = got
        for start in range(0, len(order), 512):
            batch = order[start : start + 512]
            if copy == 0:
                woven = [weave(base[i][1].decode("utf-8", "replace"), 0).encode("utf-8") for i in batch]
                known.update(zip(batch, counter.count(woven)))
            for i in batch:
                n = known[i]
                if n and got + n <= target:
                    picks.append((copy, i))
                    got += n
            if got >= floor:
                break
        if got == before:
            break  # nothing fits any more
        copy += 1
    return picks, got


def build_corpus(folder: Path, target: int, seed: int, counts_cache: Path | None = None) -> dict:
    """Write the ``target``-chunk corpus into ``folder`` (emptied first); return its manifest.

    The manifest (also written beside the folder as ``<folder>.json``) says what was written and
    which small file the save measurements edit.
    """
    base = base_documents()
    counter = ChunkCounter(counts_cache)
    picks, estimated = plan_corpus(base, target, seed, counter)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    digest = hashlib.sha256()
    edit = None
    edit_tldr = False
    for copy, i in sorted(picks):
        rel, data = base[i]
        name = f"c{copy:03d}/{rel}"
        woven = weave(data.decode("utf-8", "replace"), copy).encode("utf-8")
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(woven)
        digest.update(name.encode() + b"\0" + hashlib.sha256(woven).digest())
        # The file the saves edit: the first small tldr page, else the first small file.
        tldr = rel.startswith("tldr-pages/")
        if len(woven) < 2048 and not rel.endswith("LICENSE.md") and (edit is None or (tldr and not edit_tldr)):
            edit, edit_tldr = name, tldr
    if edit is None:
        raise SystemExit(f"a {target}-chunk corpus holds no file under 2 KiB for the saves to edit: ask for more chunks")
    manifest = {
        "layout": LAYOUT, "seed": seed, "target": target, "chunks_estimated": estimated, "files": len(picks),
        "copies": 1 + max((c for c, _ in picks), default=-1), "edit": edit, "sha256": digest.hexdigest(),
    }
    (folder.parent / f"{folder.name}.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def corpus_for(work: Path, label: str, target: int, seed: int) -> tuple[Path, dict]:
    """The corpus folder of one size under ``work``, reused when its manifest matches."""
    folder = work / label / "corpus"
    manifest_path = folder.parent / "corpus.json"
    if folder.exists() and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if (manifest.get("layout"), manifest.get("seed"), manifest.get("target")) == (LAYOUT, seed, target):
            print(f"  corpus: {manifest['files']:,} files in {manifest['copies']} cop(y/ies), reused from {folder}")
            return folder, manifest
    t = time.perf_counter()
    manifest = build_corpus(folder, target, seed, work / f"chunk-counts-{MAX_TOKENS}-{OVERLAP}.json")
    print(f"  corpus: {manifest['files']:,} files in {manifest['copies']} cop(y/ies), "
          f"{manifest['chunks_estimated']:,} chunks by the base counts, written in {time.perf_counter() - t:.0f} s")
    return folder, manifest


def real_queries(n: int) -> list[str]:
    """The corpora questions other benchmarks ask, then SciFact's real queries (12-60 characters)."""
    from bench.bench_answer import QUERIES as ANSWER
    from bench.bench_export import QUERIES as EXPORT
    from bench.corpora import scifact

    out = list(dict.fromkeys([*ANSWER, *EXPORT, *(q for q in scifact()[1] if 12 <= len(q) <= 60)]))
    return out[:n]


# -- processes -----------------------------------------------------------------------------------


def ragtui_command() -> list[str]:
    exe = Path(sys.executable).parent / "ragtui"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ragtui"]


def child_env(home: Path) -> dict[str, str]:
    """The environment of every child: no user configuration, no RAGTUI_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
    env["XDG_CONFIG_HOME"] = str(home / "xdg")
    return env


LAUNCHER = r"""
import json, os, sys, time
t0 = time.perf_counter()
limit = int(os.environ.pop("BENCH_SCALE_RSS_LIMIT_KIB", "0"))
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
killed = False
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG if limit else 0)
    if done:
        break
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
    except OSError:
        rss = 0
    if rss > limit:
        os.kill(pid, 9)
        killed = True
    time.sleep(0.1)
wall = time.perf_counter() - t0
with open(sys.argv[1], "w") as f:
    json.dump({"s": wall, "rss_kib": usage.ru_maxrss, "cpu_s": usage.ru_utime + usage.ru_stime,
               "code": os.waitstatus_to_exitcode(status), "killed": killed}, f)
"""
"""Runs a command and writes its wall time and rusage. The command is spawned by this small process, not
by the benchmark: a child's peak RSS as the kernel counts it starts from its parent's RSS at the fork.
With BENCH_SCALE_RSS_LIMIT_KIB set it polls the command's RSS every 0.1 s and kills it past the limit."""

RSS_LIMIT_KIB = 0
"""--max-rss, in KiB (0: no limit): a child past it is killed and the run stops."""


def run_child(cmd: Sequence[str], env: dict[str, str]) -> dict:
    """Run ``cmd`` to its end: wall seconds, peak RSS (MiB, from wait4), exit code, stdout, stderr."""
    exe = shutil.which(cmd[0], path=env.get("PATH")) or cmd[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(suffix=".json") as usage_file:
        limited = {**env, "BENCH_SCALE_RSS_LIMIT_KIB": str(RSS_LIMIT_KIB)} if RSS_LIMIT_KIB else env
        subprocess.run([sys.executable, "-S", "-c", LAUNCHER, usage_file.name, exe, *cmd[1:]],
                       stdout=out, stderr=err, env=limited, check=True)
        usage = json.loads(Path(usage_file.name).read_text())
        out.seek(0)
        err.seek(0)
        res = {"s": usage["s"], "rss_mib": usage["rss_kib"] / 1024, "cpu_s": usage["cpu_s"],
               "code": usage["code"], "stdout": out.read().decode("utf-8", "replace"),
               "stderr": err.read().decode("utf-8", "replace")}
    if usage.get("killed"):
        raise SystemExit(f"{' '.join(cmd[:2])} ... passed --max-rss ({RSS_LIMIT_KIB / 2**20:.1f} GiB) and was killed "
                         f"(peak {res['rss_mib']:,.0f} MiB)")
    if res["code"] not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:3])} ... exited with {res['code']}: {res['stderr'].strip()[-500:]}")
    return res


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a live process, MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def du(path: Path) -> float:
    """Bytes of the regular files under ``path`` (MB, 1e6), counting hard links once."""
    seen, total = set(), 0
    if not path.exists():
        return 0.0
    for dirpath, _, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_ino not in seen and not os.path.islink(os.path.join(dirpath, name)):
                seen.add(st.st_ino)
                total += st.st_size
    return total / 1e6


def load() -> float:
    return os.getloadavg()[0]


def pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


FIRST_QUERY = r"""
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from ragtui.core.embedders import make_embedder
from ragtui.core.search.retriever import Retriever
t1 = time.perf_counter()
index, cache, mode, query = sys.argv[1:5]
embedder = make_embedder("wordllama") if mode in ("flat", "ivf", "hybrid") else None
r = Retriever.open(index, embedder=embedder, cache_dir=Path(cache))
hits = r.search(query, mode=mode, k=10)
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "first_s": t2 - t1, "hits": [h.chunk_id for h in hits]}))
"""
"""A fresh process's ``Retriever.open`` to its first answer (argv: index, cache, mode, query): the seconds of
its imports and of the rest, and the hits' chunk ids (``bench_fresh.py`` runs it too)."""


# -- one size ------------------------------------------------------------------------------------


def measure(work: Path, label: str, target: int, args: argparse.Namespace, queries: list[str]) -> dict:
    from ragtui.core.embedders import make_embedder
    from ragtui.core.ingest.publish import rag_root
    from ragtui.core.search.retriever import Retriever

    print(f"\n== {label}: target {target:,} chunks; load average {load():.1f}")
    folder, manifest = corpus_for(work, label, target, args.seed)
    art = work / label / "art"
    shutil.rmtree(art, ignore_errors=True)
    env = child_env(work / label)
    rag = rag_root(art)
    index = rag / "corpus"
    cache = rag / ".cache"
    base = ["--artifacts", str(art), "--index", "corpus"]
    out: dict = {"label": label, "target": target, "files": manifest["files"], "copies": manifest["copies"]}

    # Ingest.
    la = load()
    res = run_child([*ragtui_command(), "ingest", str(folder), *base, "--json", "--quiet"], env)
    report = json.loads(res["stdout"])
    n = report["chunks"]["total"]
    out.update(chunks=n, ingest_s=res["s"], ingest_cpu_s=res["cpu_s"], ingest_rss_mib=res["rss_mib"],
               ingest_stages_s=report.get("seconds", {}), ingest_load=[la, load()])
    out.update(index_mb=du(index.resolve()), gen_mb=du(rag / ".gen"), cache_after_ingest_mb=du(cache),
               state_mb=du(rag / ".state"))
    print(f"  ingest: {n:,} chunks ({manifest['chunks_estimated']:,} planned) in {res['s']:.1f} s "
          f"({n / res['s']:,.0f} chunks/s; CPU {res['cpu_s']:.1f} s), peak RSS {res['rss_mib']:,.0f} MiB "
          f"({1024 * res['rss_mib'] / n:.1f} KiB a chunk); load {la:.1f} -> {load():.1f}")
    print(f"  on disk: index {out['index_mb']:,.1f} MB, cache {out['cache_after_ingest_mb']:,.1f} MB, "
          f"writer state {out['state_mb']:,.1f} MB")

    # Fresh processes: `ragtui search`, then a Python process's Retriever, per mode.
    query = queries[0]
    la = load()
    for mode in MODES:
        runs = [run_child([*ragtui_command(), "search", query, "--mode", mode, *base, "--json"], env)
                for _ in range(args.cli_runs)]
        later = runs[1:] or runs
        out[f"cli_{mode}_first_s"] = runs[0]["s"]
        out[f"cli_{mode}_s"] = statistics.median(r["s"] for r in later)
        out[f"cli_{mode}_rss_mib"] = max(r["rss_mib"] for r in runs)
        first = run_child([sys.executable, "-c", FIRST_QUERY, str(index), str(cache), mode, query], env)
        got = json.loads(first["stdout"])
        out[f"first_{mode}_s"] = got["first_s"]
        out[f"first_{mode}_rss_mib"] = first["rss_mib"]
        print(f"  fresh {mode:8}: `ragtui search` {out[f'cli_{mode}_s']:.2f} s (first run {runs[0]['s']:.2f} s), "
              f"peak RSS {out[f'cli_{mode}_rss_mib']:,.0f} MiB; Retriever open -> first answer "
              f"{got['first_s']:.2f} s (+{got['import_s']:.2f} s imports), {first['rss_mib']:,.0f} MiB")
    out["fresh_load"] = [la, load()]
    print(f"    load {la:.1f} -> {load():.1f}")

    # A full read: `ragtui info` checks every line of docs.jsonl and every vector (the BM25 arrays from the cache).
    la = load()
    res = run_child([*ragtui_command(), "info", *base, "--json"], env)
    out.update(info_s=res["s"], info_rss_mib=res["rss_mib"])
    # A reader whose cache holds nothing yet (a cache deleted, an index another program wrote): it decodes bm25.idx.
    with tempfile.TemporaryDirectory(dir=work) as empty:
        cold = run_child([sys.executable, "-c", FIRST_QUERY, str(index), empty, "bm25", query], env)
    out.update(cold_bm25_s=json.loads(cold["stdout"])["first_s"], cold_bm25_rss_mib=cold["rss_mib"])
    print(f"  `ragtui info` (every line checked): {res['s']:.1f} s, peak RSS {res['rss_mib']:,.0f} MiB; "
          f"a reader with an empty cache, open -> first bm25 answer: {out['cold_bm25_s']:.1f} s, "
          f"peak RSS {cold['rss_mib']:,.0f} MiB; load {la:.1f} -> {load():.1f}")

    # Warm, in this process.
    r = Retriever.open(index, embedder=make_embedder("wordllama"), cache_dir=cache)
    la = load()
    results: dict[str, list[list[int]]] = {}
    for mode in MODES:
        # A warm reader: one pass over the queries, then the lexical block entries that pass set building
        # (a reader builds them once its queries have read as many postings as the index holds) are done.
        for q in queries:
            r.search(q, mode=mode, k=K)
        for t in threading.enumerate():
            if t.name == "ragtui-bm25-blocks":
                t.join()
        times, rows = [], []
        for q in queries:
            t0 = time.perf_counter()
            hits = r.search(q, mode=mode, k=K)
            times.append(time.perf_counter() - t0)
            rows.append([h.row for h in hits])
        results[mode] = rows
        out[f"warm_{mode}_ms"] = 1000 * statistics.median(times)
        out[f"warm_{mode}_p95_ms"] = 1000 * pct(times, 0.95)
    ivf = r.ivf()
    nprobe = ivf.default_nprobe() if callable(ivf.default_nprobe) else ivf.default_nprobe
    recall = [len(set(a) & set(b)) / len(b) for a, b in zip(results["ivf"], results["flat"]) if b]
    out.update(ivf_recall=statistics.fmean(recall), ivf_nprobe=nprobe, ivf_nlist=ivf.params.nlist,
               ivf_calibration=list(ivf.calibration) if ivf.calibration else None, warm_load=[la, load()])
    print("  warm median (p95), ms: " + ", ".join(
        f"{m} {out[f'warm_{m}_ms']:.2f} ({out[f'warm_{m}_p95_ms']:.2f})" for m in MODES) + f"; load {load():.1f}")
    cal = f", {ivf.calibration[1]:.3f} on its calibration queries" if ivf.calibration else ""
    print(f"  IVF recall@10 vs flat over {len(recall)} real queries: {out['ivf_recall']:.3f} at the calibrated "
          f"nprobe {out['ivf_nprobe']} of {out['ivf_nlist']} lists{cal}")
    out["cache_mb"] = du(cache)

    # BM25 against tantivy on the same texts.
    if not args.no_tantivy:
        out.update(bm25_peer(r, queries, args.rounds))

    # Save -> searchable under `ragtui watch`, then the same change through `ragtui ingest`.
    out.update(watch(folder, art, manifest["edit"], r, args.saves, env))
    del r
    target_file = folder / manifest["edit"]
    original = target_file.read_bytes()
    times = []
    try:
        for i in range(args.one_file_runs):
            target_file.write_bytes(original + f"\none-file ingest {i}\n".encode())
            times.append(run_child([*ragtui_command(), "ingest", str(folder), *base, "--quiet"], env)["s"])
    finally:
        target_file.write_bytes(original)
        run_child([*ragtui_command(), "ingest", str(folder), *base, "--quiet"], env)
    out["ingest_one_file_s"] = statistics.median(times)
    out["gen_after_mb"] = du(rag / ".gen")
    out["cache_after_saves_mb"] = du(cache)
    print(f"  one changed file, `ragtui ingest`: median {out['ingest_one_file_s']:.2f} s of {len(times)}; load {load():.1f}")
    print(f"  on disk after the saves: generations {out['gen_after_mb']:,.1f} MB, cache {out['cache_after_saves_mb']:,.1f} MB")
    return out


def bm25_peer(r, queries: list[str], rounds: int) -> dict:
    from bench.bench_bm25 import best_rounds
    from bench.peer_tantivy import Tantivy
    from ragtui.core.index.analyzer import analyze

    data = r.data
    records = data.records
    la = load()
    t0 = time.perf_counter()
    tv = Tantivy((analyze(records[i].text) for i in range(data.n_chunks)), threads=1)
    build_s = time.perf_counter() - t0
    bm25 = data.bm25
    # A long-running reader builds the pruned search's block entries once its queries have read as many postings;
    # built here, as tantivy's index is, so that every round measures the warm search.
    t0 = time.perf_counter()
    bm25.blocks()
    blocks_s = time.perf_counter() - t0
    differ = 0
    for q in queries:
        got, want = bm25.search(q, K), bm25.search_exhaustive(q, K)
        differ += not (list(got[0]) == list(want[0]) and list(got[1]) == list(want[1]))
    qps, cpu = best_rounds({"ragtui": lambda q: bm25.search(q, K), "tantivy": lambda q: tv.search(analyze(q), K)},
                           queries, rounds)
    out = {"bm25_qps": qps["ragtui"], "tantivy_qps": qps["tantivy"], "bm25_vs_tantivy": qps["ragtui"] / qps["tantivy"],
           "bm25_vs_tantivy_cpu": cpu["ragtui"] / cpu["tantivy"], "bm25_inexact": differ,
           "tantivy_build_s": build_s, "ragtui_blocks_s": blocks_s, "peer_load": [la, load()]}
    print(f"  BM25 q/s: ragtui {qps['ragtui']:,.0f}, tantivy {qps['tantivy']:,.0f} -> {out['bm25_vs_tantivy']:.2f}x "
          f"(CPU time {out['bm25_vs_tantivy_cpu']:.2f}x), fastest of {rounds} rounds; top 10 differs from the "
          f"exhaustive scorer on {differ} of {len(queries)}; load {la:.1f} -> {load():.1f}")
    return out


def watch(folder: Path, art: Path, edit: str, reader, saves: int, env: dict[str, str]) -> dict:
    """Save one small file ``saves`` times under a real ``ragtui watch``; time each until a search finds it."""
    from bench.bench_watch import Daemon

    target = folder / edit
    original = target.read_text(encoding="utf-8")
    la = load()
    daemon = Daemon(folder, art)  # XDG_CONFIG_HOME beside the artifacts: no user configuration
    t0 = time.perf_counter()
    daemon.ready()
    ready_s = time.perf_counter() - t0
    rss_ready = proc_status(daemon.proc.pid)
    want: dict = {"token": None, "seen": None, "hybrid": None}
    stop = threading.Event()

    def follow() -> None:
        while not stop.is_set():
            token = want["token"]
            if reader.reload():
                hits = reader.search(token, mode="bm25", k=1) if token else []
                if hits and token in hits[0].text and want["seen"] is None:
                    want["seen"] = time.perf_counter()
            if token and want["seen"] is not None and want["hybrid"] is None:
                # The default mode too, on the generation just seen: its lexical arm needs the generation's
                # derived entries (a search waits for the writer that makes them, or makes its own).
                if any(token in h.text for h in reader.search(token, mode="hybrid", k=10)):
                    want["hybrid"] = time.perf_counter()
            time.sleep(0.002)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    totals: list[float] = []
    hybrid: list[float] = []
    syncs: list[float] = []
    stages: list[dict[str, float]] = []
    try:
        for i in range(saves):
            token = f"zqscale{i:03d}{secrets.token_hex(4)}"
            want.update(token=token, seen=None, hybrid=None)
            t0 = time.perf_counter()
            with open(target, "w", encoding="utf-8") as f:  # a save in place
                f.write(f"{original}\nscale token {token}\n")
            _, line = daemon.wait(lambda o: o["event"] == "publish")
            while want["seen"] is None or (want["hybrid"] is None and thread.is_alive()
                                           and time.perf_counter() - want["seen"] < 60):
                time.sleep(0.001)
            totals.append(want["seen"] - t0)
            if want["hybrid"] is not None:
                hybrid.append(want["hybrid"] - t0)
            syncs.append(line["ms"] / 1000)
            stages.append(line.get("seconds", {}))
            time.sleep(0.2)  # a user does not save ten times a second
        rss_after = proc_status(daemon.proc.pid)
    finally:
        stop.set()
        thread.join(5)
        target.write_text(original, encoding="utf-8")
        daemon.wait(lambda o: o["event"] == "publish")
        daemon.stop()
    out = {"save_median_ms": 1000 * statistics.median(totals), "save_p95_ms": 1000 * pct(totals, 0.95),
           "save_all_ms": [round(1000 * t) for t in totals], "save_sync_median_ms": 1000 * statistics.median(syncs),
           "save_hybrid_median_ms": 1000 * statistics.median(hybrid) if hybrid else None,
           "save_stages_median_ms": {k: round(1000 * statistics.median(st.get(k, 0.0) for st in stages), 1)
                                     for k in dict.fromkeys(k for st in stages for k in st)},
           "watch_start_s": ready_s, "watch_rss_ready_mib": rss_ready["VmRSS"],
           "watch_rss_mib": rss_after["VmRSS"], "watch_hwm_mib": rss_after["VmHWM"], "watch_load": [la, load()]}
    print(f"  save -> searchable under `ragtui watch`, {saves} saves: median {out['save_median_ms']:.0f} ms, "
          f"p95 {out['save_p95_ms']:.0f} ms (the agent's sync {out['save_sync_median_ms']:.0f} ms; "
          f"hybrid finds it at {fmt(out['save_hybrid_median_ms'])} ms); "
          f"every save (ms): {out['save_all_ms']}")
    print(f"    the agent's sync stages, medians (ms): {out['save_stages_median_ms']}")
    print(f"  watch agent: start to ready {ready_s:.1f} s; RSS {rss_ready['VmRSS']:,.0f} MiB when ready, "
          f"{rss_after['VmRSS']:,.0f} MiB after the saves, peak {rss_after['VmHWM']:,.0f} MiB; "
          f"load {la:.1f} -> {load():.1f}")
    return out


# -- the growth table and the plot ---------------------------------------------------------------

ROWS = [
    ("ingest_s", "full `ragtui ingest`, s"),
    ("ingest_rss_mib", "full ingest peak RSS, MiB"),
    ("index_mb", "index on disk (four files), MB"),
    ("cache_mb", "readers' cache on disk after the queries, MB"),
    ("state_mb", "writer state on disk, MB"),
    ("save_median_ms", "watch save -> searchable, median ms"),
    ("save_p95_ms", "watch save -> searchable, p95 ms"),
    ("save_hybrid_median_ms", "watch save -> a hybrid search finds it, median ms"),
    ("watch_rss_mib", "watch agent RSS after the saves, MiB"),
    ("watch_hwm_mib", "watch agent peak RSS, MiB"),
    ("ingest_one_file_s", "one changed file, `ragtui ingest`, s"),
    *[(f"cli_{m}_s", f"`ragtui search --mode {m}`, fresh process, s") for m in MODES],
    *[(f"cli_{m}_rss_mib", f"`ragtui search --mode {m}` peak RSS, MiB") for m in MODES],
    *[(f"first_{m}_s", f"fresh Retriever, open -> first {m} answer, s") for m in MODES],
    ("info_s", "`ragtui info` (every line checked), s"),
    ("info_rss_mib", "`ragtui info` peak RSS, MiB"),
    ("cold_bm25_s", "empty cache: open -> first bm25 answer, s"),
    ("cold_bm25_rss_mib", "empty cache: open -> first bm25 answer, peak RSS MiB"),
    *[(f"warm_{m}_ms", f"warm {m} query, median ms") for m in MODES],
    ("ivf_recall", "IVF recall@10 vs flat, real queries"),
    ("ivf_nprobe", "IVF calibrated nprobe"),
    ("bm25_qps", "BM25 q/s, ragtui"),
    ("tantivy_qps", "BM25 q/s, tantivy"),
    ("bm25_vs_tantivy", "BM25 q/s, ragtui / tantivy"),
]


def exponent(n1: float, v1: float, n2: float, v2: float) -> float | None:
    if min(n1, n2, v1, v2) <= 0 or n1 == n2:
        return None
    return math.log(v2 / v1) / math.log(n2 / n1)


def growth_table(runs: Sequence[dict]) -> str:
    """A markdown table: each figure per size, then the exponent x of n^x between consecutive sizes."""
    heads = [f"{r['chunks']:,} chunks" for r in runs]
    pairs = [f"n^x, {runs[i]['label']}→{runs[i + 1]['label']}" for i in range(len(runs) - 1)]
    lines = ["| | " + " | ".join(heads + pairs) + " |", "|---|" + "---|" * (len(heads) + len(pairs))]
    for key, label in ROWS:
        if not any(key in r for r in runs):
            continue
        cells = [fmt(r.get(key)) for r in runs]
        for a, b in zip(runs, runs[1:]):
            x = exponent(a["chunks"], a.get(key, 0) or 0, b["chunks"], b.get(key, 0) or 0)
            cells.append("–" if x is None else f"{x:.2f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    loads = []
    for r in runs:
        seen = [v for k, v in r.items() if k.endswith("_load") for v in v]
        loads.append(f"{min(seen):.1f}–{max(seen):.1f}" if seen else "–")
    lines.append("| load average during the size | " + " | ".join(loads + [""] * len(pairs)) + " |")
    return "\n".join(lines)


def fmt(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v >= 100:
            return f"{v:,.0f}"
        if v >= 10:
            return f"{v:.1f}"
        if v >= 1:
            return f"{v:.2f}"
        return f"{v:.3f}"
    return str(v)


def plot(runs: Sequence[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["chunks"] for r in runs]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))

    def panel(ax, keys: Iterable[tuple[str, str]], title: str, unit: str) -> None:
        for key, name in keys:
            vals = [r.get(key) for r in runs]
            if all(v is not None for v in vals):
                ax.plot(ns, vals, marker="o", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("chunks")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)

    a = axes[0][0]
    panel(a, [("save_median_ms", "median"), ("save_p95_ms", "p95")], "watch: save → searchable", "ms")
    t = TARGETS["save_median_ms"]
    a.plot(list(t), list(t.values()), "k:", marker="x", label="target (median)")
    a.legend(fontsize=8)
    m = axes[0][1]
    panel(m, [("ingest_rss_mib", "full ingest, peak"), ("watch_hwm_mib", "watch agent, peak"),
              ("cli_hybrid_rss_mib", "ragtui search hybrid, peak"), ("cli_bm25_rss_mib", "ragtui search bm25, peak")],
          "memory", "MiB")
    m.plot([1_000_000], [2e9 / 2**20], "kx", label="target: ingest ≤ 2 GB at 1M")
    m.plot([1_000_000], [1.5e9 / 2**20], "k+", markersize=10, label="target: watch ≤ 1.5 GB at 1M")
    m.legend(fontsize=8)
    c = axes[1][0]
    panel(c, [(f"cli_{m}_s", m) for m in MODES], "`ragtui search`, fresh process, one query", "s")
    c.plot([1_000_000], [1.5], "kx", label="target: hybrid ≤ 1.5 s at 1M")
    c.legend(fontsize=8)
    panel(axes[1][1], [(f"warm_{m}_ms", m) for m in MODES], "warm query, median", "ms")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main ----------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([km]?)\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10k, 100k, 1m, 2500)")
    return int(float(m.group(1)) * {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2)])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10k,100k,1m", help="chunk counts, comma-separated (default 10k,100k,1m)")
    ap.add_argument("--quick", action="store_true", help="one ~2k-chunk corpus, few saves and queries: a smoke run")
    ap.add_argument("--work", type=Path, metavar="DIR", help="where corpora and indexes go (default: a temporary directory)")
    ap.add_argument("--seed", type=int, default=0, help="the corpus shuffle (default 0)")
    ap.add_argument("--queries", type=int, default=200, help="real queries per mode (default 200)")
    ap.add_argument("--saves", type=int, default=20, help="saves under watch per size (default 20)")
    ap.add_argument("--cli-runs", type=int, default=3, help="`ragtui search` processes per mode (default 3)")
    ap.add_argument("--one-file-runs", type=int, default=3, help="one-file `ragtui ingest` runs per size (default 3)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved BM25 rounds against tantivy (default 5)")
    ap.add_argument("--no-tantivy", action="store_true", help="leave out the tantivy comparison")
    ap.add_argument("--max-rss", type=float, metavar="GiB", default=0,
                    help="kill a child (ingest, search) whose RSS passes this, and stop (default: no limit)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write every figure as JSON")
    ap.add_argument("--plot", type=Path, metavar="PNG", help="draw the growth (needs two sizes or more)")
    ap.add_argument("--from-json", type=Path, nargs="+", metavar="FILE",
                    help="measure nothing: print the table (and --plot) of the sizes in --json files")
    args = ap.parse_args(argv)
    if args.from_json:
        runs = sorted((r for f in args.from_json for r in json.loads(f.read_text(encoding="utf-8"))["runs"]),
                      key=lambda r: r["chunks"])
        print(growth_table(runs))
        if args.plot:
            plot(runs, args.plot)
        return 0
    if args.quick:
        sizes = [2_000]
        args.queries, args.saves = min(args.queries, 30), min(args.saves, 5)
        args.cli_runs = args.rounds = args.one_file_runs = 1
    else:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    if not args.no_tantivy:
        try:
            import tantivy  # noqa: F401
        except ImportError:
            raise SystemExit("tantivy is needed for the BM25 comparison: pip install -e '.[bench]' (or --no-tantivy)") from None
    global RSS_LIMIT_KIB
    RSS_LIMIT_KIB = int(args.max_rss * 2**20)
    queries = real_queries(args.queries)
    print(f"bench_scale: {os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB, "
          f"python {sys.version.split()[0]}; {len(queries)} queries; load average {load():.1f}")
    tmp = None
    if args.work is None:
        tmp = tempfile.TemporaryDirectory(prefix="ragtui-scale-")
        work = Path(tmp.name)
    else:
        work = args.work.resolve()
        work.mkdir(parents=True, exist_ok=True)
    runs = []
    try:
        for size in sizes:
            label = f"{size // 1_000_000}m" if size % 1_000_000 == 0 else f"{size // 1000}k" if size % 1000 == 0 else str(size)
            runs.append(measure(work, label, size, args, queries))
            if args.json:  # written after every size: a long run keeps what it measured
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps({"queries": len(queries), "runs": runs}, indent=1), encoding="utf-8")
    finally:
        if tmp is not None:
            tmp.cleanup()
    print("\n" + growth_table(runs))
    if args.plot and len(runs) >= 1:
        plot(runs, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

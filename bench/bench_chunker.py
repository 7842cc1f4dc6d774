"""Chunker speed and memory on long single-line documents, and its throughput on python-docs.

    python bench/bench_chunker.py [--lines NAME ...] [--no-corpus] [--corpus DIR] [--rounds N]

1. Long single lines, made in the run (deterministic, tests/reliability/
   helpers_longlines.py): a 300 KB and a 1 MB line of minified JSON, a 1 MB
   line of prose, 3.3 MB of minified JSON, a 10 MB line of prose and one of
   JSON. Each is written to a file and chunked (256/32) in a fresh child
   process with the default tokenizer (wordllama's Llama-2 BPE), as ingest
   reads it. Printed: chunks; seconds; the child's peak resident memory
   while chunking (the interpreter, the tokenizer and the document text
   included) and its growth over what it held before; the characters handed
   to the tokenizer per character of the line; and the named peer, the
   tokenizer alone on the same child (the line's tokens, part by part, plus
   counting the same chunks' texts), with the ratio.
   Target: the 10 MB lines chunk in <= 10 s and <= 200 MB peak.
2. python-docs (../shared/data/corpora/python-docs, 497 files): chunk_text
   end to end against the tokenizer alone, per document best of ``--rounds``,
   the two interleaved: chunks/s and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpora  # noqa: E402

from tests.reliability.helpers_longlines import KINDS, make_doc  # noqa: E402

TARGET_SECONDS, TARGET_MB = 10.0, 200.0

# Runs in the child: chunk the file, report figures as one JSON line.
_CHILD = r"""
import json, resource, sys, time
from ragtui.core.ingest.chunker import chunk_text
from tests.reliability.helpers_longlines import CountingTokenizer, wordllama_tokenizer

def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

tok = wordllama_tokenizer()  # the embedder's tokenizer, without its 33 MB table: ingest holds that anyway
tok.count("warm up " * 2000)  # builds the long-text splitter, as a first long document would
doc = open(sys.argv[1], encoding="utf-8").read()
before = rss_mb()
counting = CountingTokenizer(tok)
t0 = time.perf_counter()
chunks = chunk_text(doc, counting)
seconds = time.perf_counter() - t0
peak = rss_mb()
t0 = time.perf_counter()
for part in tok.iter_spans(doc):
    pass
texts = [c.text for c in chunks]
for lo in range(0, len(texts), 1024):
    tok.count_many(texts[lo : lo + 1024])
peer = time.perf_counter() - t0
print(json.dumps({"chunks": len(chunks), "seconds": seconds, "peak_mb": peak, "before_mb": before,
                  "per_char": counting.chars / len(doc), "peer": peer}))
"""


def bench_line(name: str, folder: Path) -> dict:
    kind, size = KINDS[name]
    path = folder / f"{kind}-{size}.txt"
    if not path.exists():
        path.write_text(make_doc(kind, size), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                         cwd=REPO, check=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["chars"] = len(path.read_text(encoding="utf-8"))
    return row


def bench_corpus(folder: Path, rounds: int) -> None:
    from ragtui.core.embedders.wordllama import WordLlamaEmbedder
    from ragtui.core.ingest.chunker import chunk_text

    tok = WordLlamaEmbedder().tokenizer
    folder = corpora.need(folder)
    docs = [p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.txt"))]
    n, t_all, t_tok = 0, 0.0, 0.0
    for doc in docs:
        best_all = best_tok = float("inf")
        for _ in range(rounds):  # interleaved, so load from other jobs hits both alike
            t0 = time.perf_counter()
            chunks = chunk_text(doc, tok)
            best_all = min(best_all, time.perf_counter() - t0)
            t0 = time.perf_counter()
            tok.spans(doc)
            tok.count_many([c.text for c in chunks])
            best_tok = min(best_tok, time.perf_counter() - t0)
        n += len(chunks)
        t_all += best_all
        t_tok += best_tok
    print(f"\npython-docs: {len(docs)} documents, {sum(map(len, docs)) / 1e6:.1f} M characters, {n:,} chunks "
          f"(best of {rounds} per document)")
    print(f"  chunk_text end to end   {t_all:6.2f} s  {n / t_all:7,.0f} chunks/s")
    print(f"  peer: tokenizer alone   {t_tok:6.2f} s  (spans + count_many of the same chunks); "
          f"ratio {t_all / t_tok:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", nargs="*", default=list(KINDS), choices=list(KINDS), metavar="NAME",
                    help="which long lines (default: all)")
    ap.add_argument("--no-corpus", action="store_true", help="skip python-docs")
    ap.add_argument("--corpus", type=Path, default=corpora.SHARED / "corpora" / "python-docs",
                    help="the python-docs folder (default: ../shared/data/corpora/python-docs)")
    ap.add_argument("--rounds", type=int, default=3, help="python-docs: best of N per document")
    args = ap.parse_args()
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}; max_tokens 256, overlap 32")
    head = (f"{'document':22} {'chars':>11} {'chunks':>7} {'seconds':>8} {'peak MB':>8} {'+MB':>5} "
            f"{'tok/char':>8} {'peer s':>7} {'ratio':>6}")
    print(head)
    verdicts = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.lines:
            r = bench_line(name, Path(tmp))
            print(f"{name:22} {r['chars']:11,} {r['chunks']:7,} {r['seconds']:8.2f} {r['peak_mb']:8.0f} "
                  f"{r['peak_mb'] - r['before_mb']:5.0f} {r['per_char']:8.2f} {r['peer']:7.2f} "
                  f"{r['seconds'] / r['peer']:6.2f}", flush=True)
            if name.startswith("10 MB"):
                ok = r["seconds"] <= TARGET_SECONDS and r["peak_mb"] <= TARGET_MB
                verdicts.append(f"{name}: {r['seconds']:.1f} s, {r['peak_mb']:.0f} MB peak -> "
                                f"{'meets' if ok else 'misses'} <= {TARGET_SECONDS:.0f} s and <= {TARGET_MB:.0f} MB")
    for v in verdicts:
        print(v)
    if not args.no_corpus:
        bench_corpus(args.corpus, args.rounds)


if __name__ == "__main__":
    main()

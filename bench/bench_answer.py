"""Pack time, tokens used versus budget, and `ragtui ask` latency per stage.

    python bench/bench_answer.py                       # pack figures on ../shared/data python-docs
    python bench/bench_answer.py --llm http://127.0.0.1:8080 --model smol-135m   # + ask against a real server

Pack is measured beside a named peer run in the same process on the same hits: **rank-order
stuffing** (take the hits in rank order, each chunk's indexed text whole, until the next one does not
fit; what a plain "stuff the top-k into the prompt" chain does). Both count tokens with the index's
tokenizer. Reported per budget: median and p90 seconds to pack (the search excluded, measured apart),
tokens used / budget, snippets, chunks covered, and tokens spent twice on the overlap between chunks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpora import SHARED, need  # noqa: E402

QUERIES = [
    "how do I read a file line by line", "sort a list of dictionaries by a key", "format a date as a string",
    "run a subprocess and capture its output", "parse command line arguments", "regular expression groups",
    "open a socket connection", "json encode a custom object", "create a temporary directory",
    "iterate over two lists in parallel", "define an abstract base class", "thread pool executor",
    "asyncio event loop run until complete", "decimal rounding modes", "unicode normalization forms",
    "context manager with statement", "logging configuration from a file", "unit test setup and teardown",
    "pickle protocol versions", "path joining and resolving symlinks",
]
ASK_QUESTIONS = [
    "How do I read a file line by line?", "How do I run a subprocess and capture its output?",
    "What does the with statement do?", "How do I create a temporary directory?",
    "How do I parse command line arguments?",
]
BUDGETS = (500, 2000, 8000)


def stuff_in_rank_order(hits, data, budget: int) -> tuple[int, int]:
    """The peer: (tokens used, chunks) taking whole chunks in rank order until one does not fit."""
    used = n = 0
    for h in hits:
        t = data.records[h.row].n_tokens
        if used + t > budget:
            break
        used, n = used + t, n + 1
    return used, n


def q(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm", metavar="URL", help="an OpenAI-compatible chat server for the ask figures")
    parser.add_argument("--model", default="smol-135m")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args()

    from ragtui.core.answer.pack import pack
    from ragtui.core.citations import Resolver
    from ragtui.core.embedders.wordllama import WordLlamaEmbedder
    from ragtui.core.ingest.publish import index_dir
    from ragtui.core.ingest.sync import sync
    from ragtui.core.search.retriever import Retriever

    corpus = need(SHARED / "corpora" / "python-docs")
    emb = WordLlamaEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "python-docs"
        folder.symlink_to(corpus, target_is_directory=True)
        t = time.perf_counter()
        sync(folder, artifacts=Path(tmp) / "art", embedder=emb)
        retriever = Retriever.open(index_dir(Path(tmp) / "art", "python-docs"), embedder=emb)
        data = retriever.data
        print(f"python-docs: {data.meta.n_chunks:,} chunks, ingested in {time.perf_counter() - t:.1f} s; "
              f"mode {args.mode}, 50 candidates, {len(QUERIES)} queries")
        search_s = []
        hits_by_q = {}
        for query in QUERIES:
            t = time.perf_counter()
            hits_by_q[query] = retriever.search(query, mode=args.mode, k=50)
            search_s.append(time.perf_counter() - t)
        print(f"search (not part of pack): median {statistics.median(search_s) * 1000:.1f} ms")
        print()
        print("| budget | pack median | pack p90 | used/budget (ragtui) | used/budget (rank-order stuffing) "
              "| snippets | chunks covered (ragtui / stuffing) | overlap tokens sent twice (stuffing) |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for budget in BUDGETS:
            times, ratio, peer_ratio, snippets, chunks, peer_chunks, dup = [], [], [], [], [], [], []
            for query in QUERIES:
                hits = hits_by_q[query]
                t = time.perf_counter()
                result = pack(query, hits, data, emb.tokenizer, budget, mode=args.mode, resolver=Resolver(data))
                times.append(time.perf_counter() - t)
                ratio.append(result.used / budget)
                snippets.append(len(result.snippets))
                chunks.append(sum(len(s.chunk_ids) for s in result.snippets))
                used, n = stuff_in_rank_order(hits, data, budget)
                peer_ratio.append(used / budget)
                peer_chunks.append(n)
                taken = {data.records[h.row].chunk_id for h in hits[:n]}
                # Adjacent chunks of one document share `overlap` tokens: stuffing sends them twice.
                dup.append(sum(data.meta.overlap for c in taken
                               if c.rsplit("#", 1)[0] + "#" + str(int(c.rsplit("#", 1)[1]) + 1) in taken))
            print(f"| {budget:,} | {statistics.median(times) * 1000:.1f} ms | {q(times, 0.9) * 1000:.1f} ms "
                  f"| {statistics.median(ratio):.2f} | {statistics.median(peer_ratio):.2f} "
                  f"| {statistics.median(snippets):.0f} | {statistics.median(chunks):.0f} / "
                  f"{statistics.median(peer_chunks):.0f} | {statistics.median(dup):.0f} |")
        if args.llm:
            ask_figures(args, retriever, emb)


def ask_figures(args, retriever, emb) -> None:
    from ragtui.core.answer import ask
    from ragtui.core.answer.llm import ChatClient

    print()
    print(f"ask against {args.llm} ({args.model}), --fast, budget 1000 tokens, max_tokens {args.max_tokens}, "
          f"streamed, {len(ASK_QUESTIONS)} questions (one warm-up call first)")
    stages: dict[str, list[float]] = {}
    firsts, tokens_in, tokens_out, verdicts = [], [], [], []
    with ChatClient(args.llm, args.model, max_tokens=args.max_tokens, timeout=600) as client:
        client.chat([{"role": "user", "content": "Say hello."}], max_tokens=4)  # load and warm the model
        for question in ASK_QUESTIONS:
            result = ask(question, retriever, emb.tokenizer, client, mode=args.mode, k=50, budget=1000, fast=True,
                         on_delta=lambda _piece: None)
            for name, seconds in result.stages.items():
                stages.setdefault(name, []).append(seconds)
            firsts.append(result.answers[-1].first_token_seconds or 0.0)
            tokens_in.append(result.prompt_tokens)
            tokens_out.append(result.completion_tokens)
            verdicts.extend(c.verdict for c in result.checks)
    print("| stage | median | max |")
    print("|---|---:|---:|")
    for name, values in stages.items():
        print(f"| {name} | {statistics.median(values):.3f} s | {max(values):.3f} s |")
    print(f"| first token (inside chat) | {statistics.median(firsts):.3f} s | {max(firsts):.3f} s |")
    print(f"usage while streaming: {tokens_in[0]} / {tokens_out[0]} (None: the server sends none when streaming); "
          f"citations: {len(verdicts)} ({', '.join(sorted(set(verdicts))) or 'none'})")


if __name__ == "__main__":
    main()

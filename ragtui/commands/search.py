"""``ragtui search QUERY``: rank chunks for a query (exit 1 when nothing matched)."""

from __future__ import annotations

import os
import sys

from ragtui import app
from ragtui.commands.options import add_ranking_options, add_rerank_options
from ragtui.core.errors import NotFoundError, UsageError
from ragtui.core.textsafe import json_text

__all__ = ["register", "run"]


def register(sub, common) -> None:
    p = sub.add_parser("search", help="rank chunks for a query", description="Rank chunks for a query.")
    p.add_argument("query")
    # Checked (with a did-you-mean) by run() before anything loads.
    p.add_argument("--mode", default="bm25", help="flat, ivf, bm25, bm25doc or hybrid (default: bm25)")
    p.add_argument("-k", type=int, default=10, help="number of results (default: 10)")
    p.add_argument("--nprobe", type=int, help="IVF lists to probe, 1 to the index's nlist (`ragtui info`); "
                   "a value outside is refused with the range")
    p.add_argument("--json", action="store_true", help="print the full hits as JSON")
    p.add_argument("--all", action="store_true",
                   help="search every index under the artifacts root as one (so does --index a,b): "
                   "BM25 with their statistics pooled, each hit naming its index")
    add_ranking_options(p)
    add_rerank_options(p)
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ragtui.core.search.query import parse_query
    from ragtui.core.search.retriever import check_query, check_search
    from ragtui.core.textsafe import one_line

    if args.k < 1:
        raise UsageError(f"-k must be at least 1 (got {args.k})")
    query = check_query(args.query)  # before anything is loaded: a bad query costs nothing
    if not query.strip():
        raise UsageError("the query is empty: give the words to search for, e.g. ragtui search 'tar archive'")
    parsed = parse_query(query)
    if args.mode == "ivf" and args.nprobe is not None and args.nprobe < 1:
        raise UsageError(f"--nprobe must be between 1 and the index's number of IVF lists (got {args.nprobe})")
    params = {"nprobe": args.nprobe} if args.nprobe is not None else {}
    check_search(args.mode, params)  # before the index or the embedder is loaded
    settings = app.settings_from(args)
    params.update(app.search_params(args, settings, args.mode))
    n_rerank, budget = app.rerank_options(args, settings)
    several = app.resolve_indexes(settings, every=args.all)
    if several is not None:
        if n_rerank:
            raise UsageError("--rerank works on one index at a time: choose one with --index")
        return _run_many(args, settings, several, parsed, params)
    reranker = app.open_reranker(args, settings) if n_rerank else None
    retriever = app.open_retriever(settings, need_embedder=args.mode not in ("bm25", "bm25doc"))
    meta = retriever.meta
    if meta.n_chunks == 0:
        raise NotFoundError(f"index {meta.index_id!r} is empty (0 chunks): the folder it was built from had no "
                            "documents to index; add some and run `ragtui ingest FOLDER` again")
    if args.mode == "ivf" and args.nprobe is not None:
        _check_nprobe(retriever, args.nprobe)
    hits = retriever.search(parsed, mode=args.mode, k=max(args.k, n_rerank), **params)
    for note in hits.notes:  # e.g. a prefix that matched more terms than are ranked
        print(f"note: {one_line(note, 300)}", file=sys.stderr)
    reranked = None
    if reranker is not None:
        from ragtui.core.rerank import rerank

        # The cross-encoder reads the words searched for, not the syntax around them.
        reranked = rerank(parsed.search_text, hits, reranker, n_rerank, budget_ms=budget)
        hits = list(reranked.hits)
    hits = hits[: args.k]
    if args.json:
        out = [
            {"rank": h.rank, "score": h.score, "chunk_id": h.chunk_id, "doc_id": h.doc_id, "row": h.row, "text": h.text}
            for h in hits
        ]
        for row, h in zip(out, hits):
            if h.rows:  # --merge joined these chunks into this hit
                row["merged_rows"] = list(h.rows)
        if any(h.rows for h in hits):
            _merged_lines(retriever, hits, out)
        if reranked is not None:  # which scores are the cross-encoder's, and where each hit was before
            for row, before in zip(out, reranked.first_stage_rank):
                row["reranked"] = before <= reranked.scored
                row["first_stage_rank"] = before
        sys.stdout.write(json_text(out, indent=1) + "\n")
    else:
        width = max(40, _term_width() - 40)
        for h in hits:
            print(f"{h.rank:>3}  {h.score:9.4f}  {one_line(h.chunk_id, 60)}  {one_line(h.text, width)}")
        ms = retriever.last_search_seconds * 1000
        extra = f"; {reranked.describe()} in {reranked.seconds * 1000:.0f} ms" if reranked is not None else ""
        print(f"{len(hits)} result(s), {args.mode}, {ms:.1f} ms{extra}", file=sys.stderr)
    return 0 if hits else 1


def _check_nprobe(retriever, nprobe: int) -> None:
    """Refuse (rather than clamp) an nprobe above the index's number of IVF lists: the range is in the message."""
    from ragtui.core.search.ivf import IVFParams

    nlist = (retriever.ivf_params or IVFParams()).resolve(retriever.meta.n_chunks).nlist
    if nprobe > nlist:
        raise UsageError(f"--nprobe must be between 1 and {nlist}, the number of IVF lists of index "
                         f"{retriever.meta.index_id!r} (got {nprobe}); {nlist} probes every list, as flat search does")


def _merged_lines(retriever, hits, out: list[dict]) -> None:
    """A merged hit's union line range in its source, [first chunk's start, last chunk's end],
    when both chunks are found in the file as it is now (spec/citations.md); else no "lines"."""
    from ragtui.core.citations import Resolver
    from ragtui.core.errors import RagtuiError

    data = retriever.data
    resolver = Resolver(data)
    for row, h in zip(out, hits):
        if not h.rows:
            continue
        try:
            first = resolver.resolve(data.records[h.rows[0]].chunk_id)
            last = resolver.resolve(data.records[h.rows[-1]].chunk_id)
        except RagtuiError:
            continue  # no recorded source folder, or a source that cannot be read: the hit stays
        if first.located and last.located and first.path == last.path:
            row["lines"] = [first.start_line, last.end_line]


def _term_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 120


def _run_many(args, settings, paths, parsed, params: dict) -> int:
    """``--all`` / ``--index a,b``: the indexes ranked as one (core.search.multi), each hit naming its index."""
    from ragtui.core.search.multi import search_many
    from ragtui.core.textsafe import one_line

    retrievers = app.open_retrievers(settings, paths, need_embedder=args.mode not in ("bm25", "bm25doc"))
    result = search_many(retrievers, parsed.text, mode=args.mode, k=args.k, **params)
    for note in result.notes:
        print(f"note: {one_line(note, 300)}", file=sys.stderr)
    hits = result.hits
    if args.json:
        out = [{"rank": m.rank, "score": m.score, "index": m.index_id, "chunk_id": m.chunk_id,
                "doc_id": m.hit.doc_id, "row": m.hit.row, "text": m.hit.text} for m in hits]
        sys.stdout.write(json_text(out, indent=1) + "\n")
    else:
        width = max(40, _term_width() - 60)
        for m in hits:
            print(f"{m.rank:>3}  {m.score:9.4f}  {one_line(m.index_id, 20)}  {one_line(m.chunk_id, 60)}  "
                  f"{one_line(m.hit.text, width)}")
        print(f"{len(hits)} result(s), {args.mode} over {len(paths)} indexes ({', '.join(p.name for p in paths)}), "
              f"merged as one index; cite a hit with `ragtui inspect --index INDEX CHUNK_ID`", file=sys.stderr)
    return 0 if hits else 1

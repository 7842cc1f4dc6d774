"""``ragtui search QUERY``: rank chunks for a query (exit 1 when nothing matched).

Each hit is printed as two lines: its rank, score, ``path:Lstart-Lend`` (the
source file as it is now, relative to the current folder when it lies below
it) and chunk_id; then a key-word-in-context snippet centred on the query's
weighty terms (``core.search.kwic``), as wide as the terminal (80 columns when
the output is not a terminal). ``--explain`` adds why each hit scored what it
did (``core.search.explain``); ``--json`` prints every hit with its source
path, line and character range, the mode and the query time.
"""

from __future__ import annotations

import os
import shutil
import sys

from ragtui import app
from ragtui.commands.options import (
    add_mode_option,
    add_query_options,
    add_ranking_options,
    add_rerank_options,
    request_of,
    settings_of,
)
from ragtui.core.errors import NotFoundError, UsageError
from ragtui.core.textsafe import json_text
from ragtui.request import DEFAULT_K, DEFAULT_MODE, MAX_K

__all__ = ["register", "run"]

INDENT = 6
"""The snippet and the explanation sit under the path, this many columns in."""


def register(sub, common) -> None:
    p = sub.add_parser("search", help="rank chunks for a query", description=(
        "Rank chunks for a query. Each hit shows its source as path:Lstart-Lend and a snippet around the "
        "query's terms; --explain says why it scored what it did. A query that begins with '-' goes after "
        "--: ragtui search -- -word"))
    p.add_argument("query")
    add_mode_option(p, DEFAULT_MODE)
    p.add_argument("-k", type=int, default=None, help=f"number of results, 1 to {MAX_K} (default: {DEFAULT_K})")
    p.add_argument("--nprobe", type=int, help="IVF lists to probe, 1 to the index's nlist (`ragtui info`); "
                   "a value outside is refused with the range")
    p.add_argument("--json", action="store_true",
                   help="print the hits as JSON, with source path, line and character range, mode and query time")
    p.add_argument("--explain", action="store_true",
                   help="say why each hit scored what it did: BM25 per-term contributions (idf, tf, weight), "
                        "each hybrid arm's rank and score, the IVF lists probed, the parsed query, and what a "
                        "score floor, MMR, merging or the reranker did to the order")
    p.add_argument("--all", action="store_true",
                   help="search every index under the artifacts root as one (so does --index a,b): "
                   "BM25 with their statistics pooled, each hit naming its index")
    add_query_options(p)
    add_ranking_options(p)
    add_rerank_options(p)
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ragtui.core.textsafe import one_line

    settings = settings_of(args)
    # Everything checked before anything is loaded: a bad request costs nothing.
    request = request_of(args, settings, args.query, default_mode=DEFAULT_MODE, default_k=DEFAULT_K)
    if (request.rerank or args.explain) and app.resolve_indexes(settings, every=request.every) is not None:
        raise UsageError(f"{'--rerank' if request.rerank else '--explain'} works on one index at a time: "
                         "choose one with --index")
    searcher = app.open_searcher(settings, request)
    if searcher.several:
        return _run_many(args, request, searcher)
    reranker = app.open_reranker(settings, getattr(args, "rerank_model", None)) if request.rerank else None
    meta = searcher.only.meta
    if meta.n_chunks == 0:
        raise NotFoundError(f"index {meta.index_id!r} is empty (0 chunks): the folder it was built from had no "
                            "documents to index; add some and run `ragtui ingest FOLDER` again")
    result = app.run_search(searcher, request, explain=args.explain, reranker=reranker)
    for note in result.notes:  # e.g. a prefix that matched more terms than are ranked, a query read as text
        print(f"note: {one_line(note, 300)}", file=sys.stderr)
    hits, explained, reranked, parsed = result.hits, result.explained, result.reranked, request.query
    (snapshot,) = result.snapshots.values()
    data = snapshot.data
    why = {e.hit.row: e for e in explained.explanations} if explained is not None else {}
    if args.json:  # cite_hits reads each source file once; the text lines' _sources are not needed
        out = []
        for row in app.cite_hits(result):
            row.update({"mode": request.mode, "query_ms": result.seconds * 1000})
            if explained is not None:
                row["explain"] = {**explained.to_json(), "stages": list(result.stages), **why[row["row"]].to_json(),
                                  "query": parsed.describe()}
            out.append(row)
        if reranked is not None:  # which scores are the cross-encoder's, and where each hit was before
            for row, before in zip(out, reranked.first_stage_rank):
                row["reranked"] = before <= reranked.scored
                row["first_stage_rank"] = before
        sys.stdout.write(json_text(out, indent=1) + "\n")
    else:
        if explained is not None and not parsed.plain:
            for line in parsed.describe().splitlines():
                print(f"query: {one_line(line, 300)}")
        _print_hits(args, parsed.search_text, hits, _sources(data, hits), data, why, explained, reranked,
                    result.stages)
        extra = f"; {reranked.describe()} in {reranked.seconds * 1000:.0f} ms" if reranked is not None else ""
        print(f"{len(hits)} result(s), {request.mode}, {result.seconds * 1000:.1f} ms{extra}", file=sys.stderr)
    return 0 if hits else 1


class _Source:
    """Where a hit's text is in its source file now, as far as it could be found."""

    def __init__(self, shown: str, citation=None, problem: str = "") -> None:
        self.shown = shown
        """``path:Lstart-Lend`` (or the doc_id and what is wrong) for people."""
        self.citation = citation
        self.problem = problem


def _sources(data, hits) -> dict[int, _Source]:
    """Each hit's ``_Source`` by row: every source file read once, never outside its folder."""
    from ragtui.core.citations import Resolver
    from ragtui.core.errors import RagtuiError
    from ragtui.core.textsafe import inline

    resolver = Resolver(data)
    cwd = os.getcwd()
    out: dict[int, _Source] = {}
    for h in hits:
        try:
            c = resolver.resolve(h.chunk_id)
        except RagtuiError as e:
            # No recorded folder, an unsafe doc_id, an unreadable file: the hit is still shown, by its doc_id.
            out[h.row] = _Source(f"{inline(h.doc_id)} (source not read)", None, str(e))
            continue
        name = inline(h.doc_id) if c.path is None else inline(_relative(str(c.path), cwd))
        if c.start_line is not None:
            shown = f"{name} {c.place}" if c.page is not None else f"{name}:L{c.start_line}-L{c.end_line}"
            if c.status != "fresh":
                shown += f" ({c.status})"
        else:
            shown = f"{name} ({c.status}: {'the file is gone' if c.status == 'missing' else 'text not in it now'})"
        out[h.row] = _Source(shown, c)
    return out


def _relative(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it lies below it, else as it is."""
    try:
        if os.path.commonpath([path, cwd]) == cwd:
            return os.path.relpath(path, cwd)
    except ValueError:
        pass
    return path


def _print_hits(args, words, hits, sources, data, why, explained, reranked, stages=()) -> None:
    from ragtui.core.search.kwic import salient, snippet, term_weights
    from ragtui.core.textsafe import inline

    width = max(40, shutil.get_terminal_size((80, 24)).columns)
    weights = salient(term_weights(data.bm25, words))
    pad = " " * INDENT
    if explained is not None:
        for line in _explain_head(explained):
            print(line)
        for line in stages:  # what a floor, MMR, merging or the reranker did to the order
            print(f"then: {line}")
    # The hits whose score is the cross-encoder's, with their first-stage rank (what --explain explains).
    first_stage = {h.row: before for h, before in zip(hits, reranked.first_stage_rank) if before <= reranked.scored
                   } if reranked is not None else {}
    for h in hits:
        print(f"{h.rank:>3}  {h.score:9.4f}  {sources[h.row].shown}  {inline(h.chunk_id)}")
        print(pad + snippet(h.text, weights, width - INDENT - 1).text)
        if h.row in why:
            if h.row in first_stage:
                print(f"{pad}first-stage rank {first_stage[h.row]}, explained below (the score above is the "
                      "cross-encoder's)")
            for line in _explain_hit(why[h.row]):
                print(pad + line)


def _explain_head(explained) -> list[str]:
    """What holds for every hit: BM25's parameters, or the IVF lists probed."""
    lines = []
    p = explained.bm25_params
    if p:
        arms = [e.arms[0].arm for e in explained.explanations if e.arms]
        stemmed = explained.mode == "bm25stem" or (arms and arms[0] == "bm25stem")
        what = "bm25stem (Snowball English stems)" if stemmed else "bm25"
        lines.append(f"{what}: k1 {p['k1']:g}, b {p['b']:g}, avgdl {p['avgdl']:.1f}, {int(p['n_docs']):,} chunks; "
                     "a term adds  weight × idf × tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))")
    if explained.nlist is not None:
        probed = ", ".join(f"{c} ({n:,})" for c, n in zip(explained.probed, explained.list_sizes))
        lines.append(f"ivf: probed {len(explained.probed)} of {explained.nlist} lists, best first "
                     f"(chunks in each): {probed}")
    return lines


def _explain_hit(e) -> list[str]:
    from ragtui.core.textsafe import inline

    if e.mode in ("bm25doc", "bm25stem"):
        chunk = sum(t.contribution for t in e.terms)
        what = "stemmed BM25" if e.mode == "bm25stem" else "BM25"
        lines = [f"= document {what} {e.score - e.chunk_weight * chunk:.4f} + {e.chunk_weight:g} × chunk {what} "
                 f"{chunk:.4f} (the chunk's own terms below)"]
        for t in e.terms:
            lines.append(f"  {inline(t.term)!s:<16} {t.contribution:9.4f} = idf {t.idf:.4f} (df {t.df:,}), tf {t.tf}")
        return lines
    if e.mode == "bm25":
        lines = [f"= {' + '.join(f'{t.contribution:.4f}' for t in e.terms) or '0'}  (dl {e.terms[0].doc_len})"
                 if e.terms else "= 0"]
        for t in e.terms:
            weight = f"{t.query_weight} × " if t.query_weight != 1 else ""
            lines.append(f"  {inline(t.term)!s:<16} {t.contribution:9.4f} = {weight}idf {t.idf:.4f} (df {t.df:,}), "
                         f"tf {t.tf}")
        return lines
    if e.mode == "hybrid":
        parts = []
        for a in e.arms:
            where = f"rank {a.rank}, score {a.score:.4f}" if a.rank is not None else "not in its top candidates"
            parts.append(f"{a.arm} {where} → {a.added:+.4f}")
        return [f"{e.fusion}: " + "; ".join(parts) + f"  = {e.score:.4f}"]
    if e.mode == "ivf":
        return [f"cosine {e.cosine:.4f}, from list {e.ivf_list}"]
    if e.mode == "flat":
        return [f"cosine {e.cosine:.4f} (exact, every chunk scored)"]
    return [f"score {e.score:.4f}"]


def _run_many(args, request, searcher) -> int:
    """``--all`` / ``--index a,b``: the indexes ranked as one (core.search.multi), each hit naming its index.

    Hits are shown as a single index's are (source lines, a snippet around the
    words searched for), with the index each one came from.
    """
    from ragtui.core.search.kwic import salient, snippet, term_weights
    from ragtui.core.textsafe import inline, one_line

    result = app.run_search(searcher, request)
    for note in result.notes:
        print(f"note: {one_line(note, 300)}", file=sys.stderr)
    hits = list(zip(result.hits, result.indexes))
    # Where each hit is in its source: every index's files read through its own data (rows are per index).
    sources: dict[tuple[str, int], _Source] = {}
    for index_id, snapshot in result.snapshots.items():
        mine = [h for h, i in hits if i == index_id]
        if mine:
            sources.update({(index_id, row): src for row, src in _sources(snapshot.data, mine).items()})
    names = list(result.snapshots)
    if args.json:
        out = [{**row, "mode": request.mode, "query_ms": result.seconds * 1000} for row in app.cite_hits(result)]
        sys.stdout.write(json_text(out, indent=1) + "\n")
    else:
        width = max(40, shutil.get_terminal_size((80, 24)).columns)
        words = request.query.search_text
        weights = {i: salient(term_weights(r.data.bm25, words)) for i, r in result.snapshots.items()}
        pad = " " * INDENT
        for h, index_id in hits:
            print(f"{h.rank:>3}  {h.score:9.4f}  {inline(index_id)}  {sources[(index_id, h.row)].shown}  "
                  f"{inline(h.chunk_id)}")
            print(pad + snippet(h.text, weights[index_id], width - INDENT - 1).text)
        print(f"{len(hits)} result(s), {request.mode} over {len(names)} indexes ({', '.join(names)}), "
              f"merged as one index; cite a hit with `ragtui inspect --index INDEX CHUNK_ID`", file=sys.stderr)
    return 0 if hits else 1

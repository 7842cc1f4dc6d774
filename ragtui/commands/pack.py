"""``ragtui pack QUERY``: the ranked chunks for a query packed into a token budget, with source lines.

Exit codes: 0 a context was packed · 1 nothing found, or nothing fits the budget · 2 bad flags, no
usable index, an embedder that is not the index's · 3 an index that fails validation, an output
file that cannot be written.
"""

from __future__ import annotations

import os
import sys

from ragtui import app
from ragtui.commands.options import add_mode_option, add_query_options, add_ranking_options, request_of, settings_of
from ragtui.core.errors import StorageError
from ragtui.core.textsafe import json_text
from ragtui.request import MAX_K

__all__ = ["add_pack_options", "register", "run"]

DEFAULT_MODE = "hybrid"
DEFAULT_CANDIDATES = 50


def add_pack_options(p) -> None:
    """--budget, --mode, -k, --nprobe and the ranking options (pack and ask: the same request as search)."""
    from ragtui.core.answer.pack import DEFAULT_BUDGET

    p.add_argument("-b", "--budget", type=int, metavar="TOKENS", default=None,
                   help=f"tokens of context, counted with the index's tokenizer (default: {DEFAULT_BUDGET})")
    add_mode_option(p, DEFAULT_MODE)
    p.add_argument("-k", type=int, default=None,
                   help=f"ranked chunks considered for the budget, 1 to {MAX_K} (default: {DEFAULT_CANDIDATES})")
    p.add_argument("--nprobe", type=int, help="IVF lists to probe, 1 to the index's nlist")
    add_ranking_options(p)


def register(sub, common) -> None:
    p = sub.add_parser(
        "pack",
        help="pack the chunks for a query into a token budget, with [path:Lstart-Lend] labels",
        description="Search, then fill a token budget (counted with the index's own tokenizer) greedily by "
        "score per token; adjacent or overlapping chunks of a document become one snippet with the union "
        "line range; snippets are ordered by source and line. Prints the paste-ready Markdown form unless "
        "--json is given.",
    )
    p.add_argument("query")
    add_pack_options(p)
    add_query_options(p)
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the pack as JSON (snippets, tokens, fingerprint)")
    form.add_argument("--markdown", action="store_true", help="print the paste-ready Markdown form (the default)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the pack to FILE instead of stdout")
    common(p)
    p.set_defaults(func=run)


def budget_of(args, settings) -> int:
    from ragtui.core.answer.pack import DEFAULT_BUDGET, check_budget

    if args.budget is not None:
        return check_budget(args.budget)
    return check_budget(settings.llm.get("context_tokens", DEFAULT_BUDGET))


def run(args) -> int:
    settings = settings_of(args)
    # The request and the budget are checked before anything loads.
    request = request_of(args, settings, args.query, default_mode=DEFAULT_MODE, default_k=DEFAULT_CANDIDATES)
    budget = budget_of(args, settings)
    searcher = app.open_searcher(settings, request, embedders=True)  # the index's tokenizer counts the budget
    found = app.run_search(searcher, request)
    result = app.pack_result(found, budget)
    text = json_text(app.pack_json(found, result), indent=1) + "\n" if args.json else result.markdown()
    if args.output:
        write_output(args.output, text)
    else:
        sys.stdout.write(text)
    for note in (*found.notes, *result.notes):  # (in --json too, under "notes")
        print(f"ragtui: note: {note}", file=sys.stderr)
    print(f"{len(result.snippets)} snippet(s), {result.used}/{result.budget} tokens ({result.tokenizer}), "
          f"{result.candidates} candidate(s), {result.skipped} left out, {request.mode}, "
          f"{result.seconds * 1000:.1f} ms to pack", file=sys.stderr)
    return 0 if result.snippets else 1


def write_output(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (a new name beside it first, then renamed: no half-written file)."""
    tmp = f"{path}.ragtui-tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise StorageError(f"cannot write {path}: {e.strerror or e}") from None

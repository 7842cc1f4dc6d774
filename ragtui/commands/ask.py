"""``ragtui ask QUESTION``: an answer from the configured chat model, with every citation checked.

Exit codes: 0 every citation verified · 1 a citation failed the check (stale, not in the context,
unresolvable), the answer cites nothing, or nothing was found to answer from (``--allow-unverified``
makes the first two 0) · 2 bad flags, no ``[llm]`` configured, no usable index · 3 the chat server
failed (down, an error, no choices, an empty answer, a stream that broke off, no end within ``[llm] timeout``
or past ``max_tokens``: what arrived is printed, marked as cut) or the index is broken.
Nothing is written into the index; the HyDE cache lives under ``$XDG_CACHE_HOME/ragtui/hyde``.
"""

from __future__ import annotations

import sys

from ragtui import app
from ragtui.commands.options import request_of, settings_of
from ragtui.commands.pack import DEFAULT_CANDIDATES, DEFAULT_MODE, add_pack_options, budget_of
from ragtui.core.textsafe import json_text, neutralize

__all__ = ["register", "run"]

CUT_MARK = "[answer cut off here: it did not end]"
"""The line under an answer that arrived only in part (the error on stderr says why)."""
MARKS = {"verified": "ok", "stale": "STALE", "not-in-context": "NOT IN CONTEXT", "unresolvable": "UNRESOLVABLE"}


def register(sub, common) -> None:
    p = sub.add_parser(
        "ask",
        help="answer a question from the index with a chat model; every citation is checked",
        description="Retrieve and pack a context (as `ragtui pack`), ask the chat model of the [llm] settings "
        "to answer citing [path:Lstart-Lend] labels, then check each citation: verified (in the context, "
        "source fresh), stale, not-in-context or unresolvable.",
    )
    p.add_argument("question")
    add_pack_options(p)
    p.add_argument("--fast", action="store_true", help="exactly one chat call (no second call when the answer "
                   "cites nothing)")
    p.add_argument("--hyde", action="store_true", help="also search a hypothetical answer written by the model "
                   "(one more call; cached on disk by model and question)")
    p.add_argument("--json", action="store_true", help="print the answer, citations, stats and context as JSON")
    stream = p.add_mutually_exclusive_group()
    stream.add_argument("--stream", dest="stream", action="store_true", default=None,
                        help="stream the answer as it is written (default: when printing to a terminal)")
    stream.add_argument("--no-stream", dest="stream", action="store_false", help="print the answer when complete")
    p.add_argument("--allow-unverified", action="store_true",
                   help="exit 0 even when a citation fails the check or the answer cites nothing")
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from typing import cast

    from ragtui.core.answer import ask
    from ragtui.core.answer.llm import AnswerCut, ChatClient
    from ragtui.core.search.retriever import SearchParams

    if args.fast and args.hyde:
        from ragtui.core.errors import UsageError

        raise UsageError("--fast makes exactly one chat call, and --hyde needs a second: choose one")
    settings = settings_of(args)
    # A question is prose, not query syntax: its quotes, dashes and colons are searched as text.
    request = request_of(args, settings, args.question, default_mode=DEFAULT_MODE, default_k=DEFAULT_CANDIDATES,
                         literal=True)
    budget = budget_of(args, settings)
    client = ChatClient.from_settings(settings.llm)  # before the index: a missing [llm] costs nothing
    searcher = app.open_searcher(settings, request, embedders=True)
    if searcher.several:
        from ragtui.core.errors import UsageError

        raise UsageError("ask answers from one index: choose one with --index")
    snapshot = searcher.only.snapshot()  # one generation for the whole question: search, pack, check
    assert snapshot.embedder is not None  # opened with embedders=True
    stream = (sys.stdout.isatty() if args.stream is None else args.stream) and not args.json
    line: list[str] = []
    """The text streamed since the last line end (the current chat call's)."""

    def on_delta(piece: str) -> None:
        line.append(piece)
        sys.stdout.write(neutralize(piece))  # the model's text: no terminal escape reaches the screen
        sys.stdout.flush()

    def end_line() -> None:
        # The answer's line ends before anything goes to stderr: on a terminal both share the screen.
        if line:
            line.clear()
            sys.stdout.write("\n")
            sys.stdout.flush()

    def on_note(text: str) -> None:
        end_line()
        print(f"ragtui: note: {text}", file=sys.stderr)

    try:
        with client:
            result = ask(args.question, snapshot, snapshot.embedder.tokenizer, client, mode=request.mode,
                         k=request.k, budget=budget,
                         params=cast("SearchParams", app.request_params(request, snapshot.meta)),
                         fast=args.fast, hyde=args.hyde, on_delta=on_delta if stream else None, on_note=on_note)
    except AnswerCut as cut:
        if args.json:
            sys.stdout.write(json_text({"question": args.question, "answer": cut.text, "complete": False,
                                        "error": str(cut)}, indent=1) + "\n")
        else:
            if "".join(line) != cut.text:  # not on the screen yet (not streamed, or another call's)
                end_line()
                sys.stdout.write(neutralize(cut.text))
            sys.stdout.write(f"\n{CUT_MARK}\n")
        sys.stdout.flush()
        raise
    end_line()
    for note in result.pack.notes:
        print(f"ragtui: note: {note}", file=sys.stderr)
    for warning in result.warnings:
        print(f"ragtui: warning: {warning}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json_text(result.to_json(), indent=1) + "\n")
    else:
        if not stream:
            sys.stdout.write(neutralize(result.text) + "\n")
        sys.stdout.write("\n" + neutralize(citations_block(result)) + "\n")
        print(stats_block(result), file=sys.stderr)
    failed = [c for c in result.checks if not c.ok]
    if failed and not args.allow_unverified:
        print(f"ragtui: {len(failed)} of {len(result.checks)} citation(s) failed the check "
              "(--allow-unverified to exit 0 anyway)", file=sys.stderr)
    return 0 if result.all_verified or args.allow_unverified else 1


def citations_block(result) -> str:
    if not result.checks:
        return "Citations: none (the answer cites no source)"
    lines = ["Citations:"]
    for c in result.checks:
        where = f"source {c.source}" if c.source is not None else c.reason
        lines.append(f"  {MARKS[c.verdict]:<15} [{c.label}]  {c.verdict}: {where}")
    return "\n".join(lines)


def stats_block(result) -> str:
    s = result.stats()
    tokens_in = "?" if s["input_tokens"] is None else s["input_tokens"]
    tokens_out = "?" if s["output_tokens"] is None else s["output_tokens"]
    seconds = " · ".join(f"{name} {sec:.3f}s" for name, sec in s["seconds"].items())
    first = f" · first token {s['first_token_seconds']:.3f}s" if s["first_token_seconds"] is not None else ""
    usage = "" if s["usage_reported"] else " (the server reported no usage for some calls)"
    return (f"Stats: mode {s['mode']} · chat calls {s['chat_calls']} · tokens in {tokens_in} / out {tokens_out}"
            f"{usage} · context {s['context_tokens']}/{s['budget']} tokens\n"
            f"       seconds: {seconds}{first}")

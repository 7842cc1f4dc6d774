"""Hostile query syntax: every mode, through the API and the installed command.

``run_hostile_syntax`` sends queries built to break a parser or a filtered
search — 8,192 characters of quotes, dashes, ORs or backslashes, a thousand
OR-joined words, 36 one-letter prefixes, 64 phrases of words that are in every
chunk, filter values holding escape sequences, NUL, bidi controls or ``..``,
and seeded random text over the syntax's characters — to every mode. Each
answer must be results (finite scores, every hit passing the query's filters)
or one ``QueryError`` (exit 2, one line, a column inside the query when it
names one), or for a query of white space alone the one ``UsageError`` every
front end gives an empty query; at the command line: exit 0, 1 or 2, no traceback, nothing that
drives the terminal.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from pathlib import Path

from tests.helpers.cli import one_error_line as one_clear_line
from tests.reliability.cases import Case
from tests.reliability.helpers_bombs import INDEX_ID, build_pristine, run_cli
from tests.reliability.helpers_terminal import unsafe

PIECES = ['"', "\\", "-", "*", ":", "OR", " OR ", "path:", "ext:", "lang:", "pth:", " ", "cats", "dogs", "a",
          "é", "\0", "\x1b[2J", "\u202e", "..", "/", "\t", "\n", "md", "py", "\udce9"]

FIXED = {
    "8,192 quotes": '"' * 8192,
    "8,191 quotes": '"' * 8191,
    "8,192 dashes": "-" * 8192,
    "ORs only": ("OR " * 2731)[:8192],
    "8,192 backslashes": "\\" * 8192,
    "1,000 OR-joined words": " OR ".join(["cats"] * 1000)[:8192],
    "65 exclusions": "cats " + " ".join(f"-w{i}" for i in range(65)),
    "36 one-letter prefixes": " ".join(f"{c}*" for c in "abcdefghijklmnopqrstuvwxyz0123456789"),
    "64 phrases of common words": " ".join(['"are and"'] * 64),
    "escape sequence in a path": "cats path:\x1b[2J\x1b]0;PWNED\x07",
    "NUL in an extension": "cats ext:\0md",
    "bidi control in a quoted path": 'cats path:"\u202edm.stac"',
    "escape sequence as a language": "cats lang:\x1b[31m",
    "escape sequence as a filter name": "cats \x1b[2Jpath:x",
    "path outside the folder": "cats path:../../../etc/passwd",
    "anchored traversal": "cats path:/../..",
    "unclosed quote then 4,000 words": '"' + "cats " * 1600,
    "prefix of a surrogate-free rare script": "\U00010400* cats",
}


def _queries(n_random: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    out = dict(FIXED)
    for i in range(n_random):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 24)))
        out[f"random #{i}"] = text.replace("\udce9", "é")  # not-UTF-8 input has its own rows (hostile queries)
    return out


SYNTAX_CASES = {"ci": (60, 2), "full": (200, 6)}
"""(random queries, how many of the random ones also go through the CLI)."""


def syntax_cases(size: str = "ci") -> list[Case]:
    """Fixed and random hostile queries x every mode through the API; the fixed ones and a few random
    ones through the installed command in bm25 and flat mode: ``API-random-17-hybrid``."""
    labels = [label for label, _ in hostile_syntax_checks(None, *SYNTAX_CASES[size])]
    return [Case(_slug(label), functools.partial(_syntax_case, size, label)) for label in labels]


def _slug(label: str) -> str:
    out = "".join(c if c.isascii() and c.isalnum() else "-" for c in label).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _syntax_case(size: str, label: str, _tmp: Path) -> None:
    from tests.reliability.cases import once

    checks = once(("hostile-syntax", size), lambda base: hostile_syntax_checks(base, *SYNTAX_CASES[size]))
    dict(checks)[label]()


def hostile_syntax_checks(base: Path | None, n_random: int = 200, cli_cases: int = 6, seed: int = 17,
                          timeout: float = 120.0) -> list[tuple[str, Callable[[], None]]]:
    """(label, check) of every case; ``base`` None: the labels alone (nothing is built)."""
    from ragtui.core.errors import QueryError, UsageError
    from ragtui.core.search.query import parse_query
    from ragtui.core.search.query_plan import path_matches
    from ragtui.core.search.retriever import EMPTY_QUERY, MODES, Retriever
    from tests.reliability.helpers import run_sync
    from tests.unit.fakes import HashEmbedder

    checks: list[tuple[str, Callable[[], None]]] = []
    if base is not None:
        folder, art = build_pristine(base)
        api_art = base / "api-art"
        run_sync(folder, api_art)
        retriever = Retriever.open(api_art / "rag" / INDEX_ID, embedder=HashEmbedder())
    queries = _queries(n_random, seed)

    for label, query in queries.items():
        for mode in MODES:
            def api_case(query=query, mode=mode):
                try:
                    hits = retriever.search(query, mode=mode, k=5)
                except UsageError as e:
                    if not isinstance(e, QueryError):  # only a blank query is refused before its syntax is read
                        assert not query.strip() and str(e) == EMPTY_QUERY, (query, str(e))
                        return
                    message = str(e)
                    assert e.exit_code == 2 and "\n" not in message and message, message
                    assert e.column is None or 1 <= e.column <= len(query) + 1, (e.column, len(query))
                    return
                assert all(math.isfinite(h.score) for h in hits)
                parsed = parse_query(query)
                for clause in parsed.filters:
                    for h in hits:
                        passes = any(path_matches(f, h.doc_id) for f in clause.items)
                        assert passes != clause.excluded, (h.doc_id, clause)
            checks.append((f"API {label}, {mode}", api_case))

    for label, query in list(queries.items())[: len(FIXED) + cli_cases]:
        if "\0" in query:
            continue  # an argument cannot hold NUL; the API rows cover it
        for mode in ("bm25", "flat"):
            def cli_case(query=query, mode=mode):
                code, out, err = run_cli("search", query, "--mode", mode, "--artifacts", str(art), timeout=timeout)
                assert code in (0, 1, 2), f"exit {code}: {err[-300:]!r}"
                assert "Traceback" not in err and "internal error" not in err, err[-300:]
                if code == 2:
                    assert one_clear_line(err), err
                assert unsafe(out + err) == [], f"raw control characters reached the terminal: {unsafe(out + err)}"
            checks.append((f"CLI {label}, {mode}", cli_case))
    return checks

"""``ragtui inspect``: show where chunks came from, open them in an editor, check an answer's citations.

Exit codes: 0 every reference resolved (with ``--check``: and every one is
fresh) · 1 a reference names no chunk (with ``--check``: or one is not
fresh) · 2 a malformed reference, one into another index, bad flags, an
index with no recorded folder and no ``--root`` · 3 an index that fails
validation or a doc_id that points outside its ingested folder. Sources are
read only inside the folder ingest recorded (spec/citations.md), never from
the current directory. With
several references each is reported on its own and the highest code wins.
The embedder is never loaded: inspecting needs no embeddings.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragtui.app import list_indexes, resolve_index
from ragtui.commands.options import settings_of
from ragtui.core.citations import FRESH, Citation, Resolver, parse_refs, split_ref
from ragtui.core.errors import NotFoundError, RagtuiError, UsageError
from ragtui.core.index.records import fingerprint
from ragtui.core.textsafe import json_text, neutralize

__all__ = ["register", "run"]


def register(sub, common) -> None:
    p = sub.add_parser(
        "inspect",
        help="show a chunk's source lines and freshness; check an answer's citations",
        description="Show where chunks came from: the chunk, its document, path:start-end in the current "
        "source file, whether it is still fresh, and the source lines around it. A REF is a chunk_id "
        "(docs/a.md#2), the short form INDEX#N (row N of that index: positional, so it names another chunk "
        "once documents are added or removed before it; cite the chunk_id to pin one), a citation string "
        "'[docs/a.md#2][docs/b.md#0]', a JSON list, or - to read any of those from stdin.",
    )
    p.add_argument("refs", nargs="+", metavar="REF", help="references to resolve (- reads them from stdin)")
    p.add_argument("--json", action="store_true", help="print one JSON object per reference (JSON Lines)")
    p.add_argument("--context", type=int, default=3, metavar="N",
                   help="source lines shown around the chunk (default 3)")
    p.add_argument("--check", action="store_true",
                   help="verify citations: exit 0 only when every one resolves and is fresh; one report line each")
    p.add_argument("--text", action="append", metavar="TEXT",
                   help="with --check: the text the citation stood for (as search printed it; once per REF, in "
                   "order); a chunk that now holds other text fails the check as 'replaced'")
    p.add_argument("--fingerprint", action="append", metavar="SHA256",
                   help="with --check: the fingerprint the citation stood for (once per REF, in order), as --text")
    p.add_argument("--open", action="store_true", help="open $VISUAL/$EDITOR at the first reference's first line")
    p.add_argument("--root", metavar="DIR", help="the folder that holds the ingested folder "
                   "(default: where ingest recorded it; required when nothing is recorded)")
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.context < 0:
        raise UsageError(f"--context must be 0 or more (got {args.context})")
    refs = _collect_refs(args.refs)
    if not refs:
        raise UsageError("no references given: pass chunk_ids like docs/a.md#2, or - to read them from stdin")
    root = None
    if args.root is not None:
        root = Path(args.root).expanduser().absolute()
        if not root.is_dir():
            raise UsageError(f"--root {args.root} is not a folder: give the folder that holds the ingested folder")
    expected = _expectations(args, refs)
    outcomes = _resolve_all(settings_of(args), refs, root)
    if args.open:
        return _open(outcomes)
    if args.check:
        return _check(outcomes, args.json, expected)
    code = 0
    out = _Output(sys.stdout)
    said: set[str] = set()
    for ref, result, resolver in outcomes:
        if isinstance(result, RagtuiError):
            code = max(code, result.exit_code)
            if args.json:
                out.json_line({"ref": ref, "status": _verdict(result), "error": str(result), "exit_code": result.exit_code})
            if str(result) not in said:  # an index that cannot be opened fails every reference into it alike
                said.add(str(result))
                _error_line(result)
        elif args.json:
            out.json_line(result.to_json())
        else:
            assert resolver is not None  # a resolved citation comes with its resolver
            out.citation(result, resolver.source_text(result), args.context)
    return code


# -- references and indexes --------------------------------------------------------------


MAX_STDIN_BYTES = 16 << 20
"""The most ``inspect -`` reads from stdin (16 MiB: far more than any answer's citations)."""


def _read_stdin() -> str:
    """stdin as text, read within ``MAX_STDIN_BYTES``: a stream that never ends is refused, not held."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is not None:
        data = stream.read(MAX_STDIN_BYTES + 1)
    else:
        data = sys.stdin.read(MAX_STDIN_BYTES + 1).encode("utf-8", errors="surrogateescape")
    if len(data) > MAX_STDIN_BYTES:
        raise UsageError(f"stdin holds more than {MAX_STDIN_BYTES >> 20} MiB: pass the references as arguments, "
                         "or pipe only the answer or list that holds them")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"stdin is not UTF-8 text (byte {e.start}): pipe the references as text") from None


def _collect_refs(items: list[str]) -> list[str]:
    """Each argument is one reference, unless it is '-' (stdin) or holds a citation string or JSON list."""
    refs: list[str] = []
    for item in items:
        if item == "-":
            refs.extend(parse_refs(_read_stdin()))
        elif "[" in item or "\n" in item:
            refs.extend(parse_refs(item))
        else:
            refs.append(item.strip())
    return refs


def _expectations(args, refs: list[str]) -> list[tuple[str | None, str | None]]:
    """(fingerprint, text) the caller expects of each reference (None: no expectation); checked against REFs."""
    texts, prints = args.text or [], args.fingerprint or []
    if (texts or prints) and not args.check:
        raise UsageError("--text and --fingerprint say what a citation stood for: use them with --check")
    for flag, given in (("--text", texts), ("--fingerprint", prints)):
        if given and len(given) != len(refs):
            raise UsageError(f"{flag} was given {len(given)} time(s) for {len(refs)} reference(s): give it once "
                             "per reference, in the same order")
    for fp in prints:
        if len(fp) != 64 or any(c not in "0123456789abcdef" for c in fp.lower()):
            raise UsageError(f"--fingerprint {fp!r} is not a fingerprint (64 hex digits, the SHA-256 of the chunk's text)")
    return [(prints[i].lower() if prints else None, texts[i] if texts else None) for i in range(len(refs))]


def _holds_expected(c: Citation, fp: str | None, text: str | None) -> bool | None:
    """Whether the chunk still holds what the caller expected (None: nothing expected)."""
    if fp is None and text is None:
        return None
    if fp is not None and c.record.fingerprint != fp:
        return False
    if text is not None and c.record.fingerprint != fingerprint(text):
        return " ".join(text.split()) == " ".join(c.record.text.split())  # search's output may re-space it
    return True


def _index_for(ref: str, settings, names: list[str]) -> str:
    """The index a reference points into; raises for a malformed one or one into another index."""
    head, _n = split_ref(ref)
    chosen = settings.index  # --index, RAGTUI_INDEX or ragtui.toml
    if "/" not in head and head in names:  # the short form INDEX#N (doc_ids always hold a '/')
        if chosen and chosen != head and chosen in names:
            raise UsageError(
                f"{ref!r} points into index {head!r}, but the index in use is {chosen!r} "
                f"(--index or RAGTUI_INDEX): cite {chosen}#<n>, or drop --index"
            )
        return chosen or head  # a chosen index that does not exist fails when opened, with its own message
    if chosen or len(names) == 1:
        return chosen or names[0]
    first = head.split("/", 1)[0]
    if first in names:
        return first  # several indexes: a doc_id starts with the name of the folder ingested
    return resolve_index(settings).name  # raises: no index, or several and none chosen


Outcome = tuple[str, Citation | RagtuiError, Resolver | None]
"""(reference, its Citation or the error it met, the Resolver that read its source)."""


def _resolve_all(settings, refs: list[str], root: Path | None) -> list[Outcome]:
    """One outcome per reference, in order; each index is opened (and validated) once."""
    from ragtui.core.index.index_format import read_index
    from ragtui.core.ingest.publish import index_dir, rag_root

    names = list_indexes(settings)
    opened: dict[str, Resolver | RagtuiError] = {}

    def resolver_for(index_id: str) -> Resolver | RagtuiError:
        if index_id not in opened:
            try:
                # full=True: inspect checks every line of docs.jsonl, as info does.
                cache = rag_root(settings.artifacts) / ".cache"
                path = index_dir(settings.artifacts, index_id)
                if not os.path.lexists(path):  # NoIndex: names the indexes that do exist
                    resolve_index(replace(settings, index=index_id), note=None)
                data = read_index(path, cache_dir=cache)
                opened[index_id] = Resolver(data, root)  # root None: the folder ingest recorded (or refuse)
            except RagtuiError as e:
                opened[index_id] = e
        return opened[index_id]

    outcomes: list[Outcome] = []
    for ref in refs:
        try:
            resolver = resolver_for(_index_for(ref, settings, names))
            if isinstance(resolver, RagtuiError):
                outcomes.append((ref, resolver, None))
            else:
                outcomes.append((ref, resolver.resolve(ref), resolver))
        except RagtuiError as e:
            outcomes.append((ref, e, None))
    return outcomes


def _verdict(error: RagtuiError) -> str:
    return "unknown" if isinstance(error, NotFoundError) else "error"


def _error_line(error: RagtuiError) -> None:
    print(f"ragtui: error: {neutralize(str(error))}", file=sys.stderr)


# -- --check ---------------------------------------------------------------------------------


REPLACED = "replaced"
"""--check's verdict for a chunk that no longer holds what --text/--fingerprint say the citation stood for."""


def _check(outcomes, as_json: bool, expected: list[tuple[str | None, str | None]]) -> int:
    code = 0
    counts: dict[str, int] = {}
    out = _Output(sys.stdout)
    for (ref, result, _resolver), (fp, text) in zip(outcomes, expected, strict=True):
        if isinstance(result, RagtuiError):
            verdict = _verdict(result)
            code = max(code, result.exit_code)
            detail = str(result)
            record = {"ref": ref, "ok": False, "status": verdict, "error": detail, "exit_code": result.exit_code}
        else:
            verdict = result.status
            holds = _holds_expected(result, fp, text)
            detail = _where(result)
            if holds is False:
                verdict = REPLACED
                detail = (f"{'row ' + str(result.row) if result.positional else ref} now holds {result.chunk_id} "
                          f"(fingerprint {result.record.fingerprint[:12]}…), not the text cited")
            elif holds is None and result.positional:
                detail += f" (positional: cite {result.chunk_id} to pin the chunk, or pass --text/--fingerprint)"
            if verdict != FRESH:
                code = max(code, 1)  # a stale citation fails the check like an unknown one
            record = {**result.to_json(), "ok": verdict == FRESH, "status": verdict, "holds_expected": holds}
        counts[verdict] = counts.get(verdict, 0) + 1
        if as_json:
            out.json_line(record)
        else:
            out.plain(f"{verdict:<8} {neutralize(ref)}  {neutralize(detail)}")
    if not as_json:
        order = ("fresh", "moved", "changed", "missing", REPLACED, "unknown", "error")
        summary = ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k))
        print(f"{len(outcomes)} citation(s): {summary}", file=sys.stderr)
    return code


def _where(c: Citation) -> str:
    if c.path is None:
        return f"{c.doc_id} cannot be located safely inside its folder (a link out of it is never followed)"
    if c.status == "missing":
        return f"{c.path} is gone"
    if c.status == "changed":
        return f"{c.path} no longer contains the chunk's text"
    span = f"{c.path} {c.place}" if c.page is not None else f"{c.path}:{c.start_line}-{c.end_line}"
    return span if c.status == FRESH else f"{span} (found out of order: the document was rearranged)"


# -- --open ----------------------------------------------------------------------------------


def _open(outcomes) -> int:
    _ref, first, _resolver = outcomes[0]
    if isinstance(first, RagtuiError):
        raise first
    if first.path is None or first.status == "missing":
        raise NotFoundError(f"cannot open {first.chunk_id!r}: {neutralize(_where(first))}")
    from ragtui.editor import editor_command

    line = first.start_line or 1
    if not first.located:
        print(f"ragtui: note: {neutralize(_where(first))}; opening at line 1", file=sys.stderr)
    argv = editor_command(first.path, line)  # the TUI's `e` runs the same command
    try:
        subprocess.run(argv, check=False)
    except OSError as e:
        raise UsageError(
            f"cannot run the editor {argv[0]!r}: {e.strerror}; set $EDITOR to an editor on PATH"
        ) from None
    return 0


# -- output ----------------------------------------------------------------------------------



class _Output:
    """Human output: rich (colour, syntax, OSC 8 links) on a terminal, plain lines when piped."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.tty = stream.isatty() and os.environ.get("TERM") != "dumb"
        self._console: Any = None  # a rich Console once a citation is printed in colour

    def json_line(self, obj: dict) -> None:
        self.stream.write(json_text(obj) + "\n")

    def plain(self, line: str) -> None:
        self.stream.write(line + "\n")

    def citation(self, c: Citation, source: str | None, context: int) -> None:
        lines, first_line = _context_lines(c, source, context)
        if self.tty:
            self._rich(c, lines, first_line)
        else:
            self._plain(c, lines, first_line)

    def _fields(self, c: Citation) -> list[tuple[str, str]]:
        r = c.record
        where = "(cannot be located safely)" if c.path is None else str(c.path)
        if c.located:
            where += f" {c.place}" if c.page is not None else f":{c.start_line}-{c.end_line}"
        status = c.status
        if c.status != FRESH:
            status += f": {_where(c)}"
        fields = [
            ("index", f"{c.index_id} (chunk {c.row})"),
            ("document", r.doc_id),
            ("source", where),
            ("status", status),
            ("n_tokens", str(r.n_tokens)),
            ("fingerprint", r.fingerprint),
        ]
        if c.positional:
            fields.insert(1, ("reference", f"{c.ref} is positional (row {c.row} of the index today; it names "
                                           f"another chunk once documents are added or removed): cite {c.chunk_id}"))
        return fields

    def _plain(self, c: Citation, lines: list[str] | None, first_line: int) -> None:
        w = self.stream.write
        w(neutralize(c.chunk_id) + "\n")
        for key, value in self._fields(c):
            w(f"  {key:<12} {neutralize(value)}\n")
        if lines is None:
            w("  text (as indexed):\n")
            for line in neutralize(c.record.text).split("\n"):
                w(f"    {line}\n")
        else:
            assert c.start_line is not None and c.end_line is not None  # lines are given for located chunks
            width = len(str(first_line + len(lines) - 1))
            for i, line in enumerate(neutralize("\n".join(lines)).split("\n")):
                n = first_line + i
                mark = ">" if c.start_line <= n <= c.end_line else " "
                w(f"{mark} {n:>{width}} | {line}\n")
        w("\n")

    def _rich(self, c: Citation, lines: list[str] | None, first_line: int) -> None:
        from rich.style import Style
        from rich.syntax import Syntax
        from rich.text import Text

        if self._console is None:
            from ragtui.terminal import console

            self._console = console(file=self.stream, soft_wrap=False)
        con = self._console
        colour = {"fresh": "green", "moved": "yellow"}.get(c.status, "red")
        con.print(Text(neutralize(c.chunk_id), style="bold"))
        for key, value in self._fields(c):
            style: str | Style = ""
            if key == "source" and c.path is not None:
                style = Style(link=c.path.as_uri(), underline=True)  # OSC 8: a click opens the file
            elif key == "status":
                style = colour
            con.print(Text.assemble((f"  {key:<12} ", "dim"), (neutralize(value), style)))
        if lines is None:
            con.print(Text("  text (as indexed):", style="dim"))
            con.print(Text(neutralize(c.record.text)))
        else:
            assert c.start_line is not None and c.end_line is not None  # lines are given for located chunks
            code = neutralize("\n".join(lines))
            lexer = Syntax.guess_lexer(str(c.path), code)
            con.print(Syntax(code, lexer, theme="ansi_dark", line_numbers=True, start_line=first_line,
                             highlight_lines=set(range(c.start_line, c.end_line + 1)), word_wrap=False,
                             background_color="default"))
        con.print()


def _context_lines(c: Citation, source: str | None, context: int) -> tuple[list[str] | None, int]:
    """The source lines from ``context`` before the chunk to ``context`` after it (None when not located)."""
    if not c.located or source is None or c.start_line is None or c.end_line is None:
        return None, 0
    all_lines = source.split("\n")
    first = max(1, c.start_line - context)
    last = min(len(all_lines), c.end_line + context)
    return [line.removesuffix("\r") for line in all_lines[first - 1 : last]], first

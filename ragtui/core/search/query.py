"""The query language of ``Retriever.search`` and ``ragtui search``: parse text into a ``ParsedQuery``.

spec/query-syntax.md is the user's page; this module is its one implementation.
Pure Python (no numpy): ``ragtui search`` parses before it loads anything, so
a malformed query costs nothing. Binding a parsed query to an index (prefix
expansion, filters, phrase checks) is ``query_plan``.

What callers may rely on:

- ``parse_query(text)`` returns a ``ParsedQuery`` for any ``str`` and raises
  nothing: only the known filters are filters, and text that cannot be read
  as syntax is plain text, with a note saying why (``ParsedQuery.notes``).
- ``parse_query(text, strict=True)`` returns a ``ParsedQuery`` or raises
  ``QueryError`` (exit 2) whose message names the 1-based column of the
  problem; it raises nothing else, for any ``str``.
- A query made only of plain words (no quote, filter, ``-word``, ``OR``,
  ``word*`` or escape) is ``plain``: it is searched as the original text,
  exactly as before the syntax existed.
- ``ParsedQuery.canonical()`` is query text that parses back to the same
  clauses, so ``describe()`` of the re-parsed query equals ``describe()``.

Over 500 lines on purpose: the scanner, the clause types and ``canonical()``
are one grammar, and ``canonical()`` must invert ``parse_query``; that stays
true most easily when both are read on the same page.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from ragtui.core.errors import QueryError
from ragtui.core.index.analyzer import TERM_PATTERN, analyze

__all__ = [
    "FILTERS",
    "LANGUAGES",
    "MAX_SYNTAX_ITEMS",
    "Clause",
    "Filter",
    "ParsedQuery",
    "Phrase",
    "Prefix",
    "Word",
    "literal",
    "parse_query",
]

MAX_SYNTAX_ITEMS = 64
"""A query holds at most this many phrases, prefixes, filters, excluded items and OR-joined items (plain words
are not counted): each is a condition evaluated over every row of the index."""

FILTERS = ("path", "ext", "lang", "sym")
"""The filter names, in the order ``describe`` lists them. ``sym:`` tests a chunk's symbols (the definitions it
is in or holds, ``core.search.symbols``); the others the document's path."""

ESCAPABLE = frozenset('"\\-*:')
"""The characters a backslash makes literal; before any other character a backslash is itself literal."""

LANGUAGES: dict[str, tuple[str, ...]] = {
    "asciidoc": ("adoc", "asciidoc", "asc"),
    "c": ("c", "h"),
    "cpp": ("cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "h"),
    "csharp": ("cs",),
    "css": ("css", "scss", "sass", "less"),
    "d2": ("d2",),
    "go": ("go",),
    "haskell": ("hs", "lhs"),
    "html": ("html", "htm", "xhtml"),
    "java": ("java",),
    "javascript": ("js", "mjs", "cjs", "jsx"),
    "json": ("json", "jsonl", "ndjson"),
    "julia": ("jl",),
    "kotlin": ("kt", "kts"),
    "latex": ("tex", "sty", "cls", "bib"),
    "lua": ("lua",),
    "markdown": ("md", "markdown", "mdx", "mkd"),
    "ocaml": ("ml", "mli"),
    "org": ("org",),
    "perl": ("pl", "pm"),
    "php": ("php",),
    "python": ("py", "pyi", "pyw"),
    "r": ("r", "rmd"),
    "rst": ("rst",),
    "ruby": ("rb",),
    "rust": ("rs",),
    "scala": ("scala", "sc"),
    "shell": ("sh", "bash", "zsh", "fish", "ksh"),
    "sql": ("sql",),
    "swift": ("swift",),
    "text": ("txt", "text"),
    "toml": ("toml",),
    "typescript": ("ts", "tsx", "mts", "cts"),
    "xml": ("xml", "xsd", "xsl", "svg"),
    "yaml": ("yaml", "yml"),
}
"""``lang:NAME`` keeps documents whose file extension (the text after the last dot of the file name,
any case) is one of these. ``.h`` counts as both C and C++."""

LANGUAGE_ALIASES = {
    "adoc": "asciidoc", "c++": "cpp", "cs": "csharp", "golang": "go", "js": "javascript", "md": "markdown",
    "py": "python", "rb": "ruby", "rs": "rust", "restructuredtext": "rst", "sh": "shell", "bash": "shell",
    "tex": "latex", "ts": "typescript", "txt": "text", "yml": "yaml",
}
"""Other names ``lang:`` accepts for a language."""

_FILTER_HEAD = re.compile(r"([A-Za-z]+):")
_SPACE = re.compile(r"\s+")


# -- the parsed query ------------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """A plain word: ``text`` as typed (escapes removed), ``terms`` its analyzer terms (may be empty)."""

    text: str
    terms: tuple[str, ...]
    column: int = field(default=0, compare=False)

    def canonical(self) -> str:
        return _escape_word(self.text)

    def describe(self) -> str:
        return self.text


@dataclass(frozen=True)
class Prefix:
    """``stem*``: every index term that starts with ``term`` (the stem's one analyzer term)."""

    stem: str
    term: str
    column: int = field(default=0, compare=False)

    def canonical(self) -> str:
        return _escape_word(self.stem) + "*"

    def describe(self) -> str:
        return f"{self.term}*"


@dataclass(frozen=True)
class Phrase:
    """``"text"``: its ``terms`` must occur consecutively in a chunk's terms."""

    text: str
    terms: tuple[str, ...]
    column: int = field(default=0, compare=False)

    def canonical(self) -> str:
        return _quote(self.text)

    def describe(self) -> str:
        return '"' + " ".join(self.terms) + '"'


@dataclass(frozen=True)
class Filter:
    """``name:value``: a condition on the chunk's document path, or (``sym``) on its symbols (``value``
    normalised: see ``parse_query``)."""

    name: str
    value: str
    column: int = field(default=0, compare=False)

    def canonical(self) -> str:
        needs_quotes = not self.value or any(c.isspace() or c == '"' for c in self.value)
        return f"{self.name}:" + (_quote(self.value) if needs_quotes else _escape_word(self.value))

    def describe(self) -> str:
        if self.name == "lang":
            return f"lang:{self.value} (.{', .'.join(LANGUAGES[self.value])})"
        return self.canonical()


Item = Word | Prefix | Phrase | Filter


@dataclass(frozen=True)
class Clause:
    """One item, or several joined by ``OR``; ``excluded`` for ``-item`` (never with OR).

    A clause is a *filter* clause when its items are filters, a *text* clause otherwise (OR never mixes them).
    """

    items: tuple[Item, ...]
    excluded: bool = False
    column: int = field(default=0, compare=False)

    @property
    def is_filter(self) -> bool:
        return isinstance(self.items[0], Filter)

    @property
    def required(self) -> bool:
        """Whether a chunk must match this clause: a phrase, an OR, or any filter (an exclusion must not match)."""
        return not self.excluded and (len(self.items) > 1 or isinstance(self.items[0], Phrase | Filter))

    def canonical(self) -> str:
        return ("-" if self.excluded else "") + " OR ".join(item.canonical() for item in self.items)


@dataclass(frozen=True)
class ParsedQuery:
    """A query as parsed: the original ``text`` and its ``clauses`` in order.

    ``plain`` is True when the text used no syntax at all; such a query is
    searched as ``text`` itself, exactly as ragtui searched before the syntax.
    """

    text: str
    clauses: tuple[Clause, ...]
    plain: bool
    notes: tuple[str, ...] = field(default=(), compare=False)
    """What a user should know about how the text was read: a query that could not be read as syntax and
    is searched as plain text instead, a ``name:`` that looks like a mistyped filter (lenient parsing)."""

    @property
    def filters(self) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if c.is_filter)

    @property
    def positive_items(self) -> tuple[Word | Prefix | Phrase, ...]:
        """The text items that are searched for (not excluded), in order."""
        out: list[Word | Prefix | Phrase] = []
        for clause in self.clauses:
            if not clause.excluded and not clause.is_filter:
                out.extend(i for i in clause.items if not isinstance(i, Filter))
        return tuple(out)

    @property
    def search_text(self) -> str:
        """The text the vector modes embed: the original text when ``plain``, else the searched words
        (phrases without quotes, prefixes as their stem), excluded items and filters left out."""
        if self.plain:
            return self.text
        parts: list[str] = []
        for item in self.positive_items:
            parts.append(item.stem if isinstance(item, Prefix) else item.text)
        return " ".join(parts)

    def canonical(self) -> str:
        """Query text that parses back to these clauses (one space between clauses)."""
        if self.plain:
            return self.text
        return " ".join(c.canonical() for c in self.clauses)

    def describe(self, expansions: dict[str, tuple[str, ...]] | None = None) -> str:
        """What the query asks for: the ranked words, then what a chunk must and must not contain, then
        the filters, one line each (no index needed). Plain text reads as its words.

        ``expansions`` (a prefix term -> the index terms scored for it, as a
        ``QueryPlan`` finds them) adds the expansions to the prefix lines.
        """
        ranked: list[str] = []
        required: list[str] = []
        excluded: list[str] = []
        filters: list[str] = []
        for clause in self.clauses:
            parts = []
            for item in clause.items:
                text = item.describe()
                if isinstance(item, Prefix) and expansions is not None:
                    found = expansions.get(item.term, ())
                    text += f" ({', '.join(found)})" if found else " (no index term)"
                parts.append(text)
            joined = " OR ".join(parts)
            if clause.is_filter:
                filters.append(("filter out: " if clause.excluded else "filter: ") + joined)
            elif clause.excluded:
                excluded.append(f"must not contain: {joined}")
            elif clause.required:
                required.append(f"must contain: {joined}")
            else:
                ranked.append(joined)
        head = "ranked by: " + (" ".join(ranked) if ranked else "(no word)")
        return "\n".join([head, *required, *excluded, *filters])


def literal(text: str) -> ParsedQuery:
    """``text`` searched as plain text whatever it holds (quotes, colons, dashes are ordinary characters)."""
    return ParsedQuery(text, (), True)


# -- parsing ---------------------------------------------------------------------------


def _error(column: int, problem: str, hint: str = "") -> QueryError:
    error = QueryError(f"query column {column}: {problem}" + (f"; {hint}" if hint else ""))
    error.column = column
    return error


def _is_term_char(ch: str) -> bool:
    return bool(TERM_PATTERN.fullmatch(ch))


@dataclass
class _Scanned:
    """One token before grouping: an item or the OR operator."""

    column: int
    item: Item | None = None
    excluded: bool = False
    syntax: bool = False  # whether reading it used any syntax (a quote, an escape, a prefix star, a filter)


class _Scanner:
    def __init__(self, text: str, strict: bool = True) -> None:
        self.s = text
        self.pos = 0
        self.strict = strict
        self.notes: list[str] = []

    def tokens(self) -> list[_Scanned]:
        s = self.s
        out: list[_Scanned] = []
        n = len(s)
        while True:
            m = _SPACE.match(s, self.pos)
            if m:
                self.pos = m.end()
            if self.pos >= n:
                return out
            column = self.pos + 1
            if s.startswith("OR", self.pos) and (self.pos + 2 == n or s[self.pos + 2].isspace()):
                out.append(_Scanned(column))
                self.pos += 2
                continue
            excluded = False
            if s[self.pos] == "-":
                nxt = s[self.pos + 1] if self.pos + 1 < n else ""
                if not nxt or nxt.isspace():
                    raise _error(column, "a lone '-'", "write -word to leave out chunks that contain word, "
                                 "or \\- to search for the character")
                if _is_term_char(nxt) or nxt in '"\\':
                    excluded = True
                    self.pos += 1
            token = self.atom(column)
            token.excluded = excluded
            token.syntax = token.syntax or excluded
            out.append(token)

    def atom(self, column: int) -> _Scanned:
        s = self.s
        if s[self.pos] == '"':
            text = self.quoted()
            terms = tuple(analyze(text))
            if not terms:
                raise _error(column, "the phrase has no letters or digits to match")
            return _Scanned(column, Phrase(text, terms, column), syntax=True)
        head = _FILTER_HEAD.match(s, self.pos)
        if head and (self.strict or head.group(1) in FILTERS):
            return self.filter(column, head)
        if head:
            close = difflib.get_close_matches(head.group(1).lower(), FILTERS, n=1, cutoff=0.75)
            if close:
                self.notes.append(f"{head.group(1)}: is not a filter and was searched as text "
                                  f"(did you mean {close[0]}:?)")
        text, star, escaped = self.word()
        if star:
            stem_terms = analyze(text)
            if len(stem_terms) != 1 or not TERM_PATTERN.fullmatch(text):
                raise _error(column, f"a prefix must be one word of letters, digits or _ before '*' (got {text!r})",
                             "escape the star as \\* to search for the text")
            return _Scanned(column, Prefix(text, stem_terms[0], column), syntax=True)
        return _Scanned(column, Word(text, tuple(analyze(text)), column), syntax=escaped)

    def quoted(self) -> str:
        """The text of a quoted string starting at ``pos`` (the opening quote); ``pos`` moves past it."""
        s, start = self.s, self.pos
        out = []
        i = start + 1
        n = len(s)
        while i < n:
            ch = s[i]
            if ch == "\\" and i + 1 < n and s[i + 1] in '"\\':
                out.append(s[i + 1])
                i += 2
                continue
            if ch == '"':
                if i + 1 < n and not s[i + 1].isspace():
                    raise _error(i + 2, "text right after a closing quote", "put a space after the quote")
                self.pos = i + 1
                return "".join(out)
            out.append(ch)
            i += 1
        raise _error(start + 1, "this quote is never closed", 'close it with ", or write \\" to search for a quote')

    def word(self) -> tuple[str, bool, bool]:
        """(the word's text with escapes removed, whether it ends in a prefix star, whether it used an escape)."""
        s = self.s
        n = len(s)
        out: list[str] = []
        escaped = False
        star = False
        i = self.pos
        while i < n and not s[i].isspace():
            ch = s[i]
            if ch == "\\" and i + 1 < n and s[i + 1] in ESCAPABLE:
                out.append(s[i + 1])
                escaped = True
                i += 2
                continue
            if ch == '"':
                raise _error(i + 1, "a quote inside a word",
                             'put a space before the quote to start a phrase, or write \\" to search for it')
            # None of the escapable characters is a term character, so s[i - 1] was typed as is.
            if ch == "*" and (i + 1 == n or s[i + 1].isspace()) and out and _is_term_char(s[i - 1]):
                star = True
                i += 1
                break
            out.append(ch)
            i += 1
        self.pos = i
        return "".join(out), star, escaped

    def filter(self, column: int, head: re.Match[str]) -> _Scanned:
        name = head.group(1)
        if name not in FILTERS:
            close = difflib.get_close_matches(name.lower(), FILTERS, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}:? " if close else ""
            names = ", ".join(f"{f}:" for f in FILTERS[:-1]) + f" and {FILTERS[-1]}:"
            raise _error(column, f"unknown filter {name + ':'!r} (the filters are {names})",
                         f"{hint}to search for the text, write {name}\\: or put it in quotes")
        self.pos = head.end()
        s = self.s
        if self.pos >= len(s) or s[self.pos].isspace():
            raise _error(column, f"the filter {name}: has no value", f"write {name}:VALUE with no space after the colon")
        if s[self.pos] == '"':
            value = self.quoted()
        else:
            value, star, _ = self.word()
            if star:
                raise _error(column, f"the filter {name}: takes no '*'",
                             "path: already matches at the start of any folder or file name; escape a real star as \\*")
        return _Scanned(column, Filter(name, _filter_value(name, value, column), column), syntax=True)


def _filter_value(name: str, value: str, column: int) -> str:
    if name == "path":
        if not value or value == "/":
            raise _error(column, "the filter path: has no value", "write path:FOLDER/ or path:NAME")
        return value
    if name == "sym":
        parts = value.split(".")
        if not value or any(not p or p != p.strip() for p in parts):
            raise _error(column, f"sym: takes a symbol such as search, Retriever or Retriever.search (got {value!r})",
                         "names joined by single dots, no spaces")
        return value
    if name == "ext":
        ext = value[1:] if value.startswith(".") else value
        if not ext or ext.startswith(".") or "/" in ext:
            raise _error(column, f"ext: takes a file extension such as md or .py (got {value!r})")
        return ext.lower()
    lang = value.lower()
    lang = LANGUAGE_ALIASES.get(lang, lang)
    if lang not in LANGUAGES:
        close = difflib.get_close_matches(lang, [*LANGUAGES, *LANGUAGE_ALIASES], n=1, cutoff=0.6)
        hint = f"did you mean lang:{close[0]}? " if close else ""
        raise _error(column, f"unknown language {value!r}", f"{hint}the languages are {', '.join(LANGUAGES)}")
    return lang


def parse_query(text: str, *, strict: bool = False) -> ParsedQuery:
    """Parse ``text`` (already checked by ``check_query``) as every front end reads a query.

    Lenient (the default): only the known filters (``FILTERS``) are filters, so any other ``word:``
    (``TypeError:``, ``https://...``, ``std::fs``) is text, and a query that cannot be read as syntax
    is searched as plain text, with a note in ``ParsedQuery.notes`` saying why. ``strict``: every
    ``name:`` is a filter and a mistake raises ``QueryError`` naming its column (spec/query-syntax.md).
    """
    if strict:
        return _parse(text, strict=True)
    try:
        return _parse(text, strict=False)
    except QueryError as e:
        return _as_plain(text, f"searched as plain text: {e} (strict parsing refuses such a query)")


def _as_plain(text: str, note: str) -> ParsedQuery:
    """``text`` read as plain words (what it was searched as before the syntax), with ``note``."""
    words = tuple(Clause((Word(m.group(), tuple(analyze(m.group())), m.start() + 1),), False, m.start() + 1)
                  for m in re.finditer(r"\S+", text))
    return ParsedQuery(text, words, True, (note,))


def _parse(text: str, *, strict: bool) -> ParsedQuery:
    scanner = _Scanner(text, strict)
    tokens = scanner.tokens()
    clauses: list[Clause] = []
    pending_or: int | None = None
    syntax = False
    for token in tokens:
        if token.item is None:  # OR
            syntax = True
            if pending_or is not None:
                raise _error(token.column, "OR right after another OR", "join two items: a OR b")
            if not clauses:
                raise _error(token.column, "OR with nothing before it", "join two items: a OR b; "
                             'write "OR" or or to search for the word')
            pending_or = token.column
            continue
        syntax = syntax or token.syntax
        item = token.item
        if pending_or is not None:
            last = clauses[-1]
            if token.excluded or last.excluded:
                raise _error(pending_or, "OR cannot join an excluded item", "write -a -b to leave out both")
            if isinstance(item, Filter) != last.is_filter:
                raise _error(pending_or, "OR joins filters with filters, or words with words, not one with the other")
            _check_matchable(item)
            if len(last.items) == 1:
                _check_matchable(last.items[0])
            clauses[-1] = Clause((*last.items, item), False, last.column)
            pending_or = None
            continue
        if token.excluded:
            _check_matchable(item)
        clauses.append(Clause((item,), token.excluded, token.column))
    if pending_or is not None:
        raise _error(pending_or, "OR with nothing after it", 'join two items: a OR b; write "OR" to search for the word')
    counted = [item for c in clauses for item in c.items if c.excluded or len(c.items) > 1 or not isinstance(item, Word)]
    if len(counted) > MAX_SYNTAX_ITEMS:
        raise _error(counted[MAX_SYNTAX_ITEMS].column, f"more than {MAX_SYNTAX_ITEMS} phrases, prefixes, filters, "
                     "exclusions and OR-joined items in one query", "search with fewer")
    notes = tuple(scanner.notes)
    if not syntax:
        return ParsedQuery(text, tuple(clauses), True, notes)
    if not any(not c.excluded and not c.is_filter for c in clauses):
        raise QueryError("the query has only filters or excluded words: add a word to search for")
    return ParsedQuery(text, tuple(clauses), False, notes)


def _check_matchable(item: Item) -> None:
    """A word that must (or must not) occur needs terms to look for."""
    if isinstance(item, Word) and not item.terms:
        raise _error(item.column, f"{item.text!r} has no letters or digits to look for")


# -- text helpers ----------------------------------------------------------------------


def _escape_word(text: str) -> str:
    """``text`` as one unquoted word that reads back as ``text`` (no whitespace or quote inside)."""
    out = []
    for i, ch in enumerate(text):
        if ch in "\\":
            # Literal unless followed by an escapable character: escape it only then (and at the end, where
            # the next character of the canonical text could be one).
            nxt = text[i + 1] if i + 1 < len(text) else ""
            out.append("\\\\" if nxt in ESCAPABLE or nxt == "" else "\\")
        elif ch in '"*:' or (ch == "-" and i == 0):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _quote(text: str) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            nxt = text[i + 1] if i + 1 < len(text) else ""
            out.append("\\\\" if nxt in '"\\' or nxt == "" else "\\")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


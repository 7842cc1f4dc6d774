"""The query parser: what each form means, where a mistake is reported, and properties over arbitrary text.

These read queries strictly (``parse_query(text, strict=True)``), the grammar as written; how a front end
reads what people paste (unknown ``word:`` as text, a malformed query as plain text) is
tests/unit/test_query_lenient.py.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtui.core.errors import QueryError
from ragtui.core.index.analyzer import analyze
from ragtui.core.search.query import (
    ESCAPABLE,
    FILTERS,
    LANGUAGE_ALIASES,
    LANGUAGES,
    MAX_SYNTAX_ITEMS,
    Clause,
    Filter,
    ParsedQuery,
    Phrase,
    Prefix,
    Word,
    literal,
)
from ragtui.core.search.query import parse_query as _parse_query


def parse_query(text: str) -> ParsedQuery:
    return _parse_query(text, strict=True)


def clauses(text: str) -> tuple[Clause, ...]:
    return parse_query(text).clauses


# -- plain text ------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "cats dogs", "state-of-the-art", "!!! ??? ... ---", "what is 3*4", "**bold**", "12:30 a.m.", "C++ -> Rust",
    "a - b".replace(" - ", "-"), "x\\y", "ends with \\", "", "   ", "or and not", "über Straße", "e-mail",
    "cats\0dogs", "\x1b[2J cats",
])
def test_text_without_syntax_is_plain_and_kept_as_typed(text):
    parsed = parse_query(text)
    assert parsed.plain
    assert parsed.search_text == text and parsed.canonical() == text
    assert parsed.describe() == "ranked by: " + (" ".join(text.split()) or "(no word)")


def test_literal_searches_anything_as_plain_text():
    parsed = literal('"unclosed -x pth:y OR')
    assert parsed.plain and parsed.search_text == '"unclosed -x pth:y OR' and parsed.clauses == ()


# -- each form -------------------------------------------------------------------------


def test_the_forms():
    got = clauses('"Exact, phrase" optim* -excluded a OR b path:notes/2026/ ext:.MD lang:py')
    assert got == (
        Clause((Phrase("Exact, phrase", ("exact", "phrase")),)),
        Clause((Prefix("optim", "optim"),)),
        Clause((Word("excluded", ("excluded",)),), excluded=True),
        Clause((Word("a", ("a",)), Word("b", ("b",)))),
        Clause((Filter("path", "notes/2026/"),)),
        Clause((Filter("ext", "md"),)),
        Clause((Filter("lang", "python"),)),
    )
    parsed = parse_query('"Exact, phrase" optim* -excluded a OR b path:notes/2026/ ext:.MD lang:py')
    assert not parsed.plain
    assert parsed.search_text == "Exact, phrase optim a b"
    assert parsed.describe() == "\n".join([
        "ranked by: optim*",
        'must contain: "exact phrase"',
        "must contain: a OR b",
        "must not contain: excluded",
        "filter: path:notes/2026/",
        "filter: ext:md",
        "filter: lang:python (.py, .pyi, .pyw)",
    ])
    assert parsed.describe({"optim": ("optimal", "optimize")}).splitlines()[0] == "ranked by: optim* (optimal, optimize)"


def test_columns_and_required():
    got = clauses('  cats  "a b"  -dogs ext:md OR ext:rst')
    assert [c.column for c in got] == [3, 9, 16, 22]
    assert [c.required for c in got] == [False, True, False, True]
    assert got[3].items == (Filter("ext", "md"), Filter("ext", "rst"))


def test_excluded_filters_and_phrases():
    got = clauses('cats -path:drafts/ -"lorem ipsum"')
    assert got[1] == Clause((Filter("path", "drafts/"),), excluded=True)
    assert got[2] == Clause((Phrase("lorem ipsum", ("lorem", "ipsum")),), excluded=True)


@pytest.mark.parametrize(("text", "word"), [
    ("\\-5", "-5"), ('\\"quoted\\"', '"quoted"'), ("note\\: x", "note:"), ("5\\*", "5*"), ("a\\\\b", "a\\b"),
])
def test_escapes_make_characters_literal(text, word):
    parsed = parse_query(text)
    assert not parsed.plain  # an escape is syntax, but it only ever makes a character ordinary
    first = parsed.clauses[0].items[0]
    assert isinstance(first, Word) and first.text == word


def test_quoted_filter_values_and_escapes_inside_quotes():
    assert clauses('x path:"my notes/"')[1].items[0] == Filter("path", "my notes/")
    assert clauses('"say \\"hi\\" now"')[0].items[0].text == 'say "hi" now'
    assert clauses('"ends in \\\\"')[0].items[0].text == "ends in \\"


def test_a_minus_before_punctuation_is_plain_and_before_a_word_excludes():
    assert parse_query("-> --flag").plain
    assert clauses("x -5")[1].excluded
    assert clauses('x -"a b"')[1].excluded


@pytest.mark.parametrize(("value", "lang"), [(alias, name) for alias, name in LANGUAGE_ALIASES.items()])
def test_language_aliases(value, lang):
    assert clauses(f"x lang:{value}")[1].items[0] == Filter("lang", lang)


def test_every_language_lists_lowercase_extensions_without_dots():
    for exts in LANGUAGES.values():
        assert exts and all(e == e.lower() and not e.startswith(".") and "/" not in e for e in exts)


# -- mistakes --------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "column", "needle"), [
    ('cats "exact phrase', 6, "this quote is never closed"),
    ("cats OR", 6, "OR with nothing after it"),
    ("OR cats", 1, "OR with nothing before it"),
    ("a OR OR b", 6, "OR right after another OR"),
    ("cats - dogs", 6, "a lone '-'"),
    ("cats -", 6, "a lone '-'"),
    ("cats path:", 6, "the filter path: has no value"),
    ("cats ext: md", 6, "the filter ext: has no value"),
    ("cats pth:notes", 6, "unknown filter 'pth:'"),
    ("Note: cats", 1, "unknown filter 'Note:'"),
    ("cats lang:pyton", 6, "unknown language 'pyton'"),
    ("cats ext:.", 6, "ext: takes a file extension"),
    ("cats path:/", 6, "the filter path: has no value"),
    ('cats say"hi"', 9, "a quote inside a word"),
    ('cats "hi"there', 10, "text right after a closing quote"),
    ('cats ""', 6, "the phrase has no letters or digits"),
    ('cats "!!!"', 6, "the phrase has no letters or digits"),
    ("cats foo.bar*", 6, "a prefix must be one word"),
    ("cats -!!x", 6, None),  # '-' before punctuation: a plain word, no error (checked below)
    ("a OR -b", 3, "OR cannot join an excluded item"),
    ("a OR ext:md", 3, "OR joins filters with filters"),
    ("cats -\\-", 6, "has no letters or digits to look for"),
    ("!!! OR cats", 1, "has no letters or digits to look for"),
    ("cats path:notes*", 6, "takes no '*'"),
])
def test_mistakes_name_their_column(text, column, needle):
    if needle is None:
        assert parse_query(text).plain
        return
    with pytest.raises(QueryError) as info:
        parse_query(text)
    assert info.value.column == column
    message = str(info.value)
    assert message.startswith(f"query column {column}: ") and needle in message
    assert "\n" not in message and info.value.exit_code == 2


def test_the_number_of_conditions_is_bounded():
    parse_query(" ".join(["x"] * 1000 + ['"a b"'] * MAX_SYNTAX_ITEMS))  # plain words are not counted
    text = "x " + " ".join(f"-w{i}" for i in range(MAX_SYNTAX_ITEMS + 1))
    with pytest.raises(QueryError, match=f"more than {MAX_SYNTAX_ITEMS} phrases") as info:
        parse_query(text)
    assert info.value.column == text.index(f"-w{MAX_SYNTAX_ITEMS}") + 1


def test_a_query_of_only_filters_or_exclusions_is_refused():
    for text in ("ext:md", "-cats", "-cats path:x"):
        with pytest.raises(QueryError, match="only filters or excluded words"):
            parse_query(text)


def test_unknown_filter_suggests_the_nearest():
    with pytest.raises(QueryError, match=r"did you mean path:\?"):
        parse_query("pth:x")
    with pytest.raises(QueryError, match=r"did you mean lang:python\?"):
        parse_query("x lang:pyhton")


# -- properties ------------------------------------------------------------------------

_PIECES = st.sampled_from([
    "a", "Cats", "dog", "x1", "é", "_", " ", "  ", "\t", '"', "\\", "-", "*", ":", "OR", "or", "path:", "ext:",
    "lang:", "py", "md", "notes/", ".", "!", "—", "\n", "pth:", "\0", "\x1b", "OR ", " OR ", "-\"", "\"a b\"",
])

_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(st.text(max_size=60))
def test_never_anything_but_a_query_error_on_arbitrary_text(text):
    _parse_or_query_error(text)


@_SETTINGS
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_never_anything_but_a_query_error_on_syntax_soup(text):
    _parse_or_query_error(text)


def _parse_or_query_error(text: str) -> ParsedQuery | None:
    try:
        parsed = parse_query(text)
    except QueryError as e:
        assert isinstance(e.column, int | None)
        if e.column is not None:
            assert 1 <= e.column <= len(text) + 1
        return None
    parsed.describe()
    return parsed


@_SETTINGS
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_canonical_text_parses_back_to_the_same_query(text):
    parsed = _parse_or_query_error(text)
    if parsed is None:
        return
    again = parse_query(parsed.canonical())
    assert again.clauses == parsed.clauses
    assert again.describe() == parsed.describe()
    assert again.search_text == parsed.search_text or parsed.plain


_WORD_TEXT = st.text(alphabet=st.sampled_from('ab1é_-*:"\\./'), min_size=1, max_size=8)
_PHRASE_TEXT = st.text(alphabet=st.sampled_from('ab1é_-*:"\\. /'), min_size=1, max_size=8)


@st.composite
def _items(draw, kind: str):
    if kind == "filter":
        name = draw(st.sampled_from(FILTERS))
        if name == "lang":
            return Filter("lang", draw(st.sampled_from(sorted(LANGUAGES))))
        if name == "ext":
            return Filter("ext", draw(st.text(alphabet=st.sampled_from("ab1_-+.:*"), min_size=1, max_size=5)).lstrip(".")
                          or "md")
        value = draw(st.text(alphabet=st.sampled_from("ab1_-./ \"\\:*"), min_size=1, max_size=8))
        return Filter("path", value if value not in ("/", "") else "a" + value)
    form = draw(st.sampled_from(["word", "prefix", "phrase"]))
    if form == "prefix":
        stem = draw(st.text(alphabet=st.sampled_from("abcé1_"), min_size=1, max_size=6))
        return Prefix(stem, stem.lower())
    text = draw(_PHRASE_TEXT if form == "phrase" else _WORD_TEXT)

    terms = tuple(analyze(text))
    if not terms:
        text, terms = text + "z", (*terms, "z")
        terms = tuple(analyze(text))
    return Phrase(text, terms) if form == "phrase" else Word(text, terms)


@st.composite
def _queries(draw):
    out = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["text", "text", "filter"]))
        n = draw(st.integers(1, 3))
        excluded = n == 1 and draw(st.booleans())
        items = tuple(draw(_items(kind)) for _ in range(n))
        first = items[0]
        if excluded and isinstance(first, Word) and not (first.text[0] in ESCAPABLE or first.text[0].isalnum()):
            items = (Word("a" + first.text, ("a", *first.terms) if first.text[0] != "_" else first.terms),)
            items = (Word(items[0].text, tuple(analyze(items[0].text))),)  # '-/x' is plain text: '-' needs a word
        out.append(Clause(items, excluded))
    if all(c.excluded or c.is_filter for c in out):
        out.append(Clause((Word("cats", ("cats",)),)))
    return ParsedQuery("", tuple(out), False)


@_SETTINGS
@given(_queries())
def test_generated_queries_round_trip_through_their_canonical_text(query):
    text = query.canonical()
    try:
        again = parse_query(text)
    except QueryError as e:  # only a value the generator cannot know is refused (an ext normalised away)
        raise AssertionError(f"{text!r}: {e}") from None
    assert again.clauses == query.clauses, text
    assert again.describe() == query.describe()

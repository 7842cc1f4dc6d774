"""How every front end reads a query people paste (``parse_query``'s default): only the known filters are
filters, any other ``word:`` is text, and what cannot be read as syntax is plain text with a note."""

from __future__ import annotations

import pytest

from ragtui.core.errors import QueryError
from ragtui.core.search.query import FILTERS, Filter, parse_query


@pytest.mark.parametrize("text", ["TypeError: unsupported operand", "https://docs.python.org/3/library",
                                  "std::fs::read_to_string", "foo::bar", "Note: cats", "a::b::c d:e",
                                  "http://x.y:8080/p?q=1"])
def test_unknown_names_before_a_colon_are_text(text):
    parsed = parse_query(text)
    assert parsed.plain and parsed.search_text == text and not parsed.notes
    with pytest.raises(QueryError, match="unknown filter"):
        parse_query(text, strict=True)


def test_the_known_filters_stay_filters():
    parsed = parse_query("cats path:notes/ ext:md lang:py https://x")
    assert [c.items[0].name for c in parsed.filters] == ["path", "ext", "lang"] and set(FILTERS) >= {"path", "ext"}
    assert all(isinstance(c.items[0], Filter) for c in parsed.filters)
    assert parsed.search_text == "cats https://x"


@pytest.mark.parametrize(("text", "problem"), [('"unclosed quote', "this quote is never closed"),
                                               ("cats OR", "OR with nothing after it"),
                                               ("-kubernetes", "only filters or excluded words"),
                                               ("cats - dogs", "a lone '-'"),
                                               ("ext:", "has no value"),
                                               ("x lang:pyton", "unknown language")])
def test_what_cannot_be_read_as_syntax_is_plain_text_with_a_note(text, problem):
    parsed = parse_query(text)
    assert parsed.plain and parsed.search_text == text
    assert len(parsed.notes) == 1 and parsed.notes[0].startswith("searched as plain text:") and problem in parsed.notes[0]
    assert [w.items[0].text for w in parsed.clauses] == text.split()  # describe() reads as its words
    with pytest.raises(QueryError, match=problem):
        parse_query(text, strict=True)


def test_a_mistyped_filter_is_text_with_a_hint():
    parsed = parse_query("cats pth:notes")
    assert parsed.plain and "did you mean path:?" in parsed.notes[0]

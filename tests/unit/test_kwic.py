"""``core.search.kwic``: the snippet is centred on the query's weighty terms, fits its width, and is safe to print."""

from __future__ import annotations

import pytest

from ragtui.core.search.kwic import cells, marks, salient, snippet, term_weights
from ragtui.core.search.retriever import Retriever
from tests.unit.indexgen import build

FILLER = "Some opening words about nothing in particular go on here for a while. " * 4
TEXT = FILLER + "To change file permissions recursively, use chmod -R on the folder. " + FILLER
WEIGHTS = {"change": 3.0, "file": 2.0, "permissions": 5.0, "recursively": 6.0}


@pytest.mark.parametrize("width", [12, 20, 40, 60, 80, 120])
def test_the_window_holds_the_matched_terms_and_fits(width):
    s = snippet(TEXT, salient(WEIGHTS), width)
    assert cells(s.text) <= width
    assert s.marks, "a snippet of a text holding the terms shows at least one"
    for m in s.marks:
        assert s.text[m.start : m.end].lower() in m.term
    if width >= 40:  # room for the whole phrase: every term is in it
        assert {m.term for m in s.marks} == set(WEIGHTS)
        assert s.text.startswith("…") and s.text.endswith("…")


def test_centred_context_on_both_sides():
    s = snippet(TEXT, salient(WEIGHTS), 80)
    first, last = s.marks[0].start, s.marks[-1].end
    before, after = first, len(s.text) - last
    assert abs(before - after) <= 12


def test_no_term_found_starts_at_the_beginning():
    s = snippet(TEXT, {"zebra": 1.0}, 30)
    assert s.text.startswith("Some opening") and s.text.endswith("…") and not s.marks


def test_a_short_text_is_shown_whole_with_whitespace_runs_as_one_space():
    s = snippet("a\n\n  b\tc", {"b": 1.0}, 40)
    assert s.text == "a b c" and [(m.start, m.term) for m in s.marks] == [(2, "b")]


def test_terminal_controls_never_reach_the_snippet():
    s = snippet("x\x1b]52;c;evil\x07 chmod \x9b31m y", {"chmod": 1.0}, 60)
    assert "\x1b" not in s.text and "\x07" not in s.text and "\x9b" not in s.text
    assert s.text[s.marks[0].start : s.marks[0].end] == "chmod"


def test_wide_characters_count_two_cells():
    s = snippet("日本語のテキスト" * 20 + " chmod", {"chmod": 1.0}, 21)
    assert cells(s.text) <= 21 and s.text.endswith("chmod")


def test_marks_use_the_index_analyzer():
    assert [m.term for m in marks("CHMOD, Chmod_x chmod ΣΑΣ", {"chmod": 1.0, "σασ": 1.0})] == ["chmod", "chmod", "σασ"]


def test_near_zero_idf_terms_are_not_salient(tmp_path):
    docs = {f"d{i}.md": [f"a note about topic{i} and a thing"] for i in range(20)}
    docs["x.md"] = ["a chmod note"]
    path, _, _ = build(tmp_path / "art", "docs", docs)
    weights = term_weights(Retriever.open(path).data.bm25, "a chmod zebra")
    assert set(weights) == {"a", "chmod"}  # zebra is not in the index: it weighs nothing
    assert salient(weights) == {"chmod": 1.0}
    assert salient(term_weights(Retriever.open(path).data.bm25, "a")) == {"a": 1.0}  # all there is

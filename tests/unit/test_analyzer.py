"""The analyzer must produce the terms another implementation (Go RE2 + strings.ToLower) produces."""

import re
import sys
import unicodedata

import pytest

from ragtui.core.index.analyzer import TERM_PATTERN, analyze, go_lower


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("snake_case and __dunder__", ["snake_case", "and", "__dunder__"]),
        # Dotted capital I: Go's simple mapping gives plain "i"; Python's lower() gives "i̇".
        ("İstanbul", ["istanbul"]),
        ("DİYARBAKIR", ["diyarbakir"]),
        # No final-sigma rule: every capital sigma becomes σ.
        ("ΟΔΟΣ", ["οδοσ"]),
        ("ΟΔΟΣ ΣΑΣ", ["οδοσ", "σασ"]),
        # Already-lowercase final sigma stays as written.
        ("οδός", ["οδός"]),
        # A decomposed accent: the combining mark (Mn) is neither letter nor number, so it ends the run.
        ("Cafe\u0301 ole", ["cafe", "ole"]),
        # The precomposed form is one letter.
        ("Caf\u00e9", ["caf\u00e9"]),
        # Digits of other scripts are numbers (Nd), as are Roman numerals (Nl) and superscripts (No).
        ("\u0661\u0662\u0663 \u0967\u0968", ["\u0661\u0662\u0663", "\u0967\u0968"]),
        ("\u2160\u2161 x\u00b2", ["\u2170\u2171", "x\u00b2"]),
        # CJK ideographs are letters (Lo) and run together.
        ("東京タワー is tall", ["東京タワー", "is", "tall"]),
        # Emoji are symbols: they split runs and are never terms.
        ("go🚀fast 👍", ["go", "fast"]),
        # Full-width Latin capitals lowercase.
        ("ＡＢＣ", ["ａｂｃ"]),
        # Titlecase digraph ǅ -> ǆ; German sharp s has no single-character uppercase change.
        ("ǅemal Straße", ["ǆemal", "straße"]),
        ("", []),
        ("  ...  ", []),
        ("a-b.c/d", ["a", "b", "c", "d"]),
        ("tab\tnew\nline\r\ncrlf", ["tab", "new", "line", "crlf"]),
    ],
)
def test_terms(text, terms):
    assert analyze(text) == terms


def test_python_lower_really_differs_in_the_pinned_cases():
    # Guards the tests above: if Python ever changed, the special cases would be untested.
    assert "İ".lower() != "i"
    assert "ΟΔΟΣ".lower() == "οδος"
    assert go_lower("ΟΔΟΣ") == "οδοσ"


def test_word_class_is_exactly_letters_numbers_underscore():
    """Python's \\w for str equals [\\p{L}\\p{N}_] for every code point of the running Unicode tables."""
    word = re.compile(r"\w")
    mismatches = []
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        in_class = unicodedata.category(ch)[0] in "LN" or ch == "_"
        if in_class != bool(word.match(ch)):
            mismatches.append(hex(cp))
    assert mismatches == []


def test_go_lower_is_per_character_simple_mapping():
    """Every letter or number lowercases to exactly one character, except U+0130, which go_lower maps to 'i'."""
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        if not TERM_PATTERN.fullmatch(ch):
            continue
        low = go_lower(ch)
        assert len(low) == 1, hex(cp)
        # The lowercase of a term character is still a term character, so
        # lowering never changes where runs end.
        assert TERM_PATTERN.fullmatch(low), hex(cp)


def test_lowercasing_a_run_is_lowercasing_each_character():
    run = "ΣΟΦΊΑ_İÇİN_ΟΔΟΣ_ǄX"
    assert go_lower(run) == "".join(go_lower(c) for c in run)

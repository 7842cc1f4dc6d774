"""Syntax-aware chunks of source code: boundaries and symbol paths per language, the chunker's promises on real
source files, and hostile files that fall back to the plain chunker (spec/chunker.md, "Code")."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.code.languages import CODE_EXTENSIONS, GRAMMARS, code_language
from ragtui.core.code.symbols import chunk_symbols, document_symbols
from ragtui.core.code.syntax import MAX_CODE_CHARS, MAX_LINE_CHARS, parse
from ragtui.core.ingest.chunker import chunk_text
from ragtui.core.ingest.code_chunks import chunk_code
from tests.helpers.code_grammars import require_grammars
from tests.unit.fakes import WordTokenizer
from tests.unit.test_chunker import check_invariants

SAMPLES = Path(__file__).parent / "code_samples"
REPO = Path(__file__).resolve().parents[2]



@pytest.fixture(autouse=True)
def _grammars() -> None:
    require_grammars()

# Each sample cut at 40 words (WordTokenizer) with an overlap of 4: every chunk's first line and its symbols.
EXPECTED = {
    'Retriever.java': [
        ('package rag;', ('Retriever', 'Retriever.Retriever')),
        ('/** The best k documents for the query. */', ('Retriever', 'Retriever.search')),
        ('for (int i = 0; i < docs.size() && out.size() < k; i++) {', ('Retriever.search', 'Retriever.Scorer', 'Retriever.Scorer.score', 'Retriever.Mode')),
    ],
    'index.sh': [
        ('#!/bin/sh', ('usage',)),
        ('function index_folder {', ('index_folder',)),
    ],
    'retriever.c': [
        ('#include <string.h>', ('store', 'hit_t', 'hit_t.hit')),
        ('/* Counts the documents that hold the word. */', ('count_docs',)),
        ('for (int i = 0; i < s->n; i++) {', ('count_docs',)),
        ('int *search(const struct store *s, const char *query, int k)', ('search',)),
        ('for (int i = 0; i < s->n && m < k; i++) {', ('search',)),
    ],
    'retriever.go': [
        ('package retriever', ('Retriever', 'New')),
        ('// Search returns the best k documents for the query.', ('Retriever.Search',)),
        ('for i, doc := range r.docs {', ('Retriever.Search',)),
        ('func (r Retriever) Size() int { return len(r.docs) }', ('Retriever.Size',)),
    ],
    'retriever.hpp': [
        ('#pragma once', ('rag', 'rag.Retriever', 'rag.Retriever.Retriever')),
        ('std::vector<int> search(const std::string& query, int k) const {', ('rag.Retriever', 'rag.Retriever.search')),
        ('private:', ('rag.Retriever', 'rag.Pair', 'rag.Retriever.size')),
    ],
    'retriever.js': [
        ("'use strict';", ('Retriever', 'Retriever.constructor')),
        ('search(query, k = 10) {', ('Retriever', 'Retriever.search')),
        ('function makeRetriever(docs) {', ('makeRetriever', 'size')),
    ],
    'retriever.py': [
        ('"""A small retriever: the sample every language\'s test mirrors."""', ('idf',)),
        ('class Retriever:', ('Retriever', 'Retriever.__init__', 'Retriever.size')),
        ('def search(self, query: str, k: int = 10) -> list[int]:', ('Retriever', 'Retriever.search')),
        ('for i, doc in enumerate(self.docs):', ('Retriever.search',)),
        ('class Cache:', ('Retriever', 'Retriever.Cache', 'Retriever.Cache.get', 'main')),
    ],
    'retriever.rs': [
        ('//! A small retriever.', ('Retriever',)),
        ('impl Retriever {', ('Retriever', 'Retriever.new')),
        ('/// The best k documents for the query.', ('Retriever', 'Retriever.search')),
        ('for (i, doc) in self.docs.iter().enumerate() {', ('Retriever.search', 'Sized2', 'Sized2.size')),
        ('impl Sized2 for Retriever {', ('Retriever', 'Retriever.size', 'tests', 'tests.helper')),
    ],
    'retriever.ts': [
        ('// A small retriever.', ('Hit',)),
        ('/** Ranks documents for a query. */', ('Retriever', 'Retriever.constructor')),
        ('/** The best k documents for the query. */', ('Retriever', 'Retriever.search')),
        ('this.docs.forEach((doc, i) => {', ('Retriever.search',)),
        ('export const rank = (r: Retriever, q: string): Hit[] => r.search(q, 3);', ('rank', 'Query', 'Util', 'Util.words')),
    ],
    'view.tsx': [
        ('import React from "react";', ('Props', 'HitList')),
        ('export const Empty = () => <p>No results</p>;', ('Empty',)),
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_boundaries_and_symbol_paths_of_each_language(name):
    text = (SAMPLES / name).read_text(encoding="utf-8")
    language = code_language(name)
    tok = WordTokenizer()
    chunks = chunk_code(text, language, tok, 40, 4)
    check_invariants(text, tok, chunks, 40, 4)
    got = [(c.text.splitlines()[0], s) for c, s in zip(chunks, chunk_symbols(name, [c.text for c in chunks]))]
    assert got == EXPECTED[name]
    # Derived from the chunks alone, the symbols are those of the file itself.
    assert [s for _, s in got] == document_symbols(text, language, [(c.start, c.end) for c in chunks])
    # Code chunks tile the file: no two share a character.
    assert all(a.end < b.start for a, b in zip(chunks, chunks[1:]))


def test_every_language_the_table_names_has_a_sample():
    assert {code_language(name) for name in EXPECTED} == set(GRAMMARS)
    assert set(CODE_EXTENSIONS.values()) == set(GRAMMARS)


def test_small_definitions_share_a_chunk_and_a_long_one_splits_at_its_methods():
    text = (SAMPLES / "retriever.py").read_text(encoding="utf-8")
    tok = WordTokenizer()
    whole = chunk_code(text, "python", tok, 1000, 32)
    assert [c.text for c in whole] == [text.strip()]  # the file fits: one chunk
    # 100 words: the class fits whole beside nothing else; main starts the next chunk.
    firsts = [c.text.splitlines()[0] for c in chunk_code(text, "python", tok, 100, 8)]
    assert firsts == ['"""A small retriever: the sample every language\'s test mirrors."""', "class Retriever:",
                      "def main() -> None:"]
    # 80 words: the class does not fit, so it is split at its methods; search shares its chunk with the
    # small definitions after it.
    chunks = chunk_code(text, "python", tok, 80, 8)
    assert [c.text.splitlines()[0] for c in chunks] == [
        '"""A small retriever: the sample every language\'s test mirrors."""', "class Retriever:",
        "def search(self, query: str, k: int = 10) -> list[int]:"]
    assert chunk_symbols("retriever.py", [c.text for c in chunks])[2] == (
        "Retriever", "Retriever.search", "Retriever.Cache", "Retriever.Cache.get", "main")


def test_leading_comments_decorators_and_docstrings_stay_with_their_definition():
    text = (SAMPLES / "retriever.py").read_text(encoding="utf-8")
    for max_tokens in range(12, 80, 3):
        chunks = chunk_code(text, "python", WordTokenizer(), max_tokens, 0)
        for c in chunks:
            assert not c.text.startswith("def idf"), "the comment above idf is cut from it"
            assert not c.text.startswith("def size"), "the decorator of size is cut from it"
            assert not c.text.startswith('"""Ranks documents'), "a docstring is cut from its class"


def _repo_files(pattern: str, limit: int) -> list[Path]:
    return sorted((REPO / "ragtui").rglob(pattern))[:limit]


def _site_files(package: str, pattern: str, limit: int) -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return []
    return sorted(Path(spec.origin).parent.rglob(pattern))[:limit]


@pytest.fixture(scope="module")
def wordllama():
    from tests.unit.test_chunker import HFTokenizer, _wordllama_tokenizer_file

    path = _wordllama_tokenizer_file()
    if path is None:
        pytest.skip("wordllama's tokenizer file is not installed")
    return HFTokenizer(path)


def test_promises_hold_on_real_source_files(wordllama):
    files = _repo_files("*.py", 60) + _site_files("textual", "*.py", 30) + _site_files("numpy", "*.h", 10)
    assert len(files) >= 60
    total = agree = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        language = code_language(path.name)
        assert language is not None
        chunks = chunk_code(text, language, wordllama, 256, 32)
        check_invariants(text, wordllama, chunks, 256, 32)
        assert chunk_code(text, language, wordllama, 256, 32) == chunks  # the same bytes every time
        truth = document_symbols(text, language, [(c.start, c.end) for c in chunks])
        derived = chunk_symbols(path.name, [c.text for c in chunks])
        assert truth is not None
        agree += sum(a == b for a, b in zip(truth, derived))
        total += len(chunks)
    # Symbols derived from the chunks alone are the file's for nearly every chunk (spec/chunker.md, "Code").
    assert agree >= 0.97 * total


class PartsOnly:
    """``tok`` that gives a text's spans part by part (``iter_spans``, ``size`` tokens a part) and records the
    length of every text whose spans were asked for whole."""

    def __init__(self, tok, size: int) -> None:
        self.tok, self.size, self.name = tok, size, tok.name
        self.whole: list[int] = []

    def spans(self, text):
        self.whole.append(len(text))
        return self.tok.spans(text)

    def iter_spans(self, text):
        spans = self.tok.spans(text)
        for lo in range(0, len(spans), self.size):
            yield spans[lo : lo + self.size]

    def count(self, text):
        return self.tok.count(text)

    def count_many(self, texts):
        return self.tok.count_many(texts)


@pytest.mark.parametrize("size", [1, 3, 64])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tokens_taken_part_by_part_give_the_same_chunks(name, size):
    # chunk_code keeps only the tokens' starts and ends, taken part by part when it tokenizes the file
    # itself: the chunks are those of the document's spans handed over whole.
    text = (SAMPLES / name).read_text(encoding="utf-8")
    language = code_language(name)
    tok = WordTokenizer()
    parts = PartsOnly(tok, size)
    for p in ((40, 4), (16, 2), (7, 0)):
        expect = chunk_code(text, language, tok, *p, spans=tok.spans(text))
        assert chunk_code(text, language, parts, *p) == expect
        assert chunk_code(text, language, tok, *p) == expect  # a tokenizer without iter_spans: one spans call
    assert len(text) not in parts.whole  # the document's spans were never asked for whole


_LINES = {
    "python": ["def f(a, b):", "    return a + b", "class C:", "    def m(self):", "        x = 'a string'",
               "        # a comment", "", "    @property", "    def p(self): return 1", "x = [1, 2,", "     3]",
               "if x:", "    pass", '"""A docstring."""'],
    "javascript": ["function f(a) {", "  return a + 1;", "}", "class C {", "  m() { return 2; }", "};",
                   "// a comment", "", "const g = () => {", "  let s = 'a string';", "x = [1, 2,", "  3];"],
}


@settings(max_examples=150, deadline=None)
@given(language=st.sampled_from(sorted(_LINES)), data=st.data(), size=st.integers(1, 9),
       p=st.sampled_from([(40, 4), (12, 2), (5, 0), (3, 1)]))
def test_tokens_in_parts_agree_with_whole_spans_on_generated_code(language, data, size, p):
    lines = data.draw(st.lists(st.sampled_from(_LINES[language]), max_size=60))
    text = "\n".join(lines) + "\n"
    tok = WordTokenizer()
    expect = chunk_code(text, language, tok, *p, spans=tok.spans(text))
    assert chunk_code(text, language, PartsOnly(tok, size), *p) == expect


@pytest.fixture(scope="module")
def default_tokenizer():
    from tests.reliability.helpers_longlines import wordllama_tokenizer

    tok = wordllama_tokenizer()
    if tok is None:
        pytest.skip("wordllama's tokenizer is not installed")
    return tok


def test_a_long_source_file_gives_the_same_chunks_and_ids_from_its_tokens_in_parts(default_tokenizer):
    # Over 300,000 characters: the default tokenizer gives the spans in several parts.
    tok = default_tokenizer
    text = ""
    for path in _repo_files("*.py", 400):
        text += path.read_text(encoding="utf-8") + "\n"
        if len(text) > 300_000:
            break
    assert len(list(tok.iter_spans(text))) > 1
    got = chunk_code(text, "python", tok, 256, 32, keep_ids=True)
    whole = chunk_code(text, "python", tok, 256, 32, spans=tok.spans(text))
    tokens = chunk_code(text, "python", tok, 256, 32, keep_ids=True, tokens=tok.encode_docs([text])[0])
    assert len(got) > 300 and got == whole == tokens
    assert all(a.ids is not None and b.ids is not None and np.array_equal(a.ids, b.ids) for a, b in zip(got, tokens))


def _status_kib(key: str) -> int:
    """A line of /proc/self/status in KiB (``VmRSS``, ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/self/status")


def _functions(size: int) -> str:
    """About ``size`` characters of JavaScript: short functions of eight statements each."""
    out, n, k = [], 0, 0
    while n < size:
        k += 1
        body = "\n".join(f"  const v{j} = compute(a{j}, {k * 7919 % 1_000_003 + j}, 'text {k}.{j}');" for j in range(8))
        out.append(f"function f{k}(a0, a1) {{\n{body}\n  return v0 + v7;\n}}\n\n")
        n += len(out[-1])
    return "".join(out)


def test_a_large_source_file_costs_a_bounded_number_of_bytes_per_character(default_tokenizer):
    # What cutting a large source file by its syntax costs this process at its peak (VmHWM: the parser's
    # tree and the tokenizer's allocations alike), ids kept as ingest keeps them. Measured: 38 MiB for
    # 500,000 characters (64 MiB for 1 MB), a third of it the tree. Holding the document's span tuples
    # and counting every chunk in one call took 74 MiB here (168 MiB for 1 MB).
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the high-water mark")
    tok = default_tokenizer
    text = _functions(500_000)
    assert parse(text, "javascript")[0] is not None
    tok.count(text[:20_000])  # the long-text splitter is built once per tokenizer, not per file
    gc.collect()
    # Writing 5 resets the high-water mark to the current resident size (Linux >= 4.0).
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    chunks = chunk_code(text, "javascript", tok, 256, 32, keep_ids=True)
    growth = (_status_kib("VmHWM") - before) << 10
    assert len(chunks) > 1000 and all(c.ids is not None for c in chunks)
    assert growth <= (8 << 20) + 96 * len(text), f"{growth >> 20} MiB for {len(text):,} characters"


def test_a_file_without_a_grammar_or_not_parsable_keeps_the_plain_chunker():
    tok = WordTokenizer()
    text = (SAMPLES / "retriever.py").read_text(encoding="utf-8")
    assert code_language("notes/readme.md") is None and code_language(".bashrc") is None
    # Mostly not Python: the plain chunker cuts it, exactly.
    broken = ")))) ((( ]]] " * 400 + text
    assert parse(broken, "python")[0] is None
    assert chunk_code(broken, "python", tok, 40, 4) == chunk_text(broken, tok, 40, 4)
    with_nul = text + "\0"
    assert chunk_code(with_nul, "python", tok, 40, 4) == chunk_text(with_nul, tok, 40, 4)
    surrogate = text + "\ud800"
    assert chunk_code(surrogate, "python", tok, 40, 4) == chunk_text(surrogate, tok, 40, 4)


def test_a_five_megabyte_minified_line_falls_back_to_the_plain_chunker():
    tok = WordTokenizer()
    line = "var a=function(b){return b+1};" * (5_000_000 // 30)
    assert len(line) >= MAX_CODE_CHARS
    assert parse(line, "javascript") == (None, f"longer than {MAX_CODE_CHARS:,} characters")
    chunks = chunk_code(line, "javascript", tok, 256, 32)
    assert chunks == chunk_text(line, tok, 256, 32)


def test_a_minified_line_keeps_the_plain_chunker():
    tok = WordTokenizer()
    text = (SAMPLES / "retriever.js").read_text(encoding="utf-8")
    minified = text + "var a=function(b){return b+1};" * (MAX_LINE_CHARS // 30 + 1) + "\n"
    assert parse(minified, "javascript") == (None, f"has a line of {MAX_LINE_CHARS:,} characters or more (minified?)")
    assert chunk_code(minified, "javascript", tok, 40, 4) == chunk_text(minified, tok, 40, 4)
    shorter = text + "var a=function(b){return b+1};" * (MAX_LINE_CHARS // 31) + "\n"
    assert parse(shorter, "javascript")[0] is not None


@pytest.mark.parametrize(("language", "opening", "closing"), [
    ("javascript", "[", "]"), ("c", "{", "}"), ("python", "(", ")"), ("rust", "{", "}"),
])
def test_ten_thousand_levels_of_nesting_are_cut_without_recursion(language, opening, closing):
    tok = WordTokenizer()
    body = {"javascript": "x = ", "c": "void f() ", "python": "x = ", "rust": "fn f() "}[language]
    text = body + (opening + " a ") * 10_000 + closing * 10_000 + "\n"
    chunks = chunk_code(text, language, tok, 64, 8)
    check_invariants(text, tok, chunks, 64, 8)
    if parse(text, language)[0] is None:
        assert chunks == chunk_text(text, tok, 64, 8)  # not valid code: the plain chunker's chunks
    else:
        assert "".join(c.text for c in chunks).replace(" ", "") == text.replace(" ", "").strip()


def test_grammars_load_from_the_installed_wheels_without_network():
    # An audit hook refuses every socket: loading every grammar and cutting every sample still works.
    code = f"""
import sys
def refuse(event, args):
    if event.startswith("socket.") or event == "urllib.Request":
        raise RuntimeError("network used: " + event)
sys.addaudithook(refuse)
from pathlib import Path
from ragtui.core.ingest.code_chunks import chunk_code
from ragtui.core.code.languages import GRAMMARS, code_language, grammar
from tests.helpers.code_grammars import require_grammars
from tests.unit.fakes import WordTokenizer
assert all(grammar(lang) is not None for lang in GRAMMARS)
n = 0
for path in sorted(Path({str(SAMPLES)!r}).iterdir()):
    n += len(chunk_code(path.read_text(), code_language(path.name), WordTokenizer(), 40, 4))
print(n)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == sum(len(v) for v in EXPECTED.values())


def test_symbols_of_chunks_that_are_not_code_are_empty():
    assert chunk_symbols("docs/notes.md", ["def f():", "pass"]) == [(), ()]
    assert chunk_symbols("docs/a.py", []) == []
    assert json.dumps(chunk_symbols("docs/a.py", ["x = (", "1)"])) == "[[], []]"


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_symbols_from_the_chunks_are_the_files_for_every_chunk_size(name, line_end):
    text = (SAMPLES / name).read_text(encoding="utf-8").replace("\n", line_end)
    language = code_language(name)
    for max_tokens in range(16, 124, 4):
        chunks = chunk_code(text, language, WordTokenizer(), max_tokens, 4)
        assert chunk_symbols(name, [c.text for c in chunks]) == document_symbols(
            text, language, [(c.start, c.end) for c in chunks]), max_tokens

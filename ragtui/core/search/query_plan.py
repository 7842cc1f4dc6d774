"""A ``ParsedQuery`` bound to one generation of an index: which rows may be returned, and in what order.

``QueryPlan.bind(parsed, data)`` does the work that needs the index:

- prefixes are expanded over the BM25 dictionary (``MAX_EXPANSIONS`` terms
  scored, the most frequent; every matching term counts for OR and ``-``);
- filters become a per-row mask through the document table (one doc_id per
  row, read once per generation from the lines' ``chunk_id``);
- a word or prefix that must (or must not) occur becomes an exact row set from
  the postings; a phrase becomes the rows holding all its terms (a superset),
  confirmed row by row by running the index's analyzer over the chunk's text.

Then ``bm25``, ``flat``, ``ivf`` rank under those conditions. The rule that
makes filtered search exact: every row that passes is scored exactly as the
unfiltered search scores it (BM25 scores, ``flat.row_scores`` bits), rows are
taken in the one tie order (score descending, row ascending), and the text
checks run on rows in that order until ``k`` pass. So the filtered top k is
the exhaustive top k of the rows that pass. IVF keeps its own approximation:
it ranks the passing rows of the lists it probes, except that when the rows
left by what the index tells without reading text (filters, words and
prefixes, a phrase's words) are fewer than ``nprobe`` lists hold on average,
it scores all of them (exact, like flat).
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragtui.core.index.analyzer import analyze
from ragtui.core.index.topk import top_k
from ragtui.core.search.query import LANGUAGES, Clause, Filter, ParsedQuery, Phrase, Prefix, Word

if TYPE_CHECKING:
    from ragtui.core.index.bm25 import BM25Index
    from ragtui.core.index.docs_file import DocsFile
    from ragtui.core.index.index_format import IndexData
    from ragtui.core.search.ivf import IVFIndex

__all__ = ["MAX_EXPANSIONS", "DocTable", "QueryPlan", "doc_table", "path_matches", "phrase_in"]

MAX_EXPANSIONS = 64
"""A prefix adds at most this many index terms to the ranking: those in the most chunks (ties: byte order)."""

_VERIFY_BATCH = 256

MAX_TEXT_CHECKS = 20_000
"""A search reads at most this many chunks' text for its phrase checks; past that it returns what matched
(fewer than k) with a note, rather than reading a whole large index for a phrase that rarely occurs."""

_ASCII_WORD = "0-9A-Za-z_"


# -- the document table ----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DocTable:
    """The documents of an index in row order: ``doc_ids[d]`` holds rows ``starts[d]`` to ``starts[d + 1] - 1``."""

    doc_ids: tuple[str, ...]
    starts: np.ndarray

    @cached_property
    def _slashed(self) -> np.ndarray:
        """'/' + each doc_id: a value at the start of a folder or file name is then '/' + value inside it."""
        return np.array(["/" + d for d in self.doc_ids], dtype=str)

    @cached_property
    def _names(self) -> np.ndarray:
        """Each document's file name, lowercased (``ext:`` and ``lang:`` ignore case)."""
        return np.array([d.rpartition("/")[2].lower() for d in self.doc_ids], dtype=str)

    def matches(self, f: Filter) -> np.ndarray:
        """A bool per document: whether it passes ``f`` (``path_matches``, a whole column at a time)."""
        if not self.doc_ids:
            return np.zeros(0, dtype=bool)
        if f.name == "path":
            if f.value.startswith("/"):
                return np.asarray(np.char.startswith(self._slashed, f.value), dtype=bool)
            return np.asarray(np.char.find(self._slashed, "/" + f.value) >= 0, dtype=bool)
        exts = (f.value,) if f.name == "ext" else LANGUAGES[f.value]
        out = np.zeros(len(self.doc_ids), dtype=bool)
        lengths = np.char.str_len(self._names)
        for ext in exts:
            out |= np.char.endswith(self._names, "." + ext) & (lengths > len(ext) + 1)
        return out

    def rows(self, per_doc: np.ndarray) -> np.ndarray:
        """A bool per row from a bool per document."""
        return np.repeat(per_doc, np.diff(self.starts))


_CHUNK_ID = re.compile(rb'\{"chunk_id":"([^"\\]*(?:\\.[^"\\]*)*)","doc_id":"')
_tables: weakref.WeakKeyDictionary[DocsFile, DocTable] = weakref.WeakKeyDictionary()
_tables_lock = threading.Lock()


def doc_table(records: DocsFile) -> DocTable:
    """The document table of ``records``, built once per docs.jsonl and kept while it lives.

    Each row's doc_id is its chunk_id up to the last ``#``, read from the
    start of the line (the format fixes chunk_id as the first key) without
    parsing the rest; a line that does not start that way is parsed in full,
    which raises ``IndexFormatError`` for a damaged line.
    """
    with _tables_lock:
        table = _tables.get(records)
        if table is None:
            table = _tables[records] = _build_table(records)
        return table


def _build_table(records: DocsFile) -> DocTable:
    n = len(records)
    raw = records.raw_lines(0, n)
    line_starts = [0, *(records.line_ends(0, n)[:-1] + 1).tolist()] if n else []
    match = _CHUNK_ID.match
    doc_ids: list[str] = []
    starts: list[int] = []
    prev = None
    for row, at in enumerate(line_starts):
        m = match(raw, at)
        doc_id = None
        if m:
            body = m.group(1)
            try:
                chunk_id = body.decode("utf-8") if b"\\" not in body else json.loads(b'"' + body + b'"')
            except (UnicodeDecodeError, ValueError):
                chunk_id = None
            if isinstance(chunk_id, str) and "#" in chunk_id:
                doc_id = chunk_id.rpartition("#")[0]
        if doc_id is None:
            doc_id = records[row].doc_id
        if doc_id != prev:
            doc_ids.append(doc_id)
            starts.append(row)
            prev = doc_id
    starts.append(n)
    return DocTable(tuple(doc_ids), np.asarray(starts, dtype=np.int64))


def path_matches(f: Filter, doc_id: str) -> bool:
    """Whether the document ``doc_id`` passes the filter ``f`` (spec/query-syntax.md says what each means).

    The plain reference of ``DocTable.matches``, which tests a whole column at once."""
    if f.name == "path":
        value = f.value
        if value.startswith("/"):
            return doc_id.startswith(value[1:])
        return doc_id.startswith(value) or ("/" + value) in doc_id
    name = doc_id.rpartition("/")[2].lower()
    if f.name == "ext":
        return _has_ext(name, f.value)
    return any(_has_ext(name, ext) for ext in LANGUAGES[f.value])


def _has_ext(name: str, ext: str) -> bool:
    return len(name) > len(ext) + 1 and name.endswith("." + ext)


# -- phrases ---------------------------------------------------------------------------


def phrase_in(terms: Sequence[str], phrase: Sequence[str]) -> bool:
    """Whether ``phrase`` occurs as consecutive items of ``terms``."""
    m = len(phrase)
    if m == 0:
        return True
    first = phrase[0]
    for i in range(len(terms) - m + 1):
        if terms[i] == first and list(terms[i : i + m]) == list(phrase):
            return True
    return False


@dataclass
class _Match:
    """Where one item occurs: ``rows`` exactly, or (``phrase`` set) a superset to confirm with the text."""

    rows: np.ndarray
    phrase: tuple[str, ...] | None = None

    @cached_property
    def ascii_pattern(self) -> re.Pattern[str] | None:
        """For an ASCII text: the phrase as a regular expression over the lowercased text (None: cannot occur).

        In ASCII text the analyzer's terms are the runs of [0-9A-Za-z_], lowercased, so the phrase occurs
        exactly when its terms appear as whole runs separated by other characters only.
        """
        assert self.phrase is not None
        if not all(t.isascii() for t in self.phrase):
            return None
        body = f"[^{_ASCII_WORD}]+".join(re.escape(t) for t in self.phrase)
        return re.compile(f"(?<![{_ASCII_WORD}]){body}(?![{_ASCII_WORD}])")

    def in_text(self, text: str, terms: list[str] | None) -> tuple[bool, list[str] | None]:
        """(whether the phrase occurs in ``text``, the text's terms if they had to be computed)."""
        assert self.phrase is not None
        if text.isascii():
            pattern = self.ascii_pattern
            return (pattern is not None and pattern.search(text.lower()) is not None), terms
        if terms is None:
            terms = analyze(text)
        return phrase_in(terms, self.phrase), terms


@dataclass
class _Check:
    """A text condition on a row: one of ``matches`` occurs (``want``) or none does (not ``want``)."""

    matches: list[_Match]
    want: bool


# -- the plan --------------------------------------------------------------------------


@dataclass
class QueryPlan:
    """What a search under a non-plain query ranks, and under which conditions (see the module docstring)."""

    parsed: ParsedQuery
    lexical_text: str
    """The text BM25 scores: the searched words, phrases' words and prefix expansions."""
    mask: np.ndarray | None
    """Rows that may be returned as far as the index alone tells (None: every row)."""
    checks: list[_Check] = field(default_factory=list)
    """Conditions confirmed against a row's text, in rank order, only for rows the mask keeps."""
    expansions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each prefix's term -> the index terms scored for it."""
    notes: list[str] = field(default_factory=list)
    """What a user should know about this search (a prefix that matched too many terms, or none)."""
    _records: DocsFile | None = None
    _verdicts: dict[int, bool] = field(default_factory=dict)
    """Rows whose text was checked, and the answer (hybrid ranks the same rows twice)."""

    @property
    def search_text(self) -> str:
        """The text the vector modes embed."""
        return self.parsed.search_text

    @classmethod
    def bind(cls, parsed: ParsedQuery, data: IndexData, *, pooled: Sequence[BM25Index] | None = None,
             cache_dir: Path | None = None) -> QueryPlan:
        """The plan of ``parsed`` over the generation ``data``.

        ``pooled``: the BM25 indexes of several indexes searched as one (``core.search.multi``); prefixes
        then expand over their dictionaries together, ranked by the chunks holding each term in all of them,
        so every index's plan scores the same text. ``cache_dir`` keeps the symbols ``sym:`` derives
        (``core.search.symbols``) outside the index between processes.
        """
        bm25 = data.bm25
        vocabularies = list(pooled) if pooled is not None else [bm25]
        n = data.n_chunks
        plan = cls(parsed, "", None, _records=data.records)
        words: list[str] = []
        mask: np.ndarray | None = None

        def narrow(rows: np.ndarray) -> None:
            nonlocal mask
            mask = rows if mask is None else mask & rows

        for clause in parsed.clauses:
            if clause.is_filter:
                narrow(_filter_rows(clause, data, cache_dir))
                continue
            if not clause.excluded:
                for item in clause.items:
                    if isinstance(item, Prefix):
                        words.extend(plan._expand(vocabularies, item))
                    elif isinstance(item, Phrase | Word):
                        words.append(item.text)
            if not clause.required and not clause.excluded:
                continue  # a lone word or prefix ranks; it does not restrict
            matches = [_occurrences(item, bm25, n) for item in clause.items if not isinstance(item, Filter)]
            union = np.zeros(n, dtype=bool)
            for match in matches:
                union |= match.rows
            if clause.excluded:
                exact = [m for m in matches if m.phrase is None]
                if exact:
                    narrow(~np.logical_or.reduce([m.rows for m in exact]))
                loose = [m for m in matches if m.phrase is not None]
                if loose:
                    plan.checks.append(_Check(loose, want=False))
            else:
                narrow(union)
                if any(m.phrase is not None for m in matches):
                    plan.checks.append(_Check(matches, want=True))
        plan.mask = mask
        plan.lexical_text = " ".join(words)
        return plan

    def _expand(self, vocabularies: Sequence[BM25Index], item: Prefix) -> list[str]:
        if len(vocabularies) == 1:
            bm25 = vocabularies[0]
            lo, hi = _prefix_range(bm25, item.term)
            ids = np.arange(lo, hi)
            if hi - lo > MAX_EXPANSIONS:
                df = np.asarray(bm25.df[lo:hi])
                ids = ids[np.lexsort((ids, -df))[:MAX_EXPANSIONS]]
                ids.sort()
            found, chosen = hi - lo, [bm25.term(int(i)) for i in ids]
        else:
            pooled: dict[str, int] = {}
            for bm25 in vocabularies:
                lo, hi = _prefix_range(bm25, item.term)
                for t in range(lo, hi):
                    term = bm25.term(t)
                    pooled[term] = pooled.get(term, 0) + int(bm25.df[t])
            found = len(pooled)
            best = sorted(pooled, key=lambda t: (-pooled[t], t.encode("utf-8")))[:MAX_EXPANSIONS]
            chosen = sorted(best, key=lambda t: t.encode("utf-8"))
        if not found:
            self.expansions[item.term] = ()
            self.notes.append(f"{item.term}* matches no term of the index")
            return []
        if found > MAX_EXPANSIONS:
            self.notes.append(f"{item.term}* matches {found:,} terms; the {MAX_EXPANSIONS} in the most chunks rank "
                              "(all of them count for OR and -); type more letters to narrow it")
        # A dictionary term analyzes to itself (a run of term characters, already lowercase); one that would
        # not (a hand-made file) is left out rather than searched as something else.
        terms = [t for t in chosen if analyze(t) == [t]]
        self.expansions[item.term] = tuple(terms)
        return terms

    # -- ranking -----------------------------------------------------------------------

    def bm25(self, data: IndexData, k: int) -> tuple[np.ndarray, np.ndarray]:
        """BM25 under the plan: rows with a positive score that pass, best ``k``."""
        return self.lexical(data.bm25.scores(self.lexical_text), k)

    def lexical(self, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` rows of dense BM25 ``scores`` (one per row of this plan's index) that score and pass."""
        keep = scores > 0.0
        if self.mask is not None:
            keep &= self.mask
        rows = np.flatnonzero(keep)
        return self._rank(scores[rows], rows, k)

    def flat(self, vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Flat search under the plan: every passing row scored (``flat.row_scores`` bits), best ``k``."""
        from ragtui.core.search.flat import as_query, as_vectors, flat_search

        if self.mask is None and not self.checks:
            return flat_search(vectors, query, k)
        v = as_vectors(vectors)
        q = as_query(query, v.shape[1])
        rows = np.arange(v.shape[0]) if self.mask is None else np.flatnonzero(self.mask)
        return self._rank(_scores_of(v, q, rows), rows, k)

    def ivf(self, lists: IVFIndex, vectors: np.ndarray, query: np.ndarray, k: int,
            nprobe: int | None) -> tuple[np.ndarray, np.ndarray]:
        """IVF under the plan: the passing rows of the probed lists, or every passing row when they are few."""
        from ragtui.core.search.flat import as_query, as_vectors

        if self.mask is None and not self.checks:
            return lists.search(query, k, nprobe=nprobe)
        v = as_vectors(vectors)
        q = as_query(query, v.shape[1])
        nprobe = lists.resolve_nprobe(nprobe)
        if lists.nlist == 0 or k == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        passing = np.arange(v.shape[0]) if self.mask is None else np.flatnonzero(self.mask)
        probed_rows = v.shape[0] * min(nprobe, lists.nlist) / lists.nlist
        if passing.size <= probed_rows:
            rows = passing
        else:
            rows = lists.probed_rows(q, nprobe)
            if self.mask is not None:
                rows = rows[self.mask[rows]]
        return self._rank(_scores_of(v, q, rows), rows, k)

    def _rank(self, scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` of (scores, rows) whose text passes the checks, in the one tie order."""
        if not self.checks:
            return top_k(scores, rows, k)
        order = np.lexsort((rows, -scores))
        kept: list[int] = []
        for lo in range(0, order.size, _VERIFY_BATCH):
            if lo >= MAX_TEXT_CHECKS:
                note = (f"the phrase checks stopped after reading {MAX_TEXT_CHECKS:,} chunks: these are the matches "
                        f"among the {MAX_TEXT_CHECKS:,} best-ranked candidates; add words or a filter to narrow it")
                if note not in self.notes:
                    self.notes.append(note)
                break
            for i in order[lo : lo + _VERIFY_BATCH].tolist():
                if self._passes(int(rows[i])):
                    kept.append(i)
                    if len(kept) == k:
                        break
            if len(kept) == k:
                break
        picked = np.asarray(kept, dtype=np.int64)
        return rows[picked].astype(np.int64, copy=False), scores[picked]

    def _passes(self, row: int) -> bool:
        verdict = self._verdicts.get(row)
        if verdict is None:
            verdict = self._verdicts[row] = self._check(row)
        return verdict

    def _check(self, row: int) -> bool:
        text: str | None = None
        terms: list[str] | None = None
        for check in self.checks:
            hit = False
            for match in check.matches:
                if not match.rows[row]:
                    continue
                if match.phrase is None:
                    hit = True
                    break
                if text is None:
                    text = self._text(row)
                hit, terms = match.in_text(text, terms)
                if hit:
                    break
            if hit != check.want:
                return False
        return True

    def _text(self, row: int) -> str:
        """The chunk's text, read from its line without keeping the parsed record (the hits are read checked)."""
        assert self._records is not None
        line = self._records.raw_lines(row, row + 1)
        try:
            text = json.loads(bytes(line))["text"]
            if isinstance(text, str):
                return text
        except (ValueError, KeyError, TypeError, RecursionError):
            pass
        return self._records[row].text  # raises IndexFormatError for a damaged line


def _scores_of(v: np.ndarray, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``row_scores`` of ``rows`` (each row's bits as in a full scan): gathered when few, else all then picked."""
    from ragtui.core.search.flat import row_scores

    if rows.size * 2 >= v.shape[0]:
        picked: np.ndarray = row_scores(v, q)[rows]
        return picked
    return row_scores(v[rows], q)


def _filter_rows(clause: Clause, data: IndexData, cache_dir: Path | None = None) -> np.ndarray:
    table = doc_table(data.records)
    per_doc = np.zeros(len(table.doc_ids), dtype=bool)
    per_row: np.ndarray | None = None
    for item in clause.items:
        if isinstance(item, Filter) and item.name == "sym":
            from ragtui.core.search.symbols import symbol_table  # parses code only when a query asks

            found = symbol_table(data.records, table, cache_dir, data.meta.index_id).matches(item.value)
            per_row = found if per_row is None else per_row | found
        elif isinstance(item, Filter):
            per_doc |= table.matches(item)
    rows = table.rows(per_doc)
    if per_row is not None:
        rows = rows | per_row
    return ~rows if clause.excluded else rows


def _term_rows(bm25: BM25Index, t: int, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    if t >= 0:
        out[bm25.post_doc[bm25.offsets[t] : bm25.offsets[t + 1]]] = True
    return out


def _occurrences(item: Word | Prefix | Phrase, bm25: BM25Index, n: int) -> _Match:
    if isinstance(item, Prefix):
        lo, hi = _prefix_range(bm25, item.term)
        out = np.zeros(n, dtype=bool)
        out[bm25.post_doc[bm25.offsets[lo] : bm25.offsets[hi]]] = True  # a prefix's terms sit side by side
        return _Match(out)
    terms = item.terms
    rows = np.ones(n, dtype=bool)
    for term in dict.fromkeys(terms):
        rows &= _term_rows(bm25, bm25.lookup(term), n)
    return _Match(rows, None if len(terms) == 1 else tuple(terms))


def _prefix_range(bm25: BM25Index, term: str) -> tuple[int, int]:
    """The numbers [lo, hi) of the dictionary terms that start with ``term`` (byte order keeps them together)."""
    key = term.encode("utf-8")
    # No UTF-8 text holds the byte 0xff, so every term that starts with key sorts before key + 0xff.
    return bm25.terms_before(key), bm25.terms_before(key + b"\xff")

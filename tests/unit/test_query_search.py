"""Query syntax in every mode: filtered rankings equal a plain reference over the rows that pass; plain text
searches exactly as before; prefix expansion is bounded; the document table reads any doc_id."""

from __future__ import annotations

import random
from pathlib import PurePosixPath

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.errors import QueryError
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.topk import top_k
from ragtui.core.search import fusion
from ragtui.core.search.flat import flat_search, row_scores
from ragtui.core.search.fusion_fit import fusion_defaults
from ragtui.core.search.ivf import IVFParams
from ragtui.core.search.query import LANGUAGES, Filter, Phrase, Prefix, Word, literal, parse_query
from ragtui.core.search.query_plan import MAX_EXPANSIONS, DocTable, _Match, doc_table, path_matches, phrase_in
from ragtui.core.search.retriever import MODES, Hits, Retriever
from ragtui.core.search.stemmed import DEFAULT_STEM_CHUNK_WEIGHT
from tests.unit.fakes import HashEmbedder
from tests.unit.indexgen import build

VOCAB = ("cat cats catalog category dog dogs dot red green blue fast slow exact phrase match "
         "the of and a to in vector index search rank").split()
PATHS = ["notes/2026/jan.md", "notes/2026/feb.md", "notes/2025/dec.md", "mynotes/2026/x.md", "src/app.py",
         "src/lib/util.py", "src/main.rs", "docs/guide.rst.txt", "docs/README.MD", "top.txt", "a#b/c\"d\\e.md",
         "ünï/côdé.go", "notes2026.md"]


def _corpus(seed: int = 7, chunks_per_doc: int = 9) -> dict[str, list[str]]:
    rng = random.Random(seed)
    docs = {}
    for path in PATHS:
        docs[path] = [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(4, 30))).capitalize() + "."
                      for _ in range(chunks_per_doc)]
    docs["notes/2026/jan.md"][0] = "An exact phrase, here: Exact-Phrase match."
    return docs


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    art = tmp_path_factory.mktemp("query") / "art"
    path, records, vectors = build(art, "docs", _corpus(), dim=8)
    # Small lists, so that nprobe below nlist leaves rows unprobed.
    retriever = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"), ivf_params=IVFParams(nlist=8))
    return retriever, records, vectors


# -- a plain reference -----------------------------------------------------------------


def _path_ref(value: str, doc_id: str) -> bool:
    if value.startswith("/"):
        return doc_id.startswith(value[1:])
    starts = [0] + [i + 1 for i, ch in enumerate(doc_id) if ch == "/"]
    return any(doc_id[i:].startswith(value) for i in starts)


def _ext_ref(ext: str, doc_id: str) -> bool:
    name = PurePosixPath(doc_id).name.lower()
    return name.endswith("." + ext) and name != "." + ext


def _filter_ref(f: Filter, doc_id: str) -> bool:
    if f.name == "path":
        return _path_ref(f.value, doc_id)
    if f.name == "ext":
        return _ext_ref(f.value, doc_id)
    return any(_ext_ref(e, doc_id) for e in LANGUAGES[f.value])


def _occurs_ref(item, tokens: list[str], loose: bool) -> bool:
    if isinstance(item, Prefix):
        return any(t.startswith(item.term) for t in tokens)
    if loose:  # what the index alone tells: all the words are in the chunk
        return set(item.terms) <= set(tokens)
    joined = " " + " ".join(tokens) + " "
    return (" " + " ".join(item.terms) + " ") in joined


def _passes_ref(parsed, rec, loose: bool = False) -> bool:
    """Whether a chunk passes; ``loose``: as far as the index tells without reading text (a phrase is its words,
    and a phrase to leave out leaves nothing out)."""
    tokens = analyze(rec.text)
    for clause in parsed.clauses:
        if clause.is_filter:
            ok = any(_filter_ref(f, rec.doc_id) for f in clause.items)
        elif clause.excluded:
            ok = any(_occurs_ref(i, tokens, False) for i in clause.items
                     if not (loose and not isinstance(i, Prefix) and len(i.terms) > 1))
        elif clause.required:
            ok = any(_occurs_ref(i, tokens, loose) for i in clause.items)
        else:
            continue
        if ok == clause.excluded:
            return False
    return True


def _lexical_ref(parsed, retriever) -> str:
    bm25 = retriever.data.bm25
    vocab = [bm25.term(t) for t in range(bm25.n_terms)]
    words = []
    for clause in parsed.clauses:
        if clause.excluded or clause.is_filter:
            continue
        for item in clause.items:
            if isinstance(item, Prefix):
                found = [t for t in vocab if t.startswith(item.term)]
                assert len(found) <= MAX_EXPANSIONS
                words.extend(found)
            else:
                words.extend(item.terms)
    return " ".join(words)


def _ranked(scores: np.ndarray, rows: list[int], k: int):
    order = sorted(rows, key=lambda r: (-scores[r], r))[:k]
    return np.asarray(order, dtype=np.int64), scores[order]


def _arm_scores(retriever, text: str, eff: dict):
    """The dense scores of hybrid's lexical arm ``eff["lexical"]`` at ``eff``'s chunk_weight."""
    if eff["lexical"] == "bm25stem":
        return retriever.stem_lexical().chunk_scores(text, eff["chunk_weight"])
    if eff["lexical"] == "bm25doc":
        return retriever.doc_lexical().chunk_scores(retriever.data.bm25, text, eff.get("chunk_weight", 0.5))
    return retriever.data.bm25.scores(text)


def _reference(retriever, records, vectors, query: str, mode: str, k: int, *, nprobe=None, depth=None):
    parsed = parse_query(query)
    passing = [i for i, rec in enumerate(records) if _passes_ref(parsed, rec)]
    bm25 = retriever.data.bm25.scores(_lexical_ref(parsed, retriever))
    qvec = retriever.query_vector(parsed.search_text)
    dense = row_scores(vectors, qvec)
    # bm25doc, and hybrid's default lexical side: the document-aware dense scores (spec/ranking.md).
    doc = retriever.doc_lexical().chunk_scores(retriever.data.bm25, _lexical_ref(parsed, retriever), 0.5)
    if mode == "bm25":
        return _ranked(bm25, [r for r in passing if bm25[r] > 0], k)
    if mode == "bm25doc":
        return _ranked(doc, [r for r in passing if doc[r] > 0], k)
    if mode == "bm25stem":  # bm25doc's score over the stemmed arm
        stem = retriever.stem_lexical().chunk_scores(_lexical_ref(parsed, retriever), DEFAULT_STEM_CHUNK_WEIGHT)
        return _ranked(stem, [r for r in passing if stem[r] > 0], k)
    if mode == "flat":
        return _ranked(dense, passing, k)
    if mode == "ivf":
        lists = retriever.ivf()
        nprobe = nprobe or lists.params.nprobe
        loose = [i for i, rec in enumerate(records) if _passes_ref(parsed, rec, loose=True)]
        if len(loose) > len(records) * min(nprobe, lists.nlist) / lists.nlist:
            probed = {int(r) for c in lists.probe(qvec, nprobe) for r in lists.lists[c]}
            passing = [r for r in passing if r in probed]
        return _ranked(dense, passing, k)
    # hybrid: what the search fills in for the index's embedder (fusion_fit), fused as fusion.fuse does.
    eff = fusion_defaults(retriever.meta.embedding_model)
    arm = _arm_scores(retriever, _lexical_ref(parsed, retriever), eff)

    def fused(at: int):
        lexical = _ranked(arm, [r for r in passing if arm[r] > 0], at)
        return fusion.fuse(lexical, _ranked(dense, passing, at), k, method=eff["fusion"], weight=eff.get("weight"),
                           rrf_k=eff.get("rrf_k"))

    rows, scores = fused(depth or fusion.DEFAULT_DEPTH)  # the depth does not depend on k
    return (rows, scores) if k <= rows.size else fusion.extend(rows, scores, fused(k), k)


QUERIES = [
    '"exact phrase"',
    '"exact phrase" match',
    "cat* dogs",
    "cat* path:notes/",
    "dogs -cats",
    'the -"of the"',
    "red OR blue",
    '"fast slow" OR "slow fast"',
    "vector ext:md",
    "index ext:md OR ext:py",
    "rank lang:python",
    "rank lang:markdown -path:notes/2026/",
    "search path:notes/2026/",
    "search path:/notes",
    "search path:2026",
    "search path:lib/util.py",
    "search ext:txt",
    "search ext:rst.txt",
    'search path:"a#b/c\\"d"',
    "search path:ünï/",
    "exact-phrase -green",
    "cat* -cats -dog*",
    "nothing* dogs",
    "dogs OR nothingatall",
    "blue ext:zzz",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("query", QUERIES)
def test_a_filtered_ranking_is_the_plain_ranking_of_the_rows_that_pass(index, query, mode):
    retriever, records, vectors = index
    for k in (1, 3, 10, 200):
        hits = retriever.search(query, mode=mode, k=k)
        rows, scores = _reference(retriever, records, vectors, query, mode, k)
        assert [h.row for h in hits] == rows.tolist(), (query, mode, k)
        assert [h.score for h in hits] == [float(s) for s in scores], (query, mode, k)  # bit for bit
        assert isinstance(hits, Hits) and hits.query == parse_query(query)


@pytest.mark.parametrize("nprobe", [1, 2, 8])
@pytest.mark.parametrize("query", ["cat* path:notes/", "search ext:md", "rank lang:python", '"exact phrase"'])
def test_ivf_ranks_the_passing_rows_of_its_probed_lists_or_all_when_few(index, query, nprobe):
    retriever, records, vectors = index
    hits = retriever.search(query, mode="ivf", k=5, nprobe=nprobe)
    rows, scores = _reference(retriever, records, vectors, query, "ivf", 5, nprobe=nprobe)
    assert [h.row for h in hits] == rows.tolist()
    assert [h.score for h in hits] == [float(s) for s in scores]
    if nprobe == 8:  # every list probed: IVF is flat
        flat = retriever.search(query, mode="flat", k=5)
        assert [(h.row, h.score) for h in hits] == [(h.row, h.score) for h in flat]


def test_every_hit_passes_and_nothing_better_was_left_out(index):
    retriever, records, _ = index
    for query in QUERIES:
        parsed = parse_query(query)
        for mode in MODES:
            for h in retriever.search(query, mode=mode, k=50):
                assert _passes_ref(parsed, records[h.row]), (query, mode, h.chunk_id)


# -- plain text ------------------------------------------------------------------------

PLAIN = ["cats", "exact phrase", "The Cat  of   the dogs", "!!! ???", "state-of-the-art 3*4", "x\\y",
         "catalog category cat"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("query", PLAIN)
def test_plain_text_searches_exactly_as_before(index, query, mode):
    """What search did before the syntax (these are its calls, unchanged), bit for bit, for plain text."""
    retriever, _, vectors = index
    data = retriever.data
    assert parse_query(query).plain
    if mode == "bm25":
        rows, scores = data.bm25.search(query, 7)
    elif mode == "bm25doc":
        rows, scores = retriever.doc_lexical().search(data.bm25, query, 7, 0.5)
    elif mode == "bm25stem":
        rows, scores = retriever.stem_lexical().search(query, 7, DEFAULT_STEM_CHUNK_WEIGHT)
    else:
        vec = retriever.query_vector(query)
        if mode == "flat":
            rows, scores = flat_search(vectors, vec, 7)
        elif mode == "ivf":
            rows, scores = retriever.ivf().search(vec, 7)
        else:
            eff = fusion_defaults(retriever.meta.embedding_model)  # hybrid's options for this embedder
            arm = _arm_scores(retriever, query, eff)
            matched = np.flatnonzero(arm > 0)
            lexical = top_k(arm[matched], matched, 100)
            rows, scores = fusion.fuse(lexical, flat_search(vectors, vec, 100), 7, method=eff["fusion"],
                                       weight=eff.get("weight"), rrf_k=eff.get("rrf_k"))
    for q in (query, literal(query)):
        hits = retriever.search(q, mode=mode, k=7)
        assert [h.row for h in hits] == rows.tolist()
        assert [h.score for h in hits] == [float(s) for s in scores]


def test_literal_searches_syntax_characters_as_text(index):
    retriever, _, _ = index
    with pytest.raises(QueryError):
        retriever.search("Note: dogs - cats", mode="bm25", strict=True)
    hits = retriever.search(literal("Note: dogs - cats"), mode="bm25", k=5)
    assert [h.row for h in hits] == retriever.data.bm25.search("Note: dogs - cats", 5)[0].tolist()
    assert hits.query.plain


# -- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_malformed_query_is_refused_before_anything_is_embedded(index, mode):
    retriever, _, _ = index
    before = len(retriever.embedder.embedded)
    for query in ('"unclosed', "cats OR", "pth:x", "cats -", "-cats", "ext:md"):
        with pytest.raises(QueryError):
            retriever.search(query, mode=mode, strict=True)
    assert len(retriever.embedder.embedded) == before


def test_vector_modes_embed_the_searched_words_only(index):
    retriever, _, _ = index
    retriever.search('"exact phrase" cat* -dogs path:notes/ ext:md', mode="flat", k=2)
    assert retriever.embedder.embedded[-1] == "exact phrase cat"


# -- prefix expansion ------------------------------------------------------------------


def test_prefix_expansion_is_bounded_to_the_most_frequent_terms(tmp_path):
    n = MAX_EXPANSIONS + 30
    docs = {f"d{i:03}.md": [" ".join(f"pre{j:03}" for j in range(i + 1)) + " other"] for i in range(n)}
    path, records, _ = build(tmp_path / "art", "pre", docs, dim=8)
    retriever = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))
    hits = retriever.search("pre*", mode="bm25", k=n)
    # pre000 is in every chunk, pre{n-1} in one: the MAX_EXPANSIONS lowest numbers are in the most chunks.
    assert hits.expansions["pre"] == tuple(f"pre{j:03}" for j in range(MAX_EXPANSIONS))
    assert hits.notes == (f"pre* matches {n} terms; the {MAX_EXPANSIONS} in the most chunks rank (all of them "
                          "count for OR and -); type more letters to narrow it",)
    assert "pre* (pre000, pre001" in hits.describe()
    # For OR and exclusion every term counts, not only the ranked ones: here each chunk holds a term of its own.
    single = {f"e{i:03}.md": [f"q{i:03} other"] for i in range(n)}
    path, _, _ = build(tmp_path / "art2", "single", single, dim=8)
    retriever = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))
    assert len(retriever.search("other q* OR zzz", mode="bm25", k=1000)) == n
    assert len(retriever.search("q* OR zzz", mode="flat", k=1000)) == n
    # BM25 returns chunks that score, and only the ranked expansions score.
    assert len(retriever.search("q* OR zzz", mode="bm25", k=1000)) == MAX_EXPANSIONS
    assert retriever.search("other -q*", mode="bm25", k=1000) == []
    assert len(retriever.search("other -q00*", mode="bm25", k=1000)) == n - 10
    none = retriever.search("zzz* other", mode="bm25", k=3)
    assert len(none) == 3
    assert none.notes == ("zzz* matches no term of the index",) and none.expansions == {"zzz": ()}


# -- the pieces ------------------------------------------------------------------------


def test_the_document_table_reads_every_doc_id(index):
    retriever, records, _ = index
    table = doc_table(retriever.data.records)
    per_row = [d for d, lo, hi in zip(table.doc_ids, table.starts[:-1], table.starts[1:]) for _ in range(lo, hi)]
    assert per_row == [r.doc_id for r in records]
    assert doc_table(retriever.data.records) is table  # built once per docs.jsonl


@pytest.mark.parametrize(("f", "doc_id", "want"), [
    (Filter("path", "notes/2026/"), "notes/2026/a.md", True),
    (Filter("path", "notes/2026/"), "docs/notes/2026/a.md", True),
    (Filter("path", "notes/2026/"), "mynotes/2026/a.md", False),
    (Filter("path", "/notes"), "docs/notes/a.md", False),
    (Filter("path", "/docs/notes"), "docs/notes/a.md", True),
    (Filter("path", "2026"), "notes/2026.md", True),
    (Filter("path", "Notes"), "notes/a.md", False),
    (Filter("ext", "md"), "a/README.MD", True),
    (Filter("ext", "md"), "a/.md", False),
    (Filter("ext", "txt"), "a/b.rst.txt", True),
    (Filter("ext", "rst.txt"), "a/b.rst.txt", True),
    (Filter("ext", "rst"), "a/b.rst.txt", False),
    (Filter("ext", "md"), "a.md/b", False),
    (Filter("lang", "python"), "x/y.pyi", True),
    (Filter("lang", "cpp"), "x/y.h", True),
    (Filter("lang", "c"), "x/y.h", True),
    (Filter("lang", "markdown"), "x/y.rst", False),
])
def test_path_filters(f, doc_id, want):
    assert path_matches(f, doc_id) is want
    assert DocTable((doc_id,), np.array([0, 1])).matches(f).tolist() == [want]
    if f.name == "path":
        assert _path_ref(f.value, doc_id) is want


def test_the_column_filters_agree_with_the_reference(index):
    retriever, _, _ = index
    table = doc_table(retriever.data.records)
    values = ["notes/", "notes/2026/", "/notes", "/src", "2026", "c\"d", "ünï", "a#b/", "app.py", ".md", "x"]
    filters = [Filter("path", v) for v in values] + [Filter("ext", e) for e in ("md", "py", "txt", "rst.txt", "go")]
    filters += [Filter("lang", lang) for lang in LANGUAGES]
    for f in filters:
        assert table.matches(f).tolist() == [path_matches(f, d) for d in table.doc_ids], f


def test_phrase_in():
    assert phrase_in(["a", "b", "c"], ["b", "c"]) and phrase_in(["a"], [])
    assert not phrase_in(["a", "b", "c"], ["a", "c"]) and not phrase_in(["b"], ["b", "b"])


def test_item_shapes_the_reference_relies_on():
    parsed = parse_query('"a b" c* d')
    assert [type(i) for i in parsed.positive_items] == [Phrase, Prefix, Word]


_TEXT = st.lists(st.sampled_from(["a", "b", "ab", "A", "B", " ", ",", "\n", "_", "1", "é", "É", "\u0130", "Σ",
                                          "ß", "-", "\u0307", "ǅ"]), max_size=30).map("".join)


@settings(max_examples=500, deadline=None)
@given(_TEXT, st.lists(st.sampled_from(["a", "b", "ab", "_", "1", "é", "i", "σ", "ß", "ǆ"]), min_size=1, max_size=3))
def test_the_ascii_phrase_check_is_the_analyzer_check(text, phrase):
    """The regular expression used on ASCII text answers as the analyzer's terms do, on any text."""
    match = _Match(np.ones(1, dtype=bool), tuple(phrase))
    assert match.in_text(text, None)[0] == phrase_in(analyze(text), phrase)


def test_phrase_checks_stop_after_a_bound_and_say_so(tmp_path, monkeypatch):
    from ragtui.core.search import query_plan

    docs = {f"d{i:03}.md": [f"alpha filler words here beta {i}"] for i in range(600)}
    docs["z.md"] = ["beta alpha at last"]
    path, _, _ = build(tmp_path / "art", "bound", docs, dim=8)
    retriever = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))
    assert [h.doc_id for h in retriever.search('"beta alpha"', mode="flat", k=3)] == ["z.md"]
    monkeypatch.setattr(query_plan, "MAX_TEXT_CHECKS", 256)
    hits = retriever.search('"beta alpha"', mode="bm25", k=3)
    assert len(hits) <= 1 and hits.notes == (
        "the phrase checks stopped after reading 256 chunks: these are the matches among the 256 best-ranked "
        "candidates; add words or a filter to narrow it",)

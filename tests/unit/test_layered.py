"""The layered view of the next generation (core.search.layered) ranks as an index of the next generation does.

Each case ingests a folder of small text files with the real writer (the base), changes the folder (edits,
deletions, additions), ingests it again into separate artifacts (the next generation), and lays the next
generation out as the base's unchanged documents plus the next index's chunks of the changed ones: every
mode, for plain queries and queries with syntax, must then give the next index's rows and scores (1e-9,
ties by ascending row).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtui.core.index.index_format import IndexData
from ragtui.core.ingest.sync import sync
from ragtui.core.search.docaware import doc_groups_of
from ragtui.core.search.layered import LayeredGeneration
from ragtui.core.search.query import parse_query
from ragtui.core.search.retriever import Retriever

from .fakes import HashEmbedder

WORDS = ["wing", "flow", "shock", "layer", "index", "term", "drag", "lift", "loan", "tip", "run", "runs", "running",
         "runner", "catalog", "catalogs", "boundary", "sea", "seas", "wave", "waves"]
FRESH, STALE = "freshword", "staleword"
"""A word only the changed folder's new text holds, and one only the text it replaced or removed held."""
QUERIES = ["wing flow", "running runner", "seas wave", "index index term", "absentword", FRESH,
           f"{STALE} tip", f"{FRESH} {STALE} layer", "boundary layer shock drag lift loan catalogs"]
PLANS = ["path:m0 wing", "wing -flow", '"wing flow"', "run*", 'ext:md run* -"seas wave"', "fresh* layer",
         "sta* OR wing", "-path:m01 boundary tip", "wing OR seas", '"boundary layer" OR shock', "lang:python wing",
         "r* w* -runs", f"+{STALE} OR {FRESH} tip", "-ext:md wing"]
"""Queries with syntax: filters, exclusions, phrases, prefixes (over words only new or only removed chunks hold)."""
CASES = [
    ("bm25", {}), ("bm25doc", {}), ("bm25doc", {"chunk_weight": 0.0}), ("bm25stem", {}),
    ("bm25stem", {"chunk_weight": 0.3}), ("flat", {}), ("hybrid", {}), ("hybrid", {"lexical": "bm25"}),
    ("hybrid", {"lexical": "bm25doc", "fusion": "rrf"}), ("hybrid", {"fusion": "zscore", "weight": 0.4, "depth": 4}),
]


def ingest(folder: Path, docs: dict[str, str], art: Path) -> Retriever:
    """Make ``folder`` hold exactly ``docs`` (name -> text) and ingest it into ``art`` from scratch."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    report = sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    return Retriever.open(report.index_path, embedder=HashEmbedder())


def spans(data: IndexData) -> dict[str, tuple[int, int]]:
    """Each document's rows [lo, hi)."""
    out: dict[str, tuple[int, int]] = {}
    for row, rec in enumerate(data.records):
        lo, _ = out.get(rec.doc_id, (row, row))
        out[rec.doc_id] = (lo, row + 1)
    return out


def overlay(base: IndexData, nxt: IndexData) -> tuple[list[tuple[str, int, int]], list, np.ndarray]:
    """The segments, new records and new vectors that lay ``nxt`` out over ``base``: a document whose chunks are
    unchanged is the base's rows, any other document's chunks are new (taken from ``nxt``)."""
    before = spans(base)
    segments: list[tuple[str, int, int]] = []
    new_rows: list[int] = []
    for doc_id, (lo, hi) in spans(nxt).items():
        was = before.get(doc_id)
        same = was is not None and [r.fingerprint for r in base.records[was[0]:was[1]]] == \
            [r.fingerprint for r in nxt.records[lo:hi]]
        if same:
            assert was is not None
            piece = ("old", *was)
        else:
            piece = ("new", len(new_rows), len(new_rows) + hi - lo)
            new_rows.extend(range(lo, hi))
        last = segments[-1] if segments else None
        if last is not None and last[0] == piece[0] and last[2] == piece[1]:
            segments[-1] = (last[0], last[1], piece[2])
        else:
            segments.append(piece)
    rows = np.array(new_rows, dtype=np.int64)
    return segments, [nxt.records[r] for r in new_rows], np.asarray(nxt.vectors)[rows].reshape(-1, nxt.meta.dim)


def layer(base: Retriever, nxt: Retriever) -> LayeredGeneration:
    segments, records, vectors = overlay(base.data, nxt.data)
    return LayeredGeneration(base.data, segments, records, vectors, doclex=base.doc_lexical,
                             stemlex=base.stem_lexical, ivf=base.ivf)


def same_ranking(got: tuple[np.ndarray, np.ndarray], want: list[tuple[int, float]], k: int) -> None:
    """``got`` ranks as ``want``: equal scores (1e-9), and equal rows but for the order of tied ones (and, in
    the last group of ties that ``k`` cuts, which of them were kept)."""
    rows, scores = got
    assert rows.dtype == np.int64 and scores.dtype == np.float64
    assert rows.size == len(want)
    np.testing.assert_allclose(scores, [s for _, s in want], rtol=0, atol=1e-9)
    start = 0
    while start < len(want):
        end = start + 1
        while end < len(want) and abs(want[end][1] - want[start][1]) <= 1e-9:
            end += 1
        cut = end == len(want) == k
        if not cut:
            assert sorted(rows[start:end].tolist()) == sorted(r for r, _ in want[start:end])
        start = end


def check(base: Retriever, nxt: Retriever) -> None:
    data = nxt.data
    n = data.n_chunks
    nprobe = max(1, base.ivf().nlist)
    for mode, params in CASES:
        lay = layer(base, nxt)  # each mode's first search on a fresh view: it derives what it needs itself
        for query in QUERIES:
            vec = nxt.query_vector(query)
            for k in (max(1, n), 3):
                want = [(h.row, h.score) for h in nxt.search(query, mode=mode, k=k, **params)]
                same_ranking(lay.search(mode, k, text=query, vector=vec, **params), want, k)
                if mode == "flat":
                    same_ranking(lay.search("ivf", k, vector=vec, nprobe=nprobe), want, k)
        for query in PLANS:
            parsed = parse_query(query, strict=True)
            assert not parsed.plain
            plan = lay.bind(parsed)
            vec = nxt.query_vector(parsed.search_text)
            for k in (max(1, n), 3):
                hits = nxt.search(query, mode=mode, k=k, **params)
                same_ranking(lay.search(mode, k, vector=vec, plan=plan, **params), [(h.row, h.score) for h in hits], k)
                assert (plan.expansions, (*parsed.notes, *plan.notes)) == (hits.expansions, hits.notes)
                if mode == "flat":
                    same_ranking(lay.search("ivf", k, vector=vec, plan=lay.bind(parsed), nprobe=nprobe),
                                 [(h.row, h.score) for h in hits], k)
    lay = layer(base, nxt)
    assert lay.n_chunks == len(lay.records) == n and lay.vectors.shape == (n, data.meta.dim)
    assert list(lay.records) == list(data.records)
    assert [lay.records[i] for i in range(-n, 0)] == list(data.records)
    np.testing.assert_array_equal(lay.vectors.take(np.arange(n)), np.asarray(data.vectors).reshape(n, data.meta.dim))
    np.testing.assert_array_equal(lay.doc_of_row, doc_groups_of(data.records))
    np.testing.assert_array_equal(lay.records.doc_starts(), data.records.doc_starts())
    # A prefix's df in the next generation: the bisection at the removed runs counts as the scan of the postings.
    terms = base.data.bm25.n_terms
    for lo, hi in ((0, terms), (terms // 3, terms), (0, terms // 2)):
        scanned = lay._removed_postings(lo, hi, "scan")
        np.testing.assert_array_equal(lay._removed_postings(lo, hi, "bisect"), scanned)
        assert int(scanned.sum()) <= int(np.diff(base.data.bm25.offsets[lo : hi + 1]).sum())


def text(rng: np.random.Generator, extra: str = "") -> str:
    words = rng.choice(WORDS, size=int(rng.integers(1, 40))).tolist()
    if extra:
        words.insert(int(rng.integers(0, len(words) + 1)), extra)
    return " ".join(words)


def base_docs(seed: int, n: int = 8) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    return {f"m{i:02d}.md": text(rng, STALE if i % 3 == 0 else "") for i in range(n)}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "docs"


def test_edits_deletions_and_additions_rank_as_the_next_index(folder: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    before = base_docs(1)
    after = dict(before)
    del after["m00.md"], after["m04.md"]
    after["m03.md"] = text(rng, FRESH)
    after["m06.md"] = text(rng)
    after["a00.md"] = text(rng, FRESH)
    after["m05b.md"] = text(rng)
    after["z00.md"] = text(rng, FRESH)
    base = ingest(folder, before, tmp_path / "base")
    nxt = ingest(folder, after, tmp_path / "next")
    lay = layer(base, nxt)
    assert lay.n_removed > 0 and any(s[0] == "old" for s in overlay(base.data, nxt.data)[0])
    check(base, nxt)


@pytest.mark.parametrize("change", ["every document removed", "nothing removed", "base empty", "additions at the start",
                                    "additions at the end", "nothing changed", "next empty"])
def test_edge_cases(folder: Path, tmp_path: Path, change: str) -> None:
    rng = np.random.default_rng(3)
    before = base_docs(2)
    after = dict(before)
    if change == "every document removed":
        after = {f"n{i}.md": text(rng, FRESH) for i in range(3)}
    elif change == "nothing removed":
        after.update({"m03b.md": text(rng, FRESH), "z.md": text(rng)})
    elif change == "base empty":
        before = {}
    elif change == "additions at the start":
        after.update({"a.md": text(rng, FRESH), "b.md": text(rng)})
    elif change == "additions at the end":
        after.update({"y.md": text(rng, FRESH), "z.md": text(rng)})
    elif change == "next empty":
        after = {}
    base = ingest(folder, before, tmp_path / "base")
    nxt = ingest(folder, after, tmp_path / "next")
    check(base, nxt)


names = st.sampled_from([f"{c}{i}.md" for c in "amz" for i in range(4)])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.lists(names, max_size=8, unique=True), st.lists(names, max_size=8, unique=True),
       st.lists(names, max_size=6, unique=True))
def test_random_changes_rank_as_the_next_index(tmp_path_factory: pytest.TempPathFactory, seed: int, kept: list[str],
                                               edited: list[str], added: list[str]) -> None:
    rng = np.random.default_rng(seed)
    before = {name: text(rng, STALE if rng.random() < 0.3 else "") for name in sorted({*kept, *edited})}
    after = {name: before[name] for name in kept if name not in edited}
    after.update({name: text(rng, FRESH if rng.random() < 0.5 else "") for name in [*edited, *added]})
    tmp = tmp_path_factory.mktemp("random")
    base = ingest(tmp / "docs", before, tmp / "base")
    nxt = ingest(tmp / "docs", after, tmp / "next")
    check(base, nxt)


def test_segments_that_do_not_tile_are_refused(folder: Path, tmp_path: Path) -> None:
    base = ingest(folder, base_docs(4, 3), tmp_path / "base")
    n = base.data.n_chunks
    for segments in ([("old", 0, n - 1), ("old", n - 2, n)], [("old", 0, n + 1)], [("new", 0, 1)],
                     [("new", 1, 2)], [("gone", 0, 1)], [("old", 2, 2)]):
        with pytest.raises(ValueError):
            LayeredGeneration(base.data, segments, [], np.zeros((0, base.data.meta.dim), np.float32),
                              doclex=base.doc_lexical, stemlex=base.stem_lexical, ivf=base.ivf)


def test_concurrent_first_searches_agree(folder: Path, tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    before = base_docs(5)
    after = {**before, "m01.md": text(np.random.default_rng(9), FRESH)}
    base = ingest(folder, before, tmp_path / "base")
    nxt = ingest(folder, after, tmp_path / "next")
    vec = nxt.query_vector("wing flow")
    calls = [(mode, params) for mode, params in CASES for _ in range(3)]
    alone = [layer(base, nxt).search(mode, 5, text="wing flow", vector=vec, **params) for mode, params in calls]
    shared = layer(base, nxt)  # every thread's first search derives what it needs at once
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda c: shared.search(c[0], 5, text="wing flow", vector=vec, **c[1]), calls))
    for (rows, scores), (want_rows, want_scores) in zip(together, alone):
        np.testing.assert_array_equal(rows, want_rows)
        np.testing.assert_array_equal(scores, want_scores)


def code(names: list[str], words: str) -> str:
    return "\n\n".join(f"def {name}(x):\n    \"\"\"{words} {name}\"\"\"\n    return x + 1\n" for name in names)


def test_code_documents_and_symbol_filters(folder: Path, tmp_path: Path) -> None:
    before = {"a.py": code(["alpha", "beta"], "wing flow"), "b.py": code(["gamma"], "run seas"),
              "c.md": "wing flow run seas tip", "d.py": code(["alpha_two"], "tip wing")}
    after = {**before, "a.py": code(["alpha", "delta"], "wing seas"), "e.py": code(["beta", "epsilon"], "flow tip")}
    del after["b.py"]
    base = ingest(folder, before, tmp_path / "base")
    nxt = ingest(folder, after, tmp_path / "next")
    lay = layer(base, nxt)
    n = nxt.data.n_chunks
    for query in ["sym:alpha wing", "sym:beta flow", "-sym:alpha wing", "sym:gamma run", "lang:python tip",
                  "sym:epsilon OR sym:delta wing", "-lang:python wing"]:
        parsed = parse_query(query, strict=True)
        vec = nxt.query_vector(parsed.search_text)
        for mode, params in CASES:
            hits = nxt.search(query, mode=mode, k=n, **params)
            got = lay.search(mode, n, vector=vec, plan=lay.bind(parsed), **params)
            same_ranking(got, [(h.row, h.score) for h in hits], n)
        assert nxt.search(query, mode="flat", k=n) or query == "sym:gamma run"


def test_a_prefix_of_many_terms_expands_by_the_next_generations_counts(folder: Path, tmp_path: Path) -> None:
    # 90 terms starting with "pre": each removed document held the first 40 many times over, so in the next
    # generation the 64 terms in the most chunks are others than in the base.
    many = [f"pre{i:02d}" for i in range(90)]
    before = {f"g{i}.md": " ".join(many[:40]) for i in range(4)}
    before.update({f"k{i}.md": " ".join(many[i % 3 :: 3] + many[60:]) for i in range(6)})
    after = {name: body for name, body in before.items() if name.startswith("k")}
    after["n.md"] = " ".join(many[50:] + ["tip"])
    base = ingest(folder, before, tmp_path / "base")
    nxt = ingest(folder, after, tmp_path / "next")
    lay = layer(base, nxt)
    n = nxt.data.n_chunks
    for query in ["pre*", "pre* tip", "-pre0* pre*", "pre8*"]:
        parsed = parse_query(query, strict=True)
        plan = lay.bind(parsed)
        for mode in ("bm25", "bm25doc", "bm25stem"):
            hits = nxt.search(query, mode=mode, k=n)
            same_ranking(lay.search(mode, n, plan=plan), [(h.row, h.score) for h in hits], n)
            assert (plan.expansions, (*parsed.notes, *plan.notes)) == (hits.expansions, hits.notes)
    assert lay.bind(parse_query("pre*")).expansions != base.search("pre*", k=1).expansions


def test_ivf_ranks_the_probed_lists_less_removed_rows_and_every_new_row(folder: Path, tmp_path: Path) -> None:
    from ragtui.core.search.ivf import IVFParams

    rng = np.random.default_rng(11)
    before = {f"m{i:02d}.md": text(rng, STALE if i % 5 == 0 else "") for i in range(30)}
    after = {**before, **{f"m{i:02d}.md": text(rng, FRESH) for i in range(0, 30, 4)}, "n.md": text(rng)}
    del after["m03.md"]
    ingested = ingest(folder, before, tmp_path / "base")
    base = Retriever.open(ingested.data.path, embedder=HashEmbedder(), ivf_params=IVFParams(nlist=8, nprobe=2))
    nxt = ingest(folder, after, tmp_path / "next")
    lay = layer(base, nxt)
    n, lists = nxt.data.n_chunks, base.ivf()
    to_next: dict[int, int] = {}
    new_rows: list[int] = []
    at = 0
    for source, lo, hi in overlay(base.data, nxt.data)[0]:
        if source == "old":
            to_next.update(zip(range(lo, hi), range(at, at + hi - lo)))
        else:
            new_rows.extend(range(at, at + hi - lo))
        at += hi - lo
    for query in QUERIES + PLANS:
        parsed = parse_query(query, strict=True)
        plan = None if parsed.plain else lay.bind(parsed)
        vec = nxt.query_vector(parsed.search_text)
        exact = {h.row: h.score for h in nxt.search(query, mode="flat", k=n)}  # every row the query allows
        probed = {to_next[r] for r in lists.probed_rows(vec, 2).tolist() if r in to_next} | set(new_rows)
        assert len(probed) < n  # the lists probed leave rows out
        # Under a plan whose rows (as the index tells, before text checks) are fewer than the probed lists
        # hold on average, every one of them is ranked (QueryPlan.ivf).
        few = plan is not None and (n if plan.mask is None else int(plan.mask.sum())) <= n * 2 / lists.nlist
        want = sorted(((r, s) for r, s in exact.items() if few or r in probed), key=lambda rs: (-rs[1], rs[0]))
        for k in (n, 3):
            same_ranking(lay.search("ivf", k, vector=vec, plan=plan), want[:k], k)

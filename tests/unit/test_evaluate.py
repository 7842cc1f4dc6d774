"""Metrics (hand-computed and against trec_eval), the randomisation test, and the evaluation harness."""

from __future__ import annotations

import hashlib
import json
import math
import random
import urllib.parse

import pytest

from ragtui.core.errors import UsageError
from ragtui.core.eval import metrics
from ragtui.core.eval.datasets import Dataset
from ragtui.core.eval.evaluate import (
    METRICS,
    REPORT_FORMAT,
    compare_reports,
    doc_file_name,
    index_fingerprint,
    make_report,
    nprobe_sweep,
    prepare_collection,
    ranked_ids,
    run_mode,
)
from ragtui.core.search.retriever import Retriever
from tests.unit.fakes import HashEmbedder

L2 = math.log2

# -- metrics, by hand ----------------------------------------------------------------------------


def test_ndcg_by_hand():
    qrels = {"a": 3.0, "b": 2.0, "c": 1.0}
    # Ranking x, b, a: DCG = 0 + 2/log2(3) + 3/log2(4); ideal 3, 2, 1.
    dcg = 2 / L2(3) + 3 / 2
    idcg = 3 + 2 / L2(3) + 1 / 2
    assert metrics.ndcg(["x", "b", "a"], qrels, 3) == pytest.approx(dcg / idcg, abs=1e-12)
    # Cutoff 2: only x, b count; the ideal is cut at 2 as well.
    assert metrics.ndcg(["x", "b", "a"], qrels, 2) == pytest.approx((2 / L2(3)) / (3 + 2 / L2(3)), abs=1e-12)
    assert metrics.ndcg(["a", "b", "c"], qrels, 3) == pytest.approx(1.0)
    assert metrics.ndcg([], qrels, 10) == 0.0
    assert metrics.ndcg(["a"], {"a": 0.0}, 10) == 0.0  # nothing relevant: 0, not a division by zero


def test_set_metrics_by_hand():
    qrels = {"a": 1.0, "b": 1.0, "c": 2.0, "z": 0.0}
    ranked = ["x", "a", "z", "c"]
    assert metrics.recall(ranked, qrels, 2) == pytest.approx(1 / 3)
    assert metrics.recall(ranked, qrels, 10) == pytest.approx(2 / 3)
    assert metrics.precision(ranked, qrels, 10) == pytest.approx(2 / 10)  # divided by k, as trec_eval's P@k
    assert metrics.precision(ranked, qrels, 4) == pytest.approx(2 / 4)
    assert metrics.mrr(ranked, qrels, 10) == pytest.approx(1 / 2)
    assert metrics.mrr(ranked, qrels, 1) == 0.0
    assert metrics.hit_rate(ranked, qrels, 1) == 0.0 and metrics.hit_rate(ranked, qrels, 2) == 1.0
    assert metrics.mrr(["z"], qrels, 10) == 0.0  # gain 0 is not relevant


# -- metrics, against an independent implementation (trec_eval through pytrec_eval) -------------


def _random_cases(seed=7, n=300):
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(40)]
    cases = []
    for q in range(n):
        judged = rng.sample(pool, rng.randint(1, 12))
        qrels = {d: rng.choice([1, 1, 2, 3, 4]) for d in judged}
        ranked = rng.sample(pool, rng.randint(0, 30))
        cases.append((f"q{q}", qrels, ranked))
    return cases


@pytest.mark.parametrize("k", [1, 3, 10, 20])
def test_metrics_agree_with_trec_eval(k):
    pytrec_eval = pytest.importorskip(
        "pytrec_eval", reason="pytrec-eval-terrier is the independent reference (pip install -e '.[eval]')"
    )
    cases = _random_cases()
    qrels = {q: dict(r) for q, r, _ in cases}
    # Distinct descending scores: trec_eval ranks by score, so the ranking is exactly ours.
    run = {q: {d: float(100 - i) for i, d in enumerate(ranked[:k])} for q, _, ranked in cases if ranked}
    measures = {f"ndcg_cut.{k}", f"recall.{k}", f"P.{k}", "recip_rank", f"success.{k}"}
    got = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    checked = 0
    for q, r, ranked in cases:
        rel = {d: float(g) for d, g in r.items()}
        ours = {m: getattr(metrics, m)(ranked, rel, k) for m in METRICS}
        if q not in got:  # trec_eval skips queries with an empty run; every metric of ours is 0 there
            assert not ranked and not any(ours.values())
            continue
        t = got[q]
        for mine, theirs in (("ndcg", f"ndcg_cut_{k}"), ("recall", f"recall_{k}"), ("precision", f"P_{k}"),
                             ("mrr", "recip_rank"), ("hit_rate", f"success_{k}")):
            assert abs(ours[mine] - t[theirs]) <= 1e-6, (q, mine, ours[mine], t[theirs])
        checked += 1
    assert checked > 250


# -- the paired randomisation test ----------------------------------------------------------------


def test_randomization_exact_small():
    # d = (1, 1, 1): of the 8 sign patterns only all-plus and all-minus reach |mean| = 1.
    assert metrics.paired_randomization_test([0, 0, 0], [1, 1, 1]) == pytest.approx(2 / 8)
    # d = (1, -1): every pattern has |mean| >= 0.
    assert metrics.paired_randomization_test([0, 1], [1, 0]) == 1.0
    assert metrics.paired_randomization_test([0.5] * 5, [0.5] * 5) == 1.0
    assert metrics.paired_randomization_test([], []) == 1.0


def test_randomization_sampled():
    rng = random.Random(3)
    a = [rng.random() for _ in range(200)]
    same = [x + rng.gauss(0, 0.1) for x in a]
    better = [x + 0.2 for x in a]
    p_same = metrics.paired_randomization_test(a, same, permutations=2000, seed=1)
    assert p_same == metrics.paired_randomization_test(a, same, permutations=2000, seed=1)  # seeded
    assert p_same == metrics.paired_randomization_test(same, a, permutations=2000, seed=1)  # two-sided
    assert p_same > 0.05
    assert metrics.paired_randomization_test(a, better, permutations=2000, seed=1) == pytest.approx(1 / 2001)
    with pytest.raises(ValueError):
        metrics.paired_randomization_test([1, 2], [1])


# -- file names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("doc_id", ["4983", "a/b c", ".hidden", "ünï", "x%41", "..", "CON", "a" * 400])
def test_doc_file_name(doc_id):
    name = doc_file_name(doc_id)
    assert name.endswith(".txt") and not name.startswith(".") and "/" not in name and len(name) <= 250
    if len(doc_id) < 50:
        assert urllib.parse.unquote(name[:-4]) == doc_id  # reversible
    assert doc_file_name(doc_id + "x") != name


# -- the harness on a small hand-made collection ----------------------------------------------------

TOPICS = {
    "d1": "solar panels convert sunlight into electricity using photovoltaic cells",
    "d2": "wind turbines generate electricity from moving air",
    "d3": "bread dough rises because yeast ferments sugar",
    "d4": "sourdough starter keeps wild yeast alive between bakes",
    "d5": ("glaciers carve valleys slowly over thousands of years " * 30).strip(),  # several chunks
    "d6": "",
}


def _dataset(docs=None):
    docs = dict(TOPICS if docs is None else docs)
    queries = {"q1": "photovoltaic sunlight electricity", "q2": "yeast dough", "q3": "glaciers valleys"}
    qrels = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0, "d4": 1.0}, "q3": {"d5": 1.0, "d6": 1.0}}
    return Dataset("mini", "beir", "/nowhere", "test", docs, queries, qrels)


@pytest.fixture
def built(tmp_path):
    emb = HashEmbedder(dim=32)
    ds = _dataset()
    path, doc_map, report = prepare_collection(ds, artifacts=tmp_path / "art", embedder=emb, index_id="eval-mini",
                                               max_tokens=24, overlap=4)
    return ds, emb, path, doc_map, report, tmp_path


def test_prepare_collection_reuses(built):
    ds, emb, path, doc_map, report, tmp_path = built
    assert report.published and path.name == "eval-mini"
    assert sorted(doc_map.values()) == sorted(ds.docs)
    folder = tmp_path / "art" / "eval" / "eval-mini" / "mini"
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    n_embedded = len(emb.embedded)
    _, _, again = prepare_collection(ds, artifacts=tmp_path / "art", embedder=emb, index_id="eval-mini",
                                     max_tokens=24, overlap=4)
    assert not again.published and len(emb.embedded) == n_embedded  # nothing written, nothing embedded
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    smaller = _dataset({k: v for k, v in TOPICS.items() if k != "d2"})
    _, doc_map2, third = prepare_collection(smaller, artifacts=tmp_path / "art", embedder=emb,
                                            index_id="eval-mini", max_tokens=24, overlap=4)
    assert third.published and third.removed == ["mini/d2.txt"] and "mini/d2.txt" not in doc_map2


def test_ranked_ids_maps_chunks_to_documents(built):
    _, emb, path, doc_map, _, _ = built
    ret = Retriever.open(path, embedder=emb)
    assert ret.data.n_chunks > 6  # d5 has several chunks
    # k=1 asks for 5 chunks; d5's chunks fill them, yet only one document is returned.
    assert ranked_ids(ret, "glaciers valleys", "bm25", 1, to_doc=doc_map) == ["d5"]
    # k=3: the 15 chunks asked hold only d5 for this query in BM25 (no other document matches): exhausted.
    assert ranked_ids(ret, "glaciers valleys", "bm25", 3, to_doc=doc_map) == ["d5"]
    # Vector search reaches every chunk: asking grows until 5 distinct documents are found.
    got = ranked_ids(ret, "glaciers valleys", "flat", 5, to_doc=doc_map)
    assert len(got) == 5 == len(set(got)) and got[0] == "d5"
    chunks = ranked_ids(ret, "glaciers valleys", "bm25", 3, level="chunk")
    assert len(chunks) == 3 and all(c.startswith("mini/d5.txt#") for c in chunks)


def test_run_and_report(built):
    ds, emb, path, doc_map, _, _ = built
    ret = Retriever.open(path, embedder=emb)
    results = [run_mode(ret, ds, m, 3, to_doc=doc_map) for m in ("bm25", "flat", "ivf", "hybrid")]
    for r in results:
        assert set(r.per_query) == {"q1", "q2", "q3"}
        for qid, row in r.per_query.items():
            for m in METRICS:
                assert row[m] == getattr(metrics, m)(row["ranked"], ds.qrels[qid], 3)
            assert row["latency_ms"] >= 0
    bm25 = results[0].per_query
    assert bm25["q3"]["ranked"] == ["d5"] and bm25["q3"]["recall"] == 0.5  # the empty d6 is unretrievable
    report = json.loads(json.dumps(make_report(ds, results, k=3, index_path=path, retriever=ret)))
    assert report["format"] == REPORT_FORMAT and report["k"] == 3 and list(report["modes"]) == ["bm25", "flat", "ivf", "hybrid"]
    mean = sum(q["ndcg"] for q in bm25.values()) / 3
    assert report["modes"]["bm25"]["metrics"]["ndcg"] == pytest.approx(mean)
    prov = report["provenance"]
    assert prov["chunker"]["max_tokens"] == 24 and prov["embedder"]["model"] == "test-hash"
    files = {n: hashlib.sha256((path / n).read_bytes()).hexdigest() for n in prov["index_fingerprint"]["files"]}
    assert files == prov["index_fingerprint"]["files"] and len(files) == 4
    assert index_fingerprint(path) == prov["index_fingerprint"]


def test_nprobe_sweep(built):
    ds, emb, path, doc_map, _, _ = built
    ret = Retriever.open(path, embedder=emb)
    rows = nprobe_sweep(ret, ds, 3, [1, 1000], to_doc=doc_map)
    nlist = rows[0]["nlist"]
    assert [r["nprobe"] for r in rows] == [1, nlist]  # clamped to nlist
    assert rows[-1]["ann_recall"] == 1.0  # probing every list is exact
    assert 0.0 <= rows[0]["ann_recall"] <= 1.0


def _fake_report(ndcgs, k=10, mode="bm25", name="mini"):
    per_query = {f"q{i}": {**{m: v for m in METRICS}, "latency_ms": 1.0, "ranked": []} for i, v in enumerate(ndcgs)}
    return {"format": REPORT_FORMAT, "k": k, "dataset": {"name": name},
            "provenance": {"index_fingerprint": {"sha256": "x"}},
            "modes": {mode: {"per_query": per_query}}}


def test_compare_reports():
    a = _fake_report([0.1, 0.2, 0.3, 0.4])
    b = _fake_report([0.2, 0.3, 0.4, 0.5])
    out = compare_reports(a, b)
    (row,) = out["rows"]
    assert row["ndcg"]["delta"] == pytest.approx(0.1) and row["n_queries"] == 4
    assert row["p_value"] == pytest.approx(2 / 16)  # exact: 4 queries, all better
    assert compare_reports(a, a)["rows"][0]["p_value"] == 1.0
    c = _fake_report([0.5, 0.5], mode="hybrid")
    out = compare_reports(a, c, pairs=[("bm25", "hybrid")])
    assert out["rows"][0]["n_queries"] == 2 and any("common queries" in n for n in out["notes"])
    # No mode in common (e.g. a variant named differently): every mode of A against every mode of B.
    out = compare_reports(a, c)
    assert [(r["mode_a"], r["mode_b"]) for r in out["rows"]] == [("bm25", "hybrid")]
    d = _fake_report([0.5, 0.5], mode="bm25-doc")
    d["modes"]["hybrid+w0.3"] = d["modes"]["bm25-doc"]
    out = compare_reports(a, d)
    assert [(r["mode_a"], r["mode_b"]) for r in out["rows"]] == [("bm25", "bm25-doc"), ("bm25", "hybrid+w0.3")]
    with pytest.raises(UsageError, match="different k"):
        compare_reports(a, _fake_report([0.1], k=100))
    with pytest.raises(UsageError, match="no mode 'flat'"):
        compare_reports(a, b, pairs=[("flat", "bm25")])
    with pytest.raises(UsageError, match="not a ragtui eval report"):
        compare_reports({"format": "other"}, b)

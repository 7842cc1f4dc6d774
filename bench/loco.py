"""Choose the ranking defaults leave-one-collection-out, for each shipped embedder; docs/quality.md's tables.

    nice python bench/loco.py [--embedder wordllama] [--write docs/quality.md]
    nice python bench/loco.py --collect-only --embedder onnx:bge-small   # ingest and embed only

For each shared collection (SciFact train, Cranfield, CISI, ADI) and each
shipped embedder (the embedded default, wordllama; the ONNX preset,
onnx:bge-small) the collection is indexed once through the normal ingest
path (256/32 chunks) under ``--artifacts/<embedder>`` and its queries are
embedded once (cached beside it). Then each query is ranked once by every
lexical arm of the grid and by flat (the top 500 chunks each, cached in
``<collection>-arms.npz``): bm25; bm25doc with chunk_weight 0.25, 0.5, 1;
the stemmed arm (``StemLexical``) with k1 in {0.9, 1.2, 1.5, 2}, b in
{0.4, 0.6, 0.75, 0.9}, chunk_weight 0.25, 0.5, 1. Every hybrid setting is
scored by re-fusing those cached rankings exactly as ``Retriever._hybrid``
does (the top 100 of each arm; extended from the top 500), with the search's
own ``fusion.fuse``: over bm25, bm25doc or the stemmed arm, weighted or
zscore fusion (weight 0.1 .. 0.9) or rrf (rrf_k 10, 30, 60, 100). Documents
rank at their best chunk, as ``ragtui eval`` ranks them. The per-query
figures of every setting are kept in ``results.pickle``.

Leave-one-collection-out: for each collection held out, the setting chosen
on the other three is scored on it, with the paired randomisation test
against the previous default. The stemmed arm's k1, b and chunk_weight are
chosen by their worst relative nDCG@10 gain over BM25; a hybrid setting by
(1) its worst shortfall against the better of its own two arms, in nDCG@10
and Recall@100 (0 when it never falls below either), then (2) its worst and
(3) its mean relative nDCG@10 gain over the better of BM25 and flat; hybrid
over the stemmed arm only at the k1 and b the lexical fit chose on the same
three collections (the index keeps one stemmed arm). The setting chosen on
all four is the default (``ragtui/core/search/fusion_fit.py``,
``stemmed.py``); for an embedder the table does not know, the bm25doc
setting best on both embedders at once. The defaults' rankings are checked
against ``Retriever.search`` (no option given) on the first queries.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

def _eval_data() -> Path:
    """The shared collections: $RAGTUI_EVAL_DATA, else ../shared/data/eval beside the repository (or its parent)."""
    if os.environ.get("RAGTUI_EVAL_DATA"):
        return Path(os.environ["RAGTUI_EVAL_DATA"])
    near = [up / "shared" / "data" / "eval" for up in (ROOT.parent, ROOT.parent.parent)]
    return next((p for p in near if p.exists()), near[0])


EVAL_DATA = _eval_data()
COLLECTIONS = ("scifact", "cranfield", "cisi", "adi")
DEPTH = 100
DEEP = 500

EMBEDDERS = {"wordllama": "wl", "onnx:bge-small": "bge"}
"""The shipped embedders (the embedded default, the ONNX preset) and their tags in file names."""


def collect(artifacts: Path, kind: str, whole: bool = False) -> dict[str, dict]:
    """Per collection: judgments, the chunk index opened, and each query's unit vector (cached).

    Each collection is ingested once per embedder under ``<artifacts>/<tag>`` (ingest
    rewrites nothing the second time) and the query vectors are kept in
    ``<artifacts>/<tag>/<collection>-queries.npy``, so a second run embeds nothing.
    """
    from ragtui.core.embedders import make_embedder
    from ragtui.core.eval.datasets import load_dataset
    from ragtui.core.eval.evaluate import prepare_collection
    from ragtui.core.search.retriever import Retriever

    tag = EMBEDDERS.get(kind, kind.replace(":", "-").replace("/", "_"))
    art = artifacts / tag
    embedder = make_embedder(kind)
    data: dict[str, dict] = {}
    for name in COLLECTIONS:
        ds = load_dataset(EVAL_DATA / name, split="train")
        qids = list(ds.queries)
        entry: dict = {"qrels": ds.qrels, "qids": qids, "queries": [ds.queries[q] for q in qids]}
        shapes = [("chunk", 256, 32)] + ([("whole", 8192, 0)] if whole else [])
        for part, max_tokens, overlap in shapes:
            t0 = time.perf_counter()
            path, doc_map, _ = prepare_collection(ds, artifacts=art, embedder=embedder,
                                                  index_id=f"loco-{name}-{part}", max_tokens=max_tokens, overlap=overlap)
            r = Retriever.open(path, embedder=embedder, cache_dir=art / "cache")
            records = r.data.records
            entry[part] = {
                "retriever": r,
                "docids": [doc_map[records[i].doc_id] for i in range(r.data.n_chunks)],
                "group": r.doc_lexical().doc_of_row,
            }
            print(f"{tag} {name} {part}: {r.data.n_chunks} chunks, {len(qids)} queries"
                  f" ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        cache = art / f"{name}-queries.npy"
        key = hashlib.sha256("\0".join(entry["queries"]).encode()).hexdigest()[:16]
        keyfile = cache.with_suffix(".key")
        if cache.exists() and keyfile.exists() and keyfile.read_text() == key:
            qv = np.load(cache)
        else:
            t0 = time.perf_counter()
            embed = getattr(embedder, "embed_query", None) or embedder.embed
            qv = np.concatenate([np.asarray(embed(entry["queries"][i:i + 64]), dtype=np.float32)
                                 for i in range(0, len(qids), 64)])
            qv /= np.linalg.norm(qv, axis=1, keepdims=True)
            np.save(cache, qv)
            keyfile.write_text(key)
            print(f"{tag} {name}: {len(qids)} queries embedded ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
        entry["qvec"] = qv
        data[name] = entry
    return data



# -- the arms: each query's top DEEP chunks per ranking, cached ------------------------------------

STEM_GRID = [(k1, b) for k1 in (0.9, 1.2, 1.5, 2.0) for b in (0.4, 0.6, 0.75, 0.9)]
CHUNK_WEIGHTS = (0.25, 0.5, 1.0)


def lexical_arms() -> list[tuple]:
    """("bm25",), ("bm25doc", cw), ("stem", k1, b, cw): every lexical ranking scored."""
    arms: list[tuple] = [("bm25",), *[("bm25doc", cw) for cw in CHUNK_WEIGHTS]]
    arms += [("stem", k1, b, cw) for k1, b in STEM_GRID for cw in CHUNK_WEIGHTS]
    return arms


def arm_lists(entry: dict, art: Path, name: str) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """Per arm: (rows, scores), each (n_queries, DEEP), rows -1 past the arm's last match."""
    from ragtui.core.search.stemmed import StemLexical

    d = entry["chunk"]
    r = d["retriever"]
    bm25 = r.data.bm25
    cache = art / f"{name}-arms.npz"
    arms = lexical_arms() + [("flat",)]
    labels = ["|".join(map(str, a)) for a in arms]
    key = hashlib.sha256(("\0".join(labels) + r.data.generation.split(":", 1)[0]).encode()).hexdigest()[:16]
    if cache.exists():
        z = np.load(cache)
        if str(z["key"]) == key:
            return {a: (z[f"r{i}"], z[f"s{i}"]) for i, a in enumerate(arms)}
    t0 = time.perf_counter()
    nq, n = len(entry["qids"]), r.data.n_chunks
    out: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def keep(a: tuple, fn) -> None:
        rows = np.full((nq, DEEP), -1, dtype=np.int64)
        scores = np.zeros((nq, DEEP), dtype=np.float64)
        for i, q in enumerate(entry["queries"]):
            rr, ss = fn(q, i)
            rows[i, : rr.size], scores[i, : ss.size] = rr, ss
        out[a] = (rows, scores)

    keep(("bm25",), lambda q, i: bm25.search(q, DEEP))
    lex = r.doc_lexical()
    for cw in CHUNK_WEIGHTS:
        keep(("bm25doc", cw), lambda q, i, cw=cw: lex.search(bm25, q, DEEP, cw))
    for k1, b in STEM_GRID:
        stem = StemLexical.build(bm25, d["group"], k1, b)
        for cw in CHUNK_WEIGHTS:
            keep(("stem", k1, b, cw), lambda q, i, s=stem, cw=cw: s.search(q, DEEP, cw))
    from ragtui.core.index.topk import top_k

    vec = np.asarray(r.data.vectors)
    keep(("flat",), lambda q, i: top_k((vec @ entry["qvec"][i]).astype(np.float64), None, min(DEEP, n)))
    np.savez(cache, key=np.array(key), **{f"r{i}": out[a][0] for i, a in enumerate(arms)},
             **{f"s{i}": out[a][1] for i, a in enumerate(arms)})
    print(f"{name}: {len(arms)} arms scored ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return out


# -- fusion over the cached lists ---------------------------------------------------------------

def fuse_one(lex: tuple[np.ndarray, np.ndarray], vec: tuple[np.ndarray, np.ndarray], k: int, method: str,
             p: float) -> np.ndarray:
    """The rows of the search's own fusion, best first."""
    from ragtui.core.search import fusion

    kw = {"weight": p, "rrf_k": None} if method != "rrf" else {"weight": None, "rrf_k": p}
    return fusion.fuse(lex, vec, k, method=method, **kw)[0]


def hybrid_rows(arms: dict, lex_arm: tuple, i: int, method: str, p: float) -> tuple[np.ndarray, object]:
    """Retriever._hybrid's ranking from the cached lists: the fusion of each arm's top DEPTH, then (the
    function returned, called only when more rows are wanted) the rows of the fusion of their top DEEP
    that it lacks."""
    def cut(a: tuple, n: int) -> tuple[np.ndarray, np.ndarray]:
        rows, scores = arms[a][0][i], arms[a][1][i]
        m = min(n, int((rows >= 0).sum()))
        return rows[:m], scores[:m]

    rows = fuse_one(cut(lex_arm, DEPTH), cut(("flat",), DEPTH), DEEP, method, p)

    def more() -> np.ndarray:
        if rows.size >= DEEP:
            return rows[:0]
        deeper = fuse_one(cut(lex_arm, DEEP), cut(("flat",), DEEP), DEEP, method, p)
        seen = set(rows.tolist())
        return np.array([r for r in deeper.tolist() if r not in seen][: DEEP - rows.size], dtype=np.int64)

    return rows, more


def evaluate(entry: dict, ranked_rows) -> tuple[np.ndarray, np.ndarray]:
    """Per-query nDCG@10 and Recall@100 of the documents ranked at their best chunk.

    ``ranked_rows(i)``: query i's chunk rows best first, or (rows, more): more() gives the rows after them.
    """
    from ragtui.core.eval import metrics

    docids = entry["chunk"]["docids"]
    nd, rc = [], []
    for i, q in enumerate(entry["qids"]):
        got = ranked_rows(i)
        parts = [got[0], got[1]] if isinstance(got, tuple) else [got]
        ranked: list[str] = []
        seen: set[str] = set()
        for part in parts:
            rows = part if isinstance(part, np.ndarray) else part()
            for r in rows.tolist():
                if r < 0:
                    break
                did = docids[r]
                if did not in seen:
                    seen.add(did)
                    ranked.append(did)
                    if len(ranked) == 100:
                        break
            if len(ranked) == 100:
                break
        rel = entry["qrels"][q]
        nd.append(metrics.ndcg(ranked, rel, 10))
        rc.append(metrics.recall(ranked, rel, 100))
    return np.array(nd), np.array(rc)

# -- systems, leave-one-collection-out ------------------------------------------------------------

HYBRID_LEX = [("bm25",), *[("bm25doc", cw) for cw in CHUNK_WEIGHTS],
              *[("stem", k1, b, cw) for k1 in (1.2, 1.5, 2.0) for b in (0.4, 0.75, 0.9) for cw in (0.5, 1.0)]]
WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
FUSION_GRID = [("weighted", w) for w in WEIGHTS] + [("zscore", w) for w in WEIGHTS] + [("rrf", k) for k in (10, 30, 60, 100)]
CURRENT = ("hybrid", ("bm25doc", 0.5), "weighted", 0.6)
"""The hybrid default before this fit: weighted 0.6 over bm25doc (chunk_weight 0.5)."""


def label(system: tuple) -> str:
    if system[0] == "flat":
        return "flat"
    if system[0] == "lex":
        return arm_label(system[1])
    _, lex, method, p = system
    return f"hybrid {arm_label(lex)} {method} {p:g}"


def arm_label(a: tuple) -> str:
    if a[0] == "bm25":
        return "bm25"
    if a[0] == "bm25doc":
        return f"bm25doc({a[1]:g})"
    return f"bm25stem(k1={a[1]:g},b={a[2]:g},cw={a[3]:g})"


def score_all(data: dict, arms: dict) -> dict[tuple, dict[str, tuple[np.ndarray, np.ndarray]]]:
    systems = [("flat",), *[("lex", a) for a in lexical_arms()],
               *[("hybrid", lex, m, p) for lex in HYBRID_LEX for m, p in FUSION_GRID]]
    out: dict[tuple, dict] = {}
    for s in systems:
        out[s] = {}
        for c in COLLECTIONS:
            a = arms[c]
            if s[0] == "flat":
                fn = lambda i, a=a: a[("flat",)][0][i]  # noqa: E731
            elif s[0] == "lex":
                fn = lambda i, a=a, s=s: a[s[1]][0][i]  # noqa: E731
            else:
                fn = lambda i, a=a, s=s: hybrid_rows(a, s[1], i, s[2], s[3])  # noqa: E731
            out[s][c] = evaluate(data[c], fn)
    return out


def mean(results: dict, s: tuple, c: str, m: int) -> float:
    return float(results[s][c][m].mean())


def fit_hybrid(results: dict, s: tuple, train: list[str]) -> tuple[float, float, float]:
    """What a hybrid setting is chosen by, on the collections ``train``, compared as a tuple:

    1. how much it loses, at worst, to the better of its own two arms (nDCG@10 and Recall@100;
       0 when it never loses): hybrid must never be worse than searching with one arm;
    2. its worst relative nDCG@10 gain over the better of BM25 and flat;
    3. its mean relative nDCG@10 gain over the same.
    """
    loss, gains = 0.0, []
    for c in train:
        for m in (0, 1):
            own = max(mean(results, ("flat",), c, m), mean(results, ("lex", s[1]), c, m))
            loss = min(loss, mean(results, s, c, m) / own - 1.0)
        ref = max(mean(results, ("lex", ("bm25",)), c, 0), mean(results, ("flat",), c, 0))
        gains.append(mean(results, s, c, 0) / ref - 1.0)
    return round(loss, 6), min(gains), float(np.mean(gains))


def fit_lexical(results: dict, s: tuple, train: list[str]) -> tuple[float, float]:
    """The worst relative nDCG@10 gain over BM25 on ``train``, then the mean one."""
    gains = [mean(results, s, c, 0) / mean(results, ("lex", ("bm25",)), c, 0) - 1.0 for c in train]
    return min(gains), float(np.mean(gains))


def loco_table(results: dict, family, fit, base: tuple, against: list[tuple]) -> tuple[list[str], tuple, list[tuple]]:
    """The markdown rows of one leave-one-collection-out run, the system chosen on all four, and each fold's.

    ``family(train)``: the systems that may be chosen on the collections ``train``.
    """
    from ragtui.core.eval import metrics

    head = " | ".join(f"{label(a)} nDCG / R@100" for a in against)
    lines = [f"| held out | chosen on the other three | nDCG@10 | R@100 | {head} | Δ nDCG vs {label(base)} | p |",
             "|---|---|---|---|" + "---|" * len(against) + "---|---|"]
    folds = []
    for held in COLLECTIONS:
        train = [c for c in COLLECTIONS if c != held]
        best = max(family(train), key=lambda s: (fit(results, s, train), label(s)))
        folds.append(best)
        nd, bnd = results[best][held][0], results[base][held][0]
        p = metrics.paired_randomization_test(list(bnd), list(nd), permutations=10_000, seed=0)
        cols = " | ".join(f"{mean(results, a, held, 0):.4f} / {mean(results, a, held, 1):.4f}" for a in against)
        lines.append(f"| {held} | {label(best)} | {nd.mean():.4f} | {results[best][held][1].mean():.4f} | {cols}"
                     f" | {nd.mean() - bnd.mean():+.4f} | {p:.4f} |")
    every = list(COLLECTIONS)
    best = max(family(every), key=lambda s: (fit(results, s, every), label(s)))
    figures = ", ".join(f"{x:+.4f}" for x in fit(results, best, every))
    lines.append(f"\nChosen on all four: **{label(best)}** (criterion on the four: {figures}).")
    return lines, best, folds


def per_collection(results: dict, systems: list[tuple], base: tuple) -> list[str]:
    """nDCG@10 and Recall@100 of each system on each collection, with the paired test against ``base``."""
    from ragtui.core.eval import metrics

    lines = ["| system | " + " | ".join(f"{c} nDCG@10 (p) | {c} R@100" for c in COLLECTIONS) + " |",
             "|---|" + "---|---|" * len(COLLECTIONS)]
    for s in systems:
        cells = []
        for c in COLLECTIONS:
            nd = results[s][c][0]
            if s == base:
                cells.append(f"{nd.mean():.4f}")
            else:
                p = metrics.paired_randomization_test(list(results[base][c][0]), list(nd), permutations=10_000, seed=0)
                cells.append(f"{nd.mean():.4f} ({p:.3f})")
            cells.append(f"{results[s][c][1].mean():.4f}")
        lines.append(f"| {label(s)} | " + " | ".join(cells) + " |")
    return lines



def run(args: argparse.Namespace, kind: str) -> dict:
    tag = EMBEDDERS.get(kind, kind)
    data = collect(args.artifacts, kind)
    arms = {c: arm_lists(data[c], args.artifacts / tag, c) for c in COLLECTIONS}
    t0 = time.perf_counter()
    # The per-query figures of every system, kept beside the arms they were computed from.
    import pickle

    cache = args.artifacts / tag / "results.pickle"
    stamp = [(c, (args.artifacts / tag / f"{c}-arms.npz").stat().st_mtime_ns) for c in COLLECTIONS]
    stamp.append(("grid", repr((HYBRID_LEX, FUSION_GRID, lexical_arms()))))
    results = None
    if cache.exists():
        with open(cache, "rb") as f:
            got = pickle.load(f)
        results = got["results"] if got.get("stamp") == stamp else None
    if results is None:
        results = score_all(data, arms)
        with open(cache, "wb") as f:
            pickle.dump({"stamp": stamp, "results": results}, f)
    print(f"{tag}: {len(results)} systems scored ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return {"data": data, "arms": arms, "results": results}


def stem_choice(results: dict, train: list[str]) -> tuple:
    """The stemmed arm (k1, b, chunk_weight) chosen on ``train`` (maximin nDCG@10 gain over BM25)."""
    family = [("lex", a) for a in lexical_arms() if a[0] == "stem"]
    return max(family, key=lambda s: (fit_lexical(results, s, train), label(s)))[1]


def hybrid_family(results: dict, stem_results: dict, lexicals: tuple[str, ...] = ("bm25", "bm25doc", "stem")):
    """Hybrid systems over ``lexicals``; a stemmed arm only at the k1 and b the lexical fit chose on the same
    collections, on the default embedder's chunks (``stem_results``): one stemmed arm for every index."""
    def family(train: list[str]) -> list[tuple]:
        k1, b = stem_choice(stem_results, train)[1:3]
        grid = {(a[1], a[2]) for a in HYBRID_LEX if a[0] == "stem"}
        k1, b = min(grid, key=lambda g: (abs(g[0] - k1) + abs(g[1] - b), g))
        return [s for s in results if s[0] == "hybrid" and s[1][0] in lexicals
                and (s[1][0] != "stem" or (s[1][1], s[1][2]) == (k1, b))]
    return family


def check_against_retriever(got: dict, kind: str, system: tuple, n: int = 5) -> int:
    """The bench's ranking of ``system`` is ``Retriever.search(mode="hybrid")`` with no option given (the
    fitted defaults applied from the index's embedding_model), on the first ``n`` queries; the mismatches."""
    bad = 0
    for c in COLLECTIONS:
        d, arms = got["data"][c], got["arms"][c]
        r = d["chunk"]["retriever"]
        for i in range(min(n, len(d["qids"]))):
            want = hybrid_rows(arms, system[1], i, system[2], system[3])[0][:50].tolist()
            hits = [h.row for h in r.search(d["queries"][i], mode="hybrid", k=50)]
            bad += hits != want
    print(f"{kind}: {bad} of the checked queries rank otherwise than Retriever.search", file=sys.stderr, flush=True)
    return bad


def report(runs: dict[str, dict]) -> str:
    """docs/quality.md's generated part: per-collection tables, and the leave-one-collection-out tables."""
    out: list[str] = []
    bm25, flat = ("lex", ("bm25",)), ("flat",)
    first = next(iter(runs.values()))["results"]
    out.append("### The stemmed arm: k1, b and chunk_weight, leave-one-collection-out\n")
    out.append("Maximin relative nDCG@10 gain over `bm25` (wordllama's chunks; the lexical arms do not use the"
               " vectors). The grid: k1 ∈ {0.9, 1.2, 1.5, 2}, b ∈ {0.4, 0.6, 0.75, 0.9}, chunk_weight ∈"
               " {0.25, 0.5, 1}.\n")
    family = [("lex", a) for a in lexical_arms() if a[0] == "stem"]
    lines, stem_best, _ = loco_table(first, lambda train: family, fit_lexical, ("lex", ("bm25doc", 0.5)),
                                     [bm25, ("lex", ("bm25doc", 0.5))])
    out += lines
    chosen: dict[str, tuple] = {}
    for kind, got in runs.items():
        results = got["results"]
        out.append(f"\n### Hybrid with {kind}, leave-one-collection-out\n")
        out.append("Chosen by (1) the worst shortfall against the better of its own two arms, nDCG@10 and"
                   " Recall@100 (0: never below either), then (2) the worst, (3) the mean relative nDCG@10 gain"
                   " over the better of BM25 and flat. Columns after R@100: BM25, flat and the previous default"
                   " on the held-out collection; p: paired randomisation test against the previous default"
                   " (10,000 sign flips, seed 0).\n")
        lines, best, _ = loco_table(results, hybrid_family(results, first), fit_hybrid, CURRENT,
                                    [bm25, flat, CURRENT])
        out += lines
        chosen[kind] = best
        for lex in ("bm25doc", "stem", "bm25"):
            out.append(f"\nOver `{'bm25stem' if lex == 'stem' else lex}` only:\n")
            lines, best_lex, _ = loco_table(results, hybrid_family(results, first, (lex,)), fit_hybrid, CURRENT,
                                            [bm25, flat, CURRENT])
            out += lines
            chosen[f"{kind}|{lex}"] = best_lex
    if len(runs) > 1:
        out.append("\n### An embedder the table does not know\n")
        out.append("The setting whose criterion is best on both shipped embedders at once (the worse of the two"
                   " embedders' figures, all four collections):\n")
        every = list(COLLECTIONS)
        all_results = [g["results"] for g in runs.values()]
        fams = [set(hybrid_family(r, first, ("bm25doc", "stem"))(every)) for r in all_results]
        common = sorted(set.intersection(*fams), key=label)

        def both(s: tuple) -> tuple:
            figs = [fit_hybrid(r, s, every) for r in all_results]
            return tuple(min(f[i] for f in figs) for i in range(3))

        unknown = max(common, key=lambda s: (both(s), label(s)))
        chosen["unknown"] = unknown
        figs = ", ".join(f"{x:+.4f}" for x in both(unknown))
        out.append(f"**{label(unknown)}** (criterion, the worse embedder: {figs}); per embedder:\n")
        out.append("| embedder | " + " | ".join(f"{c} nDCG@10 / R@100" for c in COLLECTIONS) + " |")
        out.append("|---|" + "---|" * len(COLLECTIONS))
        for kind, got in runs.items():
            cells = [f"{mean(got['results'], unknown, c, 0):.4f} / {mean(got['results'], unknown, c, 1):.4f}"
                     for c in COLLECTIONS]
            out.append(f"| {kind} | " + " | ".join(cells) + " |")
    out.append("\n### The table in code (`ragtui/core/search/fusion_fit.py`)\n")
    out.append("Each setting chosen on all four, its nDCG@10 on each collection, and the better of its two arms"
               " there (nDCG@10).\n")
    out.append("| embedder | lexical arm | setting | " + " | ".join(COLLECTIONS) + " | better arm |")
    out.append("|---|---|---|" + "---|" * len(COLLECTIONS) + "---|")
    for key, s in chosen.items():
        kind, _, lex = key.partition("|")
        if kind == "unknown":
            continue
        results = runs[kind]["results"]
        arms = " / ".join(f"{max(mean(results, ('flat',), c, 0), mean(results, ('lex', s[1]), c, 0)):.4f}"
                          for c in COLLECTIONS)
        out.append(f"| {kind} | {'default' if not lex else 'bm25stem' if lex == 'stem' else lex} | {label(s)} | "
                   + " | ".join(f"{mean(results, s, c, 0):.4f}" for c in COLLECTIONS) + f" | {arms} |")
    for kind, got in runs.items():
        results = got["results"]
        out.append(f"\n### Every mode with {kind}, per collection\n")
        out.append("nDCG@10 (p against the previous default hybrid, 10,000 sign flips, seed 0) and Recall@100.\n")
        systems = [CURRENT, bm25, ("lex", ("bm25doc", 0.5)), ("lex", stem_best[1]), flat, chosen[kind]]
        out += per_collection(results, systems, CURRENT)
    return "\n".join(out) + "\n", chosen


BEGIN, END = "<!-- bench/loco.py: begin -->", "<!-- bench/loco.py: end -->"


def write_into(path: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace what lies between ``begin`` and ``end`` in ``path`` with ``text``."""
    doc = path.read_text(encoding="utf-8")
    if begin not in doc or end not in doc:
        raise SystemExit(f"{path} has no {begin} ... {end} section to fill")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n\n{text}\n{end}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--artifacts", type=Path, default=ROOT / "bench" / "out" / "loco")
    ap.add_argument("--embedder", action="append", help="wordllama, onnx:bge-small (default: both)")
    ap.add_argument("--collect-only", action="store_true", help="ingest and embed the collections, nothing else")
    ap.add_argument("--write", type=Path, metavar="MD", help="also put the tables into MD (docs/quality.md)")
    ap.add_argument("--no-check", action="store_true", help="skip the comparison with Retriever.search")
    args = ap.parse_args(argv)
    kinds = args.embedder or list(EMBEDDERS)
    if args.collect_only:
        for kind in kinds:
            collect(args.artifacts, kind)
        return
    runs = {kind: run(args, kind) for kind in kinds}
    text, chosen = report(runs)
    print(text)
    for key, s in chosen.items():
        print(f"chosen {key}: {label(s)}", file=sys.stderr)
    if not args.no_check:
        for kind, got in runs.items():
            check_against_retriever(got, kind, chosen[kind])
    if args.write:
        write_into(args.write, text)


if __name__ == "__main__":
    main()

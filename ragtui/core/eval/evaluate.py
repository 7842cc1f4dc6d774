"""Retrieval quality: run each mode over a labelled dataset, score it, report, compare.

What callers may rely on:

* ``prepare_collection`` writes a collection's documents as one file each
  (``doc_file_name``) under ``<artifacts>/eval/<index_id>/<name>/`` and
  ingests that folder through ``sync``; a second call with the same data and
  settings rewrites no file and publishes nothing. It returns the index path
  and the map from index doc_id to the dataset's doc id.
* ``run_mode`` ranks for every query ``k`` distinct documents (a document
  ranks at its best chunk) or ``k`` chunks for chunk-level judgments, asking
  the retriever for ``5k`` chunks and more (×4) until ``k`` documents are
  found or the retriever has no more; latency is the wall time of that whole
  ask, after one untimed warm-up query (IVF lists are built then).
* ``make_report`` returns a JSON-ready dict (``REPORT_FORMAT``; spec/eval.md):
  per-mode means, latency median/p95, per-query metrics and rankings, and a
  provenance block with the sha256 of the four index files.
* ``compare_reports`` pairs two reports' modes over their common queries and
  gives a two-sided paired randomisation p-value on per-query nDCG.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragtui.core.errors import StorageError, UsageError
from ragtui.core.eval import metrics
from ragtui.core.eval.datasets import Dataset
from ragtui.core.files import TooLargeError, open_regular, read_file
from ragtui.core.search.query import ParsedQuery, literal

if TYPE_CHECKING:
    from ragtui.core.embedders.base import Embedder
    from ragtui.core.search.retriever import Retriever, SearchParams

__all__ = [
    "METRICS",
    "REPORT_FORMAT",
    "ModeResult",
    "compare_reports",
    "doc_file_name",
    "index_fingerprint",
    "make_report",
    "mode_params",
    "nprobe_sweep",
    "prepare_collection",
    "ranked_ids",
    "run_mode",
    "score_query",
]

REPORT_FORMAT = "ragtui-eval-report/1"
METRICS = ("ndcg", "recall", "precision", "mrr", "hit_rate")
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
_FIRST_ASK = 5  # chunks asked per wanted document; a document often has several chunks
_MAX_NAME = 200

Progress = Callable[[str, int, int], None]
Report = dict[str, Any]
"""A JSON object as ``json`` reads and writes it (reports are read back from files by ``compare_reports``)."""


# -- the collection as files, and its index ---------------------------------------------------


def doc_file_name(doc_id: str) -> str:
    """A file name for ``doc_id``: bytes outside [A-Za-z0-9_.-] as %XX, a leading '.' too, then ``.txt``.

    Reversible (percent-decoding) unless the id is very long: then a prefix
    and 16 hex digits of its sha256 stand for it.
    """
    raw = doc_id.encode("utf-8")
    name = "".join(chr(b) if b in _SAFE and not (i == 0 and b == 0x2E) else f"%{b:02X}" for i, b in enumerate(raw))
    if len(name) > _MAX_NAME:
        name = f"{name[:120]}~{hashlib.sha256(raw).hexdigest()[:16]}"
    return name + ".txt"


def prepare_collection(
    dataset: Dataset,
    *,
    artifacts: Path,
    embedder: Embedder,
    index_id: str,
    max_tokens: int = 256,
    overlap: int = 32,
    k1: float = 1.2,
    b: float = 0.75,
    progress: Progress | None = None,
) -> tuple[Path, dict[str, str], object]:
    """Write ``dataset.docs`` as files and sync them into ``index_id``: (index path, doc map, SyncReport).

    The doc map sends the index's doc_id (``<name>/<file>``) to the dataset's
    doc id. Files are rewritten only when their content differs, and files
    that are not the dataset's are removed, so the index mirrors the dataset.
    """
    from ragtui.core.ingest.sync import sync

    if dataset.docs is None:
        raise UsageError(f"{dataset.name}: a native dataset is evaluated on an existing index, not built")
    folder = Path(artifacts) / "eval" / index_id / dataset.name
    names: dict[str, str] = {}
    lowered: dict[str, str] = {}
    for did in dataset.docs:
        name = doc_file_name(did)
        if name.lower() in lowered:  # case-insensitive file systems would merge the two
            name = f"{name[:-4]}~{hashlib.sha256(did.encode()).hexdigest()[:16]}.txt"
        lowered[name.lower()] = did
        names[did] = name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        wanted = set(names.values())
        for entry in os.scandir(folder):
            if entry.name not in wanted and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
        for did, text in dataset.docs.items():
            path = folder / names[did]
            data = text.encode("utf-8")
            try:
                if read_file(path, len(data), follow=False) == data:
                    continue  # unchanged: keep its stat, so sync need not even read it
            except FileNotFoundError:
                pass
            except TooLargeError:
                pass  # longer than it should be: rewritten below
            except OSError:
                # Not a regular file (a FIFO, a link, a folder): never read, replaced by the document.
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            path.write_bytes(data)
    except OSError as e:
        raise StorageError(f"cannot write the collection's documents under {folder}: {e.strerror or e}") from None
    report = sync(folder, artifacts=artifacts, embedder=embedder, index_id=index_id,
                  max_tokens=max_tokens, overlap=overlap, k1=k1, b=b, progress=progress)
    doc_map = {f"{dataset.name}/{name}": did for did, name in names.items()}
    return Path(report.index_path), doc_map, report


def index_fingerprint(index_dir: Path) -> Report:
    """sha256 of each of the four index files and of all four together (name, size, content, in FILES order)."""
    from ragtui.core.index.index_format import FILES

    real = Path(os.path.realpath(index_dir))
    whole = hashlib.sha256()
    files: dict[str, str] = {}
    for name in FILES:
        h = hashlib.sha256()
        size = 0
        try:
            fd, _ = open_regular(real / name)
            with open(fd, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
                    size += len(block)
        except OSError as e:
            raise StorageError(f"cannot read {real / name} to fingerprint the index: {e.strerror or e}") from None
        files[name] = h.hexdigest()
        whole.update(f"{name}\0{size}\0{files[name]}\n".encode())
    return {"sha256": whole.hexdigest(), "files": files}


# -- running -----------------------------------------------------------------------------------


@dataclass
class ModeResult:
    """One mode over one dataset: per-query metrics, rankings and latency (seconds)."""

    mode: str
    params: dict[str, object]
    k: int
    per_query: dict[str, Report] = field(default_factory=dict)
    """Per query id: each metric (float), ``latency_ms`` (float) and ``ranked`` (the ids, best first)."""

    def means(self) -> dict[str, float]:
        n = len(self.per_query)
        return {m: (sum(q[m] for q in self.per_query.values()) / n if n else 0.0) for m in METRICS}

    def latency_ms(self) -> dict[str, float]:
        ms = np.array([q["latency_ms"] for q in self.per_query.values()], dtype=np.float64)
        if ms.size == 0:
            return {"median": 0.0, "p95": 0.0, "mean": 0.0}
        return {"median": float(np.median(ms)), "p95": float(np.percentile(ms, 95)), "mean": float(ms.mean())}

    def to_json(self) -> Report:
        return {
            "params": self.params,
            "n_queries": len(self.per_query),
            "metrics": self.means(),
            "latency_ms": self.latency_ms(),
            "per_query": self.per_query,
        }


def ranked_ids(retriever: Retriever, query: str | np.ndarray | ParsedQuery, mode: str, k: int, *, level: str = "doc",
               to_doc: Mapping[str, str] | None = None, params: SearchParams | None = None) -> list[str]:
    """The top ``k`` distinct ids for ``query``: documents (each at its best chunk) or chunks.

    ``to_doc`` maps the index's doc_id to the judged id (identity when None).
    """
    params = params or {}
    if isinstance(query, str):  # a collection's queries are prose: "CTLA - 4" or "Note:" are not query syntax
        query = literal(query)
    if level == "chunk":
        return [h.chunk_id for h in retriever.search(query, mode=mode, k=k, **params)]
    n_chunks = max(1, retriever.data.n_chunks)
    want = min(n_chunks, k * _FIRST_ASK)
    while True:
        hits = retriever.search(query, mode=mode, k=want, **params)
        out: list[str] = []
        seen: set[str] = set()
        for h in hits:
            did = h.doc_id if to_doc is None else to_doc.get(h.doc_id, h.doc_id)
            if did not in seen:
                seen.add(did)
                out.append(did)
        if len(out) >= k or len(hits) < want or want >= n_chunks:
            return out[:k]
        want = min(n_chunks, want * 4)


def score_query(ranked: list[str], qrels: Mapping[str, float], k: int) -> dict[str, float]:
    """The five metrics of one ranking at cutoff ``k``."""
    return {m: getattr(metrics, m)(ranked, qrels, k) for m in METRICS}


def run_mode(retriever: Retriever, dataset: Dataset, mode: str, k: int, *, params: SearchParams | None = None,
             to_doc: Mapping[str, str] | None = None, progress: Progress | None = None) -> ModeResult:
    """Rank and score every query of ``dataset`` with ``mode``."""
    params = params or {}
    result = ModeResult(mode, dict(params), k)
    qids = list(dataset.queries)
    tick = progress or (lambda stage, done, total: None)
    if qids:  # untimed warm-up: first-use costs (IVF build, caches) are not query latency
        ranked_ids(retriever, dataset.queries[qids[0]], mode, k, level=dataset.level(qids[0]), to_doc=to_doc,
                   params=params)
    for i, qid in enumerate(qids, 1):
        t0 = time.perf_counter()
        ranked = ranked_ids(retriever, dataset.queries[qid], mode, k, level=dataset.level(qid), to_doc=to_doc,
                            params=params)
        seconds = time.perf_counter() - t0
        row: Report = dict(score_query(ranked, dataset.qrels[qid], k))
        row["latency_ms"] = seconds * 1000.0
        row["ranked"] = ranked
        result.per_query[qid] = row
        if i % 25 == 0 or i == len(qids):
            tick(mode, i, len(qids))
    return result


def mode_params(retriever: Retriever, mode: str, nprobe: int | None = None,
                given: Mapping[str, object] | None = None) -> dict[str, object]:
    """The effective settings of ``mode`` (for the report's provenance); ``given``: the ranking
    parameters the run passed (``ragtui.app.search_params``), shown over the defaults."""
    from ragtui.core.search.docaware import DEFAULT_CHUNK_WEIGHT

    given = dict(given or {})
    out: dict[str, object]
    from ragtui.core.search.stemmed import DEFAULT_STEM_B, DEFAULT_STEM_CHUNK_WEIGHT, DEFAULT_STEM_K1

    if mode == "hybrid":
        from ragtui.core.search import fusion
        from ragtui.core.search.fusion_fit import fill_hybrid

        # As the search fills them: what the run left unset comes from the index's embedder's fit.
        eff = fill_hybrid(retriever.meta.embedding_model,
                          {k: given.get(k) for k in ("fusion", "weight", "rrf_k", "lexical", "chunk_weight")})
        method, weight, rrf_k = fusion.resolve(eff.get("fusion"), eff.get("weight"), eff.get("rrf_k"))
        out = {"fusion": method, **({"weight": weight} if method != "rrf" else {"rrf_k": rrf_k}),
               "depth": given.get("depth", fusion.DEFAULT_DEPTH), "lexical": eff["lexical"],
               "k1": retriever.meta.k1, "b": retriever.meta.b}
        if out["lexical"] == "bm25doc":
            out["chunk_weight"] = eff.get("chunk_weight", DEFAULT_CHUNK_WEIGHT)
        elif out["lexical"] == "bm25stem":
            out.update(chunk_weight=eff.get("chunk_weight", DEFAULT_STEM_CHUNK_WEIGHT), k1=DEFAULT_STEM_K1,
                       b=DEFAULT_STEM_B, stemmer="snowball english")
    elif mode == "ivf":
        ivf = retriever.ivf()
        p = ivf.params
        out = {"nlist": p.nlist, "nprobe": nprobe or ivf.default_nprobe, "train_cap": p.train_cap, "iters": p.iters}
        if ivf.calibration is not None:
            out["calibrated_nprobe"], out["calibration_recall"] = ivf.calibration
    elif mode == "bm25":
        out = {"k1": retriever.meta.k1, "b": retriever.meta.b}
    elif mode == "bm25doc":
        out = {"k1": retriever.meta.k1, "b": retriever.meta.b,
               "chunk_weight": given.get("chunk_weight", DEFAULT_CHUNK_WEIGHT)}
    elif mode == "bm25stem":
        out = {"k1": DEFAULT_STEM_K1, "b": DEFAULT_STEM_B, "stemmer": "snowball english",
               "chunk_weight": given.get("chunk_weight", DEFAULT_STEM_CHUNK_WEIGHT)}
    else:
        out = {}
    for name in ("mmr", "min_score", "merge"):
        if given.get(name) is not None:
            out[name] = given[name]
    return out


def nprobe_sweep(retriever: Retriever, dataset: Dataset, k: int, nprobes: Iterable[int], *,
                 to_doc: Mapping[str, str] | None = None, progress: Progress | None = None) -> list[Report]:
    """Per nprobe: IVF recall@k of flat's top-k chunks (mean over queries), doc nDCG@k, latency.

    ``ann_recall`` = |IVF top-k ∩ flat top-k| / |flat top-k| on chunks, so it
    measures only what IVF loses against exact search.
    """
    qids = list(dataset.queries)
    vectors = {q: retriever.query_vector(dataset.queries[q]) for q in qids}  # embed once, not per nprobe
    exact = {q: {h.row for h in retriever.search(vectors[q], mode="flat", k=k)} for q in qids}
    nlist = retriever.ivf().nlist
    rows: list[Report] = []
    steps = sorted({min(max(1, int(n)), nlist) for n in nprobes})
    for j, nprobe in enumerate(steps, 1):
        recall_sum, ndcg_sum, ms = 0.0, 0.0, []
        for q in qids:
            t0 = time.perf_counter()
            hits = retriever.search(vectors[q], mode="ivf", k=k, nprobe=nprobe)
            ms.append((time.perf_counter() - t0) * 1000.0)
            recall_sum += len(exact[q] & {h.row for h in hits}) / max(1, len(exact[q]))
            ranked = ranked_ids(retriever, vectors[q], "ivf", k, level=dataset.level(q), to_doc=to_doc,
                                params={"nprobe": nprobe})
            ndcg_sum += metrics.ndcg(ranked, dataset.qrels[q], k)
        n = max(1, len(qids))
        rows.append({"nprobe": nprobe, "nlist": nlist, "ann_recall": recall_sum / n, "ndcg": ndcg_sum / n,
                     "latency_ms_median": float(np.median(ms)) if ms else 0.0})
        if progress:
            progress("nprobe", j, len(steps))
    return rows


# -- reports -----------------------------------------------------------------------------------


def make_report(dataset: Dataset, results: Iterable[ModeResult], *, k: int, index_path: Path, retriever: Retriever,
                embedder_settings: Mapping[str, object] | None = None, sweep: list[Report] | None = None,
                command: list[str] | None = None) -> Report:
    """The JSON report (``REPORT_FORMAT``) of one evaluation run."""
    from ragtui import __version__
    from ragtui.core.ingest.publish import utc_now

    meta = retriever.meta
    report: Report = {
        "format": REPORT_FORMAT,
        "created_at": utc_now(),
        "ragtui_version": __version__,
        "command": list(command or []),
        "dataset": dataset.summary(),
        "k": k,
        "provenance": {
            "index_id": meta.index_id,
            "index_path": str(index_path),
            "index_fingerprint": index_fingerprint(index_path),
            "n_chunks": meta.n_chunks,
            "n_documents": len({r.doc_id for r in retriever.data.records}),
            "chunker": {"max_tokens": meta.max_tokens, "overlap": meta.overlap, "tokenizer": meta.tokenizer},
            "embedder": {**dict(embedder_settings or {}), "model": meta.embedding_model, "dim": meta.dim},
            "retriever": {
                "bm25": {"k1": meta.k1, "b": meta.b},
                "doc_mapping": "a document ranks at its best chunk; ask 5k chunks, then x4 until k documents",
            },
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "modes": {r.mode: r.to_json() for r in results},
    }
    if sweep is not None:
        report["nprobe_sweep"] = sweep
    return report


def _load_per_query(report: Report, mode: str, where: str) -> dict[str, Report]:
    try:
        per_query: dict[str, Report] = report["modes"][mode]["per_query"]
        return per_query
    except (KeyError, TypeError):
        have = ", ".join(report.get("modes", {})) if isinstance(report, dict) else ""
        raise UsageError(f"{where}: no mode {mode!r} in this report (it has: {have or 'none'})") from None


def compare_reports(a: Report, b: Report, *, pairs: list[tuple[str, str]] | None = None,
                    names: tuple[str, str] = ("A", "B"), permutations: int = 10_000, seed: int = 0) -> Report:
    """Compare ``a`` and ``b`` mode by mode: means of every metric and a paired test on nDCG.

    ``pairs`` lists (mode in a, mode in b); default: every mode both reports
    have, or, when they have none in common, every mode of ``a`` against every
    mode of ``b``. Only queries present in both runs are compared. Raises
    ``UsageError`` for reports of another format, different k, or no common query.
    """
    for rep, name in zip((a, b), names):
        if not isinstance(rep, dict) or rep.get("format") != REPORT_FORMAT:
            raise UsageError(f"{name}: not a ragtui eval report (format {REPORT_FORMAT!r})")
    if a["k"] != b["k"]:
        raise UsageError(f"the reports use different k ({a['k']} and {b['k']}): compare runs with the same -k")
    if pairs is None:
        # Common modes pair up; two reports with none in common (one run named its variant
        # differently) compare every mode of A with every mode of B.
        pairs = [(m, m) for m in a["modes"] if m in b["modes"]]
        pairs = pairs or [(ma, mb) for ma in a["modes"] for mb in b["modes"]]
        if not pairs:
            raise UsageError("a report has no modes to compare")
    notes = []
    if a["dataset"]["name"] != b["dataset"]["name"]:
        notes.append(f"different datasets: {a['dataset']['name']} and {b['dataset']['name']}")
    fa = a["provenance"]["index_fingerprint"]["sha256"]
    fb = b["provenance"]["index_fingerprint"]["sha256"]
    if fa != fb:
        notes.append("different index files (fingerprints differ)")
    rows = []
    for ma, mb in pairs:
        qa, qb = _load_per_query(a, ma, names[0]), _load_per_query(b, mb, names[1])
        common = [q for q in qa if q in qb]
        if not common:
            raise UsageError(f"{names[0]}:{ma} and {names[1]}:{mb} share no query")
        if len(common) != len(qa) or len(common) != len(qb):
            notes.append(f"{ma} vs {mb}: {len(common)} common queries of {len(qa)} and {len(qb)}")
        row = {"mode_a": ma, "mode_b": mb, "n_queries": len(common)}
        for m in METRICS:
            va = sum(qa[q][m] for q in common) / len(common)
            vb = sum(qb[q][m] for q in common) / len(common)
            row[m] = {"a": va, "b": vb, "delta": vb - va}
        nd_a = [qa[q]["ndcg"] for q in common]
        nd_b = [qb[q]["ndcg"] for q in common]
        row["p_value"] = metrics.paired_randomization_test(nd_a, nd_b, permutations=permutations, seed=seed)
        rows.append(row)
    return {"k": a["k"], "permutations": permutations, "seed": seed, "rows": rows, "notes": notes}

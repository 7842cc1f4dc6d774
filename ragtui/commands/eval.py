"""``ragtui eval``: measure retrieval quality on a labelled dataset, or compare two reports.

    ragtui eval DATASET [--modes flat,ivf,bm25,hybrid] [-k 10] [--split test] [--json OUT]
    ragtui eval DATASET --nprobe-sweep 1,2,4,8,16,32
    ragtui eval DATASET --modes bm25,hybrid --rerank 20   (also measures bm25+rerank, hybrid+rerank)
    ragtui eval --compare A.json B.json          (or A.json:bm25 B.json:hybrid; any two reports:
                                                 without common modes, every mode of A against every mode of B)

Exit codes: 0 done · 2 bad usage or bad dataset · 3 index, storage or embedder failure.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ragtui.core.errors import UsageError
from ragtui.core.search.modes import MODES, VECTOR_MODES
from ragtui.core.textsafe import json_text
from ragtui.progress import ProgressDisplay


def register(sub, common) -> None:
    p = sub.add_parser(
        "eval",
        help="measure retrieval quality on a labelled dataset (nDCG, recall, latency), or compare two reports",
        description="Measure each retrieval mode on a labelled dataset: a BEIR folder, a SMART collection folder "
        "(Cranfield, CISI, ADI, MEDLINE) or a native JSON dataset for your own index (spec/eval.md). Collections are "
        "indexed through the normal ingest path into the index eval-<name> under the cache folder "
        "(--cache, default ~/.cache/ragtui; reused when unchanged), never beside your own indexes.",
    )
    p.add_argument("dataset", nargs="?", help="dataset folder or .json file")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated modes (default: {','.join(MODES)})")
    p.add_argument("-k", type=int, default=10, help="cutoff: rank this many documents per query (default: 10)")
    p.add_argument("--split", default="test", help="BEIR qrels split, qrels/<split>.tsv (default: test)")
    p.add_argument("--json", metavar="OUT", help="write the full report (per-query results, provenance) to OUT ('-': stdout)")
    p.add_argument("--nprobe", type=int, metavar="N", help="IVF lists to probe in ivf mode (default: the index's rule)")
    p.add_argument("--nprobe-sweep", metavar="LIST", help="also measure IVF recall@k against flat for these nprobe values, e.g. 1,2,4,8,16")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two reports (FILE or FILE:MODE) instead of running")
    p.add_argument("--permutations", type=int, default=10_000, help="sign flips in the paired randomisation test (default: 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the randomisation test (default: 0)")
    p.add_argument("--cache", metavar="DIR",
                   help="where a collection's documents and index are built (default: $XDG_CACHE_HOME/ragtui, "
                   "i.e. ~/.cache/ragtui; never the artifacts root, which holds your own indexes)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--fit-fusion", action="store_true",
                   help="instead of measuring the modes: fit hybrid's fusion to the configured embedder on DATASET and "
                   "print the [search] values for ragtui.toml (for an embedder ragtui has no fit for, docs/quality.md)")
    from ragtui.commands.options import add_ranking_options, add_rerank_options

    add_ranking_options(p)  # each applies to the modes that take it
    add_rerank_options(p)  # with --rerank N, each mode M is also measured as M+rerank
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.compare:
        if args.dataset:
            raise UsageError("give either DATASET or --compare A B, not both")
        return _compare(args)
    if not args.dataset:
        raise UsageError("give a dataset folder or .json file (or --compare A.json B.json)")
    if args.k < 1:
        raise UsageError(f"-k must be at least 1 (got {args.k})")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise UsageError(f"unknown mode {bad[0] if bad else '(none)'!r} in --modes: choose from {', '.join(MODES)}")
    if args.nprobe is not None and args.nprobe < 1:
        raise UsageError(f"--nprobe must be at least 1 (got {args.nprobe})")
    sweep_values = _int_list(args.nprobe_sweep, "--nprobe-sweep") if args.nprobe_sweep else None
    return _evaluate(args, modes, sweep_values)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes whole numbers separated by commas (got {text!r})") from None
    if not values or min(values) < 1:
        raise UsageError(f"{flag} values must be at least 1 (got {text!r})")
    return values


def _evaluate(args, modes: list[str], sweep_values: list[int] | None) -> int:
    from dataclasses import replace
    from typing import Any, cast

    from ragtui.app import embedder_for, open_embedder, open_index, open_reranker, resolve_index, search_options
    from ragtui.commands.options import ranking_values, settings_of
    from ragtui.config import user_cache_root
    from ragtui.core.eval.datasets import load_dataset, validate_native_ids
    from ragtui.core.eval.evaluate import make_report, mode_params, nprobe_sweep, prepare_collection, run_mode
    from ragtui.core.ingest.publish import index_dir
    from ragtui.core.search.retriever import Retriever, SearchParams
    from ragtui.request import index_params, rerank_values

    settings = settings_of(args)
    n_rerank, budget = rerank_values(settings, getattr(args, "rerank", None), getattr(args, "rerank_budget_ms", None))
    reranker = open_reranker(settings, getattr(args, "rerank_model", None)) if n_rerank else None
    dataset = load_dataset(args.dataset, split=args.split)
    flags = ranking_values(args)
    # Decided as for every request (ragtui.request.search_options), checked before any work; a flag a
    # mode does not take is left out of that mode's run (one set of flags serves every mode).
    ranking = {m: search_options(settings, m, flags, strict=False) for m in modes}
    fit = getattr(args, "fit_fusion", False)
    need_embedder = any(m in VECTOR_MODES for m in modes) or sweep_values is not None or fit
    show = not args.quiet and sys.stderr.isatty()
    # A collection is indexed with the configured embedder; an index of your own is searched with its own.
    embedder = open_embedder(settings) if dataset.docs is not None else None
    if embedder is not None and dataset.docs is not None:
        from ragtui.commands.options import warn_truncation

        warn_truncation(embedder, settings.max_tokens)
    with ProgressDisplay(show) as progress:
        if dataset.docs is not None:
            # ragtui's own working copy: a cache root, so the user's artifacts root keeps only the user's indexes.
            settings = replace(settings, artifacts=Path(args.cache).expanduser() if args.cache else user_cache_root(),
                               artifacts_from="--cache" if args.cache else "default: $XDG_CACHE_HOME/ragtui")
            index_id = settings.index or f"eval-{dataset.name}"
            assert embedder is not None
            path, doc_map, sync_report = prepare_collection(
                dataset, artifacts=settings.artifacts, embedder=embedder, index_id=index_id,
                max_tokens=settings.max_tokens, overlap=settings.overlap, progress=progress.update,
            )
        else:
            doc_map = None
            path = index_dir(settings.artifacts, dataset.index) if (dataset.index and not settings.index) else resolve_index(settings)
        retriever = open_index(path, settings)
        if need_embedder:
            retriever.embedder = embedder if embedder is not None else embedder_for(settings, retriever.meta)
            retriever.check_embedder(retriever.embedder)
        if dataset.docs is None:
            records = retriever.data.records
            rows = [records[i] for i in range(len(records))]
            validate_native_ids(dataset, {r.doc_id for r in rows}, {r.chunk_id for r in rows})
        if fit:
            from ragtui.core.eval.fit import fit_fusion, search_table

            chosen, _, alone = fit_fusion(retriever, dataset, to_doc=doc_map, progress=progress.update)
        else:
            # What depends on the index (hybrid's defaults fitted to its embedder), as for every request.
            ranking = {m: index_params(m, ranking[m], retriever.meta) for m in modes}
            results = []
            for mode in modes:
                params: dict[str, Any] = {"nprobe": args.nprobe} if (mode == "ivf" and args.nprobe) else {}
                params.update(ranking[mode])
                result = run_mode(retriever, dataset, mode, args.k, params=cast("SearchParams", params), to_doc=doc_map,
                                  progress=progress.update)
                result.params = mode_params(retriever, mode, args.nprobe, ranking[mode])
                results.append(result)
            if reranker is not None:
                from ragtui.core.search.rerank import RerankingRetriever

                for mode in modes:
                    params = {"nprobe": args.nprobe} if (mode == "ivf" and args.nprobe) else {}
                    params.update(ranking[mode])
                    wrapped = RerankingRetriever(retriever, reranker, n_rerank, budget)
                    name = mode + RerankingRetriever.SUFFIX
                    # A reranking retriever searches as a Retriever does (run_mode uses its search alone).
                    result = run_mode(cast("Retriever", wrapped), dataset, name, args.k,
                                      params=cast("SearchParams", params), to_doc=doc_map, progress=progress.update)
                    result.params = {"rerank": n_rerank, "reranker": reranker.model, "budget_ms": budget,
                                     "partial_asks": wrapped.partial,
                                     "first_stage": mode_params(retriever, mode, args.nprobe, ranking[mode])}
                    results.append(result)
            sweep = None
            if sweep_values is not None:
                sweep = nprobe_sweep(retriever, dataset, args.k, sweep_values, to_doc=doc_map, progress=progress.update)
    if fit:
        n = sum(1 for q in dataset.queries if dataset.qrels.get(q))
        sys.stdout.write(search_table(chosen, alone, model=retriever.meta.embedding_model, dataset=dataset.name,
                                      n_queries=n))
        return 0
    emb_settings = {k: v for k, v in settings.embedder.items() if k in ("kind", "model", "base_url")}
    report = make_report(dataset, results, k=args.k, index_path=path, retriever=retriever,
                         embedder_settings=emb_settings, sweep=sweep, command=["ragtui", *sys.argv[1:]])
    if dataset.docs is not None:
        sync_report = cast(Any, sync_report)
        report["provenance"]["sync"] = {"published": sync_report.published, "chunks": sync_report.chunks_total,
                                        "embedded": sync_report.chunks_embedded}
    to_stdout = args.json == "-"
    if args.json:
        _write_json(report, args.json)
    _print_report(report, stderr=to_stdout)
    return 0


def _write_json(report: dict, out: str) -> None:
    text = json_text(report, indent=1) + "\n"
    if out == "-":
        sys.stdout.write(text)
        return
    try:
        path = Path(out)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        from ragtui.core.errors import StorageError

        raise StorageError(f"cannot write the report to {out}: {e.strerror or e}") from None


def _console(stderr: bool):
    import shutil

    from ragtui.terminal import console

    # Off a terminal rich would wrap at 80 columns; a wider table stays one row per mode in a file or pipe.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else max(120, shutil.get_terminal_size((120, 24)).columns)
    return console(stderr=stderr, width=width)


def _print_report(report: dict, *, stderr: bool = False) -> None:
    from rich.table import Table

    k = report["k"]
    ds = report["dataset"]
    table = Table(title=f"{ds['name']}: {ds['n_queries']} queries, {report['provenance']['n_documents']} documents, "
                  f"{report['provenance']['n_chunks']} chunks")
    for col in ("mode", f"nDCG@{k}", f"Recall@{k}", f"P@{k}", f"MRR@{k}", f"Hit@{k}", "median ms", "p95 ms"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for mode, r in report["modes"].items():
        m, lat = r["metrics"], r["latency_ms"]
        table.add_row(mode, *(f"{m[x]:.4f}" for x in ("ndcg", "recall", "precision", "mrr", "hit_rate")),
                      f"{lat['median']:.2f}", f"{lat['p95']:.2f}")
    console = _console(stderr)
    console.print(table)
    for note in ds["notes"]:
        console.print(f"note: {note}")
    if "nprobe_sweep" in report:
        sweep = Table(title=f"IVF against flat (recall@{k} of flat's top {k} chunks)")
        for col in ("nprobe", "nlist", f"recall@{k}", f"nDCG@{k}", "median ms"):
            sweep.add_column(col, justify="right")
        for row in report["nprobe_sweep"]:
            sweep.add_row(str(row["nprobe"]), str(row["nlist"]), f"{row['ann_recall']:.4f}", f"{row['ndcg']:.4f}",
                          f"{row['latency_ms_median']:.2f}")
        console.print(sweep)


def _split_ref(ref: str) -> tuple[str, str | None]:
    """FILE or FILE:MODE: the text after the last colon is a mode when the whole string is not an
    existing file and the part before it is one (any mode name a report holds, not only MODES)."""
    head, sep, tail = ref.rpartition(":")
    if sep and head and tail and not os.path.exists(ref) and os.path.isfile(head):
        return head, tail
    return ref, None


MAX_REPORT_BYTES = 256 << 20
"""The largest report read: 256 MiB (one with every query's ranking is a few MB per thousand queries)."""


def _read_report(path: str) -> dict:
    from ragtui.core.files import read_file

    try:
        return json.loads(read_file(path, MAX_REPORT_BYTES, what="a report").decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such report (write one with `ragtui eval DATASET --json {path}`)") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read the report: {e.strerror or e} (give a report "
                         "`ragtui eval --json` wrote)") from None
    except (ValueError, RecursionError) as e:
        raise UsageError(f"{path}: cannot read the report ({e})") from None


def _compare(args) -> int:
    from rich.table import Table

    from ragtui.core.eval.evaluate import compare_reports

    if args.permutations < 1:
        raise UsageError(f"--permutations must be at least 1 (got {args.permutations})")
    (fa, ma), (fb, mb) = (_split_ref(r) for r in args.compare)
    if (ma is None) != (mb is None):
        raise UsageError("name a mode on both sides (A.json:bm25 B.json:hybrid) or on neither")
    a, b = _read_report(fa), _read_report(fb)
    pairs = [(ma, mb)] if ma and mb else None
    result = compare_reports(a, b, pairs=pairs, names=(fa, fb), permutations=args.permutations, seed=args.seed)
    if args.json:
        _write_json(result, args.json)
    k = result["k"]
    table = Table(title=f"A = {fa}, B = {fb}: B - A, paired randomisation test on nDCG@{k} "
                  f"({args.permutations} sign flips, seed {args.seed})")
    for col in ("A mode", "B mode", "queries", f"nDCG@{k} A", f"nDCG@{k} B", "Δ nDCG", "p", f"Δ Recall@{k}", f"Δ MRR@{k}"):
        table.add_column(col, justify="left" if "mode" in col else "right")
    for row in result["rows"]:
        nd = row["ndcg"]
        table.add_row(row["mode_a"], row["mode_b"], str(row["n_queries"]), f"{nd['a']:.4f}", f"{nd['b']:.4f}",
                      f"{nd['delta']:+.4f}", f"{row['p_value']:.4f}", f"{row['recall']['delta']:+.4f}",
                      f"{row['mrr']['delta']:+.4f}")
    console = _console(args.json == "-")
    console.print(table)
    for note in result["notes"]:
        console.print(f"note: {note}")
    return 0

"""``ragtui info``: which artifacts root is in use and why, the indexes under it, or one index's stats.

With no --index and not exactly one index (or broken entries beside it),
lists the index ids (stdout) and the root (stderr; both in --json). No index
at all is bad input like for every command (exit 2, one ``ragtui: error:``
line naming the root and how to choose another).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ragtui import app
from ragtui.commands.options import settings_of
from ragtui.core.textsafe import json_text, one_line

__all__ = ["register", "run"]


def register(sub, common) -> None:
    p = sub.add_parser(
        "info",
        help="which artifacts root is in use, the indexes there, or one index's stats (validates it)",
        description="Say which artifacts root is in use and why (--artifacts, RAGTUI_ARTIFACTS, a config file, "
        "or the default: /artifacts when it exists and is writable, else ~/.local/share/ragtui), and list its "
        "indexes; with --index ID (or when there is only one), read and validate that index and show its stats.",
    )
    p.add_argument("--json", action="store_true", help="print the listing or the stats as JSON")
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ragtui.core.index.index_format import read_index

    settings = settings_of(args)
    root = {"artifacts": str(settings.artifacts), "artifacts_from": settings.artifacts_from}
    names, broken = ([], []) if settings.index else app.scan_indexes(settings)
    if not settings.index and (len(names) != 1 or broken):
        if not names:
            app.resolve_index(settings)  # raises NoIndex: the one message (and exit code) for no index
        if args.json:
            print(json.dumps({**root, "indexes": names,
                              "broken": [{"index_id": n, "problem": p} for n, p in broken]}))
        else:
            print("\n".join(names))
            print(f"ragtui: note: {one_line(f'{settings.artifacts}: {app.root_hint(settings)}', 2000)}", file=sys.stderr)
            if broken:
                print(f"ragtui: note: {app.broken_note(settings, broken)}", file=sys.stderr)
        return 0
    from ragtui.core.documents import TEXT, by_extension
    from ragtui.core.ingest.publish import rag_root, state_dir
    from ragtui.core.ingest.skips import load_skips

    # Every line of docs.jsonl checked (full), a block at a time; the decoded BM25 arrays from the shared cache.
    data = read_index(app.resolve_index(settings), cache_dir=rag_root(settings.artifacts) / ".cache")
    doc_ids = data.records.doc_ids()
    info: dict[str, Any] = {"path": str(data.path), **data.meta.to_json(), "n_documents": len(doc_ids)}
    code = _code_documents(doc_ids)
    if code:
        info["code_documents"] = code["documents"]
        info["code_chunker"] = code["chunker"]
    # The kinds of the documents by their names (a misnamed file is counted by its name).
    kinds: dict[str, int] = {}
    for doc_id in doc_ids:
        kind = (by_extension(doc_id) or TEXT).name
        kinds[kind] = kinds.get(kind, 0) + 1
    info["kinds"] = dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    skips = load_skips(state_dir(settings.artifacts, data.meta.index_id))
    info["skipped"] = [{"doc_id": d, "reason": why} for d, (_stamp, why) in sorted(skips.items())]
    info["n_terms"] = data.bm25.n_terms
    info.update(root)
    # The IVF lists (built on first use, then cached outside the index) and the nprobe their
    # calibration chose: the smallest reaching recall@10 0.95 against flat (spec/ivf.md).
    ivf = app.open_index(data.path, settings).ivf()
    info["ivf_nlist"], info["ivf_nprobe"] = ivf.nlist, ivf.default_nprobe
    if ivf.calibration is not None and ivf.nlist:
        from ragtui.core.search.ivf import CALIBRATION_K, CALIBRATION_QUERIES

        info["ivf_calibration"] = {"recall": round(ivf.calibration[1], 4), "k": CALIBRATION_K,
                                   "pseudo_queries": min(CALIBRATION_QUERIES, data.meta.n_chunks), "against": "flat",
                                   "method": ivf.calibration_method}
    if args.json:
        print(json_text(info, indent=1))
    else:
        skipped = info.pop("skipped")
        info["kinds"] = ", ".join(f"{k} {n}" for k, n in info["kinds"].items()) or "none"
        for key, value in info.items():
            print(f"{key:>16}: {one_line(str(value), 2000)}")
        print(f"{'skipped':>16}: {len(skipped)} file(s) a reader could not read at the last sync")
        for s in skipped:
            print(f"{'':>18}{one_line(s['doc_id'], 500)}: {one_line(s['reason'], 500)}")
    return 0


def _code_documents(doc_ids) -> dict | None:
    """Source files of the index by language, and how they are cut (by their syntax, or as plain text when the
    grammar is not installed: spec/chunker.md, "Code")."""
    from ragtui.core.code.languages import code_language, grammar

    counts: dict[str, int] = {}
    for doc_id in doc_ids:
        language = code_language(doc_id)
        if language is not None:
            counts[language] = counts.get(language, 0) + 1
    if not counts:
        return None
    missing = sorted(lang for lang in counts if grammar(lang) is None)
    chunker = "at definitions (tree-sitter)" if not missing else (
        f"plain text for {', '.join(missing)}: no grammar installed; pip install 'ragtui[code]' to cut source "
        "files at their definitions")
    return {"documents": dict(sorted(counts.items())), "chunker": chunker}

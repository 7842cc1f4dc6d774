"""``ragtui info``: list the indexes, or show one index's stats (reading it validates it).

With no --index and not exactly one index (or broken entries beside it),
lists the index ids; exit 1 when there is none.
"""

from __future__ import annotations

import json
import sys

from ragtui import app
from ragtui.core.textsafe import json_text

__all__ = ["register", "run"]


def register(sub, common) -> None:
    p = sub.add_parser("info", help="list indexes, or show one index's stats (validates it)")
    p.add_argument("--json", action="store_true")
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ragtui.core.index.index_format import read_index

    settings = app.settings_from(args)
    names, broken = ([], []) if settings.index else app.scan_indexes(settings)
    if not settings.index and (len(names) != 1 or broken):
        if args.json:
            print(json.dumps({"artifacts": str(settings.artifacts), "indexes": names,
                              "broken": [{"index_id": n, "problem": p} for n, p in broken]}))
        elif names:
            print("\n".join(names))
        elif not broken:
            print(f"no index under {settings.artifacts}/rag (build one with `ragtui ingest FOLDER`)", file=sys.stderr)
        if broken and not args.json:
            print(f"ragtui: note: {app.broken_note(settings, broken)}", file=sys.stderr)
        return 0 if names else 1
    data = read_index(app.resolve_index(settings))
    info = {"path": str(data.path), **data.meta.to_json(), "n_documents": len({r.doc_id for r in data.records})}
    info["n_terms"] = data.bm25.n_terms
    # The IVF lists (built on first use, then cached outside the index) and the nprobe their
    # calibration chose: the smallest reaching recall@10 0.95 against flat (spec/ivf.md).
    ivf = app.open_index(data.path, settings).ivf()
    info["ivf_nlist"], info["ivf_nprobe"] = ivf.nlist, ivf.default_nprobe
    if ivf.calibration is not None and ivf.nlist:
        from ragtui.core.search.ivf import CALIBRATION_K, CALIBRATION_QUERIES

        info["ivf_calibration"] = {"recall": round(ivf.calibration[1], 4), "k": CALIBRATION_K,
                                   "pseudo_queries": min(CALIBRATION_QUERIES, data.meta.n_chunks), "against": "flat"}
    if args.json:
        print(json_text(info, indent=1))
    else:
        for key, value in info.items():
            print(f"{key:>16}: {value}")
    return 0

"""The retrieval-quality figures and tables, from `ragtui eval` reports.

    nice python bench/plots.py --run --write docs/quality.md   # everything docs/quality.md shows
    python bench/plots.py --run     # run the evaluations (a few minutes), then draw
    python bench/plots.py           # draw from the reports already in bench/out/eval/

Needs matplotlib (pip install -e '.[eval]') and ../shared/data beside the
repository for --run. Writes:

* ``assets/eval-ndcg.png``  — nDCG@10 and Recall@100 per mode on each collection;
* ``assets/eval-nprobe.png`` — IVF recall@10 against flat (and nDCG@10) as nprobe varies, SciFact.

With --write MD the table of every mode is put into MD between its markers, and
bench/loco.py (both shipped embedders; the leave-one-collection-out tables that chose
the defaults) fills its own section of MD: one command for the whole page.

With --run every report is produced by exactly the commands printed (and
listed in spec/eval.md), into bench/out/eval/; the collection indexes go to
<cache>/rag/eval-<name> (--artifacts, passed to `ragtui eval --cache`; default $RAGTUI_ARTIFACTS, else bench/out/artifacts).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVAL_DATA = next((p for p in (ROOT.parent / "shared" / "data" / "eval", ROOT.parent.parent / "shared" / "data" / "eval")
                  if p.exists()), ROOT.parent / "shared" / "data" / "eval")
REPORTS = ROOT / "bench" / "out" / "eval"
ASSETS = ROOT / "assets"
COLLECTIONS = ("scifact", "cranfield", "cisi", "adi")
MODES = ("bm25", "bm25doc", "bm25stem", "flat", "ivf", "hybrid", "hybrid-prev")
"""hybrid-prev is the previous default hybrid (weighted 0.6 over bm25doc, the same for every embedder), run apart."""
PREVIOUS = ["--lexical", "bm25doc", "--fusion", "weighted", "--weight", "0.6", "--chunk-weight", "0.5"]
RUN_MODES = "flat,ivf,bm25,bm25doc,bm25stem,hybrid"
SWEEP = "1,2,3,4,6,8,12,16,20,32,48,64,128"
PUBLISHED_SCIFACT_BM25 = {"BEIR multifield": 0.665, "Anserini flat": 0.679}


def commands(artifacts: str | None) -> list[list[str]]:
    """The `ragtui eval` runs behind the figures, one report each."""
    extra = ["--cache", artifacts] if artifacts else []  # eval builds the collections there
    out = []
    for name in COLLECTIONS:
        split = ["--split", "train"] if name == "scifact" else []
        for k in (10, 100):
            sweep = ["--nprobe-sweep", SWEEP] if (name == "scifact" and k == 10) else []
            report = REPORTS / f"{name}-k{k}.json"
            out.append(["ragtui", "eval", str(EVAL_DATA / name), *split, "-k", str(k), "--modes", RUN_MODES,
                        *sweep, "--json", str(report), "--quiet", *extra])
            out.append(["ragtui", "eval", str(EVAL_DATA / name), *split, "-k", str(k), "--modes", "hybrid",
                        *PREVIOUS, "--json", str(REPORTS / f"{name}-k{k}-hybrid-prev.json"), "--quiet", *extra])
    return out


def run_all(artifacts: str | None) -> None:
    if not EVAL_DATA.exists():
        raise SystemExit(f"{EVAL_DATA} is absent: the evaluation reads ../shared/data beside the repository")
    REPORTS.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("ragtui")
    for cmd in commands(artifacts):
        print("$", " ".join(cmd), flush=True)
        argv = [exe, *cmd[1:]] if exe else [sys.executable, "-m", "ragtui", *cmd[1:]]
        subprocess.run(argv, check=True)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{path} is missing: run `python bench/plots.py --run` first") from None


def load(name: str, k: int) -> dict:
    """The report of ``name`` at cutoff ``k``, with the hybrid-prev run's mode added to it."""
    report = _read(REPORTS / f"{name}-k{k}.json")
    extra = REPORTS / f"{name}-k{k}-hybrid-prev.json"
    if extra.exists():
        report["modes"]["hybrid-prev"] = _read(extra)["modes"]["hybrid"]
    return report


def table() -> str:
    """The README table (markdown): per collection and mode nDCG@10, Recall@100, MRR@10, and the
    paired randomisation test of nDCG@10 against bm25 (10,000 sign flips, seed 0)."""
    import sys

    sys.path.insert(0, str(ROOT))
    from ragtui.core.eval.evaluate import compare_reports

    lines = ["| collection | mode | nDCG@10 | Recall@100 | MRR@10 | Δ nDCG@10 vs bm25 | p |",
             "|---|---|---|---|---|---|---|"]
    for name in COLLECTIONS:
        a, b = load(name, 10), load(name, 100)
        for m in MODES:
            if m not in a["modes"]:
                continue
            nd, rc, mr = (a["modes"][m]["metrics"]["ndcg"], b["modes"][m]["metrics"]["recall"],
                          a["modes"][m]["metrics"]["mrr"])
            if m == "bm25":
                delta = p = "—"
            else:
                row = compare_reports(a, a, pairs=[("bm25", m)])["rows"][0]
                delta, p = f"{row['ndcg']['delta']:+.4f}", f"{row['p_value']:.4f}"
            label = f"{name} ({a['dataset']['n_queries']} q)" if m == MODES[0] else ""
            lines.append(f"| {label} | {m} | {nd:.4f} | {rc:.4f} | {mr:.4f} | {delta} | {p} |")
    return "\n".join(lines)


def plot_modes(out: Path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    x = np.arange(len(COLLECTIONS))
    width = 0.12
    colors = {"bm25": "#4c72b0", "bm25doc": "#8172b3", "bm25stem": "#64b5cd", "flat": "#dd8452", "ivf": "#c9a227",
              "hybrid": "#55a868", "hybrid-prev": "#a6d5a0"}
    for ax, (k, metric, label) in zip(axes, ((10, "ndcg", "nDCG@10"), (100, "recall", "Recall@100"))):
        for i, mode in enumerate(MODES):
            vals = [load(name, k)["modes"][mode]["metrics"][metric] for name in COLLECTIONS]
            bars = ax.bar(x + (i - (len(MODES) - 1) / 2) * width, vals, width, label=mode, color=colors[mode])
            ax.bar_label(bars, fmt="%.2f", fontsize=5, padding=1, rotation=90)
        ax.set_xticks(x, [f"{n}\n({load(n, 10)['dataset']['n_queries']} q)" for n in COLLECTIONS])
        ax.set_ylabel(label)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{label} per mode (documents; a document ranks at its best chunk)", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    # Published BM25 marks beside the SciFact BM25 bar (not across it: they would hide its label).
    pub = list(PUBLISHED_SCIFACT_BM25.values())
    left = -(len(MODES) - 1) / 2 * width - 0.1
    axes[0].plot([left] * len(pub), pub, ls="none", marker="_", ms=9, mew=1.6, color="#222")
    axes[0].annotate("published BM25 (SciFact test split, stemmed):\n0.665 BEIR multifield, 0.679 Anserini flat",
                     xy=(left, 0.679), xytext=(-0.45, 0.92), fontsize=7,
                     arrowprops={"arrowstyle": "-", "color": "#555"})
    axes[0].legend(loc="upper right", fontsize=8, ncols=2)
    fig.suptitle("ragtui eval with the embedded default embedder (wordllama, 256-d); SciFact on its train split",
                 fontsize=10)
    fig.savefig(out, dpi=130)
    plt.close(fig)


def plot_nprobe(out: Path) -> None:
    import matplotlib.pyplot as plt

    rep = load("scifact", 10)
    sweep = rep["nprobe_sweep"]
    default = rep["modes"]["ivf"]["params"]["nprobe"]
    nlist = sweep[0]["nlist"]
    xs = [r["nprobe"] for r in sweep]
    fig, ax = plt.subplots(figsize=(7, 4.2), constrained_layout=True)
    ax.plot(xs, [r["ann_recall"] for r in sweep], "o-", label="recall@10 of flat's top 10 chunks", color="#4c72b0")
    ax.plot(xs, [r["ndcg"] for r in sweep], "s--", label="nDCG@10 (documents)", color="#55a868")
    flat = rep["modes"]["flat"]["metrics"]["ndcg"]
    ax.axhline(flat, color="#55a868", lw=0.8, ls=":", label=f"flat nDCG@10 = {flat:.3f}")
    ax.axvline(default, color="#888", lw=0.8, ls="-.", label=f"default nprobe = {default}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(v) for v in xs], fontsize=7)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"nprobe (of nlist = {nlist} lists; {rep['provenance']['n_chunks']} chunks)")
    ax.set_ylabel("recall / nDCG")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"IVF against exact (flat) search as nprobe varies: SciFact, {rep['dataset']['n_queries']} queries",
                 fontsize=9)
    fig.savefig(out, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run the evaluations first")
    ap.add_argument("--artifacts", default=os.environ.get("RAGTUI_ARTIFACTS") or str(ROOT / "bench" / "out" / "artifacts"),
                    help="artifacts root for the collection indexes (default: $RAGTUI_ARTIFACTS, else bench/out/artifacts)")
    ap.add_argument("--out", type=Path, default=ASSETS, help="where the PNGs go (default: assets/)")
    ap.add_argument("--write", type=Path, metavar="MD", help="put the tables into MD (docs/quality.md), loco.py's too")
    args = ap.parse_args(argv)
    if args.run:
        run_all(args.artifacts)
    import matplotlib

    matplotlib.use("Agg")
    args.out.mkdir(parents=True, exist_ok=True)
    plot_modes(args.out / "eval-ndcg.png")
    plot_nprobe(args.out / "eval-nprobe.png")
    text = table()
    print(text)
    print(f"wrote {args.out / 'eval-ndcg.png'} and {args.out / 'eval-nprobe.png'}")
    if args.write:
        import sys

        sys.path.insert(0, str(ROOT / "bench"))
        import loco

        loco.write_into(args.write, text + "\n", begin=BEGIN, end=END)
        loco.main(["--write", str(args.write)])


BEGIN, END = "<!-- bench/plots.py: begin -->", "<!-- bench/plots.py: end -->"


if __name__ == "__main__":
    main()

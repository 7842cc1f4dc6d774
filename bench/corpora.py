"""Benchmark corpora read from ../shared/data (never copied into the project)."""

from __future__ import annotations

import json
import re
from pathlib import Path

SHARED = next((p for p in (Path(__file__).resolve().parents[n] / "shared" / "data" for n in (2, 3)) if p.exists()),
              Path(__file__).resolve().parents[2] / "shared" / "data")


def need(path: Path) -> Path:
    if not path.exists():
        raise SystemExit(f"{path} is absent: the benchmarks read ../shared/data beside the repository")
    return path


def scifact() -> tuple[list[str], list[str]]:
    """SciFact documents (title + text) and all its query texts."""
    base = need(SHARED / "eval" / "scifact")
    docs = []
    with open(base / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            docs.append(f"{obj.get('title', '')}\n{obj.get('text', '')}")
    with open(base / "queries.jsonl", encoding="utf-8") as f:
        queries = [json.loads(line)["text"] for line in f]
    return docs, queries


def large_chunks(n_min: int = 100_000, words: int = 40) -> list[str]:
    """At least ``n_min`` real-text chunks of ``words`` words, cut from every shared corpus.

    Windows slide by half a window when one pass does not yield enough chunks.
    """
    texts = []
    for sub, pattern in (("corpora/python-docs", "*.txt"), ("corpora/tldr-pages", "*.md")):
        for p in sorted(need(SHARED / sub).rglob(pattern)):
            texts.append(p.read_text(encoding="utf-8", errors="replace"))
    texts.extend(scifact()[0])
    for name in ("cranfield/cran.all.1400", "cisi/CISI.ALL"):
        texts.append((SHARED / "eval" / name).read_text(encoding="utf-8", errors="replace"))
    tokens = [t.split() for t in texts]
    step = words
    while True:
        chunks = [" ".join(ws[i : i + words]) for ws in tokens for i in range(0, max(1, len(ws)), step)]
        chunks = [c for c in chunks if re.search(r"\w", c)]
        if len(chunks) >= n_min or step == 1:
            return chunks
        step = max(1, step // 2)

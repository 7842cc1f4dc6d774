"""Make real_V.npy: real wordllama vectors for bench/bench_vectors.py --npy (spec/pcg32.md, "Real").

    python bench/real_vectors.py [OUT.npy]        # default bench/out/real_V.npy; about a minute

Texts from ../shared/data: paragraphs (split on blank lines) of the Python docs
and tldr-pages, and the sentences of SciFact's abstracts; texts under 30
characters dropped, the rest cut at 2,000 characters; embedded with the default
wordllama model through ragtui's embedder (256-d, l2_supercat, offline) as unit float32 rows.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"


def texts() -> list[str]:
    out: list[str] = []
    for folder, pattern in ((DATA / "corpora" / "python-docs", "*.txt"), (DATA / "corpora" / "tldr-pages", "*.md")):
        for path in sorted(folder.rglob(pattern)):
            out += re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace"))
    with open(DATA / "eval" / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            out += re.split(r"(?<=[.!?])\s+", json.loads(line).get("text") or "")
    return [t.strip()[:2000] for t in out if len(t.strip()) >= 30]


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from ragtui.core.embedders import make_embedder

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "out" / "real_V.npy"
    all_texts = texts()
    model = make_embedder("wordllama")  # the embedded default, offline (256-d l2_supercat)
    vectors = np.concatenate([np.asarray(model.embed(all_texts[i : i + 4096]), dtype=np.float32)
                              for i in range(0, len(all_texts), 4096)])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, vectors)
    print(f"{len(all_texts)} texts -> {out} {vectors.shape}")


if __name__ == "__main__":
    main()

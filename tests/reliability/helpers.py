"""Shared pieces of the reliability harness: folders, index snapshots, leftovers.

The cases themselves come from one generator per class of fault (``helpers_*.*_cases``, see
cases.py); the tests run them at CI size, bench/reliability.py at full size for the docs tables.
Running ragtui goes through tests/helpers/cli.py (``run`` in-process, ``run_process`` as the
installed command); ``ragtui`` and ``one_clear_line`` here are those, under the names other test
folders import.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ragtui.core.index.index_format import FILES, read_index
from ragtui.core.ingest.sync import sync
from tests.files import write  # noqa: F401 - re-exported for the tests that import it from here
from tests.unit.fakes import HashEmbedder

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_TOKENS, OVERLAP = 16, 4
"""Small chunks, so a few short documents make a realistic number of chunks."""


WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma "
         "tau upsilon phi chi psi omega cats dogs birds rivers hills stones").split()


def doc_text(seed: int, n_words: int = 60) -> str:
    """Deterministic prose: ``n_words`` words chosen by ``seed``, in lines of ten."""
    words = [WORDS[(seed * 7 + i * (seed % 5 + 3)) % len(WORDS)] for i in range(n_words)]
    return "\n".join(" ".join(words[i : i + 10]) for i in range(0, n_words, 10)) + "\n"


def make_folder(folder: Path, version: int = 1, n_docs: int = 8) -> Path:
    """A folder of documents; ``version`` 2 changes two, adds one and deletes one of version 1."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n_docs):
        write(folder / ("sub" if i % 3 == 0 else "") / f"doc{i}.md", doc_text(i))
    if version >= 2:
        write(folder / "doc1.md", doc_text(101))
        write(folder / "doc2.md", doc_text(102, 90))
        write(folder / "new.md", doc_text(103, 40))
        (folder / "doc4.md").unlink()
    return folder


def run_sync(folder: Path, artifacts: Path, embedder=None, **kw):
    return sync(folder, artifacts=artifacts, embedder=embedder or HashEmbedder(),
                max_tokens=MAX_TOKENS, overlap=OVERLAP, **kw)


def snapshot(link: Path) -> dict[str, bytes]:
    """The validated index at ``link`` as comparable bytes (meta.json without ``created_at``).

    ``read_index`` validates it first (raising if it is broken); the bytes
    come from the one generation the link named then.
    """
    data = read_index(link)
    real = Path(data.generation.rsplit(":", 2)[0])
    out = {name: (real / name).read_bytes() for name in FILES}
    meta = json.loads(out["meta.json"])
    meta.pop("created_at")
    out["meta.json"] = json.dumps(meta, sort_keys=True).encode()
    return out


def leftovers(artifacts: Path, index_id: str = "docs") -> list[str]:
    """Everything under ``rag/`` a finished writer should not leave: temporary names, stale generations, journals."""
    root = artifacts / "rag"
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            if ".tmp" in name or name == "embedded.bin":
                out.append(os.path.relpath(os.path.join(dirpath, name), root))
    gens = root / ".gen" / index_id
    current = os.path.realpath(root / index_id)
    if gens.is_dir():
        out += [f".gen/{index_id}/{g} (stale)" for g in os.listdir(gens) if os.path.realpath(gens / g) != current]
    return sorted(out)


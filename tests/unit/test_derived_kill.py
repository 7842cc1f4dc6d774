"""A publishing writer killed (SIGKILL) at each step of storing the derived entries: no entry or a complete one.

The child process (``tests.reliability.helpers_child``) runs an incremental
sync and kills itself before its Nth filesystem step, for every step that
writes a document-level BM25 or stemmed-arm entry into the cache and the
first step after them. After each kill, every entry under its own name is
complete and sound (its ``complete`` marker written last, its arrays
mapping), a reader serves exactly what a reader without any cache serves,
and the next sync stores the entry of the new generation and leaves no
temporary behind.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from ragtui.core.index.arraycache import load_entry
from ragtui.core.index.index_format import read_index
from ragtui.core.search.retriever import Retriever
from tests.reliability.helpers import MAX_TOKENS, OVERLAP, leftovers, make_folder, run_sync, snapshot
from tests.reliability.helpers_child import ForkServer
from tests.unit.fakes import HashEmbedder

QUERIES = ("alpha beta", "document", "gamma delta words")
DERIVED = ("/.cache/doclex-", "/.cache/stem-")


@pytest.fixture(scope="module")
def server():
    with ForkServer() as s:
        yield s


def _prepare(base: Path) -> tuple[Path, Path]:
    """An index of version 1 whose stemmed arm a reader used; the folder then at version 2."""
    folder, art = base / "docs", base / "art"
    make_folder(folder, 1, 12)
    run_sync(folder, art)
    link = art / "rag" / "docs"
    Retriever.open(link, embedder=HashEmbedder(), cache_dir=art / "rag" / ".cache").search("words", mode="bm25stem")
    make_folder(folder, 2, 12)
    return folder, art


def _job(folder: Path, art: Path, **trace) -> dict:
    return {"action": "sync", "folder": str(folder), "artifacts": str(art), "max_tokens": MAX_TOKENS,
            "overlap": OVERLAP, "trace": {"write_max": 2048, **trace}}


def _results(link: Path, cache: Path | None) -> list:
    r = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache)
    return [[(h.row, h.score) for h in r.search(q, mode=m, k=20)] for m in ("bm25doc", "bm25stem") for q in QUERIES]


def _entries_sound(cache: Path) -> None:
    """Every derived entry under its own name has its marker and maps; temporaries are never entries."""
    for entry in cache.iterdir():
        kind, _, rest = entry.name.partition("-")
        if kind not in ("doclex", "stem") or ".tmp" in entry.name:
            continue
        key = rest[len("docs-"):]
        assert (entry / "complete").is_file(), f"{entry.name} has no marker"
        assert load_entry(cache, kind, "docs", key) is not None, f"{entry.name} does not map"


def test_kill_at_every_step_of_the_derived_entries(tmp_path, server):
    count = tmp_path / "count"
    folder, art = _prepare(count)
    old = snapshot(art / "rag" / "docs")
    served = {"old": _results(art / "rag" / "docs", None)}  # what a reader without any cache serves
    log = count / "steps.log"
    answer = server.run({**_job(folder, art, log=str(log)), "stderr": str(count / "stderr")})
    assert answer["exit"] == 0, (answer, (count / "stderr").read_text())
    new = snapshot(art / "rag" / "docs")
    served["new"] = _results(art / "rag" / "docs", None)
    steps = log.read_text(encoding="utf-8").splitlines()
    points = [i + 1 for i, s in enumerate(steps) if any(d in s for d in DERIVED)]
    kinds = {d for s in steps for d in DERIVED if d in s}
    assert kinds == set(DERIVED), f"the publish stored no {set(DERIVED) - kinds} entry"
    points.append(points[-1] + 1)
    assert len(points) >= 20
    for n in points:
        case = tmp_path / f"kill{n}"
        folder, art = _prepare(case)
        link, cache = art / "rag" / "docs", art / "rag" / ".cache"
        answer = server.run(_job(folder, art, kill_at=n))
        assert answer["signal"] == signal.SIGKILL, (n, answer)
        now = snapshot(link)
        assert now in (old, new), f"step {n}: neither the old nor the new generation"
        _entries_sound(cache)
        assert _results(link, cache) == served["new" if now == new else "old"], f"step {n}: a reader served other results"
        run_sync(folder, art)
        assert snapshot(link) == new and leftovers(art) == [], (n, leftovers(art))
        _entries_sound(cache)
        stats = read_index(link, full=False, cache_dir=cache).stats
        assert stats["doclex_key"] is None or (cache / f"doclex-docs-{stats['doclex_key']}" / "complete").is_file()
        assert _results(link, cache) == served["new"], f"step {n}: after the next sync"
        shutil.rmtree(case, ignore_errors=True)

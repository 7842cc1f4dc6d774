"""A reader moving to a new generation lets go of the old one in the releasing thread, not on its query path."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

from ragtui.core.index.release import release_later, wait_released
from ragtui.core.ingest.sync import sync
from ragtui.core.search.retriever import Retriever

from .fakes import HashEmbedder


class Held:
    """Something whose end can be watched: the thread it ends in is recorded."""


def watch_end(obj: object, ended: list[str]) -> weakref.ref:
    return weakref.ref(obj, lambda _ref: ended.append(threading.current_thread().name))


def test_objects_handed_over_end_in_the_releasing_thread():
    ended: list[str] = []
    obj = Held()
    ref = watch_end(obj, ended)
    release_later(obj, None, obj)
    del obj
    wait_released()
    assert ref() is None
    assert ended == ["ragtui-release"]


def test_a_reload_drops_the_old_generation_off_the_readers_path(tmp_path: Path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    folder.mkdir()
    for i in range(6):
        (folder / f"d{i}.md").write_text(f"document {i} about cats and dogs " * (i + 2), encoding="utf-8")

    def run():
        sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)

    run()
    reader = Retriever.open(art / "rag" / "docs", cache_dir=art / "rag" / ".cache")
    assert reader.search("cats", mode="bm25", k=1)
    ended: list[str] = []
    ref = watch_end(reader.data, ended)
    (folder / "d2.md").write_text("fresh words about otters " * 4, encoding="utf-8")
    run()

    assert reader.reload()
    wait_released()
    gc.collect()
    assert ref() is None and ended == ["ragtui-release"]
    hits = reader.search("otters", mode="bm25", k=1)
    assert hits[0].doc_id == "docs/d2.md" and "otters" in hits[0].text
    assert not reader.reload()  # nothing new: the generation it holds is kept

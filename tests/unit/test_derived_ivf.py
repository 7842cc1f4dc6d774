"""A publish warms the IVF lists of its generation once a reader has searched IVF: the next fresh reader maps
them and builds nothing; an index nobody searched with IVF gets no lists it did not ask for."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragtui.core.index import verified
from ragtui.core.ingest.sync import sync
from ragtui.core.search.retriever import Retriever

from .fakes import HashEmbedder
from .test_ivf_cache import Spy


@pytest.fixture(autouse=True)
def writer_waits(monkeypatch):
    """A tiny index saves a reader too little for the writer to wait for a non-racy record: make it wait."""
    monkeypatch.setattr(verified, "reader_saving_ns", lambda *sizes: 10**9)


def write_folder(folder: Path, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    topics = ["cats purr and sleep", "rust borrow checker lifetimes", "tar extracts gzip archives",
              "python asyncio event loop", "bread dough rises with yeast", "comets orbit the sun"]
    for i in range(60):
        words = " ".join(f"{topics[(i + j) % len(topics)]} note{i} part{j}" for j in range(8))
        (folder / f"d{i:02d}.md").write_text(words + (f" {extra}" if i == 0 else ""), encoding="utf-8")


def ivf_entries(cache: Path) -> list[str]:
    return sorted(n for n in os.listdir(cache) if n.startswith("ivf-docs-") and ".tmp" not in n)


def test_the_next_publish_warms_the_lists_a_reader_used(tmp_path, monkeypatch):
    folder, art = tmp_path / "docs", tmp_path / "art"
    link, cache = art / "rag" / "docs", art / "rag" / ".cache"
    write_folder(folder)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).ivf()  # a reader searches IVF once
    first = ivf_entries(cache)
    assert len(first) == 1

    write_folder(folder, "a new closing word")
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    assert len(set(ivf_entries(cache)) - set(first)) == 1  # the new generation's lists, stored by the writer

    spy = Spy(monkeypatch)
    lists = Retriever.open(link, embedder=HashEmbedder(), cache_dir=cache).ivf()
    assert spy.builds == 0 and lists.from_cache and lists.calibration_method == "spans"


def test_no_lists_are_built_for_an_index_nobody_searched_with_ivf(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write_folder(folder)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    write_folder(folder, "a new closing word")
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    assert ivf_entries(art / "rag" / ".cache") == []

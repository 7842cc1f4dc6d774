"""For a memory test's child process: its peak resident size, counted from after a small warm-up sync."""

from __future__ import annotations

from pathlib import Path

from ragtui.core.ingest.sync import IndexWriter, sync


def peak_kib() -> int:
    """The process's resident high-water mark (VmHWM), KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def warm_up(art: Path, embedder) -> int:
    """A small sync beside ``art`` first (the modules a sync imports on the way, and their tables, are not what is
    measured), then the high-water mark reset to the current resident size (writing 5 to clear_refs, Linux >= 4.0).
    Returns the resident size it starts from, KiB."""
    small = art.parent / "small"
    (small / "docs").mkdir(parents=True)
    (small / "docs" / "a.md").write_text("a small document to warm up with")
    sync(small / "docs", artifacts=small / "art", embedder=embedder, max_tokens=64, overlap=8)
    Path("/proc/self/clear_refs").write_text("5")
    return peak_kib()


def rebuild_alone(docs: Path, art: Path, embedder) -> dict[str, int]:
    """A full rebuild of ``docs`` into ``art`` after ``warm_up``: what the peak grew by (KiB) and the chunks. The
    rebuild alone: the derived entries a one-shot writer makes after it (the IVF lists, the stemmed arm) are
    measured on their own (tests/unit/test_ivf_memory.py)."""
    before = warm_up(art, embedder)
    report = IndexWriter(docs, artifacts=art, embedder=embedder, max_tokens=64, overlap=8, derive_all=False).sync()
    return {"grown": peak_kib() - before, "chunks": report.chunks_total}

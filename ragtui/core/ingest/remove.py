"""Delete one index: its link, its generations, its writer state and its cached arrays, under its writer lock.

What a caller may rely on (``remove_index``):

* It takes the index's writer lock (the one ``sync`` and the watch agent
  take), so it never deletes an index while a writer is publishing it: a
  held lock is ``LockedError`` and nothing is removed.
* It takes the index's watch lock too (``keeper``): while a ``ragtui watch``
  keeps the index, even between two saves, it is ``LockedError`` naming the
  agent, since the agent would rebuild the index at its next sync.
* ``rag/<index_id>`` must be an index: the link a publish made (to a
  generation, or to nothing when the generation is gone), or a plain
  directory holding ``meta.json`` (an index written by another tool). Any
  other name is ``UsageError`` (exit 2) and nothing is removed.
* Nothing outside ``<artifacts>/rag`` is touched. A link is removed as a
  link, never followed: the generations removed are those under
  ``rag/.gen/<index_id>/``, found by name, whatever the link points at,
  with everything else there (their overlays, and the temporary names of
  overlays a killed writer left).
* The link goes first, so readers see "no index" from then on; a reader
  that already opened a generation keeps its open files. The lock files
  stay (a writer waiting on one must not end up locking a different file).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ragtui.core.errors import StorageError, UsageError
from ragtui.core.index.arraycache import used_marker
from ragtui.core.index.index_format import META
from ragtui.core.ingest.keeper import KeeperLock
from ragtui.core.ingest.publish import IndexLock, check_index_id, rag_root, state_dir

__all__ = ["RemoveReport", "cache_entries", "index_kind", "remove_index"]


@dataclass
class RemoveReport:
    """What ``remove_index`` deleted."""

    index_id: str
    link: str
    """"link" (a published index), "directory" (a plain index directory) or "broken link"."""
    generations: int = 0
    state: bool = False
    cache_entries: list[str] = field(default_factory=list)


def _cache_pattern(index_id: str) -> re.Pattern[str]:
    # arraycache entries are <kind>-<name>-<key>: bm25 names them by the index id and keys them
    # v<version><letters>-<40 hex>; doclex and stem by the id, keyed v<version>-<40 hex>; verified by the id,
    # keyed by 40 hex; ivf and ivfcal (the IVF calibration) by the id made filename-safe, keyed by 32 hex.
    # The key shape keeps "docs" from matching the entries of an index called "docs-2". An entry written before
    # its key is known (arraycache.StreamedEntry) is <kind>-<id>-<tag>.tmp<pid>, the tag "streamed" or
    # "decoded<thread>": what a killed writer or reader leaves, which nothing else would take away once the
    # index is gone.
    ivf_name = _ivf_name(index_id)
    return re.compile(
        rf"(?:bm25-{re.escape(index_id)}-v\d+[a-z]*-[0-9a-f]{{40}}|verified-{re.escape(index_id)}-[0-9a-f]{{40}}"
        rf"|(?:doclex|stem)-{re.escape(index_id)}-v\d+-[0-9a-f]{{40}}"
        rf"|(?:bm25|doclex|stem)-{re.escape(index_id)}-(?:streamed|decoded\d+)(?=\.tmp)"
        rf"|(?:ivf|ivfcal)-{re.escape(ivf_name)}-[0-9a-f]{{32}})"
        rf"(?:\.tmp\d+)?"
    )


def _ivf_name(index_id: str) -> str:
    """``index_id`` as the IVF entries name it (``ivf_cache.entry_name``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", index_id)[:64] or "_"


def cache_entries(artifacts: str | os.PathLike[str], index_id: str) -> list[Path]:
    """The cached-array entries of ``index_id`` under ``rag/.cache`` (sorted; [] when there is none)."""
    cache = rag_root(artifacts) / ".cache"
    pattern = _cache_pattern(index_id)
    try:
        names = os.listdir(cache)
    except OSError:
        return []
    return sorted(cache / name for name in names if pattern.fullmatch(name))


def index_kind(link: Path) -> str:
    """What ``rag/<id>`` at ``link`` is ("link", "broken link", "directory"), or ``UsageError`` when not an index."""
    try:
        if link.is_symlink():
            return "link" if link.exists() else "broken link"
        if link.is_dir() and (link / META).is_file():
            return "directory"
    except OSError:  # a loop of links, or no permission: still the link ragtui made, removed as a link
        if os.path.islink(link):
            return "broken link"
        raise
    if os.path.lexists(link):
        raise UsageError(f"{link} is not an index (neither the link a publish makes nor a folder holding {META}): "
                         "nothing was removed")
    raise UsageError(f"no index {link.name!r} under {link.parent}: nothing was removed")


def _remove_tree(path: Path) -> bool:
    """Remove a directory tree without following any link in it (a link itself is unlinked); True if it existed."""
    if not os.path.lexists(path):
        return False
    if os.path.islink(path) or not path.is_dir():
        os.unlink(path)
    else:
        shutil.rmtree(path)  # fd-based on Linux: never follows a link inside the tree
    return True


def remove_index(artifacts: str | os.PathLike[str], index_id: str) -> RemoveReport:
    """Delete index ``index_id`` under ``artifacts`` (see the module docstring for what is guaranteed).

    Raises ``UsageError`` for a bad id or a name that is not an index,
    ``LockedError`` while a writer holds the index, ``StorageError`` when a
    removal fails (what was removed before the failure stays removed; running
    it again finishes the job).
    """
    check_index_id(index_id)
    root = rag_root(artifacts)
    link = root / index_id
    index_kind(link)  # refuse before taking a lock (which would create rag/.locks)
    with KeeperLock(artifacts, index_id).remove(), IndexLock(artifacts, index_id):
        report = RemoveReport(index_id, index_kind(link))  # again: it may have changed while we waited
        step = f"removing {link}"
        try:
            if report.link == "directory":
                shutil.rmtree(link)
            else:
                os.unlink(link)
            gens = root / ".gen" / index_id
            step = f"removing {gens}"
            if os.path.isdir(gens) and not os.path.islink(gens):
                # Generation directories only: an unfinished one (.tmp) and a generation's overlay file are not.
                report.generations = sum(1 for e in os.scandir(gens)
                                         if not e.name.endswith(".tmp") and e.is_dir(follow_symlinks=False))
            _remove_tree(gens)
            _remove_tree(root / f".{index_id}.link.tmp")  # a killed publish's leftover
            state = state_dir(artifacts, index_id)
            step = f"removing {state}"
            report.state = _remove_tree(state)
            for entry in cache_entries(artifacts, index_id):
                step = f"removing {entry}"
                _remove_tree(entry)
                report.cache_entries.append(entry.name)
            for kind, name in (("stem", index_id), ("ivf", _ivf_name(index_id))):
                # The notes that readers searched this index that way: a new index of the same name starts without.
                used_marker(rag_root(artifacts) / ".cache", kind, name).unlink(missing_ok=True)
        except OSError as e:
            raise StorageError(f"cannot delete index {index_id!r}: {step} failed: {e.strerror or e}") from None
    return report

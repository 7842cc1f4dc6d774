"""Which documents exist now, and the text of those that changed (by stamp first, then by SHA-256)."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragtui.core.documents import HEAD_BYTES, Unreadable, detect
from ragtui.core.documents.worker import Job, shared
from ragtui.core.files import read_file
from ragtui.core.ingest.patterns import PathFilter
from ragtui.core.ingest.report import Progress, SyncReport
from ragtui.core.ingest.state import FileEntry, FileTable, Stamp
from ragtui.core.ingest.texts import Texts
from ragtui.core.ingest.walk import (
    Candidate,
    Listing,
    WalkRules,
    candidate,
    doc_id_for,
    filter_paths,
    unreadable_now,
    walk_folder,
    walk_listing,
)

__all__ = ["Scan", "by_bytes", "classify", "keep_unreadable", "scan"]

PathLike = str | os.PathLike[str]


def by_bytes(doc_ids: Iterable[str]) -> list[str]:
    """``doc_ids`` in the index's order: ascending UTF-8 bytes (which is code point order)."""
    return sorted(doc_ids)


@dataclass
class Scan:
    found: dict[str, FileEntry] = field(default_factory=dict)
    """What ``seen`` holds, unless ``same``."""
    new_texts: Texts = field(default_factory=Texts)
    """The text of each new or changed document (past a bound, in a file: ``Texts``)."""
    unreadable: list[str] = field(default_factory=list)
    """doc_ids (files or folders) that exist but could not be read now."""
    skips: dict[str, tuple[tuple[int, int, int, int], str]] = field(default_factory=dict)
    """Files a reader skipped, by doc_id: (stamp, reason), to be remembered for the next sync."""
    same: Mapping[str, FileEntry] | None = None
    """The previous documents when the walk found exactly them, each with its stamp unchanged (a no-op):
    ``seen`` is then these, made into a dict only if asked for."""
    touched: set[str] | None = None
    """After a partial scan: every doc_id whose entry in ``seen`` may differ from the old one, or that the old
    documents held and ``seen`` may not (every other entry of ``seen`` is the old one as it was); None after a
    whole walk, which may change any entry."""

    @property
    def seen(self) -> dict[str, FileEntry]:
        """Every document now, with its state entry."""
        if self.same is not None:
            same, self.same = self.same, None
            self.found = dict(same.as_dict() if isinstance(same, FileTable) else same)
        return self.found


def scan(
    folder: Path, rules: WalkRules, paths: Iterable[PathLike] | None, old_files: Mapping[str, FileEntry],
    report: SyncReport, tick: Progress, skips: Mapping[str, tuple[tuple[int, int, int, int], str]] | None = None,
    spool: Path | None = None,
) -> Scan:
    """What changed in ``folder`` against ``old_files``.

    With ``paths``, only what they name is looked at; every other document of
    ``old_files`` is carried over as it was. ``skips`` are the files a reader
    skipped last time: one whose stamp is the same is skipped again, for the
    same reason, without being read. With ``spool`` (a folder), the texts read
    past ``texts.HOLD`` characters are kept in a file there until asked for
    (``Texts``), as they are read.
    """
    skips = skips or {}
    t0 = time.perf_counter()
    out = Scan(new_texts=Texts(spool))
    missed: list[Path] = []
    if paths is None:
        listing = walk_listing(folder, rules, report.skipped, unreadable=missed, warnings=report.warnings)
        checked, remembered = listing.without(skips) if skips and not missed else (listing, {})
        if not missed and _unchanged(checked, old_files):
            for doc_id, (_stamp, why) in remembered.items():
                report.skipped.append((str(folder.parent / doc_id), why))
            out.skips = remembered
            # Nothing to read, nothing to build: the state's documents stand as they are.
            tick("scan", len(listing), len(listing))
            out.same = old_files
            report.seconds["scan"] = time.perf_counter() - t0
            return out
        found = listing.candidates()
    else:
        out.found, found, out.touched = _rescan(folder, rules, paths, old_files, report.skipped, missed)
    seen = out.found
    tick("scan", len(seen) + len(found), len(seen) + len(found))
    to_read: list[tuple[Candidate, FileEntry | None, Stamp]] = []
    # Document by document from here: the state's columns made into entries once, in bulk.
    get = (old_files.as_dict() if isinstance(old_files, FileTable) else old_files).get
    for cand in found:
        doc_id = cand.doc_id
        prev = get(doc_id)
        # A Stamp is a tuple of these four: a plain tuple compares equal without building one per file.
        if prev is not None and prev.stamp == (cand.size, cand.mtime_ns, cand.ctime_ns, cand.ino):
            seen[doc_id] = prev
        elif prev is None and doc_id in skips and skips[doc_id][0] == (cand.size, cand.mtime_ns, cand.ctime_ns, cand.ino):
            out.skips[doc_id] = skips[doc_id]
            report.skipped.append((cand.where, skips[doc_id][1]))
        else:
            to_read.append((cand, prev, Stamp(cand.size, cand.mtime_ns, cand.ctime_ns, cand.ino)))
    report.seconds["scan"] = time.perf_counter() - t0

    # Read what may have changed; a matching content hash proves it did not.
    t0 = time.perf_counter()
    out.unreadable = [d for d in (doc_id_for(folder, p) for p in missed) if d is not None]
    real_folder = os.path.realpath(folder)
    # What each file read came to, applied in doc_id order once every reader has answered (the
    # workers answer in the order they finish).
    outcome: dict[str, tuple[str, object, object]] = {}  # a new text as Texts.stash kept it
    waiting: dict[str, tuple[Candidate, Stamp, str]] = {}
    extractor = shared()

    def jobs() -> Iterator[Job]:
        for cand, prev, stamp in to_read:
            try:
                data = read_file(cand.path, rules.max_bytes, inside=real_folder)
            except FileNotFoundError:
                outcome[cand.doc_id] = ("skip", "vanished", None)
                continue
            except OSError as e:
                if unreadable_now(e):
                    outcome[cand.doc_id] = (
                        "unreadable", f"unreadable: {e.strerror or e} (kept as it was until it can be read)", None)
                else:
                    outcome[cand.doc_id] = ("skip", f"unreadable: {e.strerror or e}", None)
                continue
            digest = hashlib.sha256(data).hexdigest()
            if prev is not None and prev.sha256 == digest:
                outcome[cand.doc_id] = ("seen", prev._replace(stamp=stamp), None)
                continue
            kind = detect(cand.doc_id, data[:HEAD_BYTES])
            if kind.isolated:
                waiting[cand.doc_id] = (cand, stamp, digest)
                yield Job(cand.doc_id, kind, data)
                continue
            try:
                text = kind.read(data, extractor.limits).text
            except Unreadable as e:
                outcome[cand.doc_id] = ("skip", str(e) or "not text", None)
                out.skips[cand.doc_id] = (tuple(stamp), str(e) or "not text")  # type: ignore[assignment]
                continue
            outcome[cand.doc_id] = ("new", FileEntry(stamp, digest), out.new_texts.stash(text))
            del text

    for doc_id, got in extractor.run(jobs()):
        _cand, stamp, digest = waiting.pop(doc_id)
        if isinstance(got, Unreadable):
            outcome[doc_id] = ("skip", str(got), None)
            out.skips[doc_id] = (tuple(stamp), str(got))  # type: ignore[assignment]
        else:
            outcome[doc_id] = ("new", FileEntry(stamp, digest), out.new_texts.stash(got.text))
    for cand, _prev, _stamp in to_read:
        what, entry, text = outcome[cand.doc_id]
        if what == "skip" or what == "unreadable":
            report.skipped.append((str(cand.path), str(entry)))
            if what == "unreadable":
                out.unreadable.append(cand.doc_id)
        elif what == "seen":
            seen[cand.doc_id] = entry  # type: ignore[assignment]
        else:
            out.new_texts.adopt(cand.doc_id, text)  # type: ignore[arg-type]
            seen[cand.doc_id] = entry  # type: ignore[assignment]
    report.seconds["read"] = time.perf_counter() - t0
    return out


def _unchanged(listing: Listing, old: Mapping[str, FileEntry]) -> bool:
    """Whether ``listing`` holds exactly the documents of ``old``, each with the stamp it had.

    Compared as two lists of tuples (one C-level comparison), not document by document.
    """
    if isinstance(old, FileTable):
        return old.same_stamps(listing.doc_ids, listing.stamps)
    if len(listing) != len(old):
        return False
    entries = list(map(old.get, listing.doc_ids))
    if None in entries:
        return False
    return [e.stamp for e in entries if e is not None] == listing.stamps


def _under(doc_id: str, prefixes: Sequence[str]) -> bool:
    """Whether ``doc_id`` is one of ``prefixes`` or lies in a folder one of them names."""
    return any(doc_id == p or doc_id.startswith(p + "/") for p in prefixes)


def keep_unreadable(seen: dict[str, FileEntry], unreadable: Sequence[str], old: Mapping[str, FileEntry]) -> None:
    """Carry each document of ``old`` that could not be read now (itself or its folder) into ``seen``.

    A file that exists but cannot be read at the moment is not a deletion: it
    keeps the chunks it had until it can be read again.
    """
    if not unreadable:
        return
    for doc_id, entry in old.items():
        if doc_id not in seen and _under(doc_id, unreadable):
            seen[doc_id] = entry


def classify(report: SyncReport, s: Scan, old: Iterable[str]) -> None:
    """Fill the report's added, changed, removed and unchanged, against the documents ``old``."""
    if s.same is not None:  # nothing added, changed, removed or unreadable
        report.added, report.changed, report.removed, report.unchanged = [], [], [], len(s.same)
        return
    old_set = old if isinstance(old, (set, dict)) else set(old)
    report.added = by_bytes(d for d in s.new_texts if d not in old_set)
    report.changed = by_bytes(d for d in s.new_texts if d in old_set)
    report.removed = by_bytes(set(old_set) - set(s.seen))
    # A document kept because it could not be read is reported as skipped, not as unchanged.
    report.unchanged = sum(
        1 for d in s.seen if d not in s.new_texts and not (s.unreadable and _under(d, s.unreadable))
    )


def _rescan(
    folder: Path, rules: WalkRules, paths: Iterable[PathLike], old_files: Mapping[str, FileEntry],
    skipped: list[tuple[str, str]], unreadable: list[Path],
) -> tuple[dict[str, FileEntry], list[Candidate], set[str]]:
    """For a partial sync: (old documents no path covers, candidates for what the paths name now, the doc_ids
    of both: the old documents the paths cover and the candidates).

    Paths that exist but cannot be examined now are appended to ``unreadable``.
    """
    named = filter_paths((Path(p) for p in paths), folder)
    prefixes = sorted({d for d in (doc_id_for(folder, p) for p in named) if d is not None})
    carried = dict(old_files.as_dict() if isinstance(old_files, FileTable) else old_files)
    touched: set[str] = set()
    if 0 < len(prefixes) <= 8:
        # A few named paths against many documents: drop each named one and
        # everything under a named folder, by prefix, without splitting every doc_id.
        for doc_id in old_files:
            for prefix in prefixes:
                if doc_id.startswith(prefix) and (len(doc_id) == len(prefix) or doc_id[len(prefix)] == "/"):
                    del carried[doc_id]
                    touched.add(doc_id)
                    break
    elif prefixes:
        # Many paths: look each document's ancestors up instead (linear in the documents).
        named_set = set(prefixes)
        for doc_id in old_files:
            parts = doc_id.split("/")
            if any("/".join(parts[:i]) in named_set for i in range(1, len(parts) + 1)):
                del carried[doc_id]
                touched.add(doc_id)
    found: dict[str, Candidate] = {}
    filt = rules.path_filter(folder, skipped)  # reads each ignore file on the way once
    for p in named:
        try:
            is_dir = stat.S_ISDIR(os.lstat(p).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            is_dir = False  # deleted: it and everything under it are gone
        except OSError as e:
            skipped.append((str(p), f"cannot stat: {e.strerror}"))
            if unreadable_now(e):
                unreadable.append(p)
            continue
        if is_dir:
            if _inside_walkable(folder, p / "x", filt):
                for cand in walk_folder(folder, rules, skipped, start=p, path_filter=filt, unreadable=unreadable):
                    found[cand.doc_id] = cand
        elif _inside_walkable(folder, p, filt) and filt.wants(_rel(folder, p)):
            one = candidate(folder, p, rules, skipped, unreadable=unreadable)
            if one is not None:
                found[one.doc_id] = one
            elif skipped and skipped[-1] == (str(p), "vanished"):
                skipped.pop()  # a deletion, not a skip
    for doc_id in found:
        carried.pop(doc_id, None)
    touched.update(found)
    return carried, sorted(found.values(), key=lambda c: c.doc_id), touched


def _rel(folder: Path, path: Path) -> str:
    return os.path.relpath(path, folder).replace(os.sep, "/")


def _inside_walkable(folder: Path, path: Path, filt: PathFilter) -> bool:
    """Whether every folder between ``folder`` and ``path`` is one the walk enters."""
    rel = _rel(folder, path)
    if rel.startswith(".."):
        return False
    for skip in filt.rules.skip_under:
        if os.path.commonpath([os.path.abspath(path), os.path.abspath(skip)]) == os.path.abspath(skip):
            return False
    return filt.chain(rel.rpartition("/")[0]) is not None

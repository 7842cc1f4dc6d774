"""Ingest: bring an index up to date with a folder, writing nothing when nothing changed.

``sync(folder, ...)`` walks the folder (or re-examines just the paths it is
given), decides per file whether its content changed (size, times and inode
first; a SHA-256 of the bytes when those differ), chunks and embeds only what
is new, reuses the stored vectors of every chunk whose fingerprint it
already has, and publishes the four files atomically under the index lock.
When no document changed it writes nothing at all: no index file, no state.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import mmap
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragtui.core.errors import EmbeddingError, IndexFormatError, IndexMissingError, UsageError
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.bm25 import BM25Index, build_postings, check_bm25_params, encode_spliced, splice_postings
from ragtui.core.index.index_format import (
    BM25,
    DOCS,
    FILES,
    META,
    VECTORS,
    ChunkRecord,
    DocsFile,
    IndexData,
    IndexMeta,
    bad_vector_rows,
    encode_docs,
    encode_meta,
    fingerprint,
    generation_of,
    read_index,
    vector_row_problem,
)
from ragtui.core.ingest.chunker import LONG_DOCUMENT_CHARS, chunk_text
from ragtui.core.ingest.journal import EmbedJournal
from ragtui.core.ingest.patterns import IGNORE_FILES
from ragtui.core.ingest.publish import (
    FileRange,
    IndexLock,
    check_index_id,
    encode_index,
    file_size,
    index_dir,
    publish,
    rag_root,
    remove_leftovers,
    remove_stale_generations,
    state_dir,
    utc_now,
)
from ragtui.core.ingest.walk import (
    Candidate,
    WalkRules,
    candidate,
    decode_document,
    doc_id_for,
    filter_paths,
    read_file,
    unreadable_now,
    walk_folder,
)

__all__ = ["SyncReport", "load_state", "prepare", "sync"]

STATE_VERSION = 1
MAX_STATE_BYTES = 512 << 20
"""files.json above this is not read (nor written): about two million documents' stamps and hashes."""
EMBED_BATCH = 256
CHUNK_BATCH = 64

Progress = Callable[[str, int, int], None]
"""progress(stage, done, total): stages "scan", "chunk", "embed", "write"."""


@dataclass
class SyncReport:
    """What one sync did. ``published`` is False when nothing was written."""

    index_id: str
    index_path: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    chunks_total: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_embedded: int = 0
    published: bool = False
    incremental: bool = False
    """Whether the publish spliced the previous generation (only changed documents rebuilt)."""
    rebuilt: str | None = None
    """Why every document was re-chunked (settings changed, unreadable index), if it was."""
    warnings: list[str] = field(default_factory=list)
    """One line each: an ``--include``/``--exclude`` pattern that matched nothing (whole-folder syncs)."""
    seconds: dict[str, float] = field(default_factory=dict)
    bytes_written: int = 0

    def summary(self) -> str:
        files = f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, {self.unchanged} unchanged"
        chunks = f"{self.chunks_total} chunks (+{self.chunks_added} -{self.chunks_removed}, {self.chunks_embedded} embedded)"
        what = "published" if self.published else "nothing to write"
        skipped = f", {len(self.skipped)} skipped" if self.skipped else ""
        return f"{self.index_id}: {files}{skipped}; {chunks}; {what} in {self.seconds.get('total', 0.0):.2f} s"

    def to_json(self) -> dict:
        return {
            "index_id": self.index_id,
            "index_path": self.index_path,
            "published": self.published,
            "incremental": self.incremental,
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "chunks": {
                "total": self.chunks_total,
                "added": self.chunks_added,
                "removed": self.chunks_removed,
                "embedded": self.chunks_embedded,
            },
            "rebuilt": self.rebuilt,
            "warnings": self.warnings,
            "bytes_written": self.bytes_written,
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
        }


# -- state: what the last sync saw (outside the index; it only saves time) --------------------


def _state_file(artifacts: Path, index_id: str) -> Path:
    return state_dir(artifacts, index_id) / "files.json"


def load_state(artifacts: Path, index_id: str) -> dict:
    """The writer's state for ``index_id`` ({} when absent, unreadable or over ``MAX_STATE_BYTES``).

    Read without blocking and only if it is a regular file: a bad state is
    discarded, which costs the next sync a full read of the folder and index.
    """
    try:
        state = json.loads(_read_state_bytes(_state_file(artifacts, index_id)).decode("utf-8"))
    except (OSError, ValueError, RecursionError, MemoryError):
        return {}
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return {}
    return state


def _read_state_bytes(path: Path) -> bytes:
    """files.json's bytes: ``OSError`` unless it is a regular file (not a link) of at most ``MAX_STATE_BYTES``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_STATE_BYTES:
            raise OSError(errno.EINVAL, "not a regular file of at most MAX_STATE_BYTES", str(path))
        data = f.read(MAX_STATE_BYTES + 1)
    if len(data) > MAX_STATE_BYTES:
        raise OSError(errno.EFBIG, "grew past MAX_STATE_BYTES", str(path))
    return data


def _save_state(artifacts: Path, index_id: str, state: dict) -> bool:
    path = _state_file(artifacts, index_id)
    tmp = path.with_name(f".files.json.{os.getpid()}.tmp")
    try:
        data = json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(data) > MAX_STATE_BYTES:
            raise OSError(errno.EFBIG, "larger than a state file may be")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        try:
            os.replace(tmp, path)
        except IsADirectoryError:
            # A directory where the state belongs (not ours to keep: it is in the writer's own folder).
            shutil.rmtree(path)
            os.replace(tmp, path)
        return True
    except OSError:
        # The state only saves time: without it the next sync re-reads every
        # file (and still reuses every stored vector). Not worth failing for.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


# -- what this process published last: the next sync of the same index starts from it --------

_CARRIED_STATE: dict[tuple[str, str], tuple[list, dict]] = {}
_CARRIED_INDEX: dict[tuple[str, str], tuple[dict, _Spliceable]] = {}
_CARRY_LIMIT = 4
_CARRY_LOCK = threading.Lock()  # syncs of different indexes may run on different threads


def _stat_stamp(st: os.stat_result) -> list:
    """What identifies a file's content without reading it: size, mtime, ctime, inode.

    ctime cannot be set back by a user, so a file written in place and given
    its old mtime again still differs.
    """
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _file_stamp(path: Path) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _stat_stamp(st)


def _carried_state(key, artifacts: Path, index_id: str) -> dict:
    """The writer state: the one this process saved last if the file is still that one, else read."""
    with _CARRY_LOCK:
        carried = _CARRIED_STATE.get(key)
    if carried is not None and carried[0] == _file_stamp(_state_file(artifacts, index_id)):
        return carried[1]
    return load_state(artifacts, index_id)


def _carry(key, state: dict, following: tuple[dict, _Spliceable], state_path: Path) -> None:
    """Keep what the next sync of this index needs (a few indexes at most: the rest are re-read)."""
    stamp = _file_stamp(state_path)
    if stamp is None:
        return
    with _CARRY_LOCK:
        for table, value in ((_CARRIED_STATE, (stamp, state)), (_CARRIED_INDEX, following)):
            table.pop(key, None)
            table[key] = value
            while len(table) > _CARRY_LIMIT:
                table.pop(next(iter(table)))


def prepare(artifacts: str | os.PathLike, index_id: str, *, warm: bool = False) -> bool:
    """Open the current generation of ``index_id`` for this process's next sync of it.

    A long-running writer (the watch agent) calls this when idle, so that
    its first save does not pay for reading the index it did not publish
    itself. With ``warm``, it also runs the BM25 splice once without
    publishing, so the arrays a save works on are read in and the heap has
    grown to its working size (about a second of CPU at 100k chunks, once).
    Only reads; True when the next sync can start from it.
    """
    artifacts = Path(os.path.abspath(artifacts))
    key = (str(artifacts), index_id)
    with _CARRY_LOCK:
        if key in _CARRIED_INDEX:
            return True
    target = index_dir(artifacts, index_id)
    state = _carried_state(key, artifacts, index_id)
    if not state.get("index_files") or state.get("generation") != generation_of(target):
        return False
    spliceable = _open_for_splice(target, state, state.get("files", {}), rag_root(artifacts) / ".cache")
    if spliceable is None:
        return False
    if warm:
        old = spliceable.old
        same = np.arange(old.n_chunks, dtype=np.int64)
        postings = splice_postings(old.bm25, same, old.n_chunks, [], [])
        encode_spliced(spliceable.bm25_raw, old.bm25, postings)
        BM25Index.from_postings(postings, old.meta.k1, old.meta.b)
    _carry(key, state, (state["index_files"], spliceable), _state_file(artifacts, index_id))
    return True


# -- the sync itself ---------------------------------------------------------------------------


def sync(
    folder: str | os.PathLike,
    *,
    artifacts: str | os.PathLike,
    embedder,
    index_id: str | None = None,
    max_tokens: int = 256,
    overlap: int = 32,
    k1: float = 1.2,
    b: float = 0.75,
    rules: WalkRules | None = None,
    paths: Iterable[str | os.PathLike] | None = None,
    progress: Progress | None = None,
    replace: bool = False,
) -> SyncReport:
    """Bring ``<artifacts>/rag/<index_id>`` up to date with ``folder``.

    ``paths`` limits the work to those files (and folders: everything under
    them) — the watch agent passes what its events named; every other
    document is taken as unchanged — only while the published generation is
    provably the one the writer's state describes; otherwise (and whenever the
    previous index cannot be read) every file of the folder is read.

    A file that exists but cannot be read now (permissions, I/O) keeps the
    chunks it had, and is reported in ``skipped`` with the reason.

    The index of another folder (by resolved path, as the writer's state
    records it) is never replaced unless ``replace``: ``UsageError`` instead.

    Raises ``UsageError`` for a bad folder,
    ``LockedError`` when another writer holds the index, ``EmbeddingError``
    when the embedder fails (nothing is published then) and ``StorageError``
    when publishing fails (the previous index stays intact). After either
    failure the vectors already embedded are kept (``EmbedJournal``), so the
    next sync does not ask the embedder for them again.
    """
    t_start = time.perf_counter()
    check_bm25_params(k1, b)
    folder = Path(os.path.abspath(folder))
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder: give the folder of documents to index")
    if folder.parent == folder:
        raise UsageError("cannot index the root folder itself: give a folder below it")
    artifacts = Path(os.path.abspath(artifacts))
    index_id = index_id or folder.name
    check_index_id(index_id)
    base_rules = rules or WalkRules()
    rules = dataclasses.replace(base_rules, skip_under=(*base_rules.skip_under, artifacts))
    walk = rules.describe()
    if paths is not None and rules.ignore_files:
        paths = list(paths)
        if any(os.path.basename(os.fspath(p)) in IGNORE_FILES for p in paths):
            paths = None  # an ignore file changed: any document of the folder may be in or out now
    target = index_dir(artifacts, index_id)
    report = SyncReport(index_id, str(target))
    tick = progress or (lambda stage, done, total: None)

    with IndexLock(artifacts, index_id):
        # A writer killed earlier may have left a half-written generation or state file.
        t0 = time.perf_counter()
        remove_leftovers(artifacts, index_id)
        key = (str(artifacts), index_id)
        state = _carried_state(key, artifacts, index_id)
        report.seconds["load"] = time.perf_counter() - t0
        settings = {
            "embedding_model": embedder.model,
            "dim": embedder.dim,
            "tokenizer": embedder.tokenizer.name,
            "max_tokens": max_tokens,
            "overlap": overlap,
            "k1": k1,
            "b": b,
        }
        current_gen = generation_of(target)
        if not replace:
            _refuse_other_folder(state, folder, index_id, current_gen)
        # The state stands in for the index only while the published generation is
        # the one it describes: the same meta.json and the same four files, unchanged
        # since (size, mtime, ctime, inode). A damaged or replaced file breaks that.
        trusted = (
            state.get("settings") == settings
            and state.get("generation") is not None
            and state.get("generation") == current_gen
            and state.get("folder") == str(folder)
            # Any of the four files replaced or touched since (a FIFO, a bomb, an edit): read it all again,
            # so that a damaged generation is rebuilt rather than kept because no document changed.
            and state.get("index_files") is not None
            and state.get("index_files") == _index_stamp(target)
        )
        old_files: dict = state.get("files", {}) if trusted else {}
        # Other patterns or limits than the last sync's choose other documents: only a whole walk
        # finds them (the files it already knows keep their stamps and vectors).
        same_walk = state.get("walk") == walk

        # 1-2. Which documents exist now, and the text of those that changed.
        seen, new_texts, kept = _scan(folder, rules, paths if trusted and same_walk else None, old_files, report, tick)
        if trusted:
            _keep_unreadable(seen, kept, old_files)
        _classify(report, seen, new_texts, old_files, kept)
        removed = report.removed

        nothing_changed = trusted and not new_texts and not removed
        if nothing_changed:
            report.chunks_total = sum(f.get("n_chunks", 0) for f in seen.values())
            if seen != old_files or not same_walk:
                # Only times changed (a touch, a save of the same bytes): remember
                # the new stamps so the next sync need not read these files again.
                # New walk rules that changed no document are remembered too.
                _save_state(artifacts, index_id, {**state, "files": seen, "walk": walk})
            report.seconds["total"] = time.perf_counter() - t_start
            return report

        cache_dir = rag_root(artifacts) / ".cache"
        journal = EmbedJournal(artifacts, index_id, embedder.model, embedder.dim)
        t0 = time.perf_counter()
        spliceable = None
        if trusted and current_gen:
            with _CARRY_LOCK:
                carried = _CARRIED_INDEX.pop(key, None)
            stamp = state.get("index_files")
            if carried is not None and stamp is not None and carried[0] == stamp == _index_stamp(target):
                spliceable = carried[1]  # this process published it: nothing to re-read
            else:
                spliceable = _open_for_splice(target, state, old_files, cache_dir)
        report.seconds["open"] = time.perf_counter() - t0
        if spliceable is not None:
            # 3'. The common case: keep the previous generation's bytes for every
            # unchanged document and build only what changed.
            following = _splice_publish(
                artifacts, index_id, spliceable, seen, new_texts, embedder, settings, report, tick, journal, cache_dir
            )
            t0 = time.perf_counter()
            new_state = _new_state(folder, settings, target, seen, walk)
            if _save_state(artifacts, index_id, new_state) and following is not None:
                _carry(key, new_state, following, _state_file(artifacts, index_id))
            report.seconds["state"] = time.perf_counter() - t0
            report.seconds["total"] = time.perf_counter() - t_start
            return report

        # 3. The previous index: its chunks and vectors are reused where they still fit.
        old: IndexData | None = None
        if current_gen is not None or os.path.lexists(target):  # a link whose meta.json is gone is damage too
            try:
                old = read_index(target)
            except (IndexFormatError, IndexMissingError) as e:
                report.rebuilt = f"the existing index could not be read ({e}); rebuilt from every file of the folder"
        if trusted and (old is None or not _state_matches(old, old_files)):
            # The unchanged documents were to come from that index: without it
            # (or when it does not hold what the state says), read them all.
            trusted, old_files = False, {}
            report.skipped.clear()
            seen, new_texts, kept = _scan(folder, rules, None, old_files, report, tick)
        if old is not None and not trusted:
            m = old.meta
            old_settings = {
                "embedding_model": m.embedding_model,
                "dim": m.dim,
                "tokenizer": m.tokenizer,
                "max_tokens": m.max_tokens,
                "overlap": m.overlap,
                "k1": m.k1,
                "b": m.b,
            }
            if old_settings != settings:
                changed_keys = ", ".join(k for k in settings if settings[k] != old_settings[k])
                report.rebuilt = f"settings changed ({changed_keys}); every document re-chunked"
        if not trusted:
            # Without trustworthy state every present document is re-read above,
            # so every one of them is in new_texts; classify against the old index.
            old_docs = {r.doc_id for r in old.records} if old is not None else set()
            # Their previous chunks are in the old index only: the entry has no stamp, so
            # the next sync reads the file again.
            _keep_unreadable(seen, kept, dict.fromkeys(old_docs, {"stat": None, "sha256": None}))
            _classify(report, seen, new_texts, dict.fromkeys(old_docs), kept)

        records, vectors, doc_terms = _assemble(
            folder, seen, new_texts, old, embedder, max_tokens, overlap, report, tick, journal
        )
        counts = _chunk_counts(records)
        for doc_id in seen:
            seen[doc_id] = {**seen[doc_id], "n_chunks": counts.get(doc_id, 0)}
        report.chunks_total = len(records)
        if old is not None:
            old_fps = {r.fingerprint for r in old.records}
            new_fps = {r.fingerprint for r in records}
            report.chunks_added = sum(1 for r in records if r.fingerprint not in old_fps)
            report.chunks_removed = sum(1 for r in old.records if r.fingerprint not in new_fps)
        else:
            report.chunks_added = len(records)

        # 4. Encode and publish as one unit.
        t0 = time.perf_counter()
        meta = IndexMeta(index_id, utc_now(), len(records), embedder.dim, embedder.model,
                         embedder.tokenizer.name, max_tokens, overlap, k1, b)
        postings = build_postings(doc_terms)
        files = encode_index(meta, records, vectors, postings=postings)
        if old is not None and not trusted and _same_content(old, files):
            # Every document "changed" only in ways that leave the index bytes
            # identical (e.g. state was lost): keep the current generation.
            report.published = False
        else:
            tick("write", 0, 1)
            # Readers find the decoded BM25 arrays ready instead of decoding the new file.
            BM25Index.from_postings(postings, k1, b).store(files[BM25], cache_dir, index_id)
            publish(artifacts, index_id, files)
            report.published = True
            report.bytes_written = sum(len(v) for v in files.values())
            tick("write", 1, 1)
            BM25Index.evict(cache_dir, index_id)
        journal.clear()
        report.seconds["write"] = time.perf_counter() - t0
        _save_state(artifacts, index_id, _new_state(folder, settings, target, seen, walk))
    report.seconds["total"] = time.perf_counter() - t_start
    return report


def _chunk_counts(records: Sequence[ChunkRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        counts[r.doc_id] = counts.get(r.doc_id, 0) + 1
    return counts


def _scan(folder: Path, rules: WalkRules, paths, old_files: dict, report: SyncReport, tick) -> tuple[dict, dict, list]:
    """(seen, new_texts, unreadable): every document now with its state entry, the text of each new
    or changed one, and the doc_ids (files or folders) that exist but could not be read now.

    With ``paths``, only what they name is looked at; every other document of
    ``old_files`` is carried over as it was.
    """
    t0 = time.perf_counter()
    seen: dict[str, dict] = {}
    missed: list[Path] = []
    if paths is None:
        found = walk_folder(folder, rules, report.skipped, unreadable=missed, warnings=report.warnings)
    else:
        seen, found = _rescan(folder, rules, paths, old_files, report.skipped, missed)
    tick("scan", len(seen) + len(found), len(seen) + len(found))
    to_read = []
    for cand in found:
        prev = old_files.get(cand.doc_id)
        stamp = [cand.size, cand.mtime_ns, cand.ctime_ns, cand.ino]
        if prev is not None and prev.get("stat") == stamp:
            seen[cand.doc_id] = prev
        else:
            to_read.append((cand, prev, stamp))
    report.seconds["scan"] = time.perf_counter() - t0

    # Read what may have changed; a matching content hash proves it did not.
    t0 = time.perf_counter()
    new_texts: dict[str, str] = {}
    unreadable = [d for d in (doc_id_for(folder, p) for p in missed) if d is not None]
    real_folder = os.path.realpath(folder)
    for cand, prev, stamp in to_read:
        try:
            data = read_file(cand.path, rules.max_bytes, inside=real_folder)
        except FileNotFoundError:
            report.skipped.append((str(cand.path), "vanished"))
            continue
        except OSError as e:
            if unreadable_now(e):
                report.skipped.append((str(cand.path), f"unreadable: {e.strerror or e} (kept as it was until it can be read)"))
                unreadable.append(cand.doc_id)
            else:
                report.skipped.append((str(cand.path), f"unreadable: {e.strerror or e}"))
            continue
        digest = hashlib.sha256(data).hexdigest()
        if prev is not None and prev.get("sha256") == digest:
            seen[cand.doc_id] = {**prev, "stat": stamp}
            continue
        text, reason = decode_document(data)
        if text is None:
            report.skipped.append((str(cand.path), reason))
            continue
        new_texts[cand.doc_id] = text
        seen[cand.doc_id] = {"stat": stamp, "sha256": digest}
    report.seconds["read"] = time.perf_counter() - t0
    return seen, new_texts, unreadable


def _under(doc_id: str, prefixes: Sequence[str]) -> bool:
    """Whether ``doc_id`` is one of ``prefixes`` or lies in a folder one of them names."""
    return any(doc_id == p or doc_id.startswith(p + "/") for p in prefixes)


def _keep_unreadable(seen: dict, unreadable: Sequence[str], old: dict) -> None:
    """Carry each document of ``old`` that could not be read now (itself or its folder) into ``seen``.

    A file that exists but cannot be read at the moment is not a deletion: it
    keeps the chunks it had until it can be read again.
    """
    if not unreadable:
        return
    for doc_id, entry in old.items():
        if doc_id not in seen and _under(doc_id, unreadable):
            seen[doc_id] = entry


def _classify(report: SyncReport, seen: dict, new_texts: dict, old: dict, unreadable: Sequence[str]) -> None:
    """Fill the report's added, changed, removed and unchanged, against the documents of ``old``."""
    def order(ids):
        return sorted(ids, key=lambda d: d.encode("utf-8"))

    report.added = order(d for d in new_texts if d not in old)
    report.changed = order(d for d in new_texts if d in old)
    report.removed = order(set(old) - set(seen))
    # A document kept because it could not be read is reported as skipped, not as unchanged.
    report.unchanged = sum(1 for d in seen if d not in new_texts and not (unreadable and _under(d, unreadable)))


def _state_matches(old: IndexData, old_files: dict) -> bool:
    """Whether the index holds, per document, the number of chunks the state says it does."""
    held = _chunk_counts(old.records)
    wanted = {d: f.get("n_chunks") for d, f in old_files.items() if f.get("n_chunks") != 0}
    return held == wanted


def _refuse_other_folder(state: dict, folder: Path, index_id: str, current_gen: str | None) -> None:
    """``UsageError`` when the published index ``index_id`` belongs to another folder that still exists.

    The writer's state records the folder; the same folder by another path
    (a link, a bind mount) is the same folder. When the recorded one is gone
    (moved, deleted) there is nothing of it to keep apart: a re-ingest from the
    new place takes the index over.
    """
    recorded = state.get("folder")
    if current_gen is None or not isinstance(recorded, str) or not recorded or recorded == str(folder):
        return
    try:
        if os.path.samefile(recorded, folder) or not os.path.isdir(recorded):
            return
    except OSError:
        return
    raise UsageError(
        f"index {index_id!r} holds the folder {recorded}, not {folder} (same name): "
        "give this one another index id with --index ID, or pass --replace to replace that index"
    )


def _same_content(old: IndexData, files: dict[str, bytes]) -> bool:
    """Whether ``files`` differ from the published generation only in created_at."""
    base = old.path
    try:
        for name in ("docs.jsonl", "bm25.idx", "vectors.f32"):
            if (base / name).read_bytes() != files[name]:
                return False
        old_meta = json.loads((base / "meta.json").read_bytes())
        new_meta = json.loads(files["meta.json"])
    except (OSError, ValueError):
        return False
    old_meta.pop("created_at", None)
    new_meta.pop("created_at", None)
    return old_meta == new_meta


def _rescan(folder: Path, rules: WalkRules, paths, old_files: dict, skipped, unreadable: list[Path]) -> tuple[dict, list]:
    """For a partial sync: (old documents no path covers, candidates for what the paths name now).

    Paths that exist but cannot be examined now are appended to ``unreadable``.
    """
    named = filter_paths(paths, folder)
    prefixes = sorted({d for d in (doc_id_for(folder, p) for p in named) if d is not None})
    carried = dict(old_files)
    if 0 < len(prefixes) <= 8:
        # A few named paths against many documents: drop each named one and
        # everything under a named folder, by prefix, without splitting every doc_id.
        for doc_id in old_files:
            for prefix in prefixes:
                if doc_id.startswith(prefix) and (len(doc_id) == len(prefix) or doc_id[len(prefix)] == "/"):
                    del carried[doc_id]
                    break
    elif prefixes:
        # Many paths: look each document's ancestors up instead (linear in the documents).
        named_set = set(prefixes)
        for doc_id in old_files:
            parts = doc_id.split("/")
            if any("/".join(parts[:i]) in named_set for i in range(1, len(parts) + 1)):
                del carried[doc_id]
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
            cand = candidate(folder, p, rules, skipped, unreadable=unreadable)
            if cand is not None:
                found[cand.doc_id] = cand
            elif skipped and skipped[-1] == (str(p), "vanished"):
                skipped.pop()  # a deletion, not a skip
    for doc_id in found:
        carried.pop(doc_id, None)
    return carried, sorted(found.values(), key=lambda c: c.doc_id.encode("utf-8"))


def _rel(folder: Path, path: Path) -> str:
    return os.path.relpath(path, folder).replace(os.sep, "/")


def _inside_walkable(folder: Path, path: Path, filt) -> bool:
    """Whether every folder between ``folder`` and ``path`` is one the walk enters."""
    rel = _rel(folder, path)
    if rel.startswith(".."):
        return False
    for skip in filt.rules.skip_under:
        if os.path.commonpath([os.path.abspath(path), os.path.abspath(skip)]) == os.path.abspath(skip):
            return False
    return filt.chain(rel.rpartition("/")[0]) is not None


def _assemble(folder, seen, new_texts, old, embedder, max_tokens, overlap, report, tick, journal):
    """Records, vectors and BM25 terms of the new generation, in doc_id order."""
    old_rows: dict[str, range] = {}
    if old is not None:
        start = 0
        recs = old.records
        for i in range(len(recs) + 1):
            if i == len(recs) or (i > start and recs[i].doc_id != recs[start].doc_id):
                if i > start:
                    old_rows[recs[start].doc_id] = range(start, i)
                start = i
    new_chunks = _chunk_all(new_texts, embedder.tokenizer, max_tokens, overlap, report, tick)

    records: list[ChunkRecord] = []
    source_rows: list[int] = []  # old row to copy the vector from, or -1 for "embed"
    for doc_id in sorted(seen, key=lambda d: d.encode("utf-8")):
        if doc_id in new_chunks:
            for k, ch in enumerate(new_chunks[doc_id]):
                records.append(ChunkRecord(f"{doc_id}#{k}", doc_id, "file", doc_id, ch.text, ch.n_tokens, fingerprint(ch.text)))
                source_rows.append(-1)
        elif doc_id in old_rows:
            for row in old_rows[doc_id]:
                records.append(old.records[row])
                source_rows.append(row)
        else:
            # Known to state but absent from the index (e.g. an empty document): nothing to carry.
            continue

    # Reuse any stored vector whose fingerprint matches; embed the rest once each.
    by_fp: dict[str, int] = {}
    if old is not None:
        for row in range(len(old.records)):
            by_fp.setdefault(old.records[row].fingerprint, row)
    reuse = old is not None and old.meta.embedding_model == embedder.model and old.meta.dim == embedder.dim
    vectors = np.zeros((len(records), embedder.dim), dtype=np.float32)
    pending: dict[str, list[int]] = {}
    texts_for: dict[str, str] = {}
    for i, (rec, src) in enumerate(zip(records, source_rows)):
        if src < 0:
            src = by_fp.get(rec.fingerprint, -1)
        if src >= 0 and reuse:
            vectors[i] = old.vectors[src]
        else:
            pending.setdefault(rec.fingerprint, []).append(i)
            texts_for[rec.fingerprint] = rec.text
    _embed_pending(pending, texts_for, vectors, embedder, journal, report, tick)
    t0 = time.perf_counter()
    doc_terms = [analyze(r.text) for r in records]
    report.seconds["analyze"] = time.perf_counter() - t0
    return records, vectors, doc_terms


def _chunk_all(new_texts: dict[str, str], tokenizer, max_tokens, overlap, report, tick) -> dict[str, list]:
    """Each new document's chunks."""
    t0 = time.perf_counter()
    new_chunks: dict[str, list] = {}
    done = 0
    items = list(new_texts.items())
    spans_many = getattr(tokenizer, "spans_many", None)
    for lo in range(0, len(items), CHUNK_BATCH):
        batch = items[lo : lo + CHUNK_BATCH]
        # One parallel tokenizer call for a batch of documents, when the tokenizer offers it;
        # a long document is left to chunk_text, which tokenizes it part by part.
        spans: list = [None] * len(batch)
        short = [i for i, (_, t) in enumerate(batch) if len(t) < LONG_DOCUMENT_CHARS]
        if spans_many and short:
            for i, doc_spans in zip(short, spans_many([batch[i][1] for i in short])):
                spans[i] = doc_spans
        for (doc_id, text), doc_spans in zip(batch, spans):
            new_chunks[doc_id] = chunk_text(text, tokenizer, max_tokens, overlap, spans=doc_spans)
        done += len(batch)
        tick("chunk", done, len(new_texts))
    tick("chunk", len(new_texts), len(new_texts))
    report.seconds["chunk"] = time.perf_counter() - t0
    return new_chunks


def _embed_pending(pending: dict[str, list[int]], texts_for, vectors, embedder, journal, report, tick) -> None:
    """Fill ``vectors[rows]`` for each fingerprint in ``pending``: from the journal, else from the embedder."""
    t0 = time.perf_counter()
    if pending:
        # Vectors a failed earlier run already had embedded are not asked for again.
        for f, vec in journal.load(pending).items():
            if f in pending:
                vectors[pending.pop(f)] = vec
    fps = list(pending)
    for lo in range(0, len(fps), EMBED_BATCH):
        batch = fps[lo : lo + EMBED_BATCH]
        emb = np.asarray(embedder.embed([texts_for[f] for f in batch]), dtype=np.float32)
        if emb.shape != (len(batch), vectors.shape[1]):
            raise EmbeddingError(f"embedder {embedder.model}: {emb.shape} embeddings for {len(batch)} texts of dim {vectors.shape[1]}")
        bad = bad_vector_rows(emb)
        if bad.size:
            # Never published: a row that is not a unit vector ranks wrongly in every later search.
            raise EmbeddingError(f"embedder {embedder.model}: {vector_row_problem(emb, int(bad[0]))}")
        for f, vec in zip(batch, emb):
            vectors[pending[f]] = vec
        journal.append(batch, emb)
        tick("embed", min(lo + EMBED_BATCH, len(fps)), len(fps))
    report.chunks_embedded = len(fps)
    report.seconds["embed"] = time.perf_counter() - t0


# -- the incremental publish: splice the previous generation ----------------------------------


def _index_stamp(target: Path) -> dict | None:
    """Size, mtime, ctime and inode of each file of the generation ``target`` names (None if one is missing)."""
    real = os.path.realpath(target)
    stamp: dict = {"dir": real}
    for name in FILES:
        try:
            st = os.stat(os.path.join(real, name))
        except OSError:
            return None
        stamp[name] = _stat_stamp(st)
    return stamp


def _new_state(folder: Path, settings: dict, target: Path, seen: dict, walk: dict) -> dict:
    return {
        "version": STATE_VERSION,
        "folder": str(folder),
        "root": str(folder.parent),
        "settings": settings,
        "walk": walk,
        "generation": generation_of(target),
        "index_files": _index_stamp(target),
        "files": seen,
    }


@dataclass
class _Spliceable:
    old: IndexData
    rows: dict[str, tuple[int, int]]
    """Each old document's rows [lo, hi)."""
    fingerprints: np.ndarray
    """S64: each old row's fingerprint as ASCII."""
    bm25_raw: bytes
    """The old bm25.idx, whose postings' bytes are reused."""
    stamp: dict
    """Where the old generation's files are, and the size, mtime, ctime and inode each had when it was opened."""


def _open_for_splice(target: Path, state: dict, old_files: dict, cache_dir: Path) -> _Spliceable | None:
    """The previous generation, when it is exactly the one this writer's state describes.

    That is: the state names this generation and every one of its four
    files is the one written then (size, mtime, ctime, inode), and the state's chunk
    counts add up. Anything else (an index written by another tool, a file
    touched since) returns None, and the caller reads and re-checks the whole
    previous index instead.
    """
    stamp = state.get("index_files")
    if stamp is None or stamp != _index_stamp(target):
        return None
    try:
        old = read_index(target, full=False, cache_dir=cache_dir)
    except (IndexFormatError, IndexMissingError):
        return None
    if old.generation != state.get("generation"):
        return None
    fps = old.records.written_fingerprints()
    if fps is None:
        return None
    rows: dict[str, tuple[int, int]] = {}
    at = 0
    for doc_id in sorted(old_files, key=lambda d: d.encode("utf-8")):
        n = old_files[doc_id].get("n_chunks")
        if type(n) is not int or n < 0:
            return None
        if n:
            rows[doc_id] = (at, at + n)
        at += n
    if at != old.n_chunks:
        return None
    try:
        # Non-blocking: the file stamped may have been swapped for a FIFO since (the fstat then refuses it).
        fd = os.open(os.path.join(stamp["dir"], BM25), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if _stat_stamp(st) != stamp[BM25] or not stat.S_ISREG(st.st_mode):
                return None
            bm25_raw = f.read()
    except OSError:
        return None
    return _Spliceable(old, rows, fps, bm25_raw, stamp)


def _splice_publish(artifacts, index_id, sp: _Spliceable, seen, new_texts, embedder, settings, report, tick, journal, cache_dir):
    """Publish the next generation from the previous one plus the changed documents.

    Unchanged documents keep their docs.jsonl lines and vector rows byte for
    byte (written straight from the previous generation's memory maps), and
    their BM25 postings (renumbered, not re-analyzed); only the changed
    documents are chunked, embedded and analyzed. The bytes equal what a full
    rebuild writes (tests compare them).
    """
    old = sp.old
    new_chunks = _chunk_all(new_texts, embedder.tokenizer, settings["max_tokens"], settings["overlap"], report, tick)
    t0 = time.perf_counter()
    segments: list[list] = []  # ["old", lo, hi, new_lo] or ["new", first new record, end]
    new_records: list[ChunkRecord] = []
    new_rows: list[int] = []
    next_rows: dict[str, tuple[int, int]] = {}
    n = 0
    for doc_id in sorted(seen, key=lambda d: d.encode("utf-8")):
        chunks = new_chunks.get(doc_id)
        if chunks is not None:
            seen[doc_id] = {**seen[doc_id], "n_chunks": len(chunks)}
            if not chunks:
                continue
            first = len(new_records)
            for k, ch in enumerate(chunks):
                new_records.append(
                    ChunkRecord(f"{doc_id}#{k}", doc_id, "file", doc_id, ch.text, ch.n_tokens, fingerprint(ch.text))
                )
            new_rows.extend(range(n, n + len(chunks)))
            next_rows[doc_id] = (n, n + len(chunks))
            n += len(chunks)
            if segments and segments[-1][0] == "new":
                segments[-1][2] = len(new_records)
            else:
                segments.append(["new", first, len(new_records)])
        elif doc_id in sp.rows:
            lo, hi = sp.rows[doc_id]
            if segments and segments[-1][0] == "old" and segments[-1][2] == lo:
                segments[-1][2] = hi
            else:
                segments.append(["old", lo, hi, n])
            next_rows[doc_id] = (n, n + hi - lo)
            n += hi - lo
    row_map = np.full(old.n_chunks, -1, dtype=np.int64)
    for seg in segments:
        if seg[0] == "old":
            _, lo, hi, new_lo = seg
            row_map[lo:hi] = np.arange(new_lo, new_lo + hi - lo)

    # Vectors of the new chunks: a stored one wherever the fingerprint is known, else embedded.
    find_row = _fingerprint_finder(sp.fingerprints, len(new_records))
    new_vectors = np.zeros((len(new_records), embedder.dim), dtype=np.float32)
    pending: dict[str, list[int]] = {}
    texts_for: dict[str, str] = {}
    for i, rec in enumerate(new_records):
        src = find_row(rec.fingerprint.encode("ascii"))
        if src is not None:
            new_vectors[i] = old.vectors[src]
        else:
            pending.setdefault(rec.fingerprint, []).append(i)
            texts_for[rec.fingerprint] = rec.text
    report.chunks_added = sum(len(v) for v in pending.values())
    report.seconds["plan"] = time.perf_counter() - t0
    _embed_pending(pending, texts_for, new_vectors, embedder, journal, report, tick)
    dropped = np.flatnonzero(row_map < 0)
    if dropped.size:
        now = {r.fingerprint.encode("ascii") for r in new_records}
        gone = [f for f in sp.fingerprints[dropped].tolist() if f not in now]
        if gone:
            kept = sp.fingerprints[row_map >= 0]
            if len(gone) <= 8:
                report.chunks_removed = sum(1 for f in gone if not (kept == f).any())
            else:
                kept_set = set(kept.tolist())
                report.chunks_removed = sum(1 for f in gone if f not in kept_set)
    report.chunks_total = n

    t0 = time.perf_counter()
    new_terms = [analyze(r.text) for r in new_records]
    report.seconds["analyze"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    postings = splice_postings(old.bm25, row_map, n, new_rows, new_terms)
    bm25_bytes = encode_spliced(sp.bm25_raw, old.bm25, postings)
    sources = _open_sources(sp.stamp)
    try:
        docs: list = []
        vectors: list = []
        row_bytes = 4 * old.meta.dim
        for seg in segments:
            if seg[0] == "old":
                # Unchanged stretches of the old files: the kernel copies them (or, when the
                # files cannot be opened again, they are written from the old maps).
                if sources is not None:
                    start, end = old.records.byte_range(seg[1], seg[2])
                    docs.append(FileRange(sources[DOCS], start, end - start))
                    vectors.append(FileRange(sources[VECTORS], seg[1] * row_bytes, (seg[2] - seg[1]) * row_bytes))
                else:
                    docs.append(old.records.raw_lines(seg[1], seg[2]))
                    vectors.append(memoryview(old.vectors[seg[1] : seg[2]]))
            else:
                docs.append(encode_docs(new_records[seg[1] : seg[2]]))
                vectors.append(memoryview(new_vectors[seg[1] : seg[2]]))
        meta = IndexMeta(index_id, utc_now(), n, embedder.dim, embedder.model, embedder.tokenizer.name,
                         settings["max_tokens"], settings["overlap"], settings["k1"], settings["b"])
        files = {META: encode_meta(meta), DOCS: docs, VECTORS: vectors, BM25: bm25_bytes}
        report.seconds["encode"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        tick("write", 0, 1)
        decoded = BM25Index.from_postings(postings, settings["k1"], settings["b"])
        report.seconds["weights"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        decoded.store(bm25_bytes, cache_dir, index_id)
        report.seconds["cache"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        publish(artifacts, index_id, files, tidy=False)
    finally:
        for fd in (sources or {}).values():
            os.close(fd)
    report.published = report.incremental = True
    report.bytes_written = sum(file_size(v) for v in files.values())
    report.seconds["write"] = time.perf_counter() - t0
    tick("write", 1, 1)
    # Readers already see the new generation; what follows only tidies up.
    t0 = time.perf_counter()
    following = _following(artifacts, index_id, meta, segments, docs, sp, new_records, next_rows, decoded, bm25_bytes)
    remove_stale_generations(artifacts, index_id)
    BM25Index.evict(cache_dir, index_id)
    journal.clear()
    report.seconds["tidy"] = time.perf_counter() - t0
    return following


def _open_sources(stamp: dict) -> dict[str, int] | None:
    """Read-only descriptors of the old docs.jsonl and vectors.f32, if they are still the files stamped."""
    fds: dict[str, int] = {}
    try:
        for name in (DOCS, VECTORS):
            fd = os.open(os.path.join(stamp["dir"], name), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            fds[name] = fd
            st = os.fstat(fd)
            if _stat_stamp(st) != stamp[name] or not stat.S_ISREG(st.st_mode):
                raise OSError(errno.ESTALE, "changed since it was opened")
    except OSError:
        for fd in fds.values():
            os.close(fd)
        return None
    return fds


def _fingerprint_finder(fingerprints: np.ndarray, wanted: int):
    """A function from a fingerprint (ASCII bytes) to a row holding it, or None."""
    if wanted <= 8:
        def scan(fp: bytes):
            hit = np.flatnonzero(fingerprints == fp)
            return int(hit[0]) if hit.size else None
        return scan
    rows = dict(zip(fingerprints.tolist(), range(len(fingerprints))))
    return rows.get


def _following(artifacts, index_id, meta, segments, docs, sp: _Spliceable, new_records, next_rows, decoded, bm25_bytes):
    """The just-published generation as the next splice's starting point, or None if it cannot be had cheaply."""
    target = index_dir(artifacts, index_id)
    stamp = _index_stamp(target)
    if stamp is None:
        return None
    old = sp.old
    ends, fps, pos = [], [], 0
    for seg, piece in zip(segments, docs):
        if seg[0] == "old":
            ends.append(old.records.line_ends(seg[1], seg[2]) + pos)
            fps.append(sp.fingerprints[seg[1] : seg[2]])
        else:
            ends.append(np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10) + pos)
            fps.append(np.array([r.fingerprint.encode("ascii") for r in new_records[seg[1] : seg[2]]], dtype="S64"))
        pos += file_size([piece])
    try:
        mapped = {}
        for name in (DOCS, VECTORS):
            with open(os.open(os.path.join(stamp["dir"], name), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
                st = os.fstat(f.fileno())
                if _stat_stamp(st) != stamp[name] or not stat.S_ISREG(st.st_mode):
                    return None
                mapped[name] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if st.st_size else b""
    except (OSError, ValueError):
        return None
    where = os.path.join(target, DOCS)
    records = DocsFile(mapped[DOCS], where, meta, ends=np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64))
    vectors = (
        np.frombuffer(mapped[VECTORS], dtype="<f4").reshape(meta.n_chunks, meta.dim)
        if meta.n_chunks else np.zeros((0, meta.dim), dtype=np.float32)
    )
    data = IndexData(path=target, generation=generation_of(target) or "", meta=meta, records=records,
                     vectors=vectors, bm25=decoded)
    fingerprints = np.concatenate(fps) if fps else np.zeros(0, dtype="S64")
    return stamp, _Spliceable(data, next_rows, fingerprints, bm25_bytes, stamp)

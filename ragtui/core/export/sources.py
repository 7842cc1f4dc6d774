"""The exported documents beside the search (``ragtui export --with-sources``).

Every result's ``url`` is its doc_id (percent-encoded) and ``#L<line>``,
relative to the page (spec/seekite-export.md, "Titles, headings and URLs"):
a doc_id ``notes/a.md`` is served from ``OUT/notes/a.md``. ``write_sources``
copies each document of the index there, byte for byte as it is now, so a
static host serves what the links name. Only files inside the folder the
index was ingested from are copied: a doc_id that is not a plain relative
path below it, names a hidden component (which ingest never takes), or
resolves through a link to outside it, is never read; neither is anything
that is not a regular file. Such documents, and documents gone or grown past
``MAX_COPY_BYTES`` since the ingest, are skipped and reported. ``SOURCES``
records the copied folder's name, so that the next export recognises the
folder as its own (``ragtui.core.export.writer.is_previous_export``).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ragtui.core.errors import UsageError
from ragtui.core.files import read_file
from ragtui.core.index.index_format import IndexData

__all__ = ["MAX_COPY_BYTES", "RESERVED", "SOURCES", "Copied", "sources_folder_of", "write_sources"]

SOURCES = "sources.json"
"""The export's record of its copied folder: ``{"format": "ragtui-sources", "folder": NAME, "documents": N}``."""

RESERVED = frozenset({"index.html", "search", SOURCES})
"""Names the export's own files take at the top of OUT: an ingested folder of one of these names cannot sit there."""

MAX_COPY_BYTES = 1 << 26
"""The largest document copied (64 MiB; ingest takes at most 16 MiB by default)."""

Sink = Callable[[str, Iterable[bytes]], None]


@dataclass
class Copied:
    """What ``write_sources`` did: documents copied, their bytes, and each document skipped with why."""

    folder: str
    documents: int = 0
    bytes: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _plain(doc_id: str, folder_name: str) -> str | None:
    """Why ``doc_id`` may not be copied as a path below OUT, or None when it may."""
    parts = doc_id.split("/")
    if doc_id.startswith("/") or "\0" in doc_id or len(parts) < 2 or any(p in ("", ".", "..") for p in parts):
        return "not a plain relative path"
    if parts[0] != folder_name:
        return f"not in the ingested folder {folder_name!r}"
    if any(p.startswith(".") for p in parts[1:]):
        return "holds a hidden component"
    return None


def write_sources(data: IndexData, folder: str | os.PathLike[str], sink: Sink) -> Copied:
    """Copy every document of ``data`` from ``folder`` (the ingested folder) into ``sink`` at its doc_id."""
    folder = Path(os.path.abspath(folder))
    name = folder.name
    if name in RESERVED:
        raise UsageError(f"the ingested folder is named {name!r}, as one of the export's own files, so its "
                         "documents cannot sit beside the search: export without --with-sources, or ingest the "
                         "folder under another name (a copy or a link named otherwise)")
    folder_real = os.path.realpath(folder)
    if not os.path.isdir(folder_real):
        raise UsageError(f"the ingested folder {folder} is not there: export without --with-sources, or put it back")
    copied = Copied(folder=name)
    last: str | None = None
    for rec in data.records.stream():
        if rec.doc_id == last:
            continue
        last = rec.doc_id
        why = _plain(rec.doc_id, name)
        if why is None:
            why = _copy(rec.doc_id, folder.parent, folder_real, sink, copied)
        if why is not None:
            copied.skipped.append((rec.doc_id, why))
    data.records.release_pages()
    record = {"format": "ragtui-sources", "folder": name, "documents": copied.documents}
    sink(SOURCES, [json.dumps(record, ensure_ascii=False, indent=2).encode() + b"\n"])
    return copied


def _copy(doc_id: str, root: Path, folder_real: str, sink: Sink, copied: Copied) -> str | None:
    path = root.joinpath(*doc_id.split("/"))
    real = os.path.realpath(path)
    if real == folder_real or os.path.commonpath([real, folder_real]) != folder_real:
        return "a link out of the folder (not followed)"
    try:
        st = os.stat(real)
    except OSError as e:
        return "a link loop (not followed)" if e.errno == errno.ELOOP else f"not readable now ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file now"
    try:
        # Non-blocking, no final link followed, the opened descriptor's own path checked, at most the bound.
        content = read_file(Path(real), MAX_COPY_BYTES, inside=folder_real)
    except OSError as e:
        if e.errno in (errno.EXDEV, errno.ELOOP):
            return "a link out of the folder (not followed)"
        if e.errno == 0:
            return e.strerror if "regular" in (e.strerror or "") else f"larger than {MAX_COPY_BYTES >> 20} MiB"
        return f"not readable now ({e.strerror})"
    sink(doc_id, [content])
    copied.documents += 1
    copied.bytes += len(content)
    return None


def sources_folder_of(out: Path) -> str | None:
    """The folder a previous export at ``out`` copied beside its search (its ``SOURCES`` record), or None."""
    record = out / SOURCES
    try:
        if record.is_symlink() or not record.is_file() or record.stat().st_size > 1 << 16:
            return None
        obj = json.loads(record.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(obj, dict) and obj.get("format") == "ragtui-sources"):
        return None
    name = obj.get("folder")
    if not isinstance(name, str) or name in RESERVED or _plain(f"{name}/x", name) is not None or "/" in name:
        return None
    return name

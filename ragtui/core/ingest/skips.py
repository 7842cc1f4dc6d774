"""What the readers refused at the last sync, and why, kept beside the writer's state (skipped.json).

A file that a reader skipped (encrypted, no text layer, a bomb, past a bound) is not read again
while its stamp (size, mtime, ctime, inode) stays the same: a no-op sync of a folder holding one
costs no extraction, and ``ragtui info`` can say what was left out and why. The file is only a
memory: one that is missing, unreadable or not what this module writes is taken as empty (the
files are then read again, which costs time and nothing else).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from ragtui.core.files import read_file, replace_file

__all__ = ["SKIPS_NAME", "Skips", "load_skips", "save_skips"]

SKIPS_NAME = "skipped.json"
_MAX_BYTES = 64 << 20
_VERSION = 1

Skips = dict[str, tuple[tuple[int, int, int, int], str]]
"""doc_id -> (stamp, reason)."""


def load_skips(folder: Path) -> Skips:
    """The skips remembered in the state folder ``folder`` ({} when none can be read)."""
    try:
        value = json.loads(read_file(folder / SKIPS_NAME, _MAX_BYTES))
    except (OSError, ValueError):
        return {}
    out: Skips = {}
    if not isinstance(value, dict) or value.get("version") != _VERSION or not isinstance(value.get("skipped"), dict):
        return {}
    for doc_id, entry in value["skipped"].items():
        if (isinstance(entry, list) and len(entry) == 5 and all(type(v) is int for v in entry[:4])
                and isinstance(entry[4], str)):
            out[doc_id] = ((entry[0], entry[1], entry[2], entry[3]), entry[4][:1000])
    return out


def save_skips(folder: Path, skips: Mapping[str, tuple[tuple[int, int, int, int], str]], old: Skips) -> None:
    """Remember ``skips`` (written only when they differ from ``old``; a temporary file, then a rename)."""
    if dict(skips) == old:
        return
    path = folder / SKIPS_NAME
    if not skips:
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    body = {"version": _VERSION, "skipped": {d: [*stamp, why] for d, (stamp, why) in sorted(skips.items())}}
    data = json.dumps(body, ensure_ascii=False, indent=0).encode("utf-8")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        replace_file(path, data)
    except OSError:
        pass  # what was skipped is only remembered to save work: the next sync reads those files again

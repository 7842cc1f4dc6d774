"""The detokenized vocabulary of a tokenize server, remembered between runs.

Spans by decoding (``http_tokenizer``) ask the server for the text of every
distinct token id once per tokenizer; without this cache, every ingest asked
again (hundreds to thousands of requests). ``VocabCache`` keeps those pieces
in one JSON file per server model under ``default_cache_dir()``
(``$XDG_CACHE_HOME/ragtui/vocab``, never inside an index), named by the
SHA-256 of the key: the server's address, the tokenize style, the model name
asked for, and the **model identity the server reports** (its ``/v1/models``
entry without the fields that change between calls, and llama.cpp's
``/props`` model path). A server that reports no identity gets no cache.

Trust: the file is read non-blocking, only when it is a regular file, at most
``MAX_FILE_BYTES``; an entry that is not an id and a string (or null) of at
most ``MAX_PIECE_CHARS``, a key that does not match, or a file over the
bounds counts as absent. Before cached pieces are used, ``SAMPLE`` of them
are decoded by the server again, and one that differs drops the whole file
(a different model served under the same name and identity). At most
``MAX_PIECES`` pieces are kept. Writes go to a temporary file renamed over the
old one; a cache that cannot be written is skipped, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ragtui.core.files import read_file, replace_file

__all__ = ["MAX_FILE_BYTES", "MAX_PIECES", "VocabCache", "default_cache_dir", "server_identity"]

MAX_PIECES = 1 << 18
"""Pieces kept per model (a vocabulary is at most a few hundred thousand tokens)."""
MAX_PIECE_CHARS = 1024
MAX_GROUP = 16
"""The most token ids one stored text may stand for."""
MAX_FILE_BYTES = 64 << 20
SAMPLE = 3
"""Cached pieces decoded again by the server before the others are trusted."""
FORMAT = 1

_STABLE = ("id", "object", "owned_by", "root", "parent", "max_model_len", "meta")
"""The fields of a ``/v1/models`` entry that name the model (``created`` is the time of the call on llama.cpp)."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/ragtui/vocab`` (``~/.cache`` when the variable is unset or empty)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ragtui" / "vocab"


def server_identity(get: Callable[[str], tuple[int, Any]], model: str) -> Any | None:
    """What the server says of the model it serves (``GET /v1/models``, ``GET /props``), or None when nothing.

    ``get(path)`` returns ``(status, decoded JSON or None)``; its errors propagate to the caller, who
    then goes without a cache.
    """
    status, listing = get("/v1/models")
    entries = listing.get("data") if status == 200 and isinstance(listing, dict) else None
    if not isinstance(entries, list):
        return None
    kept = [{k: e[k] for k in _STABLE if k in e} for e in entries if isinstance(e, dict)]
    named = [e for e in kept if e.get("id") == model]
    identity: dict[str, Any] = {"models": named or sorted(kept, key=lambda e: json.dumps(e, sort_keys=True))}
    if not identity["models"]:
        return None
    status, props = get("/props")
    if status == 200 and isinstance(props, dict):
        identity["props"] = {k: props[k] for k in ("model_path", "n_vocab", "model_alias") if k in props}
    return identity


Pieces = dict[tuple[int, ...], "str | None"]
"""Decoded texts by token ids: one id (a vocabulary entry) or a few (a character split over byte tokens)."""


class VocabCache:
    """One model's pieces (``{(token id, ...): text or None}``) on disk; see the module docstring."""

    def __init__(self, key_parts: Mapping[str, Any], folder: str | os.PathLike[str] | None = None) -> None:
        self.folder = Path(folder) if folder is not None else default_cache_dir()
        self.key = hashlib.sha256(json.dumps(key_parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        self.path = self.folder / f"{self.key}.json"

    def load(self) -> Pieces:
        """The pieces stored for this key; {} when there is no usable file."""
        try:
            entry = json.loads(read_file(self.path, MAX_FILE_BYTES, follow=False))
        except (OSError, ValueError):
            return {}
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != self.key:
            return {}
        pieces = entry.get("pieces")
        if not isinstance(pieces, list) or len(pieces) > MAX_PIECES:
            return {}
        out: Pieces = {}
        for item in pieces:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                    and 1 <= len(item[0]) <= MAX_GROUP and all(type(i) is int and 0 <= i < 1 << 31 for i in item[0])
                    and (item[1] is None or (isinstance(item[1], str) and len(item[1]) <= MAX_PIECE_CHARS))):
                return {}
            out[tuple(item[0])] = item[1]
        return out

    def save(self, pieces: Mapping[tuple[int, ...], str | None]) -> bool:
        """Store ``pieces`` (at most ``MAX_PIECES``); False when the folder cannot be written."""
        items = sorted(pieces.items())[:MAX_PIECES]
        data = json.dumps({"format": FORMAT, "key": self.key, "pieces": [[list(i), t] for i, t in items]},
                          ensure_ascii=False).encode("utf-8", "replace")
        if len(data) > MAX_FILE_BYTES:
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            replace_file(self.path, data)
        except OSError:
            return False
        return True

    def forget(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass



"""HyDE: a hypothetical answer, searched beside the question; cached on disk by model and question.

The cache is a folder of small JSON files (``default_cache_dir()``:
``$XDG_CACHE_HOME/ragtui/hyde``, never inside an index or the artifacts'
index folders), one per (server, model, prompt version, question), named by
the SHA-256 of those. A repeat of the same question to the same model costs
no chat call. An entry that cannot be read, is too large or does not match
its key counts as absent and is written again; a failure to write is not an
error (the answer goes on without the cache).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ragtui.core.answer.prompt import PROMPT_VERSION
from ragtui.core.files import read_file, replace_file

__all__ = ["MAX_ENTRY_BYTES", "HydeCache", "default_cache_dir"]

MAX_ENTRY_BYTES = 1 << 20


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/ragtui/hyde`` (``~/.cache`` when the variable is unset or empty)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ragtui" / "hyde"


class HydeCache:
    """Hypothetical answers by (server, model, question)."""

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        self.folder = Path(folder) if folder is not None else default_cache_dir()

    @staticmethod
    def key(server: str, model: str, question: str) -> str:
        ident = json.dumps([server, model, PROMPT_VERSION, question], ensure_ascii=False)
        return hashlib.sha256(ident.encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, server: str, model: str, question: str) -> str | None:
        key = self.key(server, model, question)
        try:
            # Regular files only, without blocking on a FIFO, at most MAX_ENTRY_BYTES (OSError otherwise).
            entry = json.loads(read_file(self.path(key), MAX_ENTRY_BYTES))
        except (OSError, ValueError):
            return None
        if (isinstance(entry, dict) and entry.get("key") == key and entry.get("question") == question
                and isinstance(entry.get("text"), str) and entry["text"].strip()):
            return str(entry["text"])
        return None

    def put(self, server: str, model: str, question: str, text: str) -> bool:
        """Store ``text``; False when the folder cannot be written (the caller goes on without it)."""
        key = self.key(server, model, question)
        data = json.dumps({"key": key, "model": model, "question": question, "text": text},
                          ensure_ascii=False).encode("utf-8")
        if len(data) > MAX_ENTRY_BYTES:
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            replace_file(self.path(key), data)
        except OSError:
            return False
        return True

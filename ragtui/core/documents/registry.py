"""The kinds of document ragtui reads: one table, one row per kind (spec/documents.md).

A row names the file extensions of its kind, how its bytes are recognised (``magic``, for a binary
format), the reader that turns bytes into a ``Document`` and whether that reader runs in the
extraction worker (``isolated``: a native library or a format whose bombs cost memory). A kind is
added by writing one module that defines a ``KIND`` row and naming the module in ``_MODULES``.

Which kind a file is: by its extension first; the bytes decide for a misnamed file (a PDF saved as
``.txt``, a .docx renamed ``.zip``-less, a text file named ``.pdf``) and for a file whose name says
nothing (an ``--include`` of an extension-less name).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ragtui.core.documents.base import Document, Limits

__all__ = ["KINDS", "TEXT", "Kind", "by_extension", "detect", "kind_named", "names_for", "reader_versions"]

Reader = Callable[[bytes, Limits], Document]


@dataclass(frozen=True)
class Kind:
    """One kind of document."""

    name: str
    """As ``[ingest] kinds``, ``ragtui info`` and spec/documents.md spell it."""
    extensions: tuple[str, ...]
    """Lower-case, with the dot; the walk takes files so named by default."""
    reader: str
    """``module:function`` of the reader (imported on first use: reading text loads no PDF engine)."""
    paged: bool = False
    isolated: bool = False
    """Read in the extraction worker process, within ``Limits.seconds`` and ``Limits.memory``."""
    magic: Callable[[bytes], bool] | None = None
    """Whether the first bytes of a file are surely of this kind (a file of any name)."""
    accepts: Callable[[bytes], bool] | None = None
    """Whether the first bytes may be of this kind when the name says so (weaker than ``magic``)."""
    looks: Callable[[bytes], bool] | None = None
    """Whether the first bytes look like this kind, for a file whose extension names no kind."""
    names: tuple[str, ...] = ()
    """Whole file names (no extension) the walk takes as this kind by default."""
    globs: tuple[str, ...] = ()
    """Other name patterns the walk takes as this kind by default."""
    version: int = 1
    """Raised when the reader gives other text for the same bytes: the next sync reads this kind's
    documents again (``reader_versions``), though their bytes did not change."""
    _read: list[Reader] = field(default_factory=list, compare=False, repr=False)

    def read(self, data: bytes, limits: Limits) -> Document:
        """The document in ``data``; ``Unreadable`` with the reason when it is not one."""
        if not self._read:
            module, _, func = self.reader.partition(":")
            self._read.append(getattr(importlib.import_module(module), func))
        return self._read[0](data, limits)

    @property
    def patterns(self) -> tuple[str, ...]:
        """The walk's default include patterns for this kind."""
        return tuple(f"*{ext}" for ext in self.extensions) + self.names + self.globs


_MODULES = ("text", "pdf", "html", "docx", "epub", "odt")
"""In table order: the first kind whose ``magic`` matches a file's bytes wins."""


def _load() -> tuple[Kind, ...]:
    return tuple(importlib.import_module(f"ragtui.core.documents.{m}").KIND for m in _MODULES)


KINDS: tuple[Kind, ...] = _load()
TEXT = KINDS[0]
_BY_NAME = {k.name: k for k in KINDS}
_BY_EXT = {ext: k for k in KINDS for ext in k.extensions}
_BY_WHOLE_NAME = {n: k for k in KINDS for n in k.names}
_MAX_EXT_DOTS = 2  # ".rst.txt"


def reader_versions() -> dict[str, int]:
    """Each kind's reader version, as the writer's state records them (the text kind's never changes:
    its text is the file's)."""
    return {k.name: k.version for k in KINDS if k is not TEXT}


def kind_named(name: str) -> Kind | None:
    return _BY_NAME.get(name)


def names_for(kinds: Sequence[str]) -> tuple[str, ...]:
    """The walk's include patterns for the kinds named (``UsageError`` is the caller's for an unknown one)."""
    return tuple(p for k in KINDS if k.name in kinds for p in k.patterns)


def by_extension(name: str) -> Kind | None:
    """The kind a file's name says (its last extension, any case), or None."""
    base = name.rpartition("/")[2]
    whole = _BY_WHOLE_NAME.get(base)
    if whole is not None:
        return whole
    dot = base.rfind(".")
    if dot <= 0:
        return None
    return _BY_EXT.get(base[dot:].lower())


def _texty(head: bytes) -> bool:
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3  # a character cut at the end of the head
    return True


def detect(name: str, head: bytes) -> Kind:
    """The kind of the file ``name`` whose first bytes (at least 4 KiB when the file has them) are ``head``."""
    named = by_extension(name)
    if named is not None and named.magic is not None:
        if named.accepts is not None and named.accepts(head):
            return named
    for kind in KINDS:
        if kind.magic is not None and kind.magic(head):
            return kind
    if named is not None and named.magic is None:
        return named
    if named is not None and not _texty(head):
        return named  # neither this kind nor text: its reader says what is wrong
    if named is None:
        for kind in KINDS:
            if kind.looks is not None and kind.looks(head):
                return kind
    return TEXT

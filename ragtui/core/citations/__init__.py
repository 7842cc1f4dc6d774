"""Citations: from a chunk reference back to the lines of the source file it came from.

- ``resolver``: ``resolve(data, ref)`` -> ``Citation`` (the chunk's record, its source's path,
  line range and freshness), ``Resolver`` for many references against one index, and where an
  index's sources live (``source_folder``, ``source_root``). spec/citations.md is the contract.
- ``refs``: references and an answer's citations as text (``split_ref``, ``parse_refs``,
  ``parse_labels``), with no file or index read.
"""

from __future__ import annotations

from ragtui.core.citations.refs import MAX_LABELS, Label, parse_labels, parse_refs, split_ref
from ragtui.core.citations.resolver import (
    CHANGED,
    FRESH,
    MAX_SOURCE_BYTES,
    MISSING,
    MOVED,
    STATUSES,
    Citation,
    Resolver,
    resolve,
    resolve_many,
    source_folder,
    source_root,
)

__all__ = [
    "CHANGED",
    "FRESH",
    "MISSING",
    "MOVED",
    "MAX_LABELS",
    "MAX_SOURCE_BYTES",
    "STATUSES",
    "Citation",
    "Label",
    "Resolver",
    "parse_labels",
    "parse_refs",
    "resolve",
    "resolve_many",
    "source_folder",
    "source_root",
    "split_ref",
]

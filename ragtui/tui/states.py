"""The words for the states with nothing to search, and for vector search being off.

Each says what happened and what to do; none is an error dialog, and the
app keeps watching for the index to appear or be fixed.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

__all__ = ["empty", "invalid", "missing", "root_flag", "several", "vectors_loading_reason"]

vectors_loading_reason = "the embedder is still loading"


def root_flag(artifacts: Path, artifacts_from: str) -> str:
    """`` --artifacts DIR`` when the UI was pointed at a root other than the default, so a command
    copied from a screen builds the index where this UI looks for it; "" for the default root."""
    if artifacts_from.startswith("default"):
        return ""
    return f" --artifacts {shlex.quote(str(artifacts))}"


def missing(artifacts: Path, watch: Path | None, index_id: str | None = None,
            broken: Sequence[tuple[str, str]] = (), names: Sequence[str] = (), root_flag: str = "") -> tuple[str, str]:
    """``broken``: (name, problem) of entries under rag/ that cannot be opened, named so they can be removed;
    ``names``: the indexes that exist when ``index_id`` is not one of them; ``root_flag``: ``root_flag()``."""
    note = ""
    if broken:
        listed = "\n".join(f"    {name}: {problem}" for name, problem in broken)
        note = (f"\n\nNot usable as an index (remove, or rebuild with `ragtui ingest FOLDER --index ID`):\n"
                f"{listed}")
    if watch is not None:
        return (
            "No index yet",
            f"The sync agent is indexing {watch} into {artifacts}/rag.\n"
            f"This screen opens the index as soon as it is published.{note}",
        )
    where = f"no index {index_id!r}" if index_id else "no index"
    there = ""
    if names:
        there = f"The indexes there: {', '.join(names)} (press i to pick one, or start with --index ID).\n\n"
    index_flag = f" --index {shlex.quote(index_id)}" if index_id else ""
    return (
        "No index yet",
        f"There is {where} under {artifacts}/rag.\n\n"
        f"{there}"
        "Build one from a folder of documents:\n"
        f"    ragtui ingest ./docs{index_flag}{root_flag}\n"
        "or build it and keep it fresh while you search:\n"
        f"    ragtui{root_flag}{index_flag} --watch ./docs\n\n"
        "(--artifacts DIR or RAGTUI_ARTIFACTS picks another artifacts root.)\n"
        f"This screen opens the index as soon as it appears.{note}",
    )


def empty(index_id: str) -> tuple[str, str]:
    return (
        f"Index {index_id!r} is empty",
        "It holds 0 chunks: the folder it was built from had no documents to index.\n\n"
        "Add documents there and run `ragtui ingest FOLDER` again (or search with "
        "`ragtui --watch FOLDER`). The index reloads here by itself.",
    )


def invalid(index_id: str | None, problem: str) -> tuple[str, str]:
    name = f"Index {index_id!r}" if index_id else "The index"
    return (
        f"{name} failed validation",
        f"{problem}\n\n"
        "Rebuild it with `ragtui ingest FOLDER` (the folder it was built from).\n"
        "A newly published index is picked up here by itself.",
    )


def several(names: list[str]) -> tuple[str, str]:
    return (
        "Several indexes",
        f"The artifacts root holds {len(names)} indexes ({', '.join(names)}).\n"
        "Press i to pick one (or start with --index ID).",
    )

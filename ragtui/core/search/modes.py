"""The search modes, one row each: what every front end knows about a mode is read from ``MODE_TABLE``.

The CLI's ``--mode`` choices and help, the MCP tools' schema, the TUI's keys,
chips and labels, ``ragtui eval``'s default modes, the explanation and the
checks of ``Retriever.search`` all read this table; the ranking itself is
``Retriever``'s method ``_rank_<name>``. Adding a mode is one row here and that
method. Pure Python (no numpy): front ends read it before anything loads.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "COMMON",
    "LEXICAL",
    "LEXICAL_MODES",
    "MODES",
    "MODE_TABLE",
    "ModeSpec",
    "PARAMS",
    "VECTOR_MODES",
    "mode_spec",
    "modes_text",
]


@dataclass(frozen=True)
class ModeSpec:
    """One search mode."""

    name: str
    """What ``--mode``, the MCP ``mode`` argument and ``Retriever.search(mode=...)`` call it."""
    kind: str
    """"lexical" (needs no embedder), "vector" (needs the index's embedder) or "fusion" (needs both)."""
    options: tuple[str, ...]
    """The ranking options of its own it takes, beyond ``COMMON`` (spec/ranking.md)."""
    label: str
    """How the TUI names it (chips, compare panels, messages)."""
    key: str
    """The TUI key that selects it (the digit; F1.. also select it, in the same order)."""
    help: str
    """One line for people: the CLI's help, the MCP schema, the TUI's help screen."""
    score_range: tuple[float, float]
    """The range of the score ``min_score`` is compared with (``postrank.floor_scores``); a floor
    outside it is refused."""
    score_text: str
    """What that score is, for the message that refuses a floor."""
    short: str = ""
    """A few words for the TUI's help screen."""

    @property
    def needs_embedder(self) -> bool:
        return self.kind != "lexical"


_UNBOUNDED = 1e12

MODE_TABLE: tuple[ModeSpec, ...] = (
    ModeSpec("flat", "vector", (), "flat", "1", "exact cosine over every chunk vector",
             (-1.0, 1.0), "the cosine, -1..1", "exact cosine over every vector"),
    ModeSpec("ivf", "vector", ("nprobe",), "IVF", "2",
             "cosine over the chunks of the nprobe nearest IVF lists (approximate, faster on large indexes)",
             (-1.0, 1.0), "the cosine, -1..1", "only the nprobe nearest of nlist lists (fast, may miss)"),
    ModeSpec("bm25", "lexical", (), "BM25", "3", "BM25 over each chunk's words (no embedder needed)",
             (0.0, _UNBOUNDED), "the raw BM25 score, 0 or more", "the index's term scores"),
    ModeSpec("bm25doc", "lexical", ("chunk_weight",), "BM25doc", "5",
             "document-aware BM25: the document's BM25 plus chunk_weight times the chunk's own",
             (0.0, _UNBOUNDED), "the raw BM25 score, 0 or more", "a chunk's document's BM25 plus its own"),
    ModeSpec("bm25stem", "lexical", ("chunk_weight",), "BM25stem", "6",
             "bm25doc over Snowball English stems (retrieval, retrieved, retrieving match)",
             (0.0, _UNBOUNDED), "the raw BM25 score, 0 or more", "bm25doc over stemmed words"),
    ModeSpec("hybrid", "fusion", ("fusion", "weight", "rrf_k", "depth", "lexical", "chunk_weight"), "hybrid", "4",
             "a lexical ranking fused with flat vectors (by default the arm and fusion fitted to the index's embedder)",
             (0.0, 1.0), "the fused score, 0..1",
             "a lexical ranking and flat fused as fitted to the embedder ([search] in ragtui.toml, f toggles rrf)"),
)
"""Every mode, in the order the CLI and ``ragtui eval`` list them."""

_BY_NAME = {m.name: m for m in MODE_TABLE}
MODES: tuple[str, ...] = tuple(m.name for m in MODE_TABLE)
LEXICAL_MODES: tuple[str, ...] = tuple(m.name for m in MODE_TABLE if m.kind == "lexical")
"""The modes that need no embedder (the TUI offers them while vectors load)."""
VECTOR_MODES: tuple[str, ...] = tuple(m.name for m in MODE_TABLE if m.needs_embedder)
PARAMS: dict[str, tuple[str, ...]] = {m.name: m.options for m in MODE_TABLE}
"""The keyword parameters ``Retriever.search`` accepts, per mode (beyond ``COMMON``)."""
COMMON = ("mmr", "min_score", "merge")
"""Parameters every mode takes: MMR diversity, a score floor, merging neighbouring chunks (postrank)."""
LEXICAL = ("bm25doc", "bm25", "bm25stem")
"""What hybrid fuses with the vectors: document-aware BM25, plain chunk BM25, or document-aware BM25 over
stemmed terms (``stemmed.StemLexical``); the default is the index's embedder's (``fusion_fit``)."""


def mode_spec(name: str) -> ModeSpec | None:
    """The row of mode ``name``, or None for a name that is not a mode."""
    return _BY_NAME.get(name)


def modes_text(names: tuple[str, ...] = MODES, default: str | None = None) -> str:
    """"flat, ivf, bm25, bm25doc, bm25stem or hybrid (default: bm25)": the modes for a help line."""
    listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)
    return listed + (f" (default: {default})" if default else "")

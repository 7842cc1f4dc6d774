"""The ranking options a user sets (flags, ``[search]`` in ragtui.toml, the Python API): names and ranges.

One place for what each option may be, checked without loading numpy, so a
config file is refused at load and a flag before any index is opened. The
search code (fusion, docaware, retriever) takes its ranges from here.
"""

from __future__ import annotations

import difflib
import math
import operator
from collections.abc import Mapping
from typing import SupportsIndex

from ragtui.core.errors import UsageError

__all__ = ["BOOLEANS", "CHOICES", "DESCRIPTIONS", "NAMES", "RANGES", "check_option", "check_options"]

RANGES: dict[str, tuple[float, float]] = {
    "weight": (0.0, 1.0),
    "rrf_k": (0.0, 1e6),
    "depth": (1, 100_000),
    "chunk_weight": (0.0, 100.0),
    "mmr": (0.0, 1.0),
    "min_score": (-1e12, 1e12),
}
"""Inclusive ranges of the numeric options (depth is a whole number)."""
CHOICES: dict[str, tuple[str, ...]] = {"fusion": ("rrf", "weighted", "zscore"), "lexical": ("bm25doc", "bm25", "bm25stem")}
BOOLEANS = ("merge",)

NAMES = ("fusion", "weight", "rrf_k", "depth", "lexical", "chunk_weight", "mmr", "min_score", "merge")
"""Every ranking option, in the order help and schemas list them (``[search]`` keys, ``--flag`` names)."""

DESCRIPTIONS: dict[str, str] = {
    "fusion": "hybrid: how the lexical and the vector rankings are fused, weighted, zscore or rrf "
              "(default: fitted to the index's embedder)",
    "weight": "hybrid weighted and zscore fusion: the LEXICAL share, 0..1; the vectors get 1 - weight "
              "(default: fitted to the index's embedder)",
    "rrf_k": "hybrid rrf fusion: the rank offset, 0..1e6 (default: 60)",
    "depth": "hybrid: candidates fused from each ranking, whatever k, 1..100000 (default: 100)",
    "lexical": "hybrid: the lexical side, bm25doc, bm25 or bm25stem (default: fitted to the index's embedder)",
    "chunk_weight": "bm25doc, bm25stem (and hybrid's side over them): a chunk's own BM25 added to its document's, "
                    "0..100 (default: bm25doc 0.5, bm25stem 1; under hybrid fitted)",
    "mmr": "diversify with MMR over chunk vectors, 0..1 (1: off; lower: more diverse)",
    "min_score": "drop hits scoring below this (bm25, bm25doc, bm25stem: the raw score, 0 or more; flat, ivf: the cosine, "
                 "-1..1; hybrid: the fused score, 0..1)",
    "merge": "merge neighbouring chunks of one document into one hit",
}
"""One line per option, shared by the CLI's help and the MCP tools' schema."""


def _range_text(name: str) -> str:
    lo, hi = RANGES[name]
    return f"from {lo:g} to {hi:g}"


def check_option(name: str, value: object, where: str = "", label: str | None = None) -> object:
    """``value`` checked for option ``name`` (``UsageError`` naming the allowed range or choices).

    Messages name the option as ``where + name``, or as ``label`` (a flag: ``--rrf-k``) when given.
    """
    label = label or f"{where}{name}"
    if name in CHOICES:
        if value not in CHOICES[name]:
            close = difflib.get_close_matches(str(value), CHOICES[name], n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{label} must be one of {', '.join(CHOICES[name])} (got {value!r}){hint}")
        return value
    if name in BOOLEANS:
        if not isinstance(value, bool):
            raise UsageError(f"{label} must be true or false (got {value!r})")
        return value
    if name not in RANGES:
        raise UsageError(f"unknown ranking option {label}")
    lo, hi = RANGES[name]
    if name == "depth":
        try:
            # numpy integers too
            whole = operator.index(value) if isinstance(value, SupportsIndex) and not isinstance(value, bool) else None
        except TypeError:
            whole = None
        if whole is None or not lo <= whole <= hi:
            raise UsageError(f"{label} must be a whole number {_range_text(name)} (got {value!r})")
        return whole
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageError(f"{label} must be a number {_range_text(name)} (got {value!r})")
    if not lo <= value <= hi:
        raise UsageError(f"{label} must be {_range_text(name)} (got {value:g})")
    return float(value)


def check_options(table: Mapping[str, object], where: str = "") -> dict[str, object]:
    """Every option of ``table`` checked; the values as the search takes them."""
    return {name: check_option(name, value, where) for name, value in table.items()}

"""The Seekite v2 format's constants and its BM25F ranking, shared by the writer, the reader and index.html.

spec/seekite-export.md is the binding description. The ranking below is
transcribed in index.html's JavaScript operation for operation (same order of
additions, same grouping), so both give the same float64 scores.
"""

from __future__ import annotations

import math
import re

import numpy as np
import numpy.typing as npt

__all__ = [
    "BM25F_B",
    "BM25F_K1",
    "CONTENT_SHARD_TARGET",
    "FIELDS",
    "FIELD_WEIGHTS",
    "MAGIC_DICTIONARY",
    "MAGIC_VECTORS",
    "POSTINGS_SHARD_TARGET",
    "VERSION",
    "bm25f_contribution",
    "content_name",
    "corpus_path_for",
    "idf",
    "postings_name",
]

VERSION = 2
MAGIC_DICTIONARY = b"SKDX"
MAGIC_VECTORS = b"SKVX"
FIELDS = ("title", "heading", "body")
FIELD_WEIGHTS = (3.0, 2.0, 1.0)
"""BM25F weights of title, heading and body (choice: a title match counts three body matches)."""
BM25F_K1 = 1.2
BM25F_B = 0.75
POSTINGS_SHARD_TARGET = 64 * 1024
CONTENT_SHARD_TARGET = 128 * 1024
DTYPES = {"f32": 0, "i8": 1}

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def corpus_path_for(index_id: str) -> str:
    """The corpus folder for an index id: ASCII letters, digits, ``_`` and ``-`` (others become ``_``)."""
    return _UNSAFE.sub("_", index_id)[:100] or "corpus"


def postings_name(shard: int) -> str:
    return f"lexical/postings-{shard:03d}.bin"


def content_name(prefix: str, shard: int) -> str:
    return f"{prefix}{shard:03d}.json"


def idf(n_chunks: int, df: int) -> float:
    """ln(1 + (N - df + 0.5) / (df + 0.5)), as index-format.md's BM25."""
    return math.log(1.0 + (n_chunks - df + 0.5) / (df + 0.5))


def bm25f_contribution(
    weight: float,
    tf: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]],
    lengths: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]],
    averages: tuple[float, float, float],
) -> npt.NDArray[np.float64]:
    """One query term's score for each of its postings.

    ``weight`` is the term's idf times its repetitions in the query; per
    field f, ``tf[f]`` and ``lengths[f]`` are the postings' frequencies and
    their chunks' field lengths. With norm_f = 1 - b + b * (len_f / avg_f)
    (1 when avg_f is 0) and t = (w_title*tf_title)/norm_title +
    (w_heading*tf_heading)/norm_heading + (w_body*tf_body)/norm_body, the
    contribution is (weight * t) / (k1 + t).
    """
    t: npt.NDArray[np.float64] | None = None
    for f in range(3):
        avg = averages[f]
        if avg > 0.0:
            norm = (1.0 - BM25F_B) + BM25F_B * (lengths[f] / avg)
        else:
            norm = np.ones_like(lengths[f])
        part = (FIELD_WEIGHTS[f] * tf[f]) / norm
        t = part if t is None else t + part
    assert t is not None
    return (weight * t) / (BM25F_K1 + t)

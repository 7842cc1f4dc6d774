"""Per-row-scaled int8 vectors: a quarter of vectors.f32's bytes, scanned first, the best re-scored exactly.

Encoding (the same as Seekite's SKVX i8): for a unit row x, ``scale = max|x_i| / 127``
(float32) and ``code_i = round(x_i / scale)`` as int8 in [-127, 127], so
``x_i ≈ scale * code_i``.

Search (``QuantizedVectors.search``) returns exactly what ``flat.flat_search``
returns — the same rows and bit-identical float32 scores — because the int8
scan only chooses which rows to re-score, and it provably keeps every row of
the true top k: for a unit query q, the approximate score a_r of row r differs
from its float32 flat score f_r by at most

    e_r = ‖x_r − scale_r·code_r‖₂·‖q‖₂ + ‖scale_r·code_r‖₂·‖q − s_q·c_q‖₂ + slack

(Cauchy–Schwarz, twice: the query is quantized the same way, s_q and c_q,
so the scan is an integer dot product; ``slack`` covers float32 rounding of
both scores). Let L be the k-th largest lower bound
a_r − e_r; a row with a_r + e_r < L is beaten by k rows whatever the rounding,
so only rows with a_r + e_r ≥ L are re-scored, with ``flat.row_scores``, and
ranked with the one tie rule. The re-score depth therefore adapts to the
query; spec/seekite-export.md ("int8 vectors in memory") records what it is
on real data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import UsageError
from ragtui.core.index.arraycache import drop_pages
from ragtui.core.index.topk import top_k
from ragtui.core.search.flat import as_query, as_vectors, row_scores

if TYPE_CHECKING:
    from ragtui.core.search.ivf import IVFIndex

__all__ = ["QuantizedVectors", "dequantize", "ivf_search_i8", "quantize_rows", "release_pages"]

_BLOCK = 8192
"""Rows converted to float32 at a time during the scan (a few MiB, stays in cache)."""


def quantize_rows(vectors: np.ndarray) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int8]]:
    """(scales float32 (n,), codes int8 (n, dim)) of float32 rows; an all-zero row gets scale 0."""
    v = as_vectors(vectors)
    n, dim = v.shape
    scales = np.empty(n, dtype=np.float32)
    codes = np.empty((n, dim), dtype=np.int8)
    for lo in range(0, n, _BLOCK):
        block = np.asarray(v[lo : lo + _BLOCK], dtype=np.float32)
        top = np.abs(block).max(axis=1) if dim else np.zeros(len(block), np.float32)
        scale = (top / np.float32(127.0)).astype(np.float32)
        safe = np.where(scale > 0, scale, np.float32(1.0))
        codes[lo : lo + len(block)] = np.clip(np.rint(block / safe[:, None]), -127, 127).astype(np.int8)
        scales[lo : lo + len(block)] = scale
    return scales, codes


def dequantize(scales: np.ndarray, codes: np.ndarray) -> npt.NDArray[np.float32]:
    """The float32 rows ``scale * code`` stand for."""
    return (codes.astype(np.float32) * np.asarray(scales, dtype=np.float32)[:, None]).astype(np.float32)


def release_pages(vectors: np.ndarray) -> None:
    """Tell the kernel this process no longer needs the pages of the file map behind ``vectors``.

    Building the copy (or an export's vectors.bin) reads every float32 row once; without this, all of vectors.f32 would stay in
    the process's resident memory although searches only re-read the few rows they re-score. The map
    is read-only and shared, so dropping its pages loses nothing: a later read faults them back in
    from the page cache or the file. Arrays not backed by a map are left alone.
    """
    drop_pages(vectors, vectors.size)


@dataclass(frozen=True, eq=False)
class QuantizedVectors:
    """The int8 copy of one vectors array, and the per-row error bounds its exact search needs."""

    vectors: np.ndarray
    """The float32 rows (often vectors.f32's memory map): only the re-scored rows are read."""
    scales: npt.NDArray[np.float32]
    codes: npt.NDArray[np.int8]
    residual: npt.NDArray[np.float32]
    """‖x − scale·code‖₂ per row, rounded up."""

    @classmethod
    def build(cls, vectors: np.ndarray) -> QuantizedVectors:
        v = as_vectors(vectors)
        scales, codes = quantize_rows(v)
        residual = np.empty(len(v), dtype=np.float32)
        for lo in range(0, len(v), _BLOCK):
            diff = np.asarray(v[lo : lo + _BLOCK], dtype=np.float64) - dequantize(scales[lo : lo + _BLOCK],
                                                                                 codes[lo : lo + _BLOCK])
            residual[lo : lo + len(diff)] = np.sqrt(np.einsum("ij,ij->i", diff, diff)) * (1 + 1e-6)
        release_pages(v)
        return cls(v, scales, codes, residual)

    @property
    def nbytes(self) -> int:
        """Memory held besides the float32 rows."""
        return int(self.scales.nbytes + self.codes.nbytes + self.residual.nbytes)

    def approximate(self, query: np.ndarray, rows: np.ndarray | None = None
                    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """(approximate scores, their error bounds e_r) for every row (or the given rows).

        The query is quantized too, so the scan is an integer dot product
        (exact in int32: dim·127² < 2³¹ for dim ≤ 65,536) scaled by both
        scales; its error adds ‖scale_r·code_r‖₂·‖q − s_q·c_q‖₂ to the bound.
        """
        dim = self.codes.shape[1]
        codes = self.codes if rows is None else self.codes[rows]
        scales = self.scales if rows is None else self.scales[rows]
        residual = self.residual if rows is None else self.residual[rows]
        q_scale_arr, q_codes = quantize_rows(query[None, :])
        q_scale = float(q_scale_arr[0])
        q64 = query.astype(np.float64)
        q_res = float(np.linalg.norm(q64 - q_scale * q_codes[0].astype(np.float64))) * (1 + 1e-6)
        qn = float(np.linalg.norm(q64))
        dots = np.einsum("ij,j->i", codes, q_codes[0], dtype=np.int32)
        approx = dots.astype(np.float32) * (scales * np.float32(q_scale))
        # float32 rounding: the flat score (|x| = 1, |q| = qn) is within gamma_d·qn of exact; the
        # approximate one is rounded three times (int to float32, the scales' product, the product).
        gamma = dim * 2.0**-24 / (1.0 - dim * 2.0**-24)
        slack = np.float32(2.0 * (gamma * qn + 4 * 2.0**-24 * (1.0 + qn)) + 1e-7)
        err = residual * np.float32(qn) + (np.float32(1.0) + residual) * np.float32(q_res)
        return approx, (err * np.float32(1.0 + 1e-5) + slack).astype(np.float32)

    def search(self, query: np.ndarray, k: int, rows: np.ndarray | None = None
               ) -> tuple[npt.NDArray[np.int64], np.ndarray]:
        """flat_search's answer over every row (or only ``rows``): (rows int64, float32 scores).

        ``rows`` (ascending or not) restricts the candidates, as an IVF probe does.
        """
        if k < 0:
            raise UsageError(f"k must be >= 0, got {k}")
        q = as_query(query, self.codes.shape[1])
        n = len(self.codes) if rows is None else len(rows)
        if n == 0 or k == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        approx, err = self.approximate(q, rows)
        kk = min(k, n)
        lower = approx - err
        floor = np.partition(lower, n - kk)[n - kk]
        keep = np.flatnonzero(approx + err >= floor)
        chosen = keep if rows is None else np.asarray(rows, dtype=np.int64)[keep]
        chosen = np.sort(chosen)
        exact = row_scores(self.vectors[chosen], q)
        return top_k(exact, chosen, k)

    def last_depth(self, query: np.ndarray, k: int) -> int:
        """How many rows ``search(query, k)`` re-scores in float32 (for the bench and the spec)."""
        q = as_query(query, self.codes.shape[1])
        approx, err = self.approximate(q)
        n = len(approx)
        kk = min(k, n)
        floor = np.partition(approx - err, n - kk)[n - kk]
        return int(np.count_nonzero(approx + err >= floor))


def ivf_search_i8(ivf: IVFIndex, quant: QuantizedVectors, query: np.ndarray, k: int,
                  nprobe: int | None = None) -> tuple[npt.NDArray[np.int64], np.ndarray]:
    """``ivf.search(query, k, nprobe)``'s answer, with the probed rows scanned in int8 and re-scored exactly.

    The same lists are probed (``ivf.probe``); only how their rows are scored changes, and the
    re-score makes it exact: the same rows and bit-identical scores.
    """
    q = as_query(query, ivf.dim)
    if k < 0:
        raise UsageError(f"k must be >= 0, got {k}")
    nprobe = ivf.resolve_nprobe(nprobe)
    if ivf.nlist == 0 or k == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    return quant.search(q, k, rows=ivf.probed_rows(q, nprobe))

"""The IVF cache: a generation's lists, list-ordered vectors and calibrated nprobe, built once, read by every process.

What callers may rely on:

- ``build_ivf_cached`` returns what ``ivf.build_ivf`` returns (the same centroids,
  lists, default nprobe and answers); the cache only saves time, and a missing,
  stale or damaged entry means a rebuild (a damaged list of vectors: those rows
  read from the index's own vectors instead).
- A generation its writer vouched for (``verified.py``; ``IndexData.stats``'s
  ``generation_key``) is found without reading its vectors: the first IVF query of a
  fresh process reads the entry's centroids and row numbers and the lists it probes.
- ``warm_ivf_cache`` stores a freshly published generation's entry ahead of its
  readers (for the writer's publish step). The writer holds the index's
  ``ivf_lock`` meanwhile, and a reader that misses the entry waits for it,
  then finds the entry instead of building the same lists beside the writer.

Entries (``arraycache`` layout, under ``<artifacts>/rag/.cache/``):
``ivf-<index_id>-<key>/`` holds centroids, offsets, rows, the vectors in list order
(``packed``), a CRC-32 per list of them and a SHA-256 of the rest;
``ivfcal-<index_id>-<key>/`` holds the calibrated nprobe, its recall and its method.
spec/ivf.md section 5 says why keying by the writer's record is sound.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ragtui.core.index.arraycache import (
    BuildLock,
    Placer,
    drop_pages,
    evict,
    load_entry,
    store_arrays,
    store_streamed,
)
from ragtui.core.search.flat import as_vectors
from ragtui.core.search.ivf import (
    ALGORITHM_VERSION,
    CALIBRATION_QUERIES,
    CALIBRATION_SPAN_WORDS,
    CalibrationText,
    IVFIndex,
    IVFParams,
    ResolvedIVFParams,
    _check,
    _lists,
    build_ivf,
    calibration_text,
    span_queries,
    span_texts,
)

if TYPE_CHECKING:
    from ragtui.core.embedders.base import Embedder
    from ragtui.core.index.index_format import IndexData

__all__ = ["build_ivf_cached", "cache_key", "entry_name", "generation_key", "ivf_lock", "warm_ivf_cache"]


def cache_key(vectors: np.ndarray, index_id: str, params: ResolvedIVFParams, key_material: str,
              generation_key: str | None = None) -> str:
    """Hex SHA-256 of everything the lists depend on.

    That is: the vectors, index_id, nlist/train_cap/iters (nprobe does not change
    the build), ALGORITHM_VERSION, the numpy version (its BLAS rounds the float32
    screens) and the caller's ``key_material``. The vectors enter by their bytes
    and shape, or, when ``generation_key`` is given, by it alone: the key of the
    ``verified`` entry that the generation's writer recorded for exactly these files
    and that the reader found for the files it opened (``IndexData.stats``). That entry
    is found only while every file has the stamp it had when written, and only once
    no change could hide within the timestamps' granularity (verified.py), so the
    key names these very bytes without reading them.
    """
    h = hashlib.sha256()
    head = (
        f"ragtui-ivf\0{ALGORITHM_VERSION}\0{np.__version__}\0{index_id}\0{vectors.shape}\0"
        f"{params.nlist}\0{params.train_cap}\0{params.iters}\0{key_material}\0"
    )
    h.update(head.encode("utf-8"))
    if generation_key is not None:
        h.update(f"generation\0{generation_key}".encode())
        return h.hexdigest()
    for start in range(0, vectors.shape[0], 65536):
        h.update(np.ascontiguousarray(vectors[start : start + 65536]).data)
    return h.hexdigest()


def _list_sums(packed: np.ndarray, offsets: np.ndarray) -> npt.NDArray[np.uint32]:
    """CRC-32 of each list's slice of the list-ordered vectors."""
    return np.array([zlib.crc32(np.ascontiguousarray(packed[offsets[c] : offsets[c + 1]]).data)
                     for c in range(offsets.shape[0] - 1)], dtype=np.uint32)


def _digest(key: str, centroids: np.ndarray, offsets: np.ndarray, rows: np.ndarray,
            sums: np.ndarray | None = None) -> np.ndarray:
    h = hashlib.sha256(key.encode("ascii"))
    for a in (centroids, offsets, rows) + (() if sums is None else (sums,)):
        h.update(np.ascontiguousarray(a).data)
    return np.frombuffer(h.digest(), dtype=np.uint8)


def _sound(
    arrays: dict[str, np.ndarray], key: str, n: int, dim: int, nlist: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64], np.ndarray, np.ndarray] | None:
    """(centroids, offsets, rows, packed, sums) of a cache entry if it is sound, else None.

    The centroids, offsets, rows and list sums are copied and checked whole (the digest,
    the structure): O(nlist · dim + n) over 8-byte row numbers. The list-ordered vectors
    stay mapped: each list is checked against its sum when first probed (``IVFIndex``).
    """
    try:
        centroids, offsets, rows, sums = (np.array(arrays[name]) for name in ("centroids", "offsets", "rows", "sums"))
        digest = np.array(arrays["digest"])
        packed = arrays["packed"]
    except (KeyError, OSError, ValueError):
        return None
    if (
        centroids.dtype != np.float64
        or centroids.shape != (nlist, dim)
        or offsets.dtype != np.int64
        or offsets.shape != (nlist + 1,)
        or rows.dtype != np.int64
        or rows.shape != (n,)
        or sums.dtype != np.uint32
        or sums.shape != (nlist,)
        or not isinstance(packed, np.ndarray)
        or packed.dtype != np.dtype("<f4")
        or packed.shape != (n, dim)
        or not np.array_equal(digest, _digest(key, centroids, offsets, rows, sums))
    ):
        return None
    # The digest catches damage; these catch a writer that was wrong.
    if offsets[0] != 0 or offsets[-1] != n or (np.diff(offsets) < 0).any():
        return None
    if rows.min() < 0 or rows.max() >= n or (np.bincount(rows, minlength=n) != 1).any():
        return None
    rising = np.diff(rows) > 0
    rising[offsets[1:-1][(offsets[1:-1] > 0) & (offsets[1:-1] < n)] - 1] = True  # list boundaries
    return (centroids, offsets, rows, packed, sums) if rising.all() else None


def entry_name(index_id: str) -> str:
    """``index_id`` made filename-safe, as the IVF entries are named."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", index_id)[:64] or "_"


def ivf_lock(index_id: str) -> str:
    """The ``BuildLock`` name under which a writer makes the IVF entries of index ``index_id``."""
    return f"ivf-{entry_name(index_id)}"


def build_ivf_cached(
    vectors: np.ndarray,
    index_id: str,
    params: IVFParams | None = None,
    cache_dir: Path | None = None,
    key_material: str = "",
    *,
    texts: CalibrationText | None = None,
    generation_key: str | None = None,
    wait: bool = True,
    should_stop: Callable[[], bool] | None = None,
) -> IVFIndex:
    """``build_ivf``, reusing a cached build from ``cache_dir`` when one matches exactly.

    Entries live in ``cache_dir`` through ``arraycache`` (the newest two per
    index_id are kept) and are keyed by ``cache_key``: by the generation's
    ``verified`` key when the reader has one (``generation_key``; nothing of the
    vectors is read then), else by the vectors' bytes, so a changed vectors file
    never reuses an old build. An entry holds the centroids, the lists, the vectors
    in list order (mapped, not copied, by the index that uses them) and a CRC-32 per
    list; one that fails its digest or its structure checks is rebuilt and replaced,
    and a list whose vectors fail their CRC is read from ``vectors`` instead.

    The calibrated nprobe (unless the user set one) is cached beside it, keyed by the
    lists' key, the method and, for spans, the model and, unless ``generation_key``
    names docs.jsonl too, the span texts themselves (so a changed docs.jsonl never
    reuses it). ``cache_dir`` None disables the cache;
    it must lie outside the index directory.

    ``wait``: on a miss, first wait for a writer that holds the index's ``ivf_lock``
    (it is making the entries of the generation it just published) and look again.
    ``should_stop`` is asked between the build's steps (``ivf.BuildStopped``).
    """
    v = as_vectors(vectors)
    p = (params or IVFParams()).resolve(v.shape[0])
    if cache_dir is None or p.nlist == 0:
        return build_ivf(v, index_id, params, texts=texts)
    started = time.perf_counter()
    key = cache_key(v, index_id, p, key_material, generation_key)[:32]
    name = entry_name(index_id)
    entry = Path(cache_dir) / f"ivf-{name}-{key}"
    arrays = load_entry(cache_dir, "ivf", name, key)
    hit = None if arrays is None else _sound(arrays, key, v.shape[0], v.shape[1], p.nlist)
    if hit is None and wait:
        with BuildLock.wait(Path(cache_dir), ivf_lock(index_id)):
            pass  # a writer making this generation's lists is done: they may be there now
        arrays = load_entry(cache_dir, "ivf", name, key)
        hit = None if arrays is None else _sound(arrays, key, v.shape[0], v.shape[1], p.nlist)
    if hit is not None:
        centroids, offsets, rows, packed, sums = hit
        index = IVFIndex(v, centroids, offsets, rows, p, from_cache=True, packed=packed, sums=sums, entry=entry)
    else:
        # None or unsound: whatever is there under this key is damaged; drop it (arraycache's layout), store anew.
        shutil.rmtree(entry, ignore_errors=True)
        index = _build_and_store(v, index_id, p, Path(cache_dir), name, key, should_stop)
    if params is None or params.nprobe is None:
        _check(should_stop)
        _calibrate_cached(index, v, index_id, texts, Path(cache_dir), name, key, generation_key is not None,
                          ivf_lock(index_id) if wait else None)
    index.build_seconds = time.perf_counter() - started
    return index


def _build_and_store(v: np.ndarray, index_id: str, p: ResolvedIVFParams, cache_dir: Path, name: str,
                     key: str, should_stop: Callable[[], bool] | None = None) -> IVFIndex:
    """Build the lists, store their entry, and return the index mapped from it (in memory if it cannot be stored).

    The vectors are written to the entry in list order a stretch of the index's rows at a time, each list's
    CRC-32 taken as its rows go by (``_packed_placer``): the build holds no second copy of them, in memory or
    mapped, and lets the index's pages go as it reads them.
    """
    started = time.perf_counter()
    centroids, offsets, rows, iterations = _lists(v, index_id, p, should_stop)
    sums = np.zeros(offsets.shape[0] - 1, dtype=np.uint32)

    def rest() -> dict[str, np.ndarray]:
        return {"centroids": centroids, "offsets": offsets, "rows": rows, "sums": sums,
                "digest": _digest(key, centroids, offsets, rows, sums)}

    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        stored = store_streamed(cache_dir, "ivf", name, key,
                                {"packed": (v.shape, np.dtype("<f4"), _packed_placer(v, rows, offsets, sums))}, rest)
    except OSError:
        stored = False
    seconds = time.perf_counter() - started
    if stored:
        evict(cache_dir, "ivf", name)
        again = load_entry(cache_dir, "ivf", name, key)
        mapped = None if again is None else _sound(again, key, v.shape[0], v.shape[1], p.nlist)
        if mapped is not None:  # the stored copy, mapped: nothing of the vectors stays in this process's memory
            return IVFIndex(v, *mapped[:3], p, iterations=iterations, packed=mapped[3], sums=mapped[4],
                            entry=cache_dir / f"ivf-{name}-{key}", build_seconds=seconds)
    return IVFIndex(v, centroids, offsets, rows, p, iterations=iterations, build_seconds=seconds)


_PLACE_BYTES = 64 << 20
"""Rows of the index's vectors read at a time while the list-ordered copy is written (``_packed_placer``)."""


def _packed_placer(v: np.ndarray, rows: np.ndarray, offsets: np.ndarray, sums: np.ndarray) -> Placer:
    """Write the rows of ``v`` in list order (``rows``: each list's rows, ascending) to a file, and fill ``sums``
    with each list's CRC-32 of those bytes (what ``_list_sums`` gives over the whole list-ordered copy).

    ``v`` is read in order, ``_PLACE_BYTES`` at a time, each stretch's pages let go once read; its rows go to
    their places with one ``pwrite`` per run of rows that are neighbours in the copy and in one list. Gathering
    in list order instead reads the rows all over a mapped file, so that its pages stay resident until the
    end (the whole vectors.f32: 1 GB at a million chunks of 256 dimensions). Since a list's rows ascend, its
    runs come in its own order, and its CRC-32 is taken run after run.
    """

    def place(fd: int, start: int) -> int:
        n, dim = v.shape
        row_bytes = dim * 4
        where = np.empty(n, dtype=np.int64)
        where[rows] = np.arange(n, dtype=np.int64)
        list_at = np.repeat(np.arange(offsets.shape[0] - 1, dtype=np.int64), np.diff(offsets))
        crcs = [zlib.crc32(b"")] * (offsets.shape[0] - 1)
        step = max(1, _PLACE_BYTES // max(1, row_bytes))
        written = 0
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            dest = where[lo:hi]
            order = np.argsort(dest, kind="stable")
            dest = dest[order]
            block = np.ascontiguousarray(v[lo:hi][order], dtype="<f4")
            drop_pages(v, hi * dim, lo * dim)  # a mapped file: read once here
            lists = list_at[dest]
            cut = np.flatnonzero((np.diff(dest) != 1) | (np.diff(lists) != 0)) + 1
            for a, b in zip([0, *cut.tolist()], [*cut.tolist(), dest.size]):
                run = block[a:b].data
                c = int(lists[a])
                crcs[c] = zlib.crc32(run, crcs[c])
                _pwrite_all(fd, run, start + int(dest[a]) * row_bytes)
                written += run.nbytes
        sums[:] = np.array(crcs, dtype=np.uint32)
        return written

    return place


def _pwrite_all(fd: int, data: memoryview, at: int) -> None:
    """``os.pwrite`` until all of ``data`` is written (a write may take part of it)."""
    data = data.cast("B")
    while data:
        done = os.pwrite(fd, data, at)
        if done <= 0:
            raise OSError(errno.EIO, "a write took no bytes")
        data, at = data[done:], at + done


_METHODS = {"spans": 1.0, "sums": 2.0}


def _calibrate_cached(index: IVFIndex, v: np.ndarray, index_id: str, texts: CalibrationText | None,
                      cache_dir: Path, name: str, lists_key: str, whole_generation: bool,
                      lock: str | None = None) -> None:
    """``index.calibrate``, through the cache: spans when they can be embedded or are cached, else sums.

    ``whole_generation``: ``lists_key`` names the generation's four files (its ``verified`` key), docs.jsonl
    with them, so the span texts need not be read to key their calibration; else they enter the key.
    ``lock``: before calibrating, wait for a writer holding that ``BuildLock`` and look again.
    """
    n = int(v.shape[0])

    def key_of(method: str, spans: list[str] | None) -> str:
        h = hashlib.sha256(f"ragtui-ivf-calibration\0{ALGORITHM_VERSION}\0{lists_key}\0{method}\0".encode())
        if method == "spans" and texts is not None:
            h.update(f"{texts.model}\0{CALIBRATION_SPAN_WORDS}\0{CALIBRATION_QUERIES}\0".encode())
            for span in spans or ():
                h.update(span.encode("utf-8", "surrogatepass") + b"\0")
        return h.hexdigest()[:32]

    def cached(key: str, method: str) -> bool:
        arrays = load_entry(cache_dir, "ivfcal", name, key)
        got = None if arrays is None else arrays.get("calibration")
        if not (isinstance(got, np.ndarray) and got.dtype == np.float64 and got.shape == (3,)):
            return False
        nprobe, recall, code = (float(x) for x in got)
        if not (nprobe.is_integer() and 1 <= nprobe <= index.nlist and 0.0 <= recall <= 1.0
                and code == _METHODS[method]):
            return False
        index.calibration, index.calibration_method = (int(nprobe), recall), method
        return True

    def store(key: str) -> None:
        assert index.calibration is not None and index.calibration_method is not None
        row = np.array([*index.calibration, _METHODS[index.calibration_method]], dtype=np.float64)
        if store_arrays(cache_dir, "ivfcal", name, key, {"calibration": row}):
            evict(cache_dir, "ivfcal", name, keep=4)

    def waited() -> None:
        if lock is not None:
            with BuildLock.wait(cache_dir, lock):
                pass  # a writer calibrating this generation's lists is done

    if texts is not None:
        spans = None if whole_generation else span_texts(n, index_id, texts)
        key = key_of("spans", spans)
        if cached(key, "spans"):
            return
        waited()
        lock = None
        if cached(key, "spans"):
            return
        if texts.embed is not None:
            index.calibration = index._calibrate_on(v, span_queries(n, index_id, texts, spans))
            index.calibration_method = "spans"
            store(key)
            return
    key = key_of("sums", [])
    if cached(key, "sums"):
        return
    waited()
    if not cached(key, "sums"):
        index.calibrate(v, index_id)
        store(key)


def warm_ivf_cache(index: IndexData | str | os.PathLike[str], cache_dir: Path, *, embedder: Embedder | None = None,
                   params: IVFParams | None = None, should_stop: Callable[[], bool] | None = None) -> IVFIndex:
    """Build and store the IVF cache entry of a freshly published generation, ahead of its readers.

    ``index`` is the generation (its directory or the ``IndexData`` read from it with this
    ``cache_dir``, after its writer recorded its ``verified`` entry, so that the entry is
    keyed as a reader will look for it); ``embedder`` the index's own (without it the
    calibration falls back to sums of rows); ``params`` the reader's IVF settings (None:
    the defaults). Returns the index, mapped from the stored entry. Raises what reading
    the index raises, and ``ivf.BuildStopped`` when ``should_stop()`` (asked between the
    build's steps) says nobody will read this generation any more; a cache that cannot be
    written only costs the next reader the build. It does not wait for the index's
    ``ivf_lock``: its caller holds it.
    """
    from ragtui.core.index.index_format import IndexData as _IndexData
    from ragtui.core.index.index_format import read_index

    data = index if isinstance(index, _IndexData) else read_index(index, full=False, cache_dir=cache_dir)
    return build_ivf_cached(data.vectors, data.meta.index_id, params, cache_dir, key_material=data.generation,
                            texts=calibration_text(data, embedder), generation_key=generation_key(data), wait=False,
                            should_stop=should_stop)


def generation_key(data: IndexData) -> str | None:
    """The ``verified`` key of the files ``data`` was read from, when their writer's record vouched for them."""
    key = data.stats.get("generation_key")
    return key if isinstance(key, str) and re.fullmatch(r"[0-9a-f]{40}", key) else None

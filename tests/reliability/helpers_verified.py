"""Crafted and damaged verified entries (``rag/.cache/verified-*``): the reader never trusts more than it should.

The writer records, for each generation it publishes, what it checked
(``ragtui.core.index.verified``): docs.jsonl's line ends, that every vector
row is a unit vector, and bm25.idx's cache key. A reader takes the entry
only for files whose stamps match and only as far as cheap checks allow.
Each case here starts from a real entry of a real publish, damages it (or
the index files under it), and asks ``read_index`` for the index: the
outcome must be exactly the outcome without any cache — the same data, or
the same ``IndexFormatError`` — and never another exception.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from ragtui.core.index import verified
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.index_format import FILES, IndexData, read_index
from tests.reliability.cases import Case
from tests.reliability.helpers import make_folder, run_sync

INDEX_ID = "docs"


@contextlib.contextmanager
def writer_waits_for_entries() -> Iterator[None]:
    """Make the writer record an entry even for a tiny index (it waits up to 1 s for it not to be racy)."""
    real = verified.reader_saving_ns
    verified.reader_saving_ns = lambda *sizes: 10**9
    try:
        yield
    finally:
        verified.reader_saving_ns = real


def build(base: Path, version: int = 1) -> tuple[Path, Path, Path]:
    """(folder, index link, cache dir) after a publish that recorded an entry."""
    folder, art = base / "docs", base / "art"
    make_folder(folder, version, 12)
    with writer_waits_for_entries():
        run_sync(folder, art)
    return folder, art / "rag" / INDEX_ID, art / "rag" / ".cache"


def entry_dir(link: Path, cache: Path) -> Path:
    """The verified entry of the generation ``link`` names now."""
    real = Path(os.path.realpath(link))
    stamps = [verified.file_stamp(os.stat(real / name)) for name in FILES]
    return cache / f"{verified.KIND}-{link.name}-{verified.entry_key(stamps)}"


def fingerprint(data: IndexData) -> dict[str, object]:
    """Everything a reader serves from an index, as comparable values (every line parsed and checked)."""
    data.records.verify()
    n = data.n_chunks
    return {
        "generation": data.generation,
        "meta": data.meta,
        "ends": data.records.line_ends(0, n).tolist(),
        "records": list(data.records),
        "vectors": np.asarray(data.vectors).tobytes(),
        "bm25": {k: np.asarray(v).tobytes() for k, v in data.bm25.to_arrays().items()},
    }


def outcome(link: Path, cache: Path | None) -> tuple[str, object]:
    """("ok", fingerprint) or ("error", message) of reading ``link`` the way search does."""
    try:
        data = read_index(link, full=False, cache_dir=cache)
        return "ok", fingerprint(data)
    except Exception as e:  # noqa: BLE001 - an IndexFormatError is an outcome; anything else fails the case
        from ragtui.core.errors import IndexFormatError

        if isinstance(e, IndexFormatError):
            return "error", str(e)
        raise


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _load(entry: Path, name: str) -> np.ndarray:
    return np.array(np.load(entry / f"{name}.npy", allow_pickle=False))


def _put(entry: Path, name: str, content: bytes | np.ndarray) -> None:
    path = entry / f"{name}.npy"
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.write_bytes(content if isinstance(content, bytes) else _npy(content))


def _ends_cases(size: int) -> dict[str, Callable[[np.ndarray], np.ndarray | bytes]]:
    return {
        "ends shifted +1": lambda e: e + 1,
        "ends shifted -1": lambda e: e - 1,
        "ends reversed": lambda e: e[::-1].copy(),
        "ends one short": lambda e: e[:-1],
        "ends one more": lambda e: np.append(e, e[-1] + 1),
        "ends with one moved to a non-newline": lambda e: np.concatenate([e[:2], [e[2] - 3], e[3:]]),
        "ends skipping a line (last doubled)": lambda e: np.concatenate([e[:1], e[2:], [e[-1]]]),
        "ends merging two lines, counted by a fake end": lambda e: np.concatenate([e[:1], [e[1] - 1], e[2:]]),
        "ends all zero": lambda e: np.zeros_like(e),
        "ends negative": lambda e: -e,
        "ends huge": lambda e: e + (1 << 62),
        "ends int32": lambda e: e.astype(np.int32),
        "ends float64": lambda e: e.astype(np.float64),
        "ends uint64": lambda e: e.astype(np.uint64),
        "ends two-dimensional": lambda e: np.stack([e, e]),
        "ends empty": lambda e: np.zeros(0, dtype=np.int64),
        "ends of an empty file": lambda e: b"",
        "ends truncated npy": lambda e: _npy(e)[:-5],
        "ends garbage": lambda e: b"\x93NUMPY garbage" * 20,
        "ends an npz archive": lambda e: _npz(e),
        "ends header claiming 2^62 values": lambda e: _npy(e).replace(f"({e.size},)".encode(), b"(4611686018427387904,)"),
        "ends with the file's size as last": lambda e: np.append(e[:-1], size),
    }


def _npz(e: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, ends=e)
    return buf.getvalue()


def _head_cases() -> dict[str, Callable[[np.ndarray], np.ndarray | bytes]]:
    def racy(h: np.ndarray) -> np.ndarray:
        h = h.copy()
        ctimes = h[verified._HEAD + 2 :: verified._STAMP_FIELDS]
        h[2] = int(ctimes.max()) + 1_000_000  # recorded 1 ms after the newest file: within the granularity
        return h

    def field(i: int, value: int) -> Callable[[np.ndarray], np.ndarray]:
        def f(h: np.ndarray) -> np.ndarray:
            h = h.copy()
            h[i] = value
            return h
        return f

    return {
        "head of another format": field(0, 2),
        "head with an unknown fact": field(1, 1 | 2 | 4 | 16),
        "head racy (recorded within the granularity of a file's ctime)": racy,
        "head with a stamp off by one (a size)": lambda h: h + np.eye(1, h.size, verified._HEAD, dtype=np.int64)[0],
        "head with a stamp off by one (an inode)": lambda h: h + np.eye(1, h.size, verified._HEAD + 3,
                                                                         dtype=np.int64)[0],
        "head one value short": lambda h: h[:-1],
        "head float64": lambda h: h.astype(np.float64),
        "head empty": lambda h: np.zeros(0, dtype=np.int64),
    }


def _key_cases(previous_key: str) -> dict[str, Callable[[np.ndarray], np.ndarray | bytes]]:
    def ascii_(text: str) -> np.ndarray:
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)

    return {
        "bm25 key of no entry": lambda k: ascii_("v1k-" + "0" * 40),
        "bm25 key of the previous generation's arrays": lambda k: ascii_(previous_key),
        "bm25 key malformed": lambda k: ascii_("../../etc"),
        "bm25 key not ASCII": lambda k: np.frombuffer("v1k-é".encode(), dtype=np.uint8),
        "bm25 key too long": lambda k: np.concatenate([k] * 4),
        "bm25 key int64": lambda k: k.astype(np.int64),
    }


def _tamper_in_place(path: Path, edit: Callable[[bytearray], None]) -> None:
    """Rewrite ``path`` in place with the same size and its old mtime back (only ctime can tell)."""
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    edit(data)
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size


def _scale_row(data: bytearray) -> None:
    row = np.frombuffer(bytes(data[:64]), dtype="<f4") * 2  # dim 16: row 0
    data[:64] = row.astype("<f4").tobytes()


def _text_char(data: bytearray) -> None:
    at = data.index(b'"text":"') + len(b'"text":"')
    data[at] = ord("Z") if data[at] != ord("Z") else ord("Y")


def _bm25_tf(data: bytearray) -> None:
    data[-1] = data[-1] ^ 1


def _newline_moved(data: bytearray) -> None:
    first = data.index(b"\n")
    data[first] = ord(" ")
    at = data.index(b'"text":"', first) + len(b'"text":"')
    data[at] = ord("\n")


def crafted_cases(size: str = "ci") -> list[Case]:
    """Every case: a damaged entry or a tampered file under an intact one; outcome == the outcome with no cache."""
    return [Case(_slug(label), functools.partial(_crafted, label)) for label, _ in crafted_checks(None)]


def _slug(label: str) -> str:
    out = "".join(c if c.isascii() and (c.isalnum() or c in ".") else "-" for c in label).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _crafted(label: str, _tmp: Path) -> None:
    from tests.reliability.cases import once

    dict(once("verified-entries", crafted_checks))[label]()


def crafted_checks(base: Path | None) -> list[tuple[str, Callable[[], None]]]:
    """(label, check) of every case, all on one index and its entry (each check restores what it damages);
    ``base`` None: the labels alone (nothing is built)."""
    checks: list[tuple[str, Callable[[], None]]] = []
    prev_key, size = "", 0
    if base is not None:
        # The previous generation's BM25 arrays stay in the cache: a key to them is a plausible wrong key.
        folder, link, cache = build(base / "prev", 1)
        prev_key = BM25Index.cache_key((link / "bm25.idx").read_bytes(), 1.2, 0.75)
        make_folder(folder, 2, 12)
        with writer_waits_for_entries():
            run_sync(folder, base / "prev" / "art")
        pristine = entry_dir(link, cache)
        saved = base / "pristine-entry"
        shutil.copytree(pristine, saved)

    def fresh() -> Path:
        if pristine.is_dir() and not pristine.is_symlink():
            shutil.rmtree(pristine)
        elif os.path.lexists(pristine):
            pristine.unlink()
        shutil.copytree(saved, pristine)
        return pristine

    if base is not None:
        reference = outcome(link, None)

    def used() -> bool:
        return bool(read_index(link, full=False, cache_dir=cache).stats.get("verified_entry"))

    def case(label: str, damage: Callable[[Path], None], expect_used: bool | None = False) -> None:
        def check() -> None:
            entry = fresh()
            damage(entry)
            got = outcome(link, cache)
            assert got == reference, f"outcome differs from the reader without a cache: {got[0]} vs {reference[0]}"
            if expect_used is not None:
                assert used() == expect_used, f"entry used: {not expect_used}, expected {expect_used}"
        checks.append((label, check))

    case("pristine entry (taken, same data)", lambda e: None, expect_used=True)
    if base is not None:
        size = os.stat(os.path.realpath(link / "docs.jsonl")).st_size
    for label, fn in _ends_cases(size).items():
        # The head still vouches, so the entry is taken; the ends then fail their check and are counted instead.
        case(label, lambda e, fn=fn: _put(e, "ends", fn(_load(e, "ends"))), expect_used=None)
    for label, fn in _head_cases().items():
        case(label, lambda e, fn=fn: _put(e, "head", fn(_load(e, "head"))))
    for label, fn in _key_cases(prev_key).items():
        case(label, lambda e, fn=fn: _put(e, "bm25_key", fn(_load(e, "bm25_key"))), expect_used=None)
    case("facts 0 (vouches for nothing)", lambda e: _put(e, "head", _with(_load(e, "head"), 1, 0)), expect_used=True)
    case("no complete marker", lambda e: (e / "complete").unlink())
    case("head missing", lambda e: (e / "head.npy").unlink())
    case("ends missing", lambda e: (e / "ends.npy").unlink(), expect_used=False)
    case("head a FIFO", lambda e: ((e / "head.npy").unlink(), os.mkfifo(e / "head.npy")))
    case("ends a directory", lambda e: ((e / "ends.npy").unlink(), (e / "ends.npy").mkdir()), expect_used=False)
    case("ends a link to the previous generation's ends",
         lambda e: ((e / "ends.npy").unlink(), (e / "ends.npy").symlink_to(saved / "ends.npy")), expect_used=False)
    case("entry replaced by a file", lambda e: (shutil.rmtree(e), e.write_bytes(b"x")))

    # Tampered index files under an intact entry: same size, mtime put back; only ctime changed.
    if base is not None:
        gen = Path(os.path.realpath(link))
        originals = {name: (gen / name).read_bytes() for name in FILES}
        ends, key = _load(saved, "ends"), bytes(_load(saved, "bm25_key")).decode("ascii")

    def tampered(label: str, name: str, edit: Callable[[bytearray], None]) -> None:
        def check() -> None:
            # The files as published, and an entry recorded for them as they are now (a restore changed their stamps).
            fresh()
            assert verified.record(cache, INDEX_ID, [gen / n for n in FILES], ends=ends, bm25_key=key,
                                   max_wait_ns=10**9)
            assert used_quietly(link, cache), "the entry recorded for these files is not taken"
            try:
                _tamper_in_place(gen / name, edit)
                assert not used_quietly(link, cache), "the entry was taken for a file changed after it was stamped"
                assert outcome(link, cache) == outcome(link, None)
            finally:
                (gen / name).write_bytes(originals[name])
        checks.append((label, check))

    tampered("vectors.f32: a row scaled x2 in place, same size and mtime", "vectors.f32", _scale_row)
    tampered("docs.jsonl: a text character changed in place, same size and mtime", "docs.jsonl", _text_char)
    tampered("docs.jsonl: a newline moved into a text, same size and mtime", "docs.jsonl", _newline_moved)
    tampered("bm25.idx: a byte changed in place, same size and mtime", "bm25.idx", _bm25_tf)
    tampered("meta.json: touched (utime only)", "meta.json", lambda d: None)
    return checks


def used_quietly(link: Path, cache: Path) -> bool:
    """Whether the entry is taken (False also when the index is refused)."""
    try:
        return bool(read_index(link, full=False, cache_dir=cache).stats.get("verified_entry"))
    except Exception:  # noqa: BLE001 - refused: not taken
        return False


def _with(a: np.ndarray, i: int, value: int) -> np.ndarray:
    a = a.copy()
    a[i] = value
    return a

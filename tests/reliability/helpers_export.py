"""Corrupt Seekite exports: generated mutations of each file, judged against the strict reader's contract.

``base_export(tmp)`` writes the export of the fuzzer's tiny index
(helpers_mutations.base_files: several documents, non-ASCII text, a ``#`` in
a doc_id). ``mutate_export_file(rel, data, rng)`` returns one corruption of
that file: byte level (helpers_mutations' truncations, flips, insertions ...)
or aware of its format (JSON values of the wrong type or out of range,
dropped keys, magic and version, varint continuation bits, counts).
``judge(root)`` says what the reader did wrong, or None: it must either
accept the export (then ``verify_text`` passes and a search answers) or raise
``IndexFormatError`` naming a file of the export (or the file a damaged
manifest points at), on one line — never
another exception, never a hang.
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import signal
from pathlib import Path

from ragtui.core.errors import IndexFormatError
from ragtui.core.export.reader import read_export
from ragtui.core.export.writer import export_files, export_to
from ragtui.core.index.index_format import read_index
from tests.reliability.cases import Case
from tests.reliability.helpers_mutations import BYTE_MUTATIONS, INDEX_ID, base_files

HANG_SECONDS = 30
STAMP = "2026-01-01T00:00:00Z"
FILES = (
    "search/manifest.json",
    f"search/{INDEX_ID}/corpus.json",
    f"search/{INDEX_ID}/lexical/dictionary.bin",
    f"search/{INDEX_ID}/lexical/postings-000.bin",
    f"search/{INDEX_ID}/content/content-000.json",
    f"search/{INDEX_ID}/vectors.bin",
)


def base_export(tmp: Path, vectors: str = "i8") -> Path:
    """The export of the tiny index, written under ``tmp/site``."""
    index = tmp / "index" / INDEX_ID
    index.mkdir(parents=True, exist_ok=True)
    for name, data in base_files().items():
        (index / name).write_bytes(data)
    return export_to(tmp / "site", export_files(read_index(index, full=True), generated_at=STAMP, vectors=vectors))


# -- JSON-aware mutations ---------------------------------------------------------------------------

_ODD = [None, True, False, "", "x", -1, 0, 1, 2, 4294967296, 1.5, [], {}, "1", [[0, 0]], [0], {"a": 1},
        "../../etc/passwd", "/abs", "a/../b", "\ud800"]


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):
            yield from _paths(v, (*prefix, i))


def _set(obj, path, value):
    if not path:
        return value
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    if value is _DROP:
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return obj


_DROP = object()


def j_odd_value(d: bytes, rng: random.Random) -> bytes:
    obj = json.loads(d)
    path = rng.choice(list(_paths(obj))[1:])
    return json.dumps(_set(obj, path, rng.choice(_ODD)), ensure_ascii=False).encode("utf-8", "surrogatepass")


def j_drop(d: bytes, rng: random.Random) -> bytes:
    obj = json.loads(d)
    path = rng.choice(list(_paths(obj))[1:])
    return json.dumps(_set(obj, path, _DROP), ensure_ascii=False).encode()


def j_shuffle_list(d: bytes, rng: random.Random) -> bytes:
    obj = json.loads(d)
    lists = [p for p in _paths(obj) if p and isinstance(_get(obj, p), list) and len(_get(obj, p)) > 1]
    if not lists:
        return d + b" "
    target = _get(obj, rng.choice(lists))
    if rng.random() < 0.5:
        rng.shuffle(target)
    else:
        target.append(target[0]) if rng.random() < 0.5 else target.pop()
    return json.dumps(obj, ensure_ascii=False).encode()


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def j_number(d: bytes, rng: random.Random) -> bytes:
    obj = json.loads(d)
    ints = [p for p in _paths(obj) if p and type(_get(obj, p)) is int]
    if not ints:
        return d[:-1]
    path = rng.choice(ints)
    value = _get(obj, path)
    return json.dumps(_set(obj, path, rng.choice([value + 1, value - 1, 0, 2**31, -5, 10**6])),
                      ensure_ascii=False).encode()


def j_text(d: bytes, rng: random.Random) -> bytes:
    return rng.choice([b"\xef\xbb\xbf" + d, d.replace(b'"', b"'", 1), b"[" * 100000 + b"]" * 100000,
                       d + b"{}", d.replace(b":", b":NaN,", 1), d.replace(b"2", b"1e400", 1), b"null"])


JSON_MUTATIONS = (j_odd_value, j_drop, j_shuffle_list, j_number, j_text)

# -- binary-aware mutations -------------------------------------------------------------------------


def x_header(d: bytes, rng: random.Random) -> bytes:
    b = bytearray(d)
    where = rng.randrange(min(len(b), 16)) if b else 0
    if b:
        b[where] = rng.choice([0, 1, 2, 3, 0x7F, 0x80, 0xFF])
    return bytes(b)


def x_continuation(d: bytes, rng: random.Random) -> bytes:
    """Set continuation bits: varints run on, or grow past 5 bytes / 32 bits."""
    b = bytearray(d)
    at = rng.randrange(len(b)) if b else 0
    for i in range(rng.randint(1, 6)):
        if at + i < len(b):
            b[at + i] |= 0x80 if rng.random() < 0.7 else 0xFF
    return bytes(b)


def x_small_value(d: bytes, rng: random.Random) -> bytes:
    """Change one small byte by one: counts, offsets, deltas and frequencies off by one."""
    b = bytearray(d)
    candidates = [i for i, v in enumerate(b) if v < 0x80] or [0]
    i = rng.choice(candidates)
    if b:
        b[i] = max(0, min(0x7F, b[i] + rng.choice([-1, 1, 2, 5])))
    return bytes(b)


def x_truncate_header(d: bytes, rng: random.Random) -> bytes:
    return d[: rng.randrange(min(len(d), 24) + 1)]


BINARY_MUTATIONS = (x_header, x_continuation, x_small_value, x_truncate_header)


def mutate_export_file(rel: str, data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """(mutation name, corrupted bytes) of the export file ``rel``; about half are format-aware."""
    aware = JSON_MUTATIONS if rel.endswith(".json") else BINARY_MUTATIONS
    fn = rng.choice(aware) if rng.random() < 0.55 else rng.choice(BYTE_MUTATIONS)
    try:
        return fn.__name__, fn(data, rng)
    except (ValueError, IndexError, KeyError, TypeError):
        return "b_truncate", data[: len(data) // 2]


# -- judging ---------------------------------------------------------------------------------------


class _Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


def judge(site: Path) -> tuple[str | None, str]:
    """(what the reader did wrong or None, "accepted" / "rejected: <file>")."""
    root = str(site / "search") + "/"
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(HANG_SECONDS)
    try:
        export = read_export(site)
        export.verify_text()
        for query in ("word end", "Zürich café", "日本語", "nothing"):
            export.search(query, 10)
        return None, "accepted"
    except IndexFormatError as e:
        if not (e.path + "/").startswith(root):
            return f"the error names {e.path!r}, not a file of the export", ""
        if "\n" in str(e) or not e.problem:
            return f"the error is not one clear line: {str(e)[:200]!r}", ""
        return None, f"rejected: {Path(e.path).name}"
    except _Hang:
        return f"no answer within {HANG_SECONDS} s", ""
    except Exception as e:  # noqa: BLE001 - the finding itself
        return f"raised {type(e).__name__}: {str(e)[:200]}", ""
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)



EXPORT_PER_FILE = {"ci": 1000, "full": 1000}


def _pristine_site() -> Path:
    from tests.reliability.cases import once

    return once("export-site", base_export)


@functools.cache
def export_mutations(rel: str, n: int, seed: str = "export") -> list[tuple[str, bytes]]:
    """The first ``n`` mutations of export file ``rel`` (one random stream per file and seed)."""
    pristine = (_pristine_site() / rel).read_bytes()
    rng = random.Random(f"{seed}-{rel}")
    return [mutate_export_file(rel, pristine, rng) for _ in range(n)]


def check_export_corrupt(rel: str, i: int, n: int, tmp: Path) -> str:
    """Mutation ``i`` of ``rel``: refused naming a file of the export, or accepted and still searchable.
    Returns the outcome (``accepted`` or ``rejected: NAME``)."""
    kind, data = export_mutations(rel, n)[i]
    site = tmp / "site"
    if not site.exists():  # a folder shared with the other cases of a group: only the mutated file changes
        shutil.copytree(_pristine_site(), site)
    path = site / rel
    path.unlink()
    path.write_bytes(data)
    problem, outcome = judge(site)
    assert problem is None, f"{rel} case {i} ({kind}): {problem} [bytes {data[:120]!r}]"
    return outcome


def export_corrupt_cases(size: str = "ci") -> list[Case]:
    """``per_file`` generated corruptions of each file of a Seekite export: ``search/corpus.json-17``."""
    n = EXPORT_PER_FILE[size]
    return [Case(f"{rel}-{i}", functools.partial(check_export_corrupt, rel, i, n)) for rel in FILES for i in range(n)]

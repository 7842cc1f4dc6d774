"""Generated corruptions of each of the four index files.

``mutate(name, data, rng)`` returns one corruption of file ``name``: byte
level (truncation, flipped bits, overwritten, inserted, deleted or repeated
bytes) or aware of the format (wrong magic or version, bad varints,
out-of-order or repeated terms, size mismatches, broken or wrongly typed
JSON, shuffled, missing, repeated or merged lines, huge numbers, deep
nesting, lone surrogates, non-finite floats). Some corruptions leave a
valid index (a vector value changed, an extra meta.json key): that is why
the fuzzer judges every case against ``helpers_reference.validate``.
``base_files`` is the tiny index they start from.
"""

from __future__ import annotations

import json
import random
import struct

import numpy as np

from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint
from ragtui.core.ingest.publish import encode_index

INDEX_ID = "docs"

def base_records() -> list[ChunkRecord]:
    """The chunks of the tiny index: several documents and chunks, non-ASCII text, ``#`` in a
    doc_id, and a term frequent enough to need a two-byte varint."""
    docs = {
        "docs/a#b.md": ["Zürich café naïve", "second chunk of a"],
        "docs/b.txt": ["word " * 140 + "end"],
        "docs/c/日本.md": ["日本語 テキスト", "mixed ASCII and ünïcödé", "third"],
    }
    records = []
    for doc_id in sorted(docs, key=lambda d: d.encode("utf-8")):
        for k, text in enumerate(docs[doc_id]):
            n_tokens = min(256, max(1, len(text.split())))
            records.append(ChunkRecord(f"{doc_id}#{k}", doc_id, "file", doc_id, text, n_tokens, fingerprint(text)))
    return records


def base_files() -> dict[str, bytes]:
    """The four files of the tiny index of ``base_records``, 4-dimensional vectors."""
    records = base_records()
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((len(records), 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    meta = IndexMeta(INDEX_ID, "2026-01-01T00:00:00Z", len(records), 4, "test-model", "test-tok", 256, 32)
    return encode_index(meta, records, vectors)


# -- byte-level mutations (any file) ---------------------------------------------------------------

_BYTES = (0x00, 0x01, 0x0A, 0x22, 0x2C, 0x7B, 0x7D, 0x7F, 0x80, 0xC3, 0xFF, 0x23, 0x5C)


def _pos(rng: random.Random, data: bytes, end: bool = False) -> int:
    return rng.randrange(len(data) + (1 if end else 0)) if data or end else 0


def b_truncate(d, rng):
    return d[: rng.randrange(len(d))] if d else d


def b_flip_bits(d, rng):
    b = bytearray(d)
    for _ in range(rng.randint(1, 3)):
        if b:
            b[_pos(rng, d)] ^= 1 << rng.randrange(8)
    return bytes(b)


def b_set_bytes(d, rng):
    b = bytearray(d)
    for _ in range(rng.randint(1, 4)):
        if b:
            b[_pos(rng, d)] = rng.choice(_BYTES) if rng.random() < 0.6 else rng.randrange(256)
    return bytes(b)


def b_insert(d, rng):
    p = _pos(rng, d, end=True)
    return d[:p] + bytes(rng.choice(_BYTES) for _ in range(rng.randint(1, 8))) + d[p:]


def b_delete(d, rng):
    p = _pos(rng, d)
    return d[:p] + d[p + rng.randint(1, 16) :]


def b_repeat(d, rng):
    p = _pos(rng, d)
    q = min(len(d), p + rng.randint(1, 32))
    return d[:q] + d[p:q] + d[q:]


def b_append(d, rng):
    return d + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))


def b_zero(d, rng):
    p = _pos(rng, d)
    n = rng.randint(1, 16)
    return d[:p] + b"\0" * len(d[p : p + n]) + d[p + n :]


def b_empty(d, rng):
    return b""


BYTE_MUTATIONS = (b_truncate, b_flip_bits, b_set_bytes, b_insert, b_delete, b_repeat, b_append, b_zero, b_empty)

# -- JSON values that break a field -----------------------------------------------------------------

_HUGE = "9" * 5000  # more digits than Python's int() accepts by default


def _odd_value(rng: random.Random) -> str:
    return rng.choice(["null", "true", "false", '""', '"x"', "-1", "0", "1", "4294967296", "1.5", "NaN",
                       "Infinity", "-Infinity", "[]", "{}", '"1"', _HUGE, "1e999", '"\\ud800"', "[" * 50 + "]" * 50])


def _set_json_field(text: str, key: str, value: str) -> str:
    """``text`` (one JSON object, compact or indented) with ``key``'s value replaced by the raw ``value``."""
    obj = json.loads(text)
    marker = "\uE000MARK\uE000"
    _assign(obj, key, marker)
    return json.dumps(obj, ensure_ascii=False).replace(json.dumps(marker, ensure_ascii=False), value)


def _assign(obj: dict, key: str, value) -> None:
    if "." in key:
        head, rest = key.split(".", 1)
        if isinstance(obj.get(head), dict):
            _assign(obj[head], rest, value)
            return
    obj[key] = value


def _drop(obj: dict, key: str) -> None:
    if "." in key:
        head, rest = key.split(".", 1)
        if isinstance(obj.get(head), dict):
            _drop(obj[head], rest)
            return
    obj.pop(key, None)


# -- meta.json --------------------------------------------------------------------------------------

META_KEYS = ("index_id", "created_at", "n_chunks", "dim", "embedding_model", "tokenizer", "chunker",
             "chunker.max_tokens", "chunker.overlap", "bm25", "bm25.k1", "bm25.b")


def m_odd_field(d, rng):
    return _set_json_field(d.decode(), rng.choice(META_KEYS), _odd_value(rng)).encode()


def m_drop_field(d, rng):
    obj = json.loads(d)
    _drop(obj, rng.choice(META_KEYS))
    return json.dumps(obj).encode()


def m_number(d, rng):
    key = rng.choice(("n_chunks", "dim", "chunker.max_tokens", "chunker.overlap"))
    return _set_json_field(d.decode(), key, str(rng.choice((-1, 0, 1, 2, 3, 7, 8, 9, 255, 2**31, 2**40)))).encode()


def m_index_id(d, rng):
    return _set_json_field(d.decode(), "index_id", json.dumps(rng.choice(("other", "", "docs ", "DOCS", ".docs")))).encode()


def m_harmless(d, rng):
    obj = json.loads(d)
    choice = rng.randrange(3)
    if choice == 0:
        obj["extra"] = {"anything": [1, 2]}
    elif choice == 1:
        obj = dict(reversed(list(obj.items())))
    else:
        obj["created_at"] = "whenever"
    return json.dumps(obj, indent=rng.choice((None, 2))).encode()


def m_not_object(d, rng):
    return rng.choice((b"[]", b"null", b"42", b'"docs"', b"[" + d + b"]", b"[" * 100000 + b"]" * 100000))


def m_bad_text(d, rng):
    return rng.choice((b"\xef\xbb\xbf" + d, d.replace(b'"docs"', b'"do\xffcs"', 1), d.replace(b"{", b"", 1),
                       d.rstrip().rstrip(b"}") + b",}", d + b"{}"))


META_MUTATIONS = (m_odd_field, m_drop_field, m_number, m_index_id, m_harmless, m_not_object, m_bad_text)

# -- docs.jsonl -------------------------------------------------------------------------------------


def _lines(d: bytes) -> list[bytes]:
    return d.split(b"\n")[:-1]


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def d_lines(d, rng):
    lines = _lines(d)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    op = rng.randrange(8)
    if op == 0:
        rng.shuffle(lines)
    elif op == 1:
        lines[i], lines[j] = lines[j], lines[i]
    elif op == 2:
        del lines[i]
    elif op == 3:
        lines.insert(i, lines[j])
    elif op == 4:
        lines.insert(i, b"")
    elif op == 5:
        return _join(lines)[:-1]  # no final newline
    elif op == 6 and len(lines) > 1:
        i = min(i, len(lines) - 2)
        lines[i : i + 2] = [lines[i] + lines[i + 1]]
    else:
        lines.reverse()
    return _join(lines)


def _edit_line(d, rng, edit):
    lines = _lines(d)
    i = rng.randrange(len(lines))
    lines[i] = edit(lines[i].decode(), rng).encode()
    return _join(lines)


def d_odd_field(d, rng):
    return _edit_line(d, rng, lambda s, r: _set_json_field(s, r.choice(
        ("chunk_id", "doc_id", "source", "uri", "text", "n_tokens", "fingerprint")), _odd_value(r)))


def d_drop_field(d, rng):
    def edit(s, r):
        obj = json.loads(s)
        obj.pop(r.choice(list(obj)))
        return json.dumps(obj, ensure_ascii=False)
    return _edit_line(d, rng, edit)


def d_chunk_id(d, rng):
    def edit(s, r):
        obj = json.loads(s)
        doc, _, k = obj["chunk_id"].rpartition("#")
        obj["chunk_id"] = r.choice((f"{doc}#{int(k) + 1}", f"{doc}#0{k}", f"{doc}#", f"{doc}#\u0663", doc,
                                    f"{doc}#{_HUGE}", f"{doc}#-1", f"{doc}#{k}#0", f"x{doc}#{k}", f"{doc}# {k}"))
        return json.dumps(obj, ensure_ascii=False)
    return _edit_line(d, rng, edit)


def d_text(d, rng):
    def edit(s, r):
        obj = json.loads(s)
        obj["text"] = r.choice(("changed", obj["text"] + " more", "", "\x1b[2J"))
        if r.random() < 0.5:
            obj["fingerprint"] = fingerprint(obj["text"])  # consistent: still a valid index
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return _edit_line(d, rng, edit)


def d_doc_id(d, rng):
    def edit(s, r):
        obj = json.loads(s)
        new = r.choice(("a", "docs/z.md", "", "docs/a#b.md", "\ud800x"))
        obj["chunk_id"] = new + "#" + obj["chunk_id"].rpartition("#")[2]
        obj["doc_id"] = new
        return json.dumps(obj)  # escaped, so a lone surrogate can be written
    return _edit_line(d, rng, edit)


def d_n_tokens(d, rng):
    return _edit_line(d, rng, lambda s, r: _set_json_field(s, "n_tokens", r.choice(("0", "257", "256", "1", "true", "1.0", "-3"))))


def d_structure(d, rng):
    def edit(s, r):
        return r.choice((s + " " + s, "[" + s + "]", s[:-1], s + "}", "[" * 100000 + "]" * 100000, "  " + s + "  ", '"' + s))
    return _edit_line(d, rng, edit)


def d_surrogate(d, rng):
    return _edit_line(d, rng, lambda s, r: s.replace('"text":"', '"text":"\\udc80', 1))


DOCS_MUTATIONS = (d_lines, d_odd_field, d_drop_field, d_chunk_id, d_text, d_doc_id, d_n_tokens, d_structure, d_surrogate)

# -- vectors.f32 ------------------------------------------------------------------------------------


def v_size(d, rng):
    return rng.choice((d[:-4], d[:-1], d + b"\0" * 4, d + d[:16], d[:-16], d + b"\0"))


def v_value(d, rng):
    b = bytearray(d)
    i = rng.randrange(len(d) // 4) * 4
    b[i : i + 4] = struct.pack("<f", rng.choice((float("nan"), float("inf"), float("-inf"), 0.0, 1e38, -2.5)))
    if rng.random() < 0.3:
        b[i : i + 4] = rng.choice((b"\xff\xff\xff\x7f", b"\x00\x00\x80\x7f", b"\x01\x00\x80\xff"))
    return bytes(b)


def v_rows(d, rng):
    rows = [d[i : i + 16] for i in range(0, len(d), 16)]
    rng.shuffle(rows)
    return b"".join(rows)


def v_scale(d, rng):
    """One row times a factor: far off unit length, or just inside or outside the tolerance."""
    b = bytearray(d)
    i = rng.randrange(len(d) // 16) * 16
    row = struct.unpack_from("<4f", d, i)
    factor = rng.choice((0.0, 1e6, 1.01, 0.99, 1.0015, 0.9985, 1.0005, 0.9995))
    struct.pack_into("<4f", b, i, *(v * factor for v in row))
    return bytes(b)


VECTOR_MUTATIONS = (v_size, v_value, v_rows, v_scale)

# -- bm25.idx ---------------------------------------------------------------------------------------


def bm25_layout(d: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """(n_docs, [(entry start, postings start, postings end)]) of a well-formed bm25.idx."""
    _, _, n_docs, n_terms, _ = struct.unpack_from("<4sIIId", d, 0)
    pos, entries = 24 + 4 * n_docs, []
    for _ in range(n_terms):
        start = pos
        (n,) = struct.unpack_from("<H", d, pos)
        pos += 2 + n
        _, pb = struct.unpack_from("<II", d, pos)
        pos += 8
        entries.append((start, pos, pos + pb))
        pos += pb
    return n_docs, entries


def x_header(d, rng):
    b = bytearray(d)
    field = rng.randrange(5)
    if field == 0:
        b[0:4] = rng.choice((b"TLBN", b"tlbm", b"\0\0\0\0", b"MBLT"))
    elif field in (1, 2, 3):
        off = 4 * field
        (v,) = struct.unpack_from("<I", d, off)
        struct.pack_into("<I", b, off, rng.choice((0, 2, v + 1, max(v - 1, 0), 0xFFFFFFFF, 1 << 20)))
    else:
        (avg,) = struct.unpack_from("<d", d, 16)
        struct.pack_into("<d", b, 16, rng.choice((float("nan"), float("inf"), 0.0, avg * (1 + 1e-6), avg * (1 + 1e-13), -avg)))
    return bytes(b)


def x_doc_len(d, rng):
    n_docs, _ = bm25_layout(d)
    b = bytearray(d)
    off = 24 + 4 * rng.randrange(n_docs)
    (v,) = struct.unpack_from("<I", d, off)
    struct.pack_into("<I", b, off, rng.choice((v + 1, max(v - 1, 0), 0, 0xFFFFFFFF)))
    return bytes(b)


def x_entry_field(d, rng):
    _, entries = bm25_layout(d)
    start, p0, p1 = rng.choice(entries)
    b = bytearray(d)
    which = rng.randrange(3)
    if which == 0:
        (n,) = struct.unpack_from("<H", d, start)
        struct.pack_into("<H", b, start, rng.choice((n + 1, max(n - 1, 0), 0, 0xFFFF)))
    else:
        off = p0 - 8 + 4 * (which - 1)
        (v,) = struct.unpack_from("<I", d, off)
        struct.pack_into("<I", b, off, rng.choice((v + 1, max(v - 1, 0), 0, 0xFFFFFFFF, v * 2)))
    return bytes(b)


def x_term_bytes(d, rng):
    _, entries = bm25_layout(d)
    start, p0, _ = rng.choice(entries)
    (n,) = struct.unpack_from("<H", d, start)
    if n == 0:
        return d
    b = bytearray(d)
    b[start + 2 + rng.randrange(n)] = rng.choice((0x00, 0x41, 0x7A, 0x7F, 0x80, 0xC3, 0xFF))
    return bytes(b)


def _replace_postings(d: bytes, entry, new: bytes, fix_size: bool = True) -> bytes:
    start, p0, p1 = entry
    b = bytearray(d[:p0] + new + d[p1:])
    if fix_size:
        struct.pack_into("<I", b, p0 - 4, len(new))
    return bytes(b)


def x_varints(d, rng):
    _, entries = bm25_layout(d)
    entry = rng.choice([e for e in entries if e[2] > e[1]])
    _, p0, p1 = entry
    post = bytearray(d[p0:p1])
    i = rng.randrange(len(post))
    op = rng.randrange(7)
    if op == 0:
        post[-1] |= 0x80  # a varint cut off at the end
    elif op == 1:
        post[i : i + 1] = bytes([post[i] | 0x80, 0x80, 0x80, 0x80, 0x80, 0x00])  # six bytes
    elif op == 2:
        post[i : i + 1] = bytes([post[i] | 0x80, 0x00])  # longer than needed, still valid
    elif op == 3:
        post[i : i + 1] = b"\xff\xff\xff\xff\x1f"  # 2**35 - 1: does not fit in 32 bits
    elif op == 4:
        post[i] = 0  # a gap or tf of 0
    elif op == 5:
        post.insert(i, rng.randrange(128))  # one varint too many
    else:
        return _replace_postings(d, entry, bytes(post), fix_size=False)[:-1] if len(post) > 1 else d
    return _replace_postings(d, entry, bytes(post), fix_size=rng.random() < 0.8)


def x_entries(d, rng):
    _, entries = bm25_layout(d)
    body_start, end = entries[0][0], entries[-1][2]
    blobs = [d[s:e] for s, _, e in entries]
    i, j = rng.randrange(len(blobs)), rng.randrange(len(blobs))
    op = rng.randrange(4)
    n_terms = len(blobs)
    if op == 0 and i != j:
        blobs[i], blobs[j] = blobs[j], blobs[i]  # out of order
    elif op == 1:
        blobs.insert(i, blobs[i])  # repeated term
        n_terms += 1
    elif op == 2:
        del blobs[i]
        n_terms -= 1
    else:
        blobs.append(b"\x03\x00zzz\x01\x00\x00\x00\x02\x00\x00\x00\x00\x01")  # a term with its own posting
        n_terms += rng.choice((0, 1))
    b = bytearray(d[:body_start] + b"".join(blobs) + d[end:])
    struct.pack_into("<I", b, 12, n_terms)
    return bytes(b)


BM25_MUTATIONS = (x_header, x_doc_len, x_entry_field, x_term_bytes, x_varints, x_varints, x_entries)

SPECIFIC = {"meta.json": META_MUTATIONS, "docs.jsonl": DOCS_MUTATIONS, "vectors.f32": VECTOR_MUTATIONS,
            "bm25.idx": BM25_MUTATIONS}


def mutate(name: str, data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """(the mutation's name, the corrupted bytes): half byte-level, half aware of the format."""
    pool = BYTE_MUTATIONS if rng.random() < 0.4 else SPECIFIC[name]
    fn = rng.choice(pool)
    out = fn(data, rng)
    return fn.__name__, out

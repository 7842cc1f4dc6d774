"""A plain reference validator for the four index files, written from spec/index-format.md alone.

``validate(files, dir_name)`` returns the decoded index (meta dict, records
as tuples, vectors as floats) when the files meet every rule in "Readers
reject", and raises ``Invalid`` naming the first rule broken otherwise. It
is deliberately slow and simple — loops and ``struct``, no numpy — so that
the fuzzer can compare the real reader against it: both must accept the same
indexes and decode them to the same content.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct

DOC_KEYS = ("chunk_id", "doc_id", "source", "uri", "text", "n_tokens", "fingerprint")


class Invalid(Exception):
    """The files break the format; ``args[0]`` names the file, ``args[1]`` the rule."""


def _is_int(v) -> bool:
    return type(v) is int


def _is_num(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def check_meta(raw: bytes, dir_name: str) -> dict:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except Exception as e:  # noqa: BLE001 - anything json cannot read is not meta.json
        raise Invalid("meta.json", f"not JSON: {type(e).__name__}") from None
    if type(obj) is not dict:
        raise Invalid("meta.json", "not an object")
    want = {"index_id": str, "created_at": str, "n_chunks": int, "dim": int, "embedding_model": str,
            "tokenizer": str, "chunker": dict, "bm25": dict}
    for key, kind in want.items():
        if key not in obj:
            raise Invalid("meta.json", f"missing {key}")
        if (kind is int and not _is_int(obj[key])) or (kind is not int and type(obj[key]) is not kind):
            raise Invalid("meta.json", f"{key} has the wrong type")
    ch, bm = obj["chunker"], obj["bm25"]
    if not (_is_int(ch.get("max_tokens")) and _is_int(ch.get("overlap"))):
        raise Invalid("meta.json", "chunker fields")
    if not (_is_num(bm.get("k1")) and _is_num(bm.get("b"))):
        raise Invalid("meta.json", "bm25 fields")
    if obj["n_chunks"] < 0 or obj["dim"] < 1 or ch["max_tokens"] < 1 or ch["overlap"] < 0:
        raise Invalid("meta.json", "out of range")
    # spec/index-format.md, "Bounds": what this implementation's format allows.
    if obj["n_chunks"] >= 2**32 or obj["dim"] > 65536 or not 0 <= bm["k1"] <= 100 or not 0 <= bm["b"] <= 1:
        raise Invalid("meta.json", "beyond the bounds")
    if obj["index_id"] != dir_name:
        raise Invalid("meta.json", "index_id is not the directory name")
    return obj


def check_docs(raw: bytes, meta: dict) -> list[tuple]:
    if raw and not raw.endswith(b"\n"):
        raise Invalid("docs.jsonl", "last line without newline")
    lines = raw.split(b"\n")[:-1] if raw else []
    if len(lines) != meta["n_chunks"]:
        raise Invalid("docs.jsonl", "line count is not n_chunks")
    records = []
    prev_doc, next_k = None, 0
    for n, line in enumerate(lines, 1):
        try:
            obj = json.loads(line.decode("utf-8"))
        except Exception:  # noqa: BLE001
            raise Invalid("docs.jsonl", f"line {n} is not JSON") from None
        if type(obj) is not dict or any(k not in obj for k in DOC_KEYS):
            raise Invalid("docs.jsonl", f"line {n} lacks a field")
        rec = tuple(obj[k] for k in DOC_KEYS)
        chunk_id, doc_id, source, uri, text, n_tokens, fp = rec
        if not all(type(v) is str for v in (chunk_id, doc_id, source, uri, text, fp)):
            raise Invalid("docs.jsonl", f"line {n}: a text field is not a string")
        if not _is_int(n_tokens) or not 1 <= n_tokens <= meta["chunker"]["max_tokens"]:
            raise Invalid("docs.jsonl", f"line {n}: n_tokens")
        try:
            doc_bytes = doc_id.encode("utf-8")
            text_bytes = text.encode("utf-8")
            for v in (chunk_id, source, uri, fp):
                v.encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("docs.jsonl", f"line {n}: not representable in UTF-8") from None
        head, sep, k = chunk_id.rpartition("#")
        digits = sep and k and all(c in "0123456789" for c in k) and (k == "0" or k[0] != "0")
        if head != doc_id or not digits:
            raise Invalid("docs.jsonl", f"line {n}: chunk_id is not doc_id#k")
        if doc_id != prev_doc:
            if prev_doc is not None and doc_bytes <= prev_doc.encode("utf-8"):
                raise Invalid("docs.jsonl", f"line {n}: documents out of order or not contiguous")
            prev_doc, next_k = doc_id, 0
        if k != str(next_k):
            raise Invalid("docs.jsonl", f"line {n}: chunk numbers do not count 0, 1, 2, ...")
        if hashlib.sha256(text_bytes).hexdigest() != fp:
            raise Invalid("docs.jsonl", f"line {n}: fingerprint")
        next_k += 1
        records.append(rec)
    return records


def check_vectors(raw: bytes, meta: dict) -> list[float]:
    if len(raw) != meta["n_chunks"] * meta["dim"] * 4:
        raise Invalid("vectors.f32", "size is not n_chunks * dim * 4")
    values = [v for (v,) in struct.iter_unpack("<f", raw)]
    if not all(math.isfinite(v) for v in values):
        raise Invalid("vectors.f32", "a value is not finite")
    dim = meta["dim"]
    for row in range(meta["n_chunks"]):
        norm = math.sqrt(math.fsum(v * v for v in values[row * dim : (row + 1) * dim]))
        if not abs(norm - 1.0) <= 1e-3:
            raise Invalid("vectors.f32", f"row {row} is not a unit vector (norm {norm})")
    return values


def _varints(region: bytes) -> list[int]:
    out, value, shift, length = [], 0, 0, 0
    for byte in region:
        value |= (byte & 0x7F) << shift
        shift += 7
        length += 1
        if length > 5:
            raise Invalid("bm25.idx", "varint longer than 5 bytes")
        if not byte & 0x80:
            if value >= 1 << 32:
                raise Invalid("bm25.idx", "varint of 2**32 or more")
            out.append(value)
            value, shift, length = 0, 0, 0
    if length:
        raise Invalid("bm25.idx", "varint cut off")
    return out


def check_bm25(raw: bytes, meta: dict) -> None:
    def need(pos: int, n: int) -> None:
        if pos + n > len(raw):
            raise Invalid("bm25.idx", "truncated")

    need(0, 24)
    magic, version, n_docs, n_terms, avgdl = struct.unpack_from("<4sIIId", raw, 0)
    if magic != b"TLBM" or version != 1:
        raise Invalid("bm25.idx", "magic or version")
    need(24, 4 * n_docs)
    doc_len = list(struct.unpack_from(f"<{n_docs}I", raw, 24))
    pos = 24 + 4 * n_docs
    mean = sum(doc_len) / n_docs if n_docs else 0.0
    if not math.isfinite(avgdl) or abs(avgdl - mean) > 1e-9 * max(1.0, mean):
        raise Invalid("bm25.idx", "avgdl is not the mean of doc_len")
    counted = [0] * n_docs
    prev = None
    for _ in range(n_terms):
        need(pos, 2)
        (term_len,) = struct.unpack_from("<H", raw, pos)
        pos += 2
        need(pos, term_len + 8)
        term = raw[pos : pos + term_len]
        pos += term_len
        if prev is not None and term <= prev:
            raise Invalid("bm25.idx", "terms not strictly ascending")
        prev = term
        try:
            term.decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid("bm25.idx", "term not UTF-8") from None
        df, postings_bytes = struct.unpack_from("<II", raw, pos)
        pos += 8
        need(pos, postings_bytes)
        if df > n_docs:
            raise Invalid("bm25.idx", "df > n_docs")
        values = _varints(raw[pos : pos + postings_bytes])
        pos += postings_bytes
        if len(values) != 2 * df:
            raise Invalid("bm25.idx", "postings overrun or leave bytes over")
        doc = None
        for gap, tf in zip(values[0::2], values[1::2]):
            if tf < 1:
                raise Invalid("bm25.idx", "tf 0")
            if doc is not None and gap < 1:
                raise Invalid("bm25.idx", "a later gap of 0")
            doc = gap if doc is None else doc + gap
            if doc >= n_docs:
                raise Invalid("bm25.idx", "document number >= n_docs")
            counted[doc] += tf
    if pos != len(raw):
        raise Invalid("bm25.idx", "bytes after the last term")
    if n_docs != meta["n_chunks"]:
        raise Invalid("bm25.idx", "n_docs is not n_chunks")
    if counted != doc_len:
        raise Invalid("bm25.idx", "doc_len is not the sum of tf")


def validate(files: dict[str, bytes], dir_name: str) -> dict:
    """The decoded index, or ``Invalid``."""
    meta = check_meta(files["meta.json"], dir_name)
    records = check_docs(files["docs.jsonl"], meta)
    vectors = check_vectors(files["vectors.f32"], meta)
    check_bm25(files["bm25.idx"], meta)
    return {"meta": meta, "records": records, "vectors": vectors}

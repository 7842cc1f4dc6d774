"""Labelled retrieval collections: documents, queries and graded relevance judgments.

``load_dataset(path, split=...)`` recognises three kinds of input:

* a BEIR folder: ``corpus.jsonl`` (``_id``, ``title``, ``text``),
  ``queries.jsonl`` (``_id``, ``text``), ``qrels/<split>.tsv`` (header line,
  then ``query-id  corpus-id  score``);
* a classic SMART collection folder: Cranfield (``cran.all.1400``,
  ``cran.qry``, ``cranqrel``), CISI (``CISI.ALL``/``.QRY``/``.REL``), ADI
  (``ADI.ALL``/``.QRY``/``.REL``) or MEDLINE (``MED.ALL``/``.QRY``/``.REL``),
  with their traps handled (below);
* a native JSON file for a user's own index (``NATIVE_FORMAT``, spec/eval.md).

What callers may rely on, for every kind:

* ``queries`` holds only queries with at least one relevant judgment, in file
  order; ``qrels[qid]`` maps ids to gains > 0 (non-relevant judgments are
  dropped, so "relevant" always means "gain > 0").
* ``docs`` maps doc ids to the text to index (None for a native dataset, whose
  documents are already in the user's index).
* ``level`` is "doc" for collection datasets; a native query says per query
  whether it judges documents or chunks (``query_level``).
* ``notes`` lists, in words, every trap the loader handled or data it left out.

SMART traps: field markers are lines ``.X`` (``.I n`` for the id), with CRLF
and trailing blanks tolerated; a marker that repeats a field already seen
*after the body began* (Cranfield 240's stray ``.A``/``.B``, 576's second
``.W``) continues the body instead of starting a field; Cranfield's judgments
number queries 1..225 by position, not by ``.I``; Cranfield code -1 (the
query's source document) is not relevant and codes 1..4 become gain 5 − code
(code 5, "no interest", does not occur in the file and would map to 0: not
relevant); CISI queries without judgments are skipped; trailing blanks of
every line are stripped (MEDLINE pads its lines to 72 columns, which would
otherwise move chunk boundaries and BM25 lengths).

Judgment files (BEIR ``qrels/<split>.tsv`` and the SMART relevance files) are
read in their own layout or in TREC's 4-column ``query iteration doc gain``
(MEDLINE's ``MED.REL`` is that form): a BEIR line of 4 columns is TREC; a SMART
file is TREC when every line has 4 columns, the second is always ``0`` or
``Q0`` and the third is not always ``0`` (CISI's ``query doc 0 0.0`` is not).
In TREC form the fourth column is the gain (0 = not relevant).

About 500 lines on purpose: three loaders that share their checks (ids,
gains, bounded reads), each trap handled beside the format it belongs to.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragtui.core.errors import UsageError
from ragtui.core.files import read_file

__all__ = ["NATIVE_FORMAT", "Dataset", "detect_kind", "load_dataset", "parse_smart", "validate_native_ids"]

NATIVE_FORMAT = "ragtui-eval-dataset/1"

_SMART_FILES = {
    "cranfield": ("cran.all.1400", "cran.qry", "cranqrel"),
    "cisi": ("CISI.ALL", "CISI.QRY", "CISI.REL"),
    "adi": ("ADI.ALL", "ADI.QRY", "ADI.REL"),
    "medline": ("MED.ALL", "MED.QRY", "MED.REL"),
}
_MARKER = re.compile(r"^\.([A-Z])(?:[ \t]+(\S.*?))?[ \t]*$")


@dataclass
class Dataset:
    """One labelled collection, loaded and checked."""

    name: str
    kind: str
    """"beir", "cranfield", "cisi", "adi", "medline" or "native"."""
    path: str
    split: str | None
    docs: dict[str, str] | None
    queries: dict[str, str]
    qrels: dict[str, dict[str, float]]
    query_level: dict[str, str] = field(default_factory=dict)
    """Per query: "doc" (judgments name doc ids) or "chunk" (chunk ids). Missing means "doc"."""
    notes: list[str] = field(default_factory=list)
    index: str | None = None
    """The index a native dataset names (None: the command's --index / the only index)."""

    def level(self, qid: str) -> str:
        return self.query_level.get(qid, "doc")

    def summary(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "split": self.split,
            "n_docs": None if self.docs is None else len(self.docs),
            "n_queries": len(self.queries),
            "n_judgments": sum(len(r) for r in self.qrels.values()),
            "notes": list(self.notes),
        }


def detect_kind(path: Path) -> str:
    """The dataset kind at ``path`` (raises ``UsageError`` naming what was looked for)."""
    # What is there, not only regular files: a FIFO or a device in a file's place is refused by name when read.
    if os.path.exists(path) and not path.is_dir():
        return "native"
    if not path.is_dir():
        raise UsageError(f"{path}: no such file or folder (give a BEIR or SMART collection folder, or a dataset .json)")
    if os.path.exists(path / "corpus.jsonl"):
        return "beir"
    for kind, files in _SMART_FILES.items():
        if os.path.exists(path / files[0]):
            return kind
    raise UsageError(
        f"{path}: not a dataset folder (expected corpus.jsonl for BEIR, or cran.all.1400 / CISI.ALL / ADI.ALL / MED.ALL)"
    )


def load_dataset(path: str | Path, *, split: str = "test") -> Dataset:
    """Load the dataset at ``path``; ``split`` picks BEIR's ``qrels/<split>.tsv``.

    Raises ``UsageError`` (one line, naming file and line) for anything malformed.
    """
    path = Path(path)
    kind = detect_kind(path)
    if kind == "beir":
        return _load_beir(path, split)
    if kind == "native":
        return _load_native(path)
    return _load_smart(path, kind)


MAX_DATASET_FILE_BYTES = 1 << 30
"""The largest file of a collection read: 1 GiB (read whole; BEIR's larger corpora are a few hundred MB)."""


def _read_text(path: Path) -> str:
    try:
        data = read_file(path, MAX_DATASET_FILE_BYTES, what="a collection's file")
    except FileNotFoundError:
        raise UsageError(f"{path}: missing (the dataset needs this file)") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e} (give the collection's files as regular files)"
                         ) from None
    try:
        # Universal newlines: CISI and ADI use CRLF.
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text (byte {e.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


# -- BEIR --------------------------------------------------------------------------------------


def _json(text: str, where: str) -> object:
    """``text`` parsed as JSON, or ``UsageError`` naming ``where``: for every way the parser can refuse
    (malformed JSON, an integer of more than 4,300 digits, nesting deeper than Python's recursion limit)
    and for strings holding an unpaired surrogate escape (``"\\ud800"``: not Unicode, unwritable as UTF-8)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not JSON ({e.msg})") from None
    except ValueError as e:  # e.g. an integer too long to convert; the rest of the message is advice for Python
        raise UsageError(f"{where}: not JSON ({str(e).split(';')[0]})") from None
    except RecursionError:
        raise UsageError(f"{where}: not JSON (nested too deeply)") from None
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(obj):
        raise UsageError(f"{where}: a string holds an unpaired surrogate escape (\\ud800-\\udfff), which is not text")
    return obj


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(obj: object) -> bool:
    stack = [obj]
    while stack:  # iterative: the parser accepted the nesting, a recursive walk might not
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        obj = _json(line, f"{path}:{n}")
        if not isinstance(obj, dict) or not isinstance(obj.get("_id"), str) or not obj["_id"]:
            raise UsageError(f"{path}:{n}: expected an object with a non-empty string _id")
        yield n, obj


def _load_beir(path: Path, split: str) -> Dataset:
    docs: dict[str, str] = {}
    for n, obj in _jsonl(path / "corpus.jsonl"):
        if obj["_id"] in docs:
            raise UsageError(f"{path / 'corpus.jsonl'}:{n}: duplicate _id {obj['_id']!r}")
        title, text = str(obj.get("title") or "").strip(), str(obj.get("text") or "")
        docs[obj["_id"]] = f"{title}\n\n{text}" if title else text
    all_queries: dict[str, str] = {}
    for n, obj in _jsonl(path / "queries.jsonl"):
        if obj["_id"] in all_queries:
            raise UsageError(f"{path / 'queries.jsonl'}:{n}: duplicate _id {obj['_id']!r}")
        all_queries[obj["_id"]] = str(obj.get("text") or "")
    qrels_path = path / "qrels" / f"{split}.tsv"
    if not os.path.exists(qrels_path):
        have = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
        raise UsageError(f"{qrels_path}: missing; splits here: {', '.join(have) or 'none'} (choose one with --split)")
    judged: dict[str, dict[str, float]] = {}
    for n, line in enumerate(_read_text(qrels_path).splitlines(), 1):
        parts = _qrels_fields(line)
        if n == 1 and len(parts) in (3, 4) and not _is_number(parts[-1]):
            continue  # the header line
        if not line.strip():
            continue
        if len(parts) not in (3, 4) or not _is_number(parts[-1]):
            raise UsageError(
                f"{qrels_path}:{n}: expected 'query-id<TAB>corpus-id<TAB>score' "
                "or TREC's 'query-id iteration corpus-id score'"
            )
        # TREC's 4 columns: the second is the iteration (unused), the third the document.
        qid, did, score = parts[0], parts[-2], float(parts[-1])
        judged.setdefault(qid, {})[did] = score
    notes = []
    unknown_q = sorted(q for q in judged if q not in all_queries)
    if unknown_q:
        raise UsageError(f"{qrels_path}: query id {unknown_q[0]!r} is not in queries.jsonl ({len(unknown_q)} such)")
    missing_docs = sum(1 for r in judged.values() for d in r if d not in docs)
    if missing_docs:
        notes.append(f"{missing_docs} judgment(s) name documents absent from corpus.jsonl (kept: they count as unretrievable)")
    queries, qrels = _keep_relevant(all_queries, judged, notes)
    return Dataset(path.name, "beir", str(path), split, docs, queries, qrels, notes=notes)


def _qrels_fields(line: str) -> list[str]:
    """A judgment line's columns: split at tabs when that gives 3 or 4 columns with no blank inside
    (ids may hold spaces), else at any whitespace."""
    if "\t" in line:
        parts = [p.strip() for p in line.strip().split("\t")]
        if len(parts) in (3, 4) and not any(" " in p for p in parts):
            return parts
    return line.split()


def _is_trec(rows: list[list[str]]) -> bool:
    """Whether SMART judgment rows are TREC's ``query 0 doc gain`` (see the module's docstring)."""
    return bool(rows) and all(len(r) == 4 and r[1] in ("0", "Q0") for r in rows) and any(r[2] != "0" for r in rows)


def _is_number(s: str) -> bool:
    try:
        return math.isfinite(float(s))
    except ValueError:
        return False


def _keep_relevant(
    queries: dict[str, str], judged: dict[str, dict[str, float]], notes: list[str]
) -> tuple[dict[str, str], dict[str, dict[str, float]]]:
    """Queries (file order) with at least one gain > 0, and their gains > 0."""
    out_q: dict[str, str] = {}
    out_r: dict[str, dict[str, float]] = {}
    no_judgment = no_relevant = 0
    for qid, text in queries.items():
        rel = {d: g for d, g in judged.get(qid, {}).items() if g > 0}
        if qid not in judged:
            no_judgment += 1
        elif not rel:
            no_relevant += 1
        if rel:
            out_q[qid], out_r[qid] = text, rel
    if no_judgment:
        notes.append(f"{no_judgment} of {len(queries)} queries have no judgments in this split: skipped")
    if no_relevant:
        notes.append(f"{no_relevant} queries have judgments but none relevant: skipped")
    return out_q, out_r


# -- SMART ---------------------------------------------------------------------------------------


def parse_smart(text: str, where: str, body: str = "W") -> tuple[list[tuple[str, dict[str, str]]], list[str]]:
    """Records of a SMART file as (``.I`` id, {field letter: text}), in file order, and notes.

    A field seen twice before the body joins its parts with newlines (CISI's
    several ``.A`` authors; an identical repeat, as in ADI 67's ``.T``, is
    dropped); once ``body`` has begun, a repeated marker continues the body.
    """
    records: list[tuple[str, dict[str, list[str]]]] = []
    current: dict[str, list[str]] | None = None
    open_field: str | None = None
    stray = 0
    for n, line in enumerate(text.splitlines(), 1):
        m = _MARKER.match(line)
        if m and m.group(1) == "I":
            rid = (m.group(2) or "").strip()
            if not rid:
                raise UsageError(f"{where}:{n}: .I without an id")
            current, open_field = {}, None
            records.append((rid, current))
            continue
        if m and m.group(2) is None and current is not None:
            letter = m.group(1)
            if letter in current and body in current and open_field == body:
                stray += 1  # a stray marker inside the body: its lines belong to the body
                continue
            current.setdefault(letter, []).append("")
            open_field = letter
            continue
        if current is None:
            if line.strip():
                raise UsageError(f"{where}:{n}: text before the first .I record")
            continue
        if open_field is None:
            if line.strip():
                raise UsageError(f"{where}:{n}: text before any field marker in record {records[-1][0]}")
            continue
        parts = current[open_field]
        line = line.rstrip()  # MEDLINE pads every line with blanks to 72 columns
        parts[-1] = f"{parts[-1]}\n{line}" if parts[-1] else line
    notes = [f"{where}: {stray} stray field marker(s) inside a body taken as body text"] if stray else []
    out = []
    for rid, fields in records:
        joined = {}
        for letter, parts in fields.items():
            distinct = []
            for p in (p.strip() for p in parts):
                if p and p not in distinct:
                    distinct.append(p)
            joined[letter] = "\n".join(distinct)
        out.append((rid, joined))
    return out, notes


def _smart_id(rid: str, where: str) -> str:
    try:
        return str(int(rid))  # "001" and "1" are the same record
    except ValueError:
        raise UsageError(f"{where}: record id {rid!r} is not a number") from None


def _doc_text(fields: dict[str, str]) -> str:
    """Title and body. Cranfield's body repeats the title: it is not indexed twice."""
    title, body = fields.get("T", ""), fields.get("W", "")
    if title and " ".join(body.split()).startswith(" ".join(title.split())):
        title = ""
    return "\n\n".join(p for p in (title, body) if p)


def _load_smart(path: Path, kind: str) -> Dataset:
    all_name, qry_name, rel_name = _SMART_FILES[kind]
    notes: list[str] = []
    records, n1 = parse_smart(_read_text(path / all_name), all_name)
    docs: dict[str, str] = {}
    for rid, fields in records:
        did = _smart_id(rid, all_name)
        if did in docs:
            raise UsageError(f"{path / all_name}: duplicate document .I {rid}")
        docs[did] = _doc_text(fields)
    empty = [d for d, t in docs.items() if not t.strip()]
    if empty:
        notes.append(f"{len(empty)} empty document(s) ({', '.join(empty[:5])}): nothing to index, still judged")
    qrecords, n2 = parse_smart(_read_text(path / qry_name), qry_name)
    notes += n1 + n2
    queries: dict[str, str] = {}
    for pos, (rid, fields) in enumerate(qrecords, 1):
        # Cranfield's judgments count queries by position; CISI's and ADI's use .I.
        qid = str(pos) if kind == "cranfield" else _smart_id(rid, qry_name)
        if qid in queries:
            raise UsageError(f"{path / qry_name}: duplicate query .I {rid}")
        queries[qid] = "\n".join(p for p in (fields.get("T", ""), fields.get("W", "")) if p)
    if kind == "cranfield":
        notes.append("query ids are positions 1..N in cran.qry (its .I numbers are not the judgment ids)")
    judged: dict[str, dict[str, float]] = {}
    codes = {"-1": 0}
    rel_path = path / rel_name
    rows = [(n, line.split()) for n, line in enumerate(_read_text(rel_path).splitlines(), 1) if line.strip()]
    trec = _is_trec([r for _, r in rows])
    if trec:
        notes.append(f"{rel_name} is in TREC's 4-column form (query 0 doc gain)")
    for n, parts in rows:
        if len(parts) < 3:
            raise UsageError(f"{rel_path}:{n}: expected 'query doc code ...' or TREC's 'query 0 doc gain'")
        qid = _smart_id(parts[0], f"{rel_name}:{n}")
        did = _smart_id(parts[2] if trec else parts[1], f"{rel_name}:{n}")
        if qid not in queries:
            raise UsageError(f"{rel_path}:{n}: query {qid} is not in {qry_name}")
        if did not in docs:
            raise UsageError(f"{rel_path}:{n}: document {did} is not in {all_name}")
        if trec:
            if not _is_number(parts[3]):
                raise UsageError(f"{rel_path}:{n}: gain {parts[3]!r} is not a number")
            gain = max(0.0, float(parts[3]))
        elif kind == "cranfield":
            code = parts[2]
            codes[code] = codes.get(code, 0) + 1
            gain = _cranfield_gain(code, f"{rel_path}:{n}")
        else:
            gain = 1.0  # CISI and ADI judgments are binary; the other columns are 0
        prev = judged.setdefault(qid, {}).get(did)
        judged[qid][did] = gain if prev is None else max(prev, gain)
    if kind == "cranfield" and not trec:
        notes.append(
            f"relevance code -1 (the query's source document, {codes.get('-1', 0)} judgment(s)) is not relevant; "
            "codes 1..4 are gain 5 - code"
        )
    q, r = _keep_relevant(queries, judged, notes)
    return Dataset(kind, kind, str(path), None, docs, q, r, notes=notes)


def _cranfield_gain(code: str, where: str) -> float:
    try:
        value = int(code)
    except ValueError:
        raise UsageError(f"{where}: relevance code {code!r} is not a whole number") from None
    if value == -1 or value == 5:
        return 0.0  # -1: the query's own source document; 5: "references of no interest"
    if 1 <= value <= 4:
        return float(5 - value)
    raise UsageError(f"{where}: relevance code {value} is outside -1, 1..5")


# -- native JSON ---------------------------------------------------------------------------------


def _load_native(path: Path) -> Dataset:
    doc = _json(_read_text(path), str(path))
    if not isinstance(doc, dict) or doc.get("format") != NATIVE_FORMAT:
        raise UsageError(f'{path}: expected a JSON object with "format": "{NATIVE_FORMAT}" (see spec/eval.md)')
    unknown = sorted(set(doc) - {"format", "name", "index", "queries"})
    if unknown:
        raise UsageError(f"{path}: unknown key {unknown[0]!r} (allowed: format, name, index, queries)")
    name = doc.get("name", path.stem)
    index = doc.get("index")
    if not isinstance(name, str) or not name or (index is not None and (not isinstance(index, str) or not index)):
        raise UsageError(f"{path}: name and index must be non-empty strings")
    items = doc.get("queries")
    if not isinstance(items, list) or not items:
        raise UsageError(f"{path}: queries must be a non-empty list")
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, float]] = {}
    level: dict[str, str] = {}
    for i, q in enumerate(items):
        where = f"{path}: queries[{i}]"
        if not isinstance(q, dict):
            raise UsageError(f"{where}: expected an object")
        extra = sorted(set(q) - {"id", "text", "relevant_doc_ids", "relevant_chunk_ids"})
        if extra:
            raise UsageError(f"{where}: unknown key {extra[0]!r}")
        qid, text = q.get("id"), q.get("text")
        if not isinstance(qid, str) or not qid:
            raise UsageError(f"{where}: id must be a non-empty string")
        if qid in queries:
            raise UsageError(f"{where}: duplicate query id {qid!r}")
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"{where}: text must be a non-empty string")
        keys = [k for k in ("relevant_doc_ids", "relevant_chunk_ids") if k in q]
        if len(keys) != 1:
            raise UsageError(f"{where}: give exactly one of relevant_doc_ids, relevant_chunk_ids")
        gains = _native_gains(q[keys[0]], f"{where}.{keys[0]}")
        queries[qid], qrels[qid] = text, gains
        level[qid] = "doc" if keys[0] == "relevant_doc_ids" else "chunk"
    return Dataset(name, "native", str(path), None, None, queries, qrels, query_level=level, index=index)


def _native_gains(value: object, where: str) -> dict[str, float]:
    """A list of ids (gain 1 each) or an object id -> gain (a number >= 0); at least one gain > 0."""
    if isinstance(value, list):
        pairs = [(v, 1) for v in value]
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:
        raise UsageError(f"{where}: expected a list of ids or an object of id -> gain")
    out: dict[str, float] = {}
    for rid, gain in pairs:
        if not isinstance(rid, str) or not rid:
            raise UsageError(f"{where}: ids must be non-empty strings (got {rid!r})")
        if rid in out:
            raise UsageError(f"{where}: {rid!r} is listed twice")
        try:
            # float() first: an int beyond float's range raises OverflowError in math.isfinite too
            value = float(gain) if isinstance(gain, int | float) and not isinstance(gain, bool) else math.nan
        except OverflowError:
            value = math.inf
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"{where}: gain of {rid!r} must be a number >= 0 (got {_short(gain)})")
        out[rid] = value
    relevant = {r: g for r, g in out.items() if g > 0}
    if not relevant:
        raise UsageError(f"{where}: no id with a gain > 0 (a query needs at least one relevant id)")
    return relevant


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def validate_native_ids(dataset: Dataset, doc_ids: set[str], chunk_ids: set[str]) -> None:
    """Raise ``UsageError`` naming the first judged id the index does not hold."""
    for qid, rel in dataset.qrels.items():
        known, what = (chunk_ids, "chunk_id") if dataset.level(qid) == "chunk" else (doc_ids, "doc_id")
        for rid in rel:
            if rid not in known:
                raise UsageError(
                    f"{dataset.path}: query {qid!r} judges {what} {rid!r}, which the index does not hold "
                    f"(check the id, or re-ingest; `ragtui inspect` lists ids)"
                )

"""Cut a source file at its definitions: syntax-aware chunks (spec/chunker.md, "Code").

``chunk_code(text, language, tokenizer, max_tokens, overlap)`` gives chunks
with every promise of ``chunk_text`` (exact substrings without leading or
trailing whitespace, ``1 <= n_tokens == count(text) <= max_tokens``, starts
and ends strictly increasing, every non-whitespace token covered) but cut
where the syntax tree says: a chunk starts at a definition boundary
whenever one lies in the allowed window, a definition too long for one
chunk is split at its nested definitions, then at its statements, then at
its lines. A file that cannot be parsed (``code.syntax.parse``) is cut by
``chunk_text`` itself, exactly as if it were not code.

The cut, in three steps (spec/chunker.md, "Code", is the precise version):

1. *Atoms.* The file is laid out as a sequence of atoms that tile it: each
   child of the root is one atom, and an atom whose token estimate is over
   the budget is replaced by its children, recursively (strings, comments
   and leaves stay whole; a definition that is split has its body split
   too). A run of comments, attributes or decorators right above a
   definition (at most one line break between each) joins the definition's
   atom. The boundary before each atom has a priority: a definition's
   ``DEFINITION - depth`` (at least ``NESTED``), a statement on a new line
   of a body ``STATEMENT`` (+1 after a blank line), another child on a new
   line ``LINE`` (+1), anything else ``WEAK``, and inside a definition up to
   its body, and before the body's first statement (or docstring), ``KEEP``:
   a header is cut from its body only when nothing else is left. A boundary
   inside a token's text is dropped.
2. *Packing.* Atoms are added to the chunk while the estimate stays within
   the budget; when the next one does not fit, the chunk ends at the
   highest-priority boundary (the latest of equals) among those that leave
   it at least half the budget (a quarter, for a definition's boundary), or
   right before the atom that did not fit. So small adjacent definitions
   share a chunk, and a chunk starts at a definition whenever one lies in
   that window.
3. *Counting.* The estimate is the number of the document's token spans
   that start inside a range; each chunk is then counted by the tokenizer.
   A chunk over ``max_tokens`` (BPE merges at its edges) is packed again
   with a smaller budget (``_REPACKS`` times at most); an atom over the
   budget that cannot be split, and a chunk still over after that, is cut
   by ``chunk_text`` within its own range with no overlap.

Chunks of code share no tokens: they tile the file (the whitespace between
them is in neither), which is what lets the symbol paths be derived from the
chunks alone (``core.code.symbols``).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ragtui.core.code.syntax import TRIVIA, WRAPPERS, Parsed, body_types, definition, parse
from ragtui.core.ingest.chunker import IDS_MAX_CHARS, Chunk, _check_params, _Tokenizer, chunk_text

__all__ = ["DEFINITION", "KEEP", "LINE", "NESTED", "STATEMENT", "WEAK", "chunk_code", "code_atoms"]

DEFINITION = 100
"""The boundary before a top-level definition; one nested d deep has ``DEFINITION - d`` (at least ``NESTED``)."""
NESTED = 60
STATEMENT = 40
LINE = 20
WEAK = 10
KEEP = 1

MAX_DEPTH = 400
"""Nodes nested deeper than this are not split by their children: each stays one atom (cut by lines)."""

_NON_SPACE = re.compile(r"\S")
_LEAF_TYPES = re.compile(r"string|comment|heredoc|regex")
"""Nodes never split by their children (a docstring's quotes stay with its text): cut by lines when long."""


def chunk_code(
    text: str,
    language: str,
    tokenizer: _Tokenizer,
    max_tokens: int,
    overlap: int,
    spans: Sequence[tuple[int, int]] | None = None,
    keep_ids: bool = False,
    tokens: Any = None,
) -> list[Chunk]:
    """The chunks of source ``text`` in ``language`` (a ``core.code.languages`` name), cut by its syntax when it
    parses, else by ``chunk_text`` with the same arguments."""
    _check_params(max_tokens, overlap)
    if not text or text.isspace():
        return []
    parsed, _ = parse(text, language)
    if parsed is None:
        return chunk_text(text, tokenizer, max_tokens, overlap, spans=spans, keep_ids=keep_ids, tokens=tokens)
    if tokens is not None:
        spans = tokens.spans
    starts, ends = _token_bounds(text, tokenizer, spans)
    budget = max(1, max_tokens - 2)  # the count of a substring can pass the spans' by a word-start piece
    atoms = _on_token_boundaries(code_atoms(parsed, text, starts, budget), starts, ends, text)
    del ends
    return _chunks(text, atoms, starts, tokenizer, max_tokens, budget, keep_ids)


def _token_bounds(text: str, tokenizer: _Tokenizer,
                  spans: Sequence[tuple[int, int]] | None) -> tuple[array[int], array[int]]:
    """The tokens' starts and ends, each as one array of 8-byte integers (16 bytes a token; a list of
    span tuples takes about 100). Without ``spans`` the tokenizer is asked for them part by part when it
    can (``iter_spans``), so the document's span tuples are never all held at once."""
    if spans is not None:
        parts: Iterable[Sequence[tuple[int, int]]] = (spans,)
    else:
        iter_spans = getattr(tokenizer, "iter_spans", None)
        parts = iter_spans(text) if callable(iter_spans) else (tokenizer.spans(text),)
    starts, ends = array("q"), array("q")
    for part in parts:
        starts.extend([s for s, _ in part])
        ends.extend([e for _, e in part])
    return starts, ends


def _estimate(starts: Sequence[int], a: int, b: int) -> int:
    return bisect_left(starts, b) - bisect_left(starts, a)


def code_atoms(parsed: Parsed, text: str, starts: Sequence[int], budget: int) -> list[tuple[int, int, bool]]:
    """The atoms of the file: (start character, priority of the boundary before it, whether it is a leaf over
    the budget). They tile the text: atom i runs to atom i+1's start (the last to the end)."""
    language = parsed.language
    char = parsed.char
    data = parsed.data
    bodies = body_types()
    root = parsed.tree.root_node
    out: list[tuple[int, int, bool]] = [(0, DEFINITION, False)]
    # Work items: a node to split (node, depth, definitions around its children, whether its children are a
    # definition's body), or an atom (start, priority, leaf over the budget) to emit in its turn.
    stack: list[tuple[Any, ...]] = [(root, 0, 0, False)]
    while stack:
        item = stack.pop()
        if len(item) == 3:
            out.append(item)
            continue
        node, depth, defs, is_body = item
        wrapper = node.type in WRAPPERS
        node_is_def = not wrapper and node is not root and definition(node, language) is not None
        units = _units(node.children, data, language)
        queued: list[tuple[Any, ...]] = []
        seen_named = past_body = False
        for k, (lead, main, name) in enumerate(units):
            first = lead[0] if lead else main
            s = char(first.start_byte)
            if k + 1 < len(units):
                nxt = units[k + 1][0][0] if units[k + 1][0] else units[k + 1][1]
                e = char(nxt.start_byte)
            else:
                e = char(node.end_byte)
            if k == 0 and node is not root:
                prio = -1  # the parent's own boundary stands here
            elif wrapper:
                prio = KEEP  # decorators, `export`, `template <...>` stay with what they wrap
            elif name is not None:
                prio = max(NESTED, DEFINITION - defs)
            else:
                breaks = data.count(b"\n", units[k - 1][1].end_byte, first.start_byte)
                if not breaks:
                    prio = WEAK
                elif node.type in bodies:
                    prio = STATEMENT + (breaks >= 2)
                else:
                    prio = LINE + (breaks >= 2)
            if node_is_def and prio >= 0 and not past_body:
                prio = KEEP  # a definition's header, and its body, stay together
            splittable = main.child_count > 0 and depth < MAX_DEPTH and not _LEAF_TYPES.search(main.type)
            body = node_is_def and not past_body and _is_body(main, node)
            past_body = past_body or body
            if is_body and main.is_named and not seen_named and prio >= 0:
                prio = KEEP  # a definition's first statement (or docstring) stays with its header
            seen_named = seen_named or main.is_named
            # A definition being split has its body split too: a body that fits alone but not with
            # its header would otherwise leave the header a chunk of its own.
            if _estimate(starts, s, e) <= budget and not (body and splittable):
                if prio >= 0:
                    queued.append((s, prio, False))
                continue
            main_s = char(main.start_byte)
            if lead:
                if prio >= 0:
                    queued.append((s, prio, False))
                queued.extend((char(c.start_byte), KEEP, False) for c in lead[1:])
                prio = KEEP
            if splittable:
                if prio >= 0:
                    queued.append((main_s, prio, False))
                inner_defs = defs + (name is not None and not wrapper)
                queued.append((main, depth + 1, inner_defs, node_is_def and _is_body(main, node)))
            elif prio >= 0:
                queued.append((main_s, prio, _estimate(starts, main_s, e) > budget))
        # Emitted in document order: pushed in reverse, a subtree expands before the atoms after it.
        stack.extend(reversed(queued))
    atoms: list[tuple[int, int, bool]] = []
    for s, prio, leaf in out:
        if atoms and s <= atoms[-1][0]:
            continue  # a boundary that coincides with the one before it (leading whitespace)
        atoms.append((s, prio, leaf))
    return atoms


def _on_token_boundaries(atoms: list[tuple[int, int, bool]], starts: Sequence[int], ends: Sequence[int],
                         text: str) -> list[tuple[int, int, bool]]:
    """The atoms without the boundaries that fall inside a token's text (``},`` can be one token of a BPE
    vocabulary): such an atom joins the one before it, so no token is cut in two. Token k is
    ``starts[k] .. ends[k]``."""
    out: list[tuple[int, int, bool]] = []
    for atom in atoms:
        p = atom[0]
        i = bisect_right(starts, p) - 1
        inside = False
        for j in (i - 1, i):
            if 0 <= j < len(starts):
                s, e = starts[j], ends[j]
                while s < e and text[s].isspace():
                    s += 1
                while e > s and text[e - 1].isspace():
                    e -= 1
                inside = inside or s < p < e
        if inside and out:
            prev = out[-1]
            out[-1] = (prev[0], prev[1], prev[2] or atom[2])
            continue
        out.append(atom)
    return out


def _is_body(child: Any, parent: Any) -> bool:
    """Whether ``child`` is the body of the definition ``parent`` (its first statement stays with the header)."""
    body = parent.child_by_field_name("body")
    if body is not None:
        return bool(body == child)
    return child.type in body_types()


def _units(children: Sequence[Any], data: bytes, language: str) -> list[tuple[list[Any], Any, tuple[str, ...] | None]]:
    """The children as (leading trivia, node, its name as a definition or None): comments, attributes and
    decorators right above a definition (at most one line break between each) lead it."""
    units: list[tuple[list[Any], Any, tuple[str, ...] | None]] = []
    pending: list[Any] = []
    for child in children:
        if child.type in TRIVIA:
            if pending and data.count(b"\n", pending[-1].end_byte, child.start_byte) > 1:
                units.extend(([], p, None) for p in pending)
                pending = []
            pending.append(child)
            continue
        name = definition(child, language)
        if name is not None and pending and data.count(b"\n", pending[-1].end_byte, child.start_byte) <= 1:
            units.append((pending, child, name))
        else:
            units.extend(([], p, None) for p in pending)
            units.append(([], child, name))
        pending = []
    units.extend(([], p, None) for p in pending)
    return units


def _pack(atoms: list[tuple[int, int, bool]], est: list[int], lo: int, hi: int,
          budget: int) -> list[tuple[int, int, bool]]:
    """Atoms ``lo .. hi-1`` in groups of consecutive atoms ``(first, past_last, cut by lines)``, in order."""
    groups: list[tuple[int, int, bool]] = []
    a = lo
    half, quarter = budget // 2, budget // 4
    while a < hi:
        if atoms[a][2] or est[a] > budget:
            groups.append((a, a + 1, True))
            a += 1
            continue
        total = est[a]
        i = a + 1
        while i < hi and not (atoms[i][2] or est[i] > budget) and total + est[i] <= budget:
            total += est[i]
            i += 1
        if i >= hi:
            groups.append((a, i, False))
            a = i
            continue
        if atoms[i][2] or est[i] > budget:
            # A leaf over the budget (a long string or comment) is cut by lines, together with what leads
            # up to it on its line or statement (``x = `` before the string).
            if atoms[i][1] < STATEMENT:
                groups.append((a, i + 1, True))
            else:
                groups.extend([(a, i, False), (i, i + 1, True)])
            a = i + 1
            continue
        # Atom i does not fit: end at the best boundary that leaves the chunk at least half the budget
        # (a quarter, for a definition's boundary), else right before atom i.
        best, best_prio = i, atoms[i][1]
        filled = total
        for j in range(i - 1, a, -1):
            filled -= est[j]
            if filled < quarter:
                break
            prio = atoms[j][1]
            if prio > best_prio and (filled >= half or prio >= NESTED):
                best, best_prio = j, prio
        groups.append((a, best, False))
        a = best
    return groups


_REPACKS = 4
"""Times a group whose count is over ``max_tokens`` is packed again with a smaller budget before it is cut by
lines."""
_COUNT_BATCH = 256
"""Chunk texts handed to the tokenizer per ``ids_many`` or ``count_many`` call."""


def _chunks(text: str, atoms: list[tuple[int, int, bool]], starts: Sequence[int], tok: _Tokenizer,
            max_tokens: int, budget: int, keep_ids: bool) -> list[Chunk]:
    n = len(text)
    bounds = [a[0] for a in atoms] + [n]
    est = [_estimate(starts, bounds[i], bounds[i + 1]) for i in range(len(atoms))]
    ids_many = getattr(tok, "ids_many", None) if keep_ids else None
    # Each entry: (first atom, past last atom, budget it was packed with, times packed, cut by lines).
    queued = [(a, b, budget, 0, lines) for a, b, lines in _pack(atoms, est, 0, len(atoms), budget)]
    done: dict[int, list[Chunk]] = {}
    while queued:
        ranges: list[tuple[int, int]] = []
        for a, b, _, _, _ in queued:
            ranges.append(_trimmed(text, bounds[a], bounds[b]))
        texts = [text[s:e] for s, e in ranges if e > s]
        ids: list[np.ndarray] | None = None
        if callable(ids_many) and all(len(t) < IDS_MAX_CHARS for t in texts):
            ids = []
        counts: list[int] = []
        # A batch at a time: the library's encodings and the ids as Python lists are held for one batch,
        # not for every chunk of the file (a 1 MB file's took 45 MiB); each chunk keeps its ids as int32.
        for lo in range(0, len(texts), _COUNT_BATCH):
            batch = texts[lo : lo + _COUNT_BATCH]
            if ids is not None:
                assert callable(ids_many)
                answers = list(ids_many(batch))
                ids.extend(np.asarray(x, dtype=np.int32) for x in answers)
                counts.extend(len(x) for x in answers)
            else:
                answers = list(tok.count_many(batch))
                counts.extend(answers)
            if len(answers) != len(batch):
                from ragtui.core.errors import EmbeddingError

                raise EmbeddingError(f"tokenizer {getattr(tok, 'name', '?')!r} counted {len(answers)} texts "
                                     f"when given {len(batch)}")
        again: list[tuple[int, int, int, int, bool]] = []
        t = 0
        for (a, b, used, times, leaf), (s, e) in zip(queued, ranges):
            if e <= s:
                continue  # only whitespace
            k = counts[t]
            got = None if ids is None else ids[t]
            t += 1
            if 1 <= k <= max_tokens and not leaf:
                done[a] = [Chunk(s, e, text[s:e], k, got)]
            elif k < 1 and not leaf:
                continue  # the tokenizer sees no token here (the plain chunker skips such text too)
            elif b > a + 1 and times < _REPACKS and not leaf:
                smaller = max(1, used - (k - max_tokens) - 1)
                again.extend((x, y, smaller, times + 1, z) for x, y, z in _pack(atoms, est, a, b, smaller))
            else:
                done[a] = [Chunk(s + c.start, s + c.end, c.text, c.n_tokens, c.ids)
                           for c in chunk_text(text[s:e], tok, max_tokens, 0, keep_ids=keep_ids)]
        queued = again
    return [c for a in sorted(done) for c in done[a]]


def _trimmed(text: str, s: int, e: int) -> tuple[int, int]:
    """``text[s:e]`` without leading and trailing whitespace, as a range (empty when it is all whitespace)."""
    m = _NON_SPACE.search(text, s, e)
    if m is None:
        return s, s
    start = m.start()
    while e > start and text[e - 1].isspace():
        e -= 1
    return start, e

"""Chunk references and the citations an answer gives, as text: parsed here, resolved by ``resolver``.

``split_ref`` splits one ``head#n`` reference; ``parse_refs`` finds the
references in a list, a JSON array or an answer's brackets; ``parse_labels``
reads an answer's ``[path:Lstart-Lend]``, ``[path p.N Lstart-Lend]`` and
``[chunk_id]`` citations. Nothing here reads a file or an index.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ragtui.core.errors import UsageError

__all__ = ["MAX_LABELS", "Label", "parse_labels", "parse_refs", "split_ref"]


def split_ref(ref: str) -> tuple[str, int]:
    """``(head, n)`` of ``head#n``; ``UsageError`` for anything else.

    ``n`` is plain decimal without leading zeros (as in every chunk_id); the
    head may itself hold ``#``.
    """
    if not isinstance(ref, str):
        raise UsageError(f"malformed reference {ref!r}: a reference is a string")
    head, sep, k = ref.rpartition("#")
    if not sep or not head:
        raise UsageError(f"malformed reference {ref!r}: expected a chunk_id like docs/a.md#2 or INDEX#N")
    if not (k.isascii() and k.isdigit()) or (len(k) > 1 and k[0] == "0"):
        raise UsageError(
            f"malformed reference {ref!r}: the part after the last '#' must be a chunk number (0, 1, 2, ...)"
        )
    if any(c in ref for c in "\0\n\r"):
        raise UsageError(f"malformed reference {ref!r}: it holds a control character")
    return head, int(k)


# A bracketed reference inside text: no brackets or line breaks inside, ends in #<n>.
_BRACKETED = re.compile(r"\[([^\[\]\r\n]+?#[0-9]+)\]")


def parse_refs(text: str) -> list[str]:
    """The references in ``text``, in order.

    Accepted: a JSON list of strings (``["docs/a.md#2", "docs#0"]``); text
    holding bracketed references (``[docs/a.md#2][docs/b.md#0]``, or an
    answer whose prose cites them: only the bracketed ``[...#n]`` parts are
    taken); otherwise whitespace-separated references. References are not
    validated here (``split_ref`` and ``resolve`` do that).
    """
    stripped = text.strip()
    if not stripped:
        return []
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise UsageError("a JSON list of references must hold only strings")
            return list(value)
    found = _BRACKETED.findall(stripped)
    if found:
        return found
    return stripped.split()


@dataclass(frozen=True)
class Label:
    """One citation an answer gives: ``[path:Lstart-Lend]`` (lines) or ``[chunk_id]``."""

    text: str
    """As written inside the brackets."""
    doc_id: str
    start_line: int | None
    """None for a chunk_id citation."""
    end_line: int | None
    chunk_id: str | None
    """Set for a chunk_id citation."""
    page: int | None = None
    """Set for a page citation (``paper.pdf p.12 L3-9``): ``start_line`` is then a line of this page."""
    page_end: int | None = None
    """The page ``end_line`` is on (a page citation)."""


_LABEL_LINES = re.compile(r"^(?P<path>[^\[\]\r\n]+?):L(?P<a>[0-9]{1,9})(?:-L?(?P<b>[0-9]{1,9}))?$")
_LABEL_PAGE = re.compile(
    r"^(?P<path>[^\[\]\r\n]+?)[ \t]+p\.(?P<p>[0-9]{1,9})[ \t]+L(?P<a>[0-9]{1,9})"
    r"(?:[-\u2013](?:p\.(?P<q>[0-9]{1,9})[ \t]+)?L?(?P<b>[0-9]{1,9}))?$")
_LABEL_CHUNK = re.compile(r"^(?P<path>[^\[\]\r\n\s]+?)#(?P<k>0|[1-9][0-9]{0,8})$")
_BRACKETS = re.compile(r"\[([^\[\]\r\n]{1,4096})\]")
MAX_LABELS = 1000
"""The most citations read from one answer: a model that loops cannot make the check unbounded."""


def parse_labels(text: str) -> list[Label]:
    """The citations in an answer, in order: each bracketed ``path:Lstart-Lend`` (also ``path:Ln``,
    ``path:Lstart-Lend``) or ``chunk_id``; several in one bracket may be separated by ``;`` or ``,``.
    Bracketed text that is neither (``[1]``, a link's text) is not a citation.
    """
    out: list[Label] = []
    for group in _BRACKETS.findall(text):
        for part in re.split(r"\s*[;,]\s+|\s*;\s*", group.strip()):
            part = part.strip()
            m = _LABEL_LINES.match(part)
            page = None if m else _LABEL_PAGE.match(part)
            if m:
                a = int(m["a"])
                b = int(m["b"]) if m["b"] else a
                out.append(Label(part, m["path"].strip(), a, b, None))
            elif page:
                a = int(page["a"])
                b = int(page["b"]) if page["b"] else a
                p = int(page["p"])
                out.append(Label(part, page["path"].strip(), a, b, None, p, int(page["q"]) if page["q"] else p))
            else:
                m = _LABEL_CHUNK.match(part)
                if m and "/" in m["path"]:
                    out.append(Label(part, m["path"], None, None, part))
            if len(out) >= MAX_LABELS:
                return out
    return out

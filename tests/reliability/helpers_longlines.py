"""Long single-line documents: chunked with work linear in their length, and correctly.

``run_long_lines(base, sizes)`` makes one document of each kind and size,
chunks it with the real default tokenizer (wordllama's Llama-2 BPE) through
a wrapper that counts every character handed to the tokenizer, and checks
per document:

- *linear*: the tokenizer saw at most ``WORK_PER_CHAR`` characters per
  character of the document (one tokenization, the counts of the windows
  with their overlap, recounts of windows that had to shrink). Before the
  fix, 300 KB of minified JSON cost 190 and 1 MB 237;
- *correct*: every chunk is the exact substring at its offsets, trimmed, and
  within ``max_tokens``; starts and ends strictly increase; every
  non-whitespace character lies in some chunk; ``n_tokens`` equals the
  tokenizer's own count (checked on every 25th chunk).

``run_ingest_long_line(base, size)`` runs ``ragtui ingest`` in a child whose
address space is limited (``RLIMIT_AS``, 640 MiB) on a folder holding one
line of minified JSON: it must exit 0 and index the line whole. Memory is
what is bounded; the subprocess timeout (30 times the time it takes) and the
caller's pytest timeout only turn a hang into a failure.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.reliability.cases import Case
from tests.reliability.helpers import REPO_ROOT, write

WORK_PER_CHAR = 4.0
"""Characters tokenized per document character, at most (measured: 2.2 to 3.2)."""

KINDS = {
    # name: (generator, size in characters)
    "300 KB JSON line": ("json", 300_000),
    "1 MB prose line": ("prose", 1_000_000),
    "1 MB JSON line": ("json", 1_000_000),
    "3.3 MB minified JSON": ("json", 3_300_000),
    "10 MB prose line": ("prose", 10_000_000),
    "10 MB JSON line": ("json", 10_000_000),
}
CI_KINDS = ("300 KB JSON line", "1 MB prose line")

_WORDS = (
    "the index keeps each chunk with its offsets so a hit can be shown in place; a window of tokens "
    "prefers to end at a paragraph, then a line, then a sentence. BM25 scores terms, vectors score "
    "meaning, and fusion ranks both. naïve café 漢字 — e.g. 3.14 is no sentence end!"
).split(" ")


def prose_line(size: int, seed: int = 0) -> str:
    """Sentences of words on one line (a text file with its line breaks lost)."""
    rng = random.Random(seed)
    parts, n = [], 0
    while n < size:
        word = rng.choice(_WORDS)
        parts.append(word)
        n += len(word) + 1
    return " ".join(parts)[:size].strip()


def json_line(size: int, seed: int = 0) -> str:
    """Minified JSON: one line, no spaces."""
    rng = random.Random(seed)
    out, n = [], 0
    while n < size:
        rec = json.dumps(
            {
                "id": rng.randrange(10**9),
                "name": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 12))),
                "tags": [rng.choice(_WORDS) for _ in range(3)],
                "score": rng.random(),
                "ok": rng.random() < 0.5,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )
        out.append(rec)
        n += len(rec) + 1
    return ("[" + ",".join(out) + "]")[:size]


def make_doc(kind: str, size: int, seed: int = 0) -> str:
    return json_line(size, seed) if kind == "json" else prose_line(size, seed)


class CountingTokenizer:
    """Passes every call to ``tok`` and adds up the characters it was handed."""

    def __init__(self, tok) -> None:
        self.tok = tok
        self.name = tok.name
        self.chars = 0
        self.calls = 0

    def spans(self, text):
        self.chars += len(text)
        self.calls += 1
        return self.tok.spans(text)

    def iter_spans(self, text):
        self.chars += len(text)
        self.calls += 1
        return self.tok.iter_spans(text)

    def count(self, text):
        self.chars += len(text)
        self.calls += 1
        return self.tok.count(text)

    def count_many(self, texts):
        self.chars += sum(map(len, texts))
        self.calls += len(texts)
        return self.tok.count_many(texts)


def wordllama_tokenizer():
    """The default embedder's tokenizer, or None when wordllama is not installed."""
    from ragtui.core.errors import EmbeddingError

    try:
        from ragtui.core.embedders.hf_tokenizer import HFTokenizer
        from ragtui.core.embedders.wordllama import MODEL_NAME, bundled_files
    except ImportError:
        return None
    try:
        return HFTokenizer.from_file(bundled_files()[1], MODEL_NAME)
    except EmbeddingError:
        return None


_BLANK = re.compile(r"\s*")


def check_chunks(doc: str, chunks, tok, max_tokens: int, every: int = 25) -> list[str]:
    """What is wrong with ``chunks`` of ``doc`` (empty when nothing is)."""
    problems = []
    covered = 0  # everything before this offset is in a chunk or whitespace
    for i, ch in enumerate(chunks):
        if doc[ch.start : ch.end] != ch.text or not ch.text or ch.text != ch.text.strip():
            problems.append(f"chunk {i}: not the trimmed substring at {ch.start}..{ch.end}")
        if not 1 <= ch.n_tokens <= max_tokens:
            problems.append(f"chunk {i}: {ch.n_tokens} tokens")
        if i and not (chunks[i - 1].start < ch.start and chunks[i - 1].end < ch.end):
            problems.append(f"chunk {i}: no progress")
        if ch.start > covered and _BLANK.fullmatch(doc, covered, ch.start) is None:
            problems.append(f"text {covered}..{ch.start} is in no chunk")
        covered = max(covered, ch.end)
        if i % every == 0 and tok.count(ch.text) != ch.n_tokens:
            problems.append(f"chunk {i}: n_tokens {ch.n_tokens} != count {tok.count(ch.text)}")
        if len(problems) > 5:
            break
    if _BLANK.fullmatch(doc, covered) is None:
        problems.append(f"text after {covered} is in no chunk")
    return problems


def long_line_cases(size: str = "ci", kinds=None) -> list[Case]:
    """Two cases per long single-line document: linear tokenizing work, and correct chunks."""
    names = kinds or (CI_KINDS if size == "ci" else tuple(KINDS))
    return [Case(f"{name.replace(' ', '-')}-{what}", functools.partial(_long_line, name, what))
            for name in names for what in ("linear-work", "chunks")]


def _chunked(name: str):
    """(document, chunks, characters tokenized per character) of one kind, chunked once per run."""
    from ragtui.core.ingest.chunker import chunk_text
    from tests.reliability.cases import shared

    def chunk():
        kind, size = KINDS[name]
        doc = make_doc(kind, size)
        counting = CountingTokenizer(wordllama_tokenizer())
        chunks = chunk_text(doc, counting)
        return doc, chunks, counting.chars / len(doc)

    return shared(("long-line", name), chunk)


def _long_line(name: str, what: str, _tmp: Path) -> None:
    from ragtui.core.ingest.chunker import DEFAULT_MAX_TOKENS

    if wordllama_tokenizer() is None:
        pytest.skip("wordllama's tokenizer is not installed")
    doc, chunks, per_char = _chunked(name)
    if what == "linear-work":
        assert per_char <= WORK_PER_CHAR, f"{name}: {per_char:.1f} characters tokenized per character"
    else:
        problems = check_chunks(doc, chunks, wordllama_tokenizer(), DEFAULT_MAX_TOKENS)
        assert not problems and len(chunks) > KINDS[name][1] // 5000, f"{name}: {len(chunks)} chunks, {problems[:3]}"


AS_LIMIT = 640 << 20
"""The child's address space. Ingesting 3 MB of minified JSON needs 300-350 MiB; the
old chunker's single tokenisation of the line alone held 770 MB (at this limit it hit
the wall inside the Rust tokenizer and hung)."""


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def check_ingest_long_line(size: int, base: Path, timeout: float = 300) -> int:
    """``ragtui ingest`` of a folder with one line of minified JSON, in ``AS_LIMIT`` of address
    space: it exits 0 (within ``timeout`` seconds, 30 times what it takes) and indexes it whole.
    Two cases: the exit, and the chunks."""
    if wordllama_tokenizer() is None:
        pytest.skip("wordllama's tokenizer is not installed")
    folder = base / "oneline"
    doc = json_line(size)
    write(folder / "data.json.txt", doc)
    art = Path(tempfile.mkdtemp(dir=base))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
    # Thread pools reserve address space per thread: keep their count fixed, so
    # the limit measures the document, not the machine's number of cores.
    env.update(RAYON_NUM_THREADS="2", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MALLOC_ARENA_MAX="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ragtui", "ingest", str(folder), "--artifacts", str(art), "--json", "--quiet"],
            capture_output=True, text=True, env=env, cwd=base, timeout=timeout, preexec_fn=_limit_address_space,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"no exit within {timeout:.0f} s") from None
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    from ragtui.core.index.index_format import read_index

    records = read_index(art / "rag" / "oneline").records
    ok = len(records) > size // 500 and records[0].text == doc[: len(records[0].text)]
    assert ok and doc.endswith(records[-1].text), f"{len(records)} chunks indexed"
    return 2


def ingest_long_line_cases(size: str = "ci") -> list[Case]:
    """3 MB of minified JSON on one line (full size: and 10 MB), ingested in bounded address space."""
    sizes = (3_000_000,) if size == "ci" else (3_000_000, 10_000_000)
    return [Case(f"{n // 1_000_000}-MB", functools.partial(check_ingest_long_line, n), 2) for n in sizes]

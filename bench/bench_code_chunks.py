"""Syntax-aware chunks of source code against the plain chunker's windows: where chunks start, on real trees.

    python bench/bench_code_chunks.py [--files N] [--max-tokens 256] [--overlap 32] [TREE:GLOB ...]

No labelled code-search collection ships inside a package of the registries
this project installs from (searched: CodeSearchNet, CoSQA), so retrieval
quality is not measured; what is measured is where chunks start. For each
tree (default: this repository's Python, an installed library's Python,
npm's JavaScript, LLVM's C++ headers and the perf tests' shell scripts, those
present on the machine) and each chunker (``chunk_text``, the windows every
file had before; ``chunk_code``), on at most ``--files`` files per tree
(sorted, then a fixed shuffle), with the default embedder's tokenizer
(wordllama's Llama-2 BPE) at 256/32:

- ``at def``: the share of chunks that start at a definition: at the first
  character of a function, method, class, impl, struct... (the grammar's
  definitions, ``code.syntax.definition``), or of the comment, decorator or
  attribute lines right above one;
- ``mid-line``: the share of chunks that start after other text on their line;
- ``whole defs``: of the definitions that fit in ``max_tokens`` (counted by
  the tokenizer), the share that lie inside one chunk;
- ``sym agree``: for the code chunks, the share whose symbols derived from
  the chunk texts alone (what a reader does, ``chunk_symbols``) equal those
  computed from the file (``document_symbols``);
- seconds for each chunker over the tree, and the ratio (the peer is
  ``chunk_text`` on the same files and tokenizer, in the same run).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ragtui.core.code.languages import code_language  # noqa: E402
from ragtui.core.code.symbols import chunk_symbols, definitions, document_symbols  # noqa: E402
from ragtui.core.code.syntax import parse  # noqa: E402
from ragtui.core.ingest.chunker import chunk_text  # noqa: E402
from ragtui.core.ingest.code_chunks import chunk_code  # noqa: E402


def default_trees() -> list[tuple[str, Path, str]]:
    import importlib.util

    out = [("ragtui (Python)", REPO / "ragtui", "*.py")]
    for package in ("textual",):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin is not None:
            out.append((f"{package} (Python)", Path(spec.origin).parent, "*.py"))
    for label, path, glob in (("npm (JavaScript)", Path("/usr/lib/node_modules/npm"), "*.js"),
                              ("llvm-14 headers (C++)", Path("/usr/include/llvm-14/llvm"), "*.h"),
                              ("perf tests (shell)", Path("/usr/lib/perf-core/tests"), "*.sh")):
        if path.is_dir():
            out.append((label, path, glob))
    return out


def _tokenizer():
    import wordllama
    from tokenizers import Tokenizer

    path = Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"

    class WL:
        name, t = "wordllama", Tokenizer.from_file(str(path))

        def spans(self, s):
            return self.t.encode(s, add_special_tokens=False).offsets

        def count(self, s):
            return len(self.t.encode(s, add_special_tokens=False).ids)

        def count_many(self, ss):
            return [len(e.ids) for e in self.t.encode_batch(list(ss), add_special_tokens=False)]

    return WL()


_LEADERS = ("@", "#", "//", "/*", "*", "///", "#[")


def definition_starts(text: str, defs: list[tuple[int, int, str]]) -> set[int]:
    """The first character of every definition, and of each comment, decorator or attribute line right above it."""
    out: set[int] = set()
    for s, _, _ in defs:
        out.add(s)
        line_start = text.rfind("\n", 0, s) + 1
        if text[line_start:s].strip():
            continue  # the definition does not open its line (``export``, ``static``): its own start only
        while line_start > 0:
            prev_start = text.rfind("\n", 0, line_start - 1) + 1
            line = text[prev_start:line_start - 1]
            if not line.strip() or not line.lstrip().startswith(_LEADERS):
                break
            out.add(prev_start + len(line) - len(line.lstrip()))
            line_start = prev_start
    return out


def measure(files: list[Path], tok, max_tokens: int, overlap: int) -> dict[str, float]:
    stats = {k: 0.0 for k in ("files", "plain_chunks", "code_chunks", "plain_at_def", "code_at_def", "plain_mid",
                              "code_mid", "defs_fit", "plain_whole", "code_whole", "sym_total", "sym_agree",
                              "t_plain", "t_code")}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        language = code_language(path.name)
        parsed, _ = parse(text, language) if language else (None, None)
        if parsed is None:
            continue
        stats["files"] += 1
        defs = definitions(parsed)
        starts = definition_starts(text, defs)
        t0 = time.perf_counter()
        plain = chunk_text(text, tok, max_tokens, overlap)
        stats["t_plain"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        code = chunk_code(text, language, tok, max_tokens, overlap)
        stats["t_code"] += time.perf_counter() - t0
        fitting = [(s, e) for s, e, _ in defs if tok.count(text[s:e]) <= max_tokens]
        stats["defs_fit"] += len(fitting)
        for name, chunks in (("plain", plain), ("code", code)):
            stats[f"{name}_chunks"] += len(chunks)
            stats[f"{name}_at_def"] += sum(c.start in starts for c in chunks)
            stats[f"{name}_mid"] += sum(bool(text[text.rfind("\n", 0, c.start) + 1:c.start].strip()) for c in chunks)
            stats[f"{name}_whole"] += sum(any(c.start <= s and e <= c.end for c in chunks) for s, e in fitting)
        truth = document_symbols(text, language, [(c.start, c.end) for c in code]) or []
        derived = chunk_symbols(path.name, [c.text for c in code])
        stats["sym_total"] += len(truth)
        stats["sym_agree"] += sum(a == b for a, b in zip(truth, derived))
    return stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="*", help="TREE:GLOB, e.g. /usr/include/llvm-14/llvm:*.h")
    ap.add_argument("--files", type=int, default=150)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--overlap", type=int, default=32)
    args = ap.parse_args()
    trees = [(t.split(":")[0], Path(t.split(":")[0]), t.split(":")[1]) for t in args.trees] or default_trees()
    tok = _tokenizer()
    print(f"load average {open('/proc/loadavg').read().split()[:3]}; {os.cpu_count()} cores; "
          f"wordllama tokenizer, {args.max_tokens}/{args.overlap}; at most {args.files} files per tree")
    print(f"{'tree':24} {'files':>5} | {'chunks':>13} | {'at def':>13} | {'mid-line':>13} | {'whole defs':>13} | "
          f"{'sym agree':>9} | {'seconds':>11} {'ratio':>5}")
    print(f"{'':24} {'':>5} | {'plain  code':>13} | {'plain  code':>13} | {'plain  code':>13} | "
          f"{'plain  code':>13} | {'':>9} | {'plain code':>11}")
    for label, root, glob in trees:
        files = sorted(root.rglob(glob))
        random.Random(0).shuffle(files)
        s = measure(files[: args.files], tok, args.max_tokens, args.overlap)
        pc, cc, fit = max(1, s["plain_chunks"]), max(1, s["code_chunks"]), max(1, s["defs_fit"])
        print(f"{label[:24]:24} {int(s['files']):5d} | {int(s['plain_chunks']):6d} {int(s['code_chunks']):6d} | "
              f"{s['plain_at_def'] / pc:6.1%} {s['code_at_def'] / cc:6.1%} | "
              f"{s['plain_mid'] / pc:6.1%} {s['code_mid'] / cc:6.1%} | "
              f"{s['plain_whole'] / fit:6.1%} {s['code_whole'] / fit:6.1%} | "
              f"{s['sym_agree'] / max(1, s['sym_total']):9.1%} | {s['t_plain']:5.1f} {s['t_code']:5.1f} "
              f"{s['t_code'] / max(1e-9, s['t_plain']):5.2f}")
    print(f"load average after {open('/proc/loadavg').read().split()[:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

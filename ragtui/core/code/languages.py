"""Which source files have a grammar: the extension table and the grammar loader (spec/chunker.md, "Code").

One small table, extension -> language, that a registry of document kinds can
take over as it is. A language's grammar is a compiled tree-sitter wheel
(``ragtui[code]``) loaded from the installed package: nothing is fetched,
built or downloaded at run time. Without the wheels every file keeps the
plain chunker.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

__all__ = [
    "CODE_CHUNKER_VERSION", "CODE_EXTENSIONS", "GRAMMARS", "chunker_identity", "code_language", "grammar",
    "grammar_versions", "missing_grammars",
]

CODE_CHUNKER_VERSION = 1
"""The version of the code chunker (``ingest.code_chunks``) and of the symbols derived from its chunks: raised
whenever the same source and grammars would be cut, or read, differently."""

CODE_EXTENSIONS: dict[str, str] = {
    "py": "python", "pyi": "python", "pyw": "python",
    "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
    "ts": "typescript", "mts": "typescript", "cts": "typescript",
    "tsx": "tsx",
    "go": "go",
    "rs": "rust",
    "c": "c",
    "h": "cpp", "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "c++": "cpp", "hh": "cpp", "hpp": "cpp", "hxx": "cpp",
    "java": "java",
    "sh": "bash", "bash": "bash", "zsh": "bash", "ksh": "bash",
}
"""The last extension of a file name (lowercased) -> the grammar it is cut with. ``.h`` is read with the C++
grammar, which also reads C headers; ``.tsx`` with TypeScript's TSX grammar."""

GRAMMARS: dict[str, tuple[str, str, str]] = {
    "python": ("tree_sitter_python", "language", "tree-sitter-python"),
    "javascript": ("tree_sitter_javascript", "language", "tree-sitter-javascript"),
    "typescript": ("tree_sitter_typescript", "language_typescript", "tree-sitter-typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx", "tree-sitter-typescript"),
    "go": ("tree_sitter_go", "language", "tree-sitter-go"),
    "rust": ("tree_sitter_rust", "language", "tree-sitter-rust"),
    "c": ("tree_sitter_c", "language", "tree-sitter-c"),
    "cpp": ("tree_sitter_cpp", "language", "tree-sitter-cpp"),
    "java": ("tree_sitter_java", "language", "tree-sitter-java"),
    "bash": ("tree_sitter_bash", "language", "tree-sitter-bash"),
}
"""language -> (module, the function that returns its grammar, the distribution that ships it)."""

_lock = threading.Lock()
_loaded: dict[str, Any] = {}


def code_language(doc_id: str) -> str | None:
    """The language a document is cut as, from its file name's last extension; None for other files."""
    name = doc_id.rpartition("/")[2]
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return None  # no extension, or a dot file such as .bashrc
    return CODE_EXTENSIONS.get(ext.lower())


def grammar(language: str) -> Any | None:
    """The ``tree_sitter.Language`` of ``language``, or None when its wheel (or tree-sitter) is not installed."""
    with _lock:
        if language in _loaded:
            return _loaded[language]
        found = None
        spec = GRAMMARS.get(language)
        if spec is not None:
            try:
                import tree_sitter

                module = importlib.import_module(spec[0])
                found = tree_sitter.Language(getattr(module, spec[1])())
            except (ImportError, AttributeError, ValueError, TypeError, OSError):
                found = None
        _loaded[language] = found
        return found


def missing_grammars() -> list[str]:
    """The languages of the table whose grammar cannot be loaded, in table order."""
    return [lang for lang in GRAMMARS if grammar(lang) is None]


def grammar_versions() -> str:
    """The installed tree-sitter and grammar versions, one string: chunks of code depend on them."""
    from importlib import metadata

    parts = []
    for dist in ("tree-sitter", *dict.fromkeys(spec[2] for spec in GRAMMARS.values())):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}=-")
    return ",".join(parts)


def chunker_identity() -> str:
    """What the chunks of source files depend on besides the text: the code chunker's version and the grammars
    installed; "" when none is (every file is then cut by ``chunk_text``). A change re-chunks the folder."""
    if all(grammar(lang) is None for lang in GRAMMARS):
        return ""
    loaded = ",".join(lang for lang in GRAMMARS if grammar(lang) is not None)
    return f"code-{CODE_CHUNKER_VERSION};{loaded};{grammar_versions()}"

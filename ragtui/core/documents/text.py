"""Plain text, Markdown, reStructuredText, AsciiDoc, source code and the other text-like files:
the document's text is the file's UTF-8 text (a byte order mark dropped, line endings kept)."""

from __future__ import annotations

from ragtui.core.documents.base import Document, Limits, Unreadable
from ragtui.core.documents.registry import Kind
from ragtui.core.ingest.reader import decode_document

TEXT_EXTENSIONS = (
    ".md", ".markdown", ".mdx", ".rst", ".txt", ".text", ".adoc", ".asciidoc", ".org", ".tex", ".d2",
    ".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".csv", ".tsv", ".xml",
    ".py", ".pyi", ".go", ".rs", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".c", ".h",
    ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".bash", ".zsh", ".fish",
    ".sql", ".lua", ".r", ".jl", ".ex", ".exs", ".erl", ".hs", ".ml", ".css", ".scss", ".vue", ".svelte",
    ".proto", ".graphql", ".tf", ".nix", ".dockerfile", ".mk", ".cmake",
)


def read(data: bytes, limits: Limits) -> Document:
    text, reason = decode_document(data)
    if text is None:
        raise Unreadable(reason or "not text")
    return Document(text, "text")


KIND = Kind(
    name="text",
    extensions=TEXT_EXTENSIONS,
    reader="ragtui.core.documents.text:read",
    names=("README", "LICENSE", "Makefile", "Dockerfile"),
    globs=("*.rst.txt",),
)

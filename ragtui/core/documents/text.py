"""Plain text, Markdown, reStructuredText, AsciiDoc, source code and the other text-like files:
the document's text is the file's UTF-8 text (a byte order mark dropped, line endings kept)."""

from __future__ import annotations

from ragtui.core.documents.base import Document, Limits, Unreadable
from ragtui.core.documents.registry import Kind

TEXT_EXTENSIONS = (
    ".md", ".markdown", ".mdx", ".rst", ".txt", ".text", ".adoc", ".asciidoc", ".org", ".tex", ".d2",
    ".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".csv", ".tsv", ".xml",
    ".py", ".pyi", ".go", ".rs", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".c", ".h",
    ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".bash", ".zsh", ".fish",
    ".sql", ".lua", ".r", ".jl", ".ex", ".exs", ".erl", ".hs", ".ml", ".css", ".scss", ".vue", ".svelte",
    ".proto", ".graphql", ".tf", ".nix", ".dockerfile", ".mk", ".cmake",
)


def decode_document(data: bytes) -> tuple[str | None, str | None]:
    """(text, None) for a UTF-8 document, or (None, reason) for one that is not text.

    A UTF-8 byte order mark is dropped; line endings are kept as they are.
    """
    if b"\0" in data[:8192]:
        return None, "binary (NUL bytes)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 (byte {e.start})"
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\0" in text:
        return None, "binary (NUL bytes)"
    return text, None


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

"""A source file's syntax tree, bounded, and which of its nodes are definitions (spec/chunker.md, "Code").

``parse(text, language)`` returns the tree of a file that the code chunker may
cut by its syntax, or the reason it must not (then the plain chunker cuts
it): too long, a NUL byte, text that is not valid UTF-8 once encoded (a lone
surrogate), or mostly unparsable. ``definition(node, language)`` tells which
nodes are definitions (function, method, class, impl, struct, interface...)
and their names, for the chunker's boundaries and the symbol paths alike.

Bounds: a file of ``MAX_CODE_CHARS`` characters or more is never parsed;
tree-sitter's parser is iterative and linear on what it accepts, and every
walk here uses an explicit stack, so nesting depth costs memory in
proportion to the file, never Python's recursion limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ragtui.core.code.languages import grammar

__all__ = [
    "MAX_CODE_CHARS", "MAX_ERROR_SHARE", "MAX_LINE_CHARS", "TRIVIA", "WRAPPERS", "Parsed", "body_types", "definition", "parse", "parse_reason",
]

MAX_CODE_CHARS = 1 << 20
"""Files of this many characters or more keep the plain chunker (generated or minified code, mostly)."""
MAX_LINE_CHARS = 10_000
"""Files with a line this long or longer keep the plain chunker: minified code is one line of statements,
which syntax cannot cut better than windows, and its tree costs memory in proportion to its tokens
(a 900 KB line of JavaScript: 9 s and 218 MB more, against the plain chunker's figures)."""
MAX_ERROR_SHARE = 0.5
"""A tree whose ERROR nodes hold more than this share of the file's bytes is not used."""

TRIVIA = frozenset({"comment", "line_comment", "block_comment", "attribute_item", "decorator"})
"""Nodes that stay with the definition right below them (no blank line between)."""

_BODIES = frozenset({
    "module", "block", "program", "source_file", "translation_unit", "statement_block", "compound_statement",
    "class_body", "declaration_list", "field_declaration_list", "interface_body", "enum_body", "statement_list",
    "enum_variant_list", "object_type", "constructor_body", "switch_block", "switch_body", "do_group",
})
"""Nodes whose children are statements or members: a line break before a child there is a statement boundary."""

_DEFINITIONS: dict[str, frozenset[str]] = {
    "python": frozenset({"function_definition", "class_definition"}),
    "javascript": frozenset({
        "function_declaration", "generator_function_declaration", "class_declaration", "method_definition",
    }),
    "typescript": frozenset({
        "function_declaration", "generator_function_declaration", "class_declaration", "method_definition",
        "abstract_class_declaration", "interface_declaration", "type_alias_declaration", "enum_declaration",
        "internal_module", "module", "function_signature",
    }),
    "go": frozenset({"function_declaration", "method_declaration", "type_spec"}),
    "rust": frozenset({
        "function_item", "function_signature_item", "impl_item", "struct_item", "enum_item", "union_item",
        "trait_item", "mod_item", "macro_definition", "type_item",
    }),
    "c": frozenset({"function_definition", "struct_specifier", "union_specifier", "enum_specifier", "type_definition"}),
    "java": frozenset({
        "class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
        "annotation_type_declaration", "method_declaration", "constructor_declaration",
        "compact_constructor_declaration",
    }),
    "bash": frozenset({"function_definition"}),
}
_DEFINITIONS["tsx"] = _DEFINITIONS["typescript"]
_DEFINITIONS["cpp"] = _DEFINITIONS["c"] | {"class_specifier", "namespace_definition"}

WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration", "ambient_declaration"})
"""Nodes that carry a definition inside (decorators, ``export``, ``template <...>``, ``declare``): the wrapper is
the definition's boundary, the inner node its name."""
_VARIABLES = frozenset({"lexical_declaration", "variable_declaration"})
_FUNCTION_VALUES = frozenset({
    "arrow_function", "function_expression", "function", "generator_function", "class", "class_expression",
})
_SPECIFIERS_WITH_BODY = frozenset({"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"})
_NAME_MAX = 200


@dataclass
class Parsed:
    """A file's tree and the means to turn its byte offsets into the text's character offsets."""

    language: str
    tree: Any
    data: bytes
    _lead: np.ndarray | None
    """Characters before each byte offset (None: ASCII, where they are equal)."""

    def char(self, byte: int) -> int:
        if self._lead is None:
            return byte
        return int(self._lead[byte])


def parse_reason(text: str, language: str) -> str | None:
    """Why ``text`` is not cut by its syntax before any parsing (None: it may be parsed)."""
    if len(text) >= MAX_CODE_CHARS:
        return f"longer than {MAX_CODE_CHARS:,} characters"
    if "\0" in text:
        return "holds a NUL character"
    if _longest_line(text) >= MAX_LINE_CHARS:
        return f"has a line of {MAX_LINE_CHARS:,} characters or more (minified?)"
    if grammar(language) is None:
        return f"no grammar for {language} (install ragtui[code])"
    return None


def _longest_line(text: str) -> int:
    """The length of the longest line (between ``\n``), one pass without copies."""
    longest, at = 0, 0
    while True:
        nl = text.find("\n", at)
        end = len(text) if nl < 0 else nl
        longest = max(longest, end - at)
        if nl < 0:
            return longest
        at = nl + 1


def parse(text: str, language: str) -> tuple[Parsed | None, str | None]:
    """(the parsed file, None), or (None, why the plain chunker must cut it)."""
    reason = parse_reason(text, language)
    if reason is not None:
        return None, reason
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None, "not encodable as UTF-8 (a lone surrogate)"
    import tree_sitter

    parser = tree_sitter.Parser(grammar(language))
    tree = parser.parse(data)
    if tree is None:
        return None, "the parser gave no tree"
    root = tree.root_node
    if root.has_error and _error_bytes(root) > MAX_ERROR_SHARE * max(1, len(data)):
        return None, "mostly unparsable"
    lead = None
    if not text.isascii():
        raw = np.frombuffer(data, dtype=np.uint8)
        lead = np.zeros(len(data) + 1, dtype=np.int64)
        np.cumsum((raw & 0xC0) != 0x80, out=lead[1:])
    return Parsed(language, tree, data, lead), None


def _error_bytes(root: Any) -> int:
    """Bytes inside ERROR nodes (the outermost ones), visiting only subtrees that hold an error."""
    total = 0
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error:
            total += node.end_byte - node.start_byte
            continue
        stack.extend(c for c in node.children if c.has_error)
    return total


def body_types() -> frozenset[str]:
    return _BODIES


def definition(node: Any, language: str) -> tuple[str, ...] | None:
    """The name of ``node`` as a path (``("Foo", "bar")`` for Go's ``func (f *Foo) bar``, C++'s
    ``Foo::bar`` or Rust's ``impl Foo``), when it is a definition; else None."""
    kinds = _DEFINITIONS.get(language)
    if kinds is None:
        return None
    t = node.type
    if t in WRAPPERS:
        inner = _wrapped(node)
        return None if inner is None else definition(inner, language)
    if t == "expression_statement" and language in ("typescript", "tsx"):
        inner = node.named_children[0] if node.named_child_count == 1 else None
        return definition(inner, language) if inner is not None and inner.type == "internal_module" else None
    if t in _VARIABLES and language in ("javascript", "typescript", "tsx"):
        return _variable_name(node)
    if language == "go" and t == "type_declaration":
        specs = [c for c in node.named_children if c.type == "type_spec"]
        return definition(specs[0], language) if len(specs) == 1 else None
    if t not in kinds:
        return None
    if t in _SPECIFIERS_WITH_BODY and node.child_by_field_name("body") is None:
        return None  # `struct S s;` names a type, it does not define one
    if t == "method_declaration" and language == "go":
        name = _text(node.child_by_field_name("name"))
        receiver = _go_receiver(node.child_by_field_name("receiver"))
        return _path(receiver, name)
    if t == "impl_item":
        return _path(_type_name(node.child_by_field_name("type")))
    if t == "function_definition" and language in ("c", "cpp"):
        return _c_function_name(node.child_by_field_name("declarator"))
    if t == "type_definition":
        return _path(_c_declarator_name(node.child_by_field_name("declarator")))
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return None
    if name_node.type in ("nested_namespace_specifier", "qualified_identifier", "scoped_identifier"):
        return _path(*_split_qualified(_text(name_node)))
    return _path(_text(name_node))


def _wrapped(node: Any) -> Any | None:
    for field in ("definition", "declaration"):
        inner = node.child_by_field_name(field)
        if inner is not None:
            return inner
    named = [c for c in node.named_children if c.type not in TRIVIA and c.type not in (
        "decorator", "template_parameter_list", "requires_clause")]
    return named[-1] if node.type in ("template_declaration", "ambient_declaration") and named else None


def _variable_name(node: Any) -> tuple[str, ...] | None:
    """``const f = () => ...`` (one declarator whose value is a function or class) is the definition of f."""
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    value = declarators[0].child_by_field_name("value")
    if value is None or value.type not in _FUNCTION_VALUES:
        return None
    name = declarators[0].child_by_field_name("name")
    return _path(_text(name)) if name is not None and name.type == "identifier" else None


def _go_receiver(params: Any) -> str:
    if params is None:
        return ""
    for p in params.named_children:
        t = p.child_by_field_name("type")
        if t is not None:
            return _type_name(t)
    return ""


def _type_name(t: Any) -> str:
    """The bare name of a type: ``*Foo`` -> Foo, ``Foo<T>`` -> Foo, ``a::b::Foo`` -> Foo."""
    stack = [t]
    seen = 0
    while stack and seen < 64:
        seen += 1
        node = stack.pop()
        if node is None:
            continue
        if node.type in ("type_identifier", "identifier", "primitive_type"):
            return _text(node)
        if node.type in ("scoped_type_identifier", "qualified_type"):
            name = node.child_by_field_name("name")
            if name is not None:
                return _text(name)
        inner = node.child_by_field_name("type")
        if inner is not None:
            stack.append(inner)
            continue
        stack.extend(reversed(node.named_children))
    return ""


def _c_function_name(declarator: Any) -> tuple[str, ...] | None:
    """The name in a C/C++ function declarator chain: ``*f(int)`` -> f, ``A::m`` -> A.m."""
    node = declarator
    for _ in range(64):
        if node is None:
            return None
        if node.type == "function_declarator":
            name = node.child_by_field_name("declarator")
            if name is None:
                return None
            if name.type in ("qualified_identifier", "scoped_identifier"):
                return _path(*_split_qualified(_text(name)))
            if name.type in ("identifier", "field_identifier", "destructor_name", "operator_name"):
                return _path(_text(name))
            node = name
            continue
        node = node.child_by_field_name("declarator")
    return None


def _c_declarator_name(declarator: Any) -> str:
    node = declarator
    for _ in range(64):
        if node is None:
            return ""
        if node.type in ("type_identifier", "identifier", "primitive_type"):
            return _text(node)
        node = node.child_by_field_name("declarator")
    return ""


def _split_qualified(text: str) -> list[str]:
    return [p.strip() for p in text.split("::")]


def _text(node: Any) -> str:
    if node is None:
        return ""
    raw: bytes = node.text or b""
    return raw[: _NAME_MAX * 4].decode("utf-8", errors="replace")


def _path(*parts: str) -> tuple[str, ...] | None:
    clean = tuple(" ".join(p.split())[:_NAME_MAX] for p in parts if p and p.strip())
    return clean or None

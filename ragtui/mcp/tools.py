"""The tools ``ragtui mcp`` serves, without the SDK: their schemas, the strict check of their arguments,
and what each does, through ``ragtui.app`` (the same functions the commands call).

    search        query, mode, k, nprobe, fusion, weight, rrf_k, depth, index -> ranked chunks
    get           ref (a chunk_id or path:Lstart-Lend), index -> text, lines, freshness
    pack          query, budget, mode, k, index -> a budgeted context (as `ragtui pack --json`)
    list_indexes  -> the indexes under the artifacts root

Arguments are checked before anything runs: an argument a tool does not take (a misspelt one
included) is an error naming the nearest one it does take, and so are a missing required argument
and a value of the wrong type or range (``UsageError``). Every tool returns a JSON-able dict.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ragtui import app
from ragtui.config import Settings
from ragtui.core.errors import NotFoundError, RagtuiError, UsageError

__all__ = ["TOOLS", "Tool", "Toolbox", "check_arguments"]

MAX_K = 200

_STRING, _INT, _NUMBER = {"type": "string"}, {"type": "integer"}, {"type": "number"}
_INDEX = {"type": "string", "description": "index id (default: the configured one, else the only one)"}
_MODES = {"type": "string", "enum": ["bm25", "flat", "ivf", "hybrid"]}


class Tool:
    """One tool: its name, description and JSON Schema of its arguments."""

    def __init__(self, name: str, description: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> None:
        self.name, self.description, self.required = name, description, required
        self.properties = properties

    @property
    def input_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.properties, "required": list(self.required),
                "additionalProperties": False}


TOOLS = (
    Tool("search", "Rank the chunks of a ragtui index for a query. Returns rank, score, chunk_id, doc_id and text.",
         {"query": {**_STRING, "description": "what to search for"},
          "mode": {**_MODES, "description": "bm25 (default), flat, ivf or hybrid"},
          "k": {**_INT, "minimum": 1, "maximum": MAX_K, "description": "number of results (default 10)"},
          "nprobe": {**_INT, "minimum": 1, "description": "ivf: lists to probe"},
          "fusion": {"type": "string", "enum": ["rrf", "weighted", "zscore"], "description": "hybrid: how to fuse"},
          "weight": {**_NUMBER, "description": "hybrid weighted fusion: the vector side's weight (0..1)"},
          "rrf_k": {**_NUMBER, "description": "hybrid rrf: the constant k"},
          "depth": {**_INT, "minimum": 1, "description": "hybrid: candidates taken from each side"},
          "index": _INDEX},
         ("query",)),
    Tool("get", "Fetch a chunk by chunk_id (docs/a.md#2) or source lines by path:Lstart-Lend, with the lines it "
         "sits on now and whether the source is still fresh.",
         {"ref": {**_STRING, "description": "a chunk_id like docs/a.md#2, or docs/a.md:L10-20"}, "index": _INDEX},
         ("ref",)),
    Tool("pack", "Search and pack the best chunks into a token budget (counted with the index's tokenizer): "
         "snippets with [path:Lstart-Lend] labels, chunk_ids, freshness, and a context fingerprint.",
         {"query": {**_STRING, "description": "what the context is for"},
          "budget": {**_INT, "minimum": 1, "maximum": 1_000_000, "description": "tokens (default 2000)"},
          "mode": {**_MODES, "description": "hybrid (default), bm25, flat or ivf"},
          "k": {**_INT, "minimum": 1, "maximum": MAX_K, "description": "chunks considered (default 50)"},
          "index": _INDEX},
         ("query",)),
    Tool("list_indexes", "List the ragtui indexes under the artifacts root, with their size and models.", {}),
)
_BY_NAME = {t.name: t for t in TOOLS}


def _nearest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_arguments(tool_name: str, arguments: object) -> dict[str, Any]:
    """``arguments`` checked against the tool's schema (``UsageError`` naming what is wrong)."""
    tool = _BY_NAME.get(tool_name)
    if tool is None:
        raise UsageError(f"unknown tool {tool_name!r}{_nearest(str(tool_name), list(_BY_NAME))}: "
                         f"the tools are {', '.join(_BY_NAME)}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise UsageError(f"{tool_name}: the arguments must be an object")
    takes = list(tool.properties)
    for key in arguments:
        if key not in tool.properties:
            what = f"takes {', '.join(takes)}" if takes else "takes no arguments"
            raise UsageError(f"{tool_name}: unknown argument {key!r}{_nearest(str(key), takes)}; {tool_name} {what}")
    for key in tool.required:
        if key not in arguments:
            raise UsageError(f"{tool_name}: the argument {key!r} is required")
    for key, value in arguments.items():
        spec = tool.properties[key]
        kind = spec["type"]
        ok = (isinstance(value, str) if kind == "string" else type(value) is int if kind == "integer"
              else type(value) in (int, float))
        if not ok:
            raise UsageError(f"{tool_name}: {key} must be {'an' if kind == 'integer' else 'a'} {kind} "
                             f"(got {type(value).__name__})")
        if "enum" in spec and value not in spec["enum"]:
            raise UsageError(f"{tool_name}: {key} must be one of {', '.join(spec['enum'])} "
                             f"(got {value!r}){_nearest(str(value), spec['enum'])}")
        if "minimum" in spec and value < spec["minimum"] or "maximum" in spec and value > spec["maximum"]:
            raise UsageError(f"{tool_name}: {key} must be from {spec.get('minimum')} to "
                             f"{spec.get('maximum', 'any')} (got {value!r})")
    return dict(arguments)


class Toolbox:
    """Runs the tools against the indexes of one artifacts root, keeping each opened index (reloaded on use)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._readers: dict[str | None, app.Reader] = {}
        self._lock = threading.Lock()

    def call(self, name: str, arguments: object) -> dict[str, Any]:
        args = check_arguments(name, arguments)
        run: Callable[[dict[str, Any]], dict[str, Any]] = getattr(self, f"_{name}")
        return run(args)

    def _reader(self, index: str | None) -> app.Reader:
        with self._lock:
            reader = self._readers.get(index)
            if reader is None:
                from dataclasses import replace

                settings = replace(self.settings, index=index) if index else self.settings
                reader = self._readers[index] = app.open_reader(settings, note=None)
            else:
                reader.retriever.reload()  # a publish since the last call is seen
            return reader

    def _search(self, args: Mapping[str, Any]) -> dict[str, Any]:
        params = {k: args[k] for k in ("nprobe", "fusion", "weight", "rrf_k", "depth") if k in args}
        reader = self._reader(args.get("index"))
        mode = args.get("mode", "bm25")
        hits = app.search_hits(reader, args["query"], mode=mode, k=args.get("k", 10), params=params)
        return {"index": reader.retriever.meta.index_id, "mode": mode,
                "results": [{"rank": h.rank, "score": h.score, "chunk_id": h.chunk_id, "doc_id": h.doc_id,
                             "text": h.text} for h in hits]}

    def _pack(self, args: Mapping[str, Any]) -> dict[str, Any]:
        from ragtui.core.pack import DEFAULT_BUDGET

        reader = self._reader(args.get("index"))
        budget = args.get("budget", self.settings.llm.get("context_tokens", DEFAULT_BUDGET))
        packed = app.pack_query(reader, args["query"], mode=args.get("mode", "hybrid"), k=args.get("k", 50),
                                budget=budget)
        return {"index": reader.retriever.meta.index_id, **packed.to_json()}

    def _get(self, args: Mapping[str, Any]) -> dict[str, Any]:
        from ragtui.core.citations import Resolver, parse_labels

        reader = self._reader(args.get("index"))
        data = reader.retriever.data
        resolver = Resolver(data)
        ref = args["ref"].strip()
        labels = parse_labels(f"[{ref}]")
        if labels and labels[0].chunk_id is None and labels[0].text == ref:
            label = labels[0]
            assert label.start_line is not None and label.end_line is not None
            if not 1 <= label.start_line <= label.end_line:
                raise UsageError(f"get: {ref!r}: lines are numbered from 1, and a range ends at or after its start")
            chunks = resolver.chunks_at(label.doc_id, label.start_line, label.end_line)
            if not chunks:
                raise NotFoundError(f"no chunk of index {data.meta.index_id!r} lies on {ref} "
                                    "(check the path and the lines)")
            source = resolver.source_text(chunks[0])
            assert source is not None  # located chunks have their source
            lines = source.split("\n")
            end = min(label.end_line, len(lines))
            return {"ref": ref, "path": label.doc_id, "source": str(chunks[0].path),
                    "lines": f"L{label.start_line}-{end}", "text": "\n".join(lines[label.start_line - 1:end]),
                    "chunks": [{"chunk_id": c.chunk_id, "status": c.status, "lines": f"L{c.start_line}-{c.end_line}"}
                               for c in chunks]}
        c = resolver.resolve(ref)
        return {"ref": ref, "chunk_id": c.chunk_id, "path": c.doc_id,
                "source": None if c.path is None else str(c.path),
                "lines": None if c.start_line is None else f"L{c.start_line}-{c.end_line}",
                "status": c.status, "fresh": c.status == "fresh", "text": c.record.text}

    def _list_indexes(self, args: Mapping[str, Any]) -> dict[str, Any]:
        from ragtui.core.ingest.publish import index_dir

        listing = app.scan_indexes(self.settings)
        out = []
        for name in listing.names:
            try:
                meta = app.open_index(index_dir(self.settings.artifacts, name), self.settings).meta
                out.append({"index_id": name, "n_chunks": meta.n_chunks, "embedding_model": meta.embedding_model,
                            "tokenizer": meta.tokenizer, "created_at": meta.created_at})
            except RagtuiError as e:  # one broken index hides no other
                out.append({"index_id": name, "error": str(e)})
        return {"artifacts": str(self.settings.artifacts), "default": self.settings.index,
                "indexes": out, "broken": [{"name": n, "problem": p} for n, p in listing.broken]}

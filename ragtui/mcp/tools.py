"""The tools ``ragtui mcp`` serves, without the SDK: their schemas, the strict check of their arguments,
and what each does, through ``ragtui.app`` and ``ragtui.request`` (the same request the commands build).

    search        query, mode, k, nprobe, the ranking options, strict, index -> ranked chunks with
                  path, lines, freshness and the index (as `ragtui search --json`)
    get           ref (a chunk_id or path:Lstart-Lend), index -> text, lines, freshness
    pack          query, budget, mode, k, nprobe, the ranking options, strict, index -> a budgeted
                  context (as `ragtui pack --json`)
    list_indexes  -> the indexes under the artifacts root

The schemas are generated from the mode table (``core.search.modes``) and the ranking options'
ranges and descriptions (``core.search.ranking_options``), the same the CLI's help reads. An
argument a tool does not take (a misspelt one included) is an error naming the nearest one it does
take, and so are a missing required argument and a value of the wrong type; values are checked by
``ragtui.request.build_request``, with the messages every front end gives (``UsageError``).
With several indexes and no ``index`` argument (and none configured), a tool is an error listing
them: an agent names the index it means. Every tool returns a JSON-able dict.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ragtui import app
from ragtui.config import Settings
from ragtui.core.errors import NotFoundError, RagtuiError, UsageError
from ragtui.core.search.modes import MODE_TABLE, MODES
from ragtui.core.search.ranking_options import BOOLEANS, CHOICES, DESCRIPTIONS, NAMES, RANGES
from ragtui.request import DEFAULT_K, DEFAULT_MODE, MAX_K, build_request

__all__ = ["TOOLS", "Tool", "Toolbox", "check_arguments"]

PACK_MODE, PACK_K = "hybrid", 50
"""``pack``'s defaults, as ``ragtui pack``'s."""

_STRING, _INT, _NUMBER, _BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
_INDEX = {"type": "string", "description": "index id (several: a,b). Default: the configured one, else the only "
                                           "one; with several indexes and none configured, name one"}


def _mode(default: str) -> dict[str, Any]:
    lines = "; ".join(f"{m.name}: {m.help}" for m in MODE_TABLE)
    return {"type": "string", "enum": list(MODES), "description": f"the ranking (default {default}). {lines}"}


def _option_schema(name: str) -> dict[str, Any]:
    """One ranking option's schema, from its range or choices and its description (the CLI's help line)."""
    if name in CHOICES:
        spec: dict[str, Any] = {"type": "string", "enum": list(CHOICES[name])}
    elif name in BOOLEANS:
        spec = dict(_BOOLEAN)
    else:
        lo, hi = RANGES[name]
        spec = {"type": "integer" if name == "depth" else "number", "minimum": lo, "maximum": hi}
    return {**spec, "description": DESCRIPTIONS[name]}


def _search_properties(default_mode: str, default_k: int) -> dict[str, Any]:
    return {
        "mode": _mode(default_mode),
        "k": {**_INT, "minimum": 1, "maximum": MAX_K, "description": f"number of results (default {default_k})"},
        "nprobe": {**_INT, "minimum": 1, "description": "ivf: IVF lists to probe, 1 to the index's nlist "
                   "(default: the calibrated number)"},
        **{name: _option_schema(name) for name in NAMES},
        "strict": {**_BOOLEAN, "description": "refuse a query whose syntax is malformed or names an unknown filter "
                   "(default false: it is searched as plain text, with a note)"},
        "index": _INDEX,
    }


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
    Tool("search", "Rank the chunks of a ragtui index for a query (query syntax: \"phrase\", word*, -word, OR, "
         "path:, ext:, lang:). Each hit has rank, score, chunk_id, the index, the text, and where it is now: "
         "path, start_line/end_line, status and fresh (page where the source has pages). The [search] table "
         "of ragtui.toml applies, as for `ragtui search`.",
         {"query": {**_STRING, "description": "what to search for"}, **_search_properties(DEFAULT_MODE, DEFAULT_K)},
         ("query",)),
    Tool("get", "Fetch a chunk by chunk_id (docs/a.md#2) or source lines by path:Lstart-Lend, with the lines it "
         "sits on now and whether the source is still fresh.",
         {"ref": {**_STRING, "description": "a chunk_id like docs/a.md#2, or docs/a.md:L10-20"}, "index": _INDEX},
         ("ref",)),
    Tool("pack", "Search and pack the best chunks into a token budget (counted with the index's tokenizer): "
         "snippets with [path:Lstart-Lend] labels, chunk_ids, freshness, and a context fingerprint.",
         {"query": {**_STRING, "description": "what the context is for"},
          "budget": {**_INT, "minimum": 1, "maximum": 1_000_000, "description": "tokens (default: [llm] "
                     "context_tokens, else 2000)"},
          **_search_properties(PACK_MODE, PACK_K)},
         ("query",)),
    Tool("list_indexes", "List the ragtui indexes under the artifacts root, with their size and models.", {}),
)
_BY_NAME = {t.name: t for t in TOOLS}
_SEARCH_KEYS = ("mode", "k", "nprobe", "strict", "index", *NAMES)


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
        kind = tool.properties[key]["type"]
        ok = (isinstance(value, str) if kind == "string" else type(value) is int if kind == "integer"
              else type(value) is bool if kind == "boolean" else type(value) in (int, float))
        if not ok:
            raise UsageError(f"{tool_name}: {key} must be {'an' if kind == 'integer' else 'a'} {kind} "
                             f"(got {type(value).__name__})")
    # The values themselves are checked where every front end's are (ragtui.request.build_request).
    return dict(arguments)


class Toolbox:
    """Runs the tools against the indexes of one artifacts root, keeping each opened index (reloaded on use)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._searchers: dict[tuple[str | None, bool], app.Searcher] = {}
        self._embedders: dict[str, Any] = {}
        self._lock = threading.Lock()

    def call(self, name: str, arguments: object) -> dict[str, Any]:
        args = check_arguments(name, arguments)
        run: Callable[[dict[str, Any]], dict[str, Any]] = getattr(self, f"_{name}")
        return run(args)

    def _request(self, args: Mapping[str, Any], *, default_mode: str, default_k: int) -> app.SearchRequest:
        return build_request(
            self.settings, args["query"], mode=args.get("mode"), k=args.get("k"),
            options={name: args.get(name) for name in NAMES}, nprobe=args.get("nprobe"),
            index=args.get("index", self.settings.index), strict=bool(args.get("strict", False)), style="name",
            default_mode=default_mode, default_k=default_k)

    def _searcher(self, request: app.SearchRequest, *, embedders: bool) -> app.Searcher:
        """The indexes of ``request``, opened once and moved to their newest generation at each call."""
        with self._lock:
            key = (request.index, embedders)
            searcher = self._searchers.get(key)
            if searcher is None:
                searcher = self._searchers[key] = app.open_searcher(
                    self.settings, request, embedders=embedders, note=None, remember=False, guess=False,
                    cache=self._embedders)
            else:
                searcher.reload()  # a publish since the last call is seen
                nprobe = request.params.get("nprobe")
                if nprobe is not None:
                    for retriever in searcher.retrievers.values():
                        app.check_nprobe(retriever, nprobe)
            return searcher

    def _search(self, args: Mapping[str, Any]) -> dict[str, Any]:
        request = self._request(args, default_mode=DEFAULT_MODE, default_k=DEFAULT_K)
        searcher = self._searcher(request, embedders=request.needs_embedder)
        result = app.run_search(searcher, request)
        return {"index": ",".join(result.snapshots), "mode": request.mode, "notes": list(result.notes),
                "stages": list(result.stages), "query_ms": result.seconds * 1000, "results": app.cite_hits(result)}

    def _pack(self, args: Mapping[str, Any]) -> dict[str, Any]:
        from ragtui.core.answer.pack import DEFAULT_BUDGET, check_budget

        request = self._request(args, default_mode=PACK_MODE, default_k=PACK_K)
        budget = check_budget(args.get("budget", self.settings.llm.get("context_tokens", DEFAULT_BUDGET)))
        searcher = self._searcher(request, embedders=True)
        result = app.run_search(searcher, request)
        packed = app.pack_result(result, budget)
        return {"index": ",".join(result.snapshots), **app.pack_json(result, packed)}

    def _get(self, args: Mapping[str, Any]) -> dict[str, Any]:
        from ragtui.core.citations import Resolver, parse_labels

        index = args.get("index", self.settings.index)
        request = build_request(self.settings, "get", index=index, style="name")
        searcher = self._searcher(request, embedders=False)
        if searcher.several:
            raise UsageError("get: name one index (a chunk_id belongs to one)")
        data = searcher.only.snapshot().data
        resolver = Resolver(data)
        ref = args["ref"].strip()
        labels = parse_labels(f"[{ref}]")
        if labels and labels[0].chunk_id is None and labels[0].text == ref:
            label = labels[0]
            assert label.start_line is not None and label.end_line is not None
            if label.page is not None:  # lines of pages: the same lines of the document's text
                from dataclasses import replace

                a = resolver.document_line(label.doc_id, label.page, label.start_line)
                b = resolver.document_line(label.doc_id, label.page_end or label.page, label.end_line)
                if a is None or b is None:
                    raise NotFoundError(f"get: {ref!r}: {label.doc_id!r} has no such page and line")
                label = replace(label, start_line=a, end_line=b)
            if label.start_line is None or label.end_line is None or not 1 <= label.start_line <= label.end_line:
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
                    "lines": f"L{label.start_line}-{end}",
                    # A page's first line starts after the page break (form feed) that ends the page before.
                    "text": "\n".join(lines[label.start_line - 1:end]).removeprefix("\f" if label.page else ""),
                    "chunks": [{"chunk_id": c.chunk_id, "status": c.status, "lines": f"L{c.start_line}-{c.end_line}"}
                               for c in chunks]}
        c = resolver.resolve(ref)
        out = {"ref": ref, "chunk_id": c.chunk_id, "path": c.doc_id,
               "source": None if c.path is None else str(c.path),
               "lines": None if c.start_line is None else f"L{c.start_line}-{c.end_line}",
               "status": c.status, "fresh": c.status == "fresh", "text": c.record.text}
        if c.page is not None:
            out.update(page=c.page, page_end=c.page_end, place=c.place)
        return out

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

"""The application layer: settings -> which index -> open it with which embedder -> build the watch agent.

The CLI's commands, the TUI and (later) the MCP server call these functions
and decide none of this themselves, so a flag, a config key or a rule about
which index to open means the same thing in every front end::

    settings = settings_from(config=..., index=...)    # flags > RAGTUI_* > ragtui.toml > defaults
    request = build_request(settings, "tar archive", mode="hybrid")   # one checked request (ragtui.request)
    result = run_search(open_searcher(settings, request), request)  # each index with its own embedder
    job = folder_settings("docs/", "watch")        # a folder, its index id and walk rules
    agent = build_agent(job.settings, job.folder, job.rules, index_id=job.index_id)

Errors are ``ragtui.core.errors`` classes with a one-line message the CLI
prints as it is: ``UsageError`` (exit 2) for a bad flag or no usable index,
with ``NoIndex`` and ``SeveralIndexes`` carrying what a UI needs to say more.
Importing this module loads no UI library and neither numpy nor watchdog;
what a function needs it imports when called.

Over 500 lines on purpose: it is the one place where front ends
decide settings, index, embedder and agent; split into several modules, the
forks this layer removed (each front end choosing the index its own way)
would have room to come back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ragtui.config import ROOT_FLAGS, Settings, load_settings, user_state_dir
from ragtui.core.errors import RagtuiError, StorageError, UsageError
from ragtui.request import (
    Searcher,
    SearchRequest,
    SearchResult,
    build_request,
    cite_hits,
    pack_hits,
    pack_json,
    pack_result,
    request_params,
    run_search,
    search_options,
)

if TYPE_CHECKING:
    from ragtui.core.ingest.walk import WalkRules
    from ragtui.core.search.ivf import IVFParams
    from ragtui.core.search.retriever import Retriever
    from ragtui.watch import WatchAgent

__all__ = [
    "DEFAULT_RECONCILE_EVERY",
    "FolderSettings",
    "IndexListing",
    "NoIndex",
    "SearchRequest",
    "SearchResult",
    "Searcher",
    "SeveralIndexes",
    "broken_note",
    "build_agent",
    "build_request",
    "check_nprobe",
    "cite_hits",
    "embedder_for",
    "embedder_options_for",
    "folder_settings",
    "index_id_for",
    "ivf_params",
    "list_indexes",
    "open_embedder",
    "open_index",
    "open_reranker",
    "open_retrievers",
    "open_searcher",
    "pack_hits",
    "pack_json",
    "pack_result",
    "prepare_root",
    "remember_index",
    "remembered_index",
    "request_params",
    "resolve_index",
    "resolve_indexes",
    "root_hint",
    "run_search",
    "scan_indexes",
    "search_options",
    "settings_from",
    "walk_rules",
    "with_rerank",
]

DEFAULT_RECONCILE_EVERY = 600.0
"""Seconds between the watch agent's full reconciles of its folder (``ragtui watch --reconcile-every``)."""


# -- settings -------------------------------------------------------------------------------------


def settings_from(*, config: str | os.PathLike | None = None, artifacts: str | os.PathLike | None = None,
                  index: str | None = None) -> Settings:
    """The settings for a front end's --config, --artifacts and --index values over the usual layers."""
    return load_settings(config=config).with_flags(artifacts=artifacts, index=index)


def root_hint(settings: Settings) -> str:
    """What chose the artifacts root and how to choose another (every message about the root ends with it)."""
    return f"artifacts root chosen by {settings.artifacts_from}; {ROOT_FLAGS} chooses another"


def prepare_root(settings: Settings) -> None:
    """Create ``<artifacts>/rag`` if need be (``StorageError`` naming the flags when it cannot be).

    Called before a folder is read, so a root that cannot be created costs a
    clear message, not a walk and an embedding run that fail at the lock.
    """
    from ragtui.core.ingest.publish import rag_root

    root = rag_root(settings.artifacts)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(f"cannot write the indexes under {root}: {e.strerror or e} ({root_hint(settings)})") from None


def index_id_for(folder: str | os.PathLike, settings: Settings) -> str:
    """The index a folder is ingested into: the configured ``index``, else the folder's name."""
    return settings.index or Path(os.path.abspath(folder)).name


def walk_rules(include=None, exclude=None, max_bytes: int | None = None, ignore_files: bool = True,
               kinds=None) -> WalkRules:
    """The ``WalkRules`` for the walk flags (None: the default); ``UsageError`` for a bad pattern or size.

    ``kinds`` (names of document kinds, ``[ingest] kinds`` or ``--no-documents``) narrows the default
    names to those kinds' files; ``include`` patterns, when given, replace the names whatever the kinds.
    """
    from ragtui.core.documents import KINDS, names_for
    from ragtui.core.ingest.patterns import check_patterns
    from ragtui.core.ingest.walk import DEFAULT_INCLUDE, DEFAULT_MAX_BYTES, WalkRules

    if max_bytes is not None and max_bytes < 1:
        raise UsageError(f"--max-bytes must be at least 1 (got {max_bytes})")
    # A pattern that is not one is bad usage (exit 2) before anything is read or written.
    check_patterns(tuple(include or ()), "--include")
    check_patterns(tuple(exclude or ()), "--exclude")
    default = DEFAULT_INCLUDE
    if kinds is not None and set(kinds) != {k.name for k in KINDS}:
        default = names_for(tuple(kinds))
    return WalkRules(
        include=tuple(include) if include else default,
        exclude=tuple(exclude or ()),
        max_bytes=max_bytes or DEFAULT_MAX_BYTES,
        ignore_files=ignore_files,
    )


class FolderSettings(NamedTuple):
    """What ``ingest`` and ``watch`` work with (unpacks as ``settings, folder, index_id, rules``)."""

    settings: Settings
    folder: Path
    index_id: str
    rules: WalkRules


def folder_settings(folder: str | os.PathLike, verb: str, *, config: str | os.PathLike | None = None,
                    artifacts: str | os.PathLike | None = None, index: str | None = None,
                    max_tokens: int | None = None, overlap: int | None = None, include=None, exclude=None,
                    max_bytes: int | None = None, ignore_files: bool = True,
                    no_documents: bool = False) -> FolderSettings:
    """Settings, folder, index id and walk rules for ``ingest`` and ``watch`` (the values of
    ``commands.options.add_folder_options``' flags).

    ``verb`` says what is done to the folder, for the message when it is not one (``UsageError``).
    Nothing is created: the command calls ``prepare_root`` once its other inputs (the embedder's
    options among them) are checked, so a usage error leaves no trace on disk.
    """
    settings = load_settings(config=config).with_flags(artifacts=artifacts, max_tokens=max_tokens, overlap=overlap)
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"{path} is not a folder: give the folder of documents to {verb}")
    index_id = index or index_id_for(path, settings)
    kinds = ("text",) if no_documents else settings.kinds
    rules = walk_rules(include, exclude, max_bytes, ignore_files=ignore_files, kinds=kinds)
    return FolderSettings(settings, path, index_id, rules)


# -- which index ----------------------------------------------------------------------------------


class IndexListing(NamedTuple):
    """What ``<artifacts>/rag/`` holds."""

    names: list[str]
    """The index ids whose entry is a directory (or a link to one), sorted."""
    broken: list[tuple[str, str]]
    """(name, problem) of the entries that cannot be an index: a link loop, a link to nothing, no permission."""


class NoIndex(UsageError):
    """There is no index to open (or not the one named); ``broken`` lists (name, problem) of the entries
    under rag/ that are broken, ``names`` the indexes that exist (some, when the one named is not among them)."""

    def __init__(self, message: str, broken: list[tuple[str, str]], names: list[str] | None = None) -> None:
        super().__init__(message)
        self.broken, self.names = broken, names or []


class SeveralIndexes(UsageError):
    """There are several indexes and none was named: ``names`` are the choices (a UI asks which one)."""

    def __init__(self, message: str, names: list[str], broken: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.names, self.broken = names, broken


def scan_indexes(settings: Settings) -> IndexListing:
    """The indexes under the artifacts root, and the broken entries beside them (one bad entry hides no other)."""
    import errno

    from ragtui.core.ingest.publish import rag_root

    root = rag_root(settings.artifacts)
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return IndexListing([], [])
    except OSError as e:
        raise UsageError(f"cannot list {root}: {e.strerror}") from None
    names, broken = [], []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_dir():
                names.append(entry.name)
            elif entry.is_symlink():
                gone = not os.path.lexists(os.path.realpath(entry.path))
                broken.append((entry.name, "a link to nothing (its generation is gone)" if gone
                               else "a link to something that is not a directory"))
        except OSError as e:
            broken.append((entry.name, "a loop of symbolic links" if e.errno == errno.ELOOP else e.strerror or str(e)))
    return IndexListing(sorted(names), sorted(broken))


def list_indexes(settings: Settings) -> list[str]:
    """The index ids under the artifacts root, sorted (broken entries left out: see ``scan_indexes``)."""
    return scan_indexes(settings).names


def broken_note(settings: Settings, broken: list[tuple[str, str]]) -> str:
    """One line naming the broken entries under rag/ and what to do about them."""
    from ragtui.core.ingest.publish import rag_root

    root = rag_root(settings.artifacts)
    what = "; ".join(f"{root / name} is not a usable index ({problem})" for name, problem in broken)
    return f"{what}: remove it, or rebuild it with `ragtui ingest FOLDER --index ID`"


def _note_on_stderr(text: str) -> None:
    print(f"ragtui: note: {text}", file=sys.stderr)


def resolve_index(settings: Settings, *, note: Callable[[str], None] | None = _note_on_stderr,
                  cwd: str | os.PathLike | None = None, guess: bool = True) -> Path:
    """The directory of the index to use: ``settings.index``, else the one the situation makes clear.

    With several indexes and none named, the choice is clear when the current
    directory (``cwd``, default the process's) lies inside the folder one of
    them was built from (the innermost such folder wins), else when one of
    them was used last (``remembered_index``); otherwise (and always when not ``guess``: an agent's
    request names its index) ``SeveralIndexes``.
    ``NoIndex`` when there is none, or when the named one does not exist (its
    message lists those that do). ``note`` receives a line saying which index
    was picked among several and about broken entries beside a good one (by
    default printed on stderr, as every command does; None: say nothing).
    """
    from ragtui.core.ingest.publish import index_dir

    if settings.index:
        path = index_dir(settings.artifacts, settings.index)
        if os.path.lexists(path):
            return path  # opening it says what is wrong with it, if anything
        names, broken = scan_indexes(settings)
        there = f"the indexes there: {', '.join(names)}" if names else "it holds none"
        raise NoIndex(f"no index {settings.index!r} under {settings.artifacts}/rag ({there}; "
                      f"{root_hint(settings)})", broken, names)
    names, broken = scan_indexes(settings)
    also = f"; {broken_note(settings, broken)}" if broken else ""
    if len(names) == 1:
        if broken and note is not None:
            note(f"{broken_note(settings, broken)}; using {names[0]}")
        return index_dir(settings.artifacts, names[0])
    if not names:
        raise NoIndex(
            f"no index under {settings.artifacts}/rag: build one with `ragtui ingest FOLDER` "
            f"({root_hint(settings)}){also}", broken
        )
    picked = _clear_choice(settings, names, cwd, note) if guess else None
    if picked is not None:
        name, why = picked
        if note is not None:
            note(f"using index {name} ({why}; --index ID chooses another of {', '.join(names)}){also}")
        return index_dir(settings.artifacts, name)
    listed = ", ".join(names)
    how = "--index" if guess else "the index argument"
    raise SeveralIndexes(f"several indexes under {settings.artifacts}/rag ({listed}): choose one with {how} "
                         f"({root_hint(settings)}){also}", names, broken)


def resolve_indexes(settings: Settings, *, every: bool = False) -> list[Path] | None:
    """The indexes a search over several names: all of them (``every``: ``--all``), or ``--index a,b``.

    None when one index is meant (no comma in ``settings.index``, or an index of exactly that
    name exists: a comma is a legal character of an index id). Each named index must exist
    (``NoIndex`` listing those that do); a name given twice counts once.
    """
    from ragtui.core.ingest.publish import check_index_id, index_dir

    if every:
        names, broken = scan_indexes(settings)
        if not names:
            raise NoIndex(f"no index under {settings.artifacts}/rag: build one with `ragtui ingest FOLDER` "
                          f"({root_hint(settings)})", broken)
        return [index_dir(settings.artifacts, n) for n in names]
    wanted = settings.index or ""
    if "," not in wanted or os.path.lexists(index_dir(settings.artifacts, wanted)):
        return None
    parts = list(dict.fromkeys(p.strip() for p in wanted.split(",")))
    if "" in parts:
        raise UsageError(f"--index {wanted!r} names an empty index id: separate the ids with single commas")
    names, broken = scan_indexes(settings)
    for name in parts:
        check_index_id(name)
        if name not in names:
            there = f"the indexes there: {', '.join(names)}" if names else "it holds none"
            raise NoIndex(f"no index {name!r} under {settings.artifacts}/rag ({there}; {root_hint(settings)})",
                          broken, names)
    return [index_dir(settings.artifacts, n) for n in parts]


def open_retrievers(settings: Settings, paths: list[Path], *, need_embedder: bool) -> dict[str, Retriever]:
    """Each index of ``paths`` opened (index id -> retriever, in order), each with the embedder it was built
    with when ``need_embedder`` (``embedder_for``: one per model); BM25 needs no embedder."""
    cache: dict[str, Any] = {}
    out = {}
    for path in paths:
        retriever = open_index(path, settings)
        if need_embedder:
            retriever.embedder = embedder_for(settings, retriever.meta, cache)
        out[path.name] = retriever
    return out


def _clear_choice(settings: Settings, names: list[str], cwd: str | os.PathLike | None,
                  note: Callable[[str], None] | None = None) -> tuple[str, str] | None:
    """(index id, why) when one of several indexes is the clear choice, else None."""
    from ragtui.core.citations import source_folder

    here = os.path.realpath(os.getcwd() if cwd is None else cwd)
    inside: list[tuple[int, str]] = []
    for name in names:
        try:
            folder = source_folder(settings.artifacts, name)
        except (OSError, RagtuiError):
            folder = None  # no usable writer state: this index cannot claim the directory
        if folder is None:
            continue
        real = os.path.realpath(folder)
        if here == real or here.startswith(real.rstrip(os.sep) + os.sep):
            inside.append((len(real), name))
    if inside:
        inside.sort(reverse=True)
        if len(inside) == 1 or inside[0][0] != inside[1][0]:  # two indexes of the same folder: not clear
            return inside[0][1], "its folder holds the current directory"
    last = remembered_index(settings, note)
    if last in names:
        return last, "used last"
    return None


# -- the index used last --------------------------------------------------------------------------

_LAST_NAME = "last-index.json"
_LAST_MAX_BYTES = 64 * 1024
_LAST_MAX_ROOTS = 64


def _last_path() -> Path:
    return user_state_dir() / _LAST_NAME


def _read_last(note: Callable[[str], None] | None = None) -> dict[str, str]:
    """The remembered {artifacts root: index id}; {} for anything unreadable or malformed (it only saves a question).

    A file that is not a regular file of at most 64 KiB (a FIFO, a link, a device, a folder) is ignored,
    with a line to ``note``: the next command that picks an index writes a new one in its place.
    """
    import json

    from ragtui.core.files import read_file

    path = _last_path()
    try:
        raw = read_file(path, _LAST_MAX_BYTES, follow=False, what="the index used last")
        doc = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as e:
        if note is not None:
            note(f"ignored {path}: {e.strerror or e} (it only remembers the index used last: remove it, "
                 "or let the next ingest or search replace it)")
        return {}
    except ValueError:
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("last"), dict):
        return {}
    return {k: v for k, v in doc["last"].items() if isinstance(k, str) and isinstance(v, str)}


def remembered_index(settings: Settings, note: Callable[[str], None] | None = None) -> str | None:
    """The index id used last under this artifacts root (None when none was remembered)."""
    return _read_last(note).get(os.path.abspath(settings.artifacts))


def remember_index(settings: Settings, index_id: str) -> None:
    """Remember ``index_id`` as the one used last under this artifacts root, in the user's state folder.

    Outside every index folder; written whole to a temporary file and renamed
    over the old one. Best effort: a state folder that cannot be written only
    means the next command may ask again.
    """
    import json

    from ragtui.core.files import replace_file

    known = _read_last()
    root = os.path.abspath(settings.artifacts)
    if known.get(root) == index_id:
        return
    known.pop(root, None)
    known[root] = index_id
    known = dict(list(known.items())[-_LAST_MAX_ROOTS:])  # the roots used most recently
    path = _last_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, json.dumps({"last": known}, indent=1).encode("utf-8"))
    except OSError:
        pass


# -- opening it -----------------------------------------------------------------------------------


def open_embedder(settings: Settings, *, warm: bool = True):
    """The configured embedder (``[embedder] kind`` and its options); ``UsageError`` for a bad option.

    ``warm``: have its model files read now (the embedded embedder reads them
    on first use otherwise), so that the first search does not wait for them;
    ``ragtui ingest`` passes False, since a sync that finds nothing to do
    never needs them.
    """
    from ragtui.core.embedders import make_embedder

    options = dict(settings.embedder)
    kind = options.pop("kind", "wordllama")
    embedder = make_embedder(kind, **options)
    if warm:
        warm_embedder(embedder)
    return embedder


def warm_embedder(embedder) -> None:
    """Have an embedder that reads its model files on first use read what a query needs now."""
    warm = getattr(embedder, "warm", None)
    if warm is not None:
        warm()
    elif getattr(embedder, "tokenizer_name", None) is not None:
        embedder.tokenizer  # noqa: B018  (reads the model files of an embedder that waits for first use)


def ivf_params(settings: Settings) -> IVFParams | None:
    """The configured ``IVFParams``, or None for the defaults."""
    from ragtui.core.search.ivf import IVFParams

    if settings.nlist or settings.nprobe:
        return IVFParams(nlist=settings.nlist, nprobe=settings.nprobe)
    return None


def open_index(path: Path, settings: Settings, *, embedder=None, check_embedder: bool = True) -> Retriever:
    """Open and validate the index at ``path`` with the configured IVF parameters and the shared IVF cache.

    Without an embedder BM25 works at once; with one (and ``check_embedder``)
    a model that differs from the index's is a ``ModelMismatchError``.
    """
    from ragtui.core.ingest.publish import rag_root
    from ragtui.core.search.retriever import VECTOR_SCANS, Retriever

    if settings.vector_scan not in VECTOR_SCANS:
        raise UsageError(f"[vectors] scan must be one of {', '.join(VECTOR_SCANS)} (got {settings.vector_scan!r})")
    retriever = Retriever.open(path, embedder=embedder, ivf_params=ivf_params(settings),
                               cache_dir=rag_root(settings.artifacts) / ".cache", vector_scan=settings.vector_scan)
    if embedder is not None and check_embedder:
        retriever.check_embedder(embedder)
    return retriever


def with_rerank(settings: Settings, n: int, budget_ms: float | None, model: str | None = None) -> Settings:
    """``settings`` whose ``[rerank]`` table holds ``n``, ``budget_ms`` and ``model`` (a preset name or a folder)."""
    from dataclasses import replace

    table = {**settings.rerank, "n": n, "budget_ms": budget_ms or 0}
    if model is not None:
        from ragtui.core.embedders.onnx_model import is_preset_name

        table.pop("model", None)
        table.pop("model_dir", None)
        table["model" if is_preset_name(model) else "model_dir"] = model
    return replace(settings, rerank=table)


def open_reranker(settings: Settings, model: str | None = None):
    """The cross-encoder the ``[rerank]`` settings (or ``model``: a preset name or a folder) name."""
    from ragtui.core.search.rerank import make_reranker

    return make_reranker(settings.rerank, model=model)


# -- the watch agent ------------------------------------------------------------------------------


def build_agent(
    settings: Settings,
    folder: str | os.PathLike,
    rules: WalkRules | None = None,
    *,
    index_id: str | None = None,
    embedder=None,
    quiet_seconds: float = 0.1,
    reconcile_every: float | None = DEFAULT_RECONCILE_EVERY,
    poll: bool = False,
    poll_seconds: float = 1.0,
    on_publish: Callable[[Any], None] | None = None,
    on_sync: Callable[[Any], None] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
    on_event: Callable[[Any], None] | None = None,
    on_idle: Callable[[], None] | None = None,
    idle_seconds: float = 600.0,
) -> WatchAgent:
    """The sync agent keeping ``folder``'s index fresh, not started; ``ragtui watch`` and ``ragtui --watch``
    both build theirs here, so both reconcile every ``reconcile_every`` seconds (None: never) and walk
    the folder by the same rules (``rules``; None: ``walk_rules()``, the defaults with .gitignore/.ignore).

    ``index_id`` defaults to ``index_id_for(folder, settings)``; ``embedder`` to ``open_embedder(settings)``.
    The callbacks are ``WatchAgent``'s and run on the agent's thread.
    """
    from ragtui.watch import WatchAgent

    return WatchAgent(
        folder,
        artifacts=settings.artifacts,
        embedder=open_embedder(settings) if embedder is None else embedder,
        index_id=index_id or index_id_for(folder, settings),
        rules=walk_rules() if rules is None else rules,
        max_tokens=settings.max_tokens,
        overlap=settings.overlap,
        quiet_seconds=quiet_seconds,
        reconcile_every=reconcile_every,
        poll=poll,
        poll_seconds=poll_seconds,
        on_publish=on_publish,
        on_sync=on_sync,
        on_error=on_error,
        on_event=on_event,
        on_idle=on_idle,
        idle_seconds=idle_seconds,
    )


# -- the index's own embedder ---------------------------------------------------------------------


def _configured_kind(settings: Settings) -> str:
    return str(settings.embedder.get("kind", "wordllama"))


def embedder_setting_for(meta: Any) -> str:
    """The setting to add so that an index embedded with ``meta.embedding_model`` can be searched."""
    model = meta.embedding_model
    return (f'set [embedder] kind = "http", model = "{model}" and the base_url of a server that serves it in '
            f"your ragtui.toml (or RAGTUI_EMBEDDER=http RAGTUI_EMBED_MODEL={model} RAGTUI_EMBED_URL=...); for an "
            f'ONNX model folder, kind = "onnx:/path/to/its/folder"')


def embedder_options_for(settings: Settings, meta: Any) -> tuple[str, dict[str, Any]] | None:
    """(kind, options) of the embedder that made an index whose meta.json says ``meta``, or None.

    In this order: the configured embedder when it names that model (an HTTP model, the
    embedded default); the embedded default (its name is fixed); an ONNX preset whose files
    carry that name (``onnx:bge-small``); the configured ONNX embedder (a folder), checked
    against the index once built. The configured embedder's own options (threads, timeouts)
    come along when its kind is the one chosen.
    """
    from ragtui.core.embedders.onnx_model import EMBEDDER_PRESETS
    from ragtui.core.embedders.wordllama import MODEL_NAME

    configured = dict(settings.embedder)
    kind = str(configured.pop("kind", "wordllama"))
    model = meta.embedding_model
    if kind == "http" and configured.get("model") == model:
        return "http", configured
    if model == MODEL_NAME:
        return "wordllama", configured if kind == "wordllama" else {}
    name = model.split("@", 1)[0]
    onnx_options = {k: v for k, v in configured.items() if k in ("threads", "optimization", "batch_size",
                                                                  "max_batch_tokens")} if kind.startswith("onnx") else {}
    for preset, spec in EMBEDDER_PRESETS.items():
        if spec.name == name:
            return "onnx", {**onnx_options, "model": preset}
    if kind.startswith("onnx") and (configured.get("model_dir") or kind.startswith("onnx:")):
        return kind, configured
    return None


def embedder_for(settings: Settings, meta: Any, cache: dict[str, Any] | None = None, *, warm: bool = True):
    """The embedder an index needs (``embedder_options_for``), built once per model in ``cache``.

    ``ModelMismatchError`` naming the setting to add when no embedder for that model is known, or
    when the one found makes other vectors than the index's (another model behind the same name).
    """
    from ragtui.core.embedders import make_embedder
    from ragtui.core.errors import ModelMismatchError

    cache = {} if cache is None else cache
    model = meta.embedding_model
    if model in cache:
        return cache[model]
    chosen = embedder_options_for(settings, meta)
    if chosen is None:
        raise ModelMismatchError(
            f"index {meta.index_id!r} was embedded with {model!r} (dim {meta.dim}), and no embedder for it is "
            f"configured (the configured one is {_configured_kind(settings)}): {embedder_setting_for(meta)}")
    kind, options = chosen
    embedder = make_embedder(kind, **options)
    if embedder.model != model or embedder.dim != meta.dim:
        raise ModelMismatchError(
            f"index {meta.index_id!r} was embedded with {model!r} (dim {meta.dim}), but the {kind} embedder "
            f"found for it is {embedder.model!r} (dim {embedder.dim}): {embedder_setting_for(meta)}, or re-ingest "
            "the folder with the configured embedder")
    if warm:
        warm_embedder(embedder)
    cache[model] = embedder
    return embedder


# -- one request, searched -------------------------------------------------------------------------


def open_searcher(settings: Settings, request: SearchRequest, *, embedders: bool | None = None,
                  note: Callable[[str], None] | None = _note_on_stderr, remember: bool = True, guess: bool = True,
                  cache: dict[str, Any] | None = None) -> Searcher:
    """The indexes ``request`` names (``resolve_indexes``, else ``resolve_index``), each opened with its own
    embedder (``embedder_for``) when ``embedders`` (default: when the request's mode needs vectors).

    An ``nprobe`` above an index's number of IVF lists is refused here, with the range. ``guess``: with
    several indexes and none named, take the one the situation makes clear (``resolve_index``);
    ``remember``: that one becomes the index used last. ``cache`` keeps the embedders (one per model).
    """
    from dataclasses import replace

    local = replace(settings, index=request.index) if request.index != settings.index else settings
    paths = resolve_indexes(local, every=request.every)
    several = paths is not None
    if paths is None:
        paths = [resolve_index(local, note=note, guess=guess)]
    want = request.needs_embedder if embedders is None else embedders
    cache = {} if cache is None else cache
    retrievers: dict[str, Retriever] = {}
    for path in paths:
        retriever = open_index(path, local)
        if want:
            retriever.embedder = embedder_for(local, retriever.meta, cache)
        retrievers[path.name] = retriever
    if not several and remember:
        remember_index(local, paths[0].name)
    nprobe = request.params.get("nprobe")
    if nprobe is not None:
        for retriever in retrievers.values():
            check_nprobe(retriever, nprobe, "--nprobe" if request.style == "flag" else "nprobe")
    return Searcher(retrievers, several)


def check_nprobe(retriever: Retriever, nprobe: int, flag: str = "nprobe") -> None:
    """Refuse (rather than clamp) an nprobe above the index's number of IVF lists: the range is in the message."""
    from ragtui.core.search.ivf import IVFParams

    nlist = (retriever.ivf_params or IVFParams()).resolve(retriever.meta.n_chunks).nlist
    if nprobe > nlist:
        raise UsageError(f"{flag} must be between 1 and {nlist}, the number of IVF lists of index "
                         f"{retriever.meta.index_id!r} (got {nprobe}); {nlist} probes every list, as flat search does")

"""The application layer: settings -> which index -> open it with which embedder -> build the watch agent.

The CLI's commands, the TUI and (later) the MCP server call these functions
and decide none of this themselves, so a flag, a config key or a rule about
which index to open means the same thing in every front end::

    settings = settings_from(args)                 # flags > RAGTUI_* > ragtui.toml > defaults
    retriever = open_retriever(settings, need_embedder=True)
    job = folder_settings(args, "watch")           # a folder, its index id and walk rules from flags
    agent = build_agent(job.settings, job.folder, job.rules, index_id=job.index_id)

Errors are ``ragtui.core.errors`` classes with a one-line message the CLI
prints as it is: ``UsageError`` (exit 2) for a bad flag or no usable index,
with ``NoIndex`` and ``SeveralIndexes`` carrying what a UI needs to say more.
Importing this module loads no UI library and neither numpy nor watchdog;
what a function needs it imports when called.

Over 500 lines on purpose (issue #16): it is the one place where front ends
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
    "Reader",
    "SeveralIndexes",
    "broken_note",
    "build_agent",
    "folder_settings",
    "index_id_for",
    "ivf_params",
    "list_indexes",
    "open_embedder",
    "open_index",
    "open_reader",
    "open_retriever",
    "open_retrievers",
    "pack_hits",
    "pack_query",
    "prepare_root",
    "remember_index",
    "remembered_index",
    "resolve_index",
    "resolve_indexes",
    "root_hint",
    "scan_indexes",
    "search_hits",
    "search_params",
    "settings_from",
    "walk_rules",
]

DEFAULT_RECONCILE_EVERY = 600.0
"""Seconds between the watch agent's full reconciles of its folder (``ragtui watch --reconcile-every``)."""


# -- settings -------------------------------------------------------------------------------------


def settings_from(args) -> Settings:
    """The settings for parsed arguments: their --config, --artifacts and --index over the usual layers."""
    return load_settings(config=getattr(args, "config", None)).with_flags(
        artifacts=getattr(args, "artifacts", None), index=getattr(args, "index", None)
    )


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


def walk_rules(include=None, exclude=None, max_bytes: int | None = None, ignore_files: bool = True) -> WalkRules:
    """The ``WalkRules`` for the walk flags (None: the default); ``UsageError`` for a bad pattern or size."""
    from ragtui.core.ingest.patterns import check_patterns
    from ragtui.core.ingest.walk import DEFAULT_INCLUDE, DEFAULT_MAX_BYTES, WalkRules

    if max_bytes is not None and max_bytes < 1:
        raise UsageError(f"--max-bytes must be at least 1 (got {max_bytes})")
    # A pattern that is not one is bad usage (exit 2) before anything is read or written.
    check_patterns(tuple(include or ()), "--include")
    check_patterns(tuple(exclude or ()), "--exclude")
    return WalkRules(
        include=tuple(include) if include else DEFAULT_INCLUDE,
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


def folder_settings(args, verb: str) -> FolderSettings:
    """Settings, folder, index id and walk rules from the flags of ``commands.options.add_folder_options``.

    ``verb`` says what is done to the folder, for the message when it is not one (``UsageError``).
    Nothing is created: the command calls ``prepare_root`` once its other inputs (the embedder's
    options among them) are checked, so a usage error leaves no trace on disk.
    """
    settings = load_settings(config=getattr(args, "config", None)).with_flags(
        artifacts=getattr(args, "artifacts", None), max_tokens=args.max_tokens, overlap=args.overlap
    )
    folder = Path(args.folder)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder: give the folder of documents to {verb}")
    index_id = getattr(args, "index", None) or index_id_for(folder, settings)
    rules = walk_rules(args.include, args.exclude, args.max_bytes, ignore_files=not args.no_ignore)
    return FolderSettings(settings, folder, index_id, rules)


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
                  cwd: str | os.PathLike | None = None) -> Path:
    """The directory of the index to use: ``settings.index``, else the one the situation makes clear.

    With several indexes and none named, the choice is clear when the current
    directory (``cwd``, default the process's) lies inside the folder one of
    them was built from (the innermost such folder wins), else when one of
    them was used last (``remembered_index``); otherwise ``SeveralIndexes``.
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
    picked = _clear_choice(settings, names, cwd)
    if picked is not None:
        name, why = picked
        if note is not None:
            note(f"using index {name} ({why}; --index ID chooses another of {', '.join(names)}){also}")
        return index_dir(settings.artifacts, name)
    listed = ", ".join(names)
    raise SeveralIndexes(f"several indexes under {settings.artifacts}/rag ({listed}): choose one with --index "
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
    """Each index of ``paths`` opened (index id -> retriever, in order), sharing one configured embedder.

    An index embedded with another model than the configured one is a ``ModelMismatchError`` naming it
    when vectors are needed; BM25 needs no embedder.
    """
    embedder = open_embedder(settings) if need_embedder else None
    return {path.name: open_index(path, settings, embedder=embedder) for path in paths}


def _clear_choice(settings: Settings, names: list[str], cwd: str | os.PathLike | None) -> tuple[str, str] | None:
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
    last = remembered_index(settings)
    if last in names:
        return last, "used last"
    return None


# -- the index used last --------------------------------------------------------------------------

_LAST_NAME = "last-index.json"
_LAST_MAX_BYTES = 64 * 1024
_LAST_MAX_ROOTS = 64


def _last_path() -> Path:
    return user_state_dir() / _LAST_NAME


def _read_last() -> dict[str, str]:
    """The remembered {artifacts root: index id}; {} for anything unreadable or malformed (it only saves a question)."""
    import json

    try:
        with open(_last_path(), "rb") as f:
            raw = f.read(_LAST_MAX_BYTES + 1)
        if len(raw) > _LAST_MAX_BYTES:
            return {}
        doc = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("last"), dict):
        return {}
    return {k: v for k, v in doc["last"].items() if isinstance(k, str) and isinstance(v, str)}


def remembered_index(settings: Settings) -> str | None:
    """The index id used last under this artifacts root (None when none was remembered)."""
    return _read_last().get(os.path.abspath(settings.artifacts))


def remember_index(settings: Settings, index_id: str) -> None:
    """Remember ``index_id`` as the one used last under this artifacts root, in the user's state folder.

    Outside every index folder; written whole to a temporary file and renamed
    over the old one. Best effort: a state folder that cannot be written only
    means the next command may ask again.
    """
    import json

    known = _read_last()
    root = os.path.abspath(settings.artifacts)
    if known.get(root) == index_id:
        return
    known.pop(root, None)
    known[root] = index_id
    known = dict(list(known.items())[-_LAST_MAX_ROOTS:])  # the roots used most recently
    path = _last_path()
    tmp = path.with_name(f".{_LAST_NAME}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"last": known}, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
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
    if warm and getattr(embedder, "tokenizer_name", None) is not None:
        embedder.tokenizer  # noqa: B018  (reads the model files of an embedder that waits for first use)
    return embedder


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


def open_retriever(settings: Settings, *, need_embedder: bool) -> Retriever:
    """The index ``resolve_index`` picks, opened, with the configured embedder when ``need_embedder``."""
    path = resolve_index(settings)
    retriever = open_index(path, settings, embedder=open_embedder(settings) if need_embedder else None)
    remember_index(settings, path.name)
    return retriever


RANKING_FLAGS = ("fusion", "weight", "rrf_k", "depth", "lexical", "chunk_weight", "mmr", "min_score", "merge")
"""The ranking options a flag may set (``commands.options.add_ranking_options``; ``[search]`` keys)."""


def search_params(args, settings: Settings, mode: str, *, strict: bool = True) -> dict[str, Any]:
    """The ``Retriever.search`` parameters for ``mode``: flags over ``[search]`` over the defaults.

    A ``[search]`` key that ``mode`` does not take is left out (one file serves every mode), as is
    the config's weight under rrf fusion, its rrf_k under weighted and its chunk_weight under
    lexical bm25. A flag ``mode`` does not take is a ``UsageError`` when ``strict`` (search),
    else left out (eval runs several modes with one set of flags). Values are checked
    (``UsageError`` naming the allowed range).
    """
    from ragtui.core.search.ranking_options import check_option
    from ragtui.core.search.retriever import COMMON, PARAMS, check_search

    takes = set(PARAMS.get(mode, ())) | set(COMMON)
    flags: dict[str, Any] = {}
    for name in RANKING_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            flags[name] = check_option(name, value, label="--" + name.replace("_", "-"))
    out = {k: v for k, v in settings.search.items() if k in takes}
    given = {k: v for k, v in flags.items() if k in takes}
    if strict and len(given) < len(flags):
        name = next(k for k in flags if k not in takes)
        owners = [m for m, names in PARAMS.items() if name in names]
        raise UsageError(f"--{name.replace('_', '-')} applies to {' and '.join(owners)} search, not {mode}")
    fusion = given.get("fusion", out.get("fusion"))
    lexical = given.get("lexical", out.get("lexical", "bm25doc"))
    # No fusion named: the index's fit decides (fusion_fit), and a config's rrf_k is not this run's.
    for key, off in (("weight", fusion == "rrf"), ("rrf_k", fusion != "rrf"), ("chunk_weight", lexical == "bm25")):
        if off and key not in given and mode == "hybrid":
            out.pop(key, None)  # the config's value for the other method: not this run's
    out.update(given)
    check_search(mode, out)
    return out


# -- the watch agent ------------------------------------------------------------------------------


def rerank_options(args, settings: Settings) -> tuple[int, float | None]:
    """(n, budget_ms) from the --rerank* flags, else the ``[rerank]`` settings; n = 0 means off."""
    n = getattr(args, "rerank", None)
    n = settings.rerank.get("n", 0) if n is None else n
    budget = getattr(args, "rerank_budget_ms", None)
    budget = settings.rerank.get("budget_ms") if budget is None else budget
    if type(n) is not int or n < 0:
        raise UsageError(f"--rerank must be 0 (off) or a number of candidates (got {n})")
    if budget is not None and (budget != budget or budget < 0):
        raise UsageError(f"--rerank-budget-ms must be a number of milliseconds >= 0 (got {budget})")
    return n, (budget or None)


def with_rerank_flags(args, settings: Settings) -> Settings:
    """``settings`` whose ``[rerank]`` table holds the --rerank* flags (checked)."""
    from dataclasses import replace

    n, budget = rerank_options(args, settings)
    table = {**settings.rerank, "n": n, "budget_ms": budget or 0}
    model = getattr(args, "rerank_model", None)
    if model is not None:
        from ragtui.core.embedders.onnx_model import is_preset_name

        table.pop("model", None)
        table.pop("model_dir", None)
        table["model" if is_preset_name(model) else "model_dir"] = model
    return replace(settings, rerank=table)


def open_reranker(args, settings: Settings):
    """The cross-encoder the settings (and a --rerank-model flag) name."""
    from ragtui.core.rerank import make_reranker

    return make_reranker(settings.rerank, model=getattr(args, "rerank_model", None))


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


# -- packing and answering (ragtui pack, ragtui ask, ragtui mcp) -----------------------------------


class Reader(NamedTuple):
    """An opened index with the embedder it was built with: what pack, ask and the MCP server search with."""

    retriever: Retriever
    tokenizer: Any
    """The index's own tokenizer (the embedder's), which counts a pack's tokens."""


def open_reader(settings: Settings, *, note: Callable[[str], None] | None = _note_on_stderr) -> Reader:
    """The index ``resolve_index`` picks, with the configured embedder; ``ModelMismatchError`` when the
    embedder (or its tokenizer) is not the one the index was built with."""
    from ragtui.core.pack import check_tokenizer

    path = resolve_index(settings, note=note)
    embedder = open_embedder(settings)
    retriever = open_index(path, settings, embedder=embedder)
    check_tokenizer(embedder.tokenizer, retriever.data)
    return Reader(retriever, embedder.tokenizer)


def search_hits(reader: Reader, query: str, *, mode: str, k: int, params: dict | None = None) -> list:
    """The top ``k`` hits for ``query`` (mode and params checked first: ``UsageError``)."""
    from ragtui.core.search.retriever import check_query, check_search

    if type(k) is not int or k < 1:
        raise UsageError(f"k must be a whole number of at least 1 (got {k!r})")
    check_query(query)
    params = {name: value for name, value in (params or {}).items() if value is not None}
    check_search(mode, params)
    return reader.retriever.search(query, mode=mode, k=k, **params)


def pack_hits(reader: Reader, query: str, hits: list, *, mode: str, budget: int):
    """``core.pack.pack`` over ``hits``, reading sources where ingest recorded the folder."""
    from ragtui.core.citations import Resolver
    from ragtui.core.pack import pack

    data = reader.retriever.data
    return pack(query, hits, data, reader.tokenizer, budget, mode=mode, resolver=Resolver(data))


def pack_query(reader: Reader, query: str, *, mode: str, k: int, budget: int, params: dict | None = None):
    """Search ``query`` and pack the top ``k`` hits into ``budget`` tokens (a ``core.pack.Pack``)."""
    from ragtui.core.pack import check_budget

    check_budget(budget)  # before the search: a bad budget costs nothing
    hits = search_hits(reader, query, mode=mode, k=k, params=params)
    return pack_hits(reader, query, hits, mode=mode, budget=budget)

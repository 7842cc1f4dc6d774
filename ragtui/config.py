"""Settings: flags > RAGTUI_* environment > ragtui.toml files > defaults; which files are trusted.

Where settings come from, each layer overriding the one before:

1. the defaults;
2. the user's config, ``$XDG_CONFIG_HOME/ragtui/ragtui.toml``
   (``~/.config/ragtui/ragtui.toml``);
3. the project's config: the file given with ``--config FILE``, else
   ``ragtui.toml`` in the current directory (a ``ragtui.toml`` inside the
   folder being ingested is a document, never a config);
4. ``RAGTUI_*`` environment variables;
5. command-line flags.

Tables merge key by key (the project's ``[chunker] overlap`` keeps the
user's ``max_tokens``), except that an ``[embedder]`` naming another
``kind`` starts that table afresh (one kind's options mean nothing to
another). Every key is optional:

    artifacts = "/artifacts"          # RAGTUI_ARTIFACTS; default: /artifacts when writable, else ~/.local/share/ragtui
    index = "docs"                    # RAGTUI_INDEX
    trusted_configs = ["/abs/path/ragtui.toml"]   # the user's config only
    [embedder]
    kind = "wordllama"                # or "http", "onnx:bge-small", "onnx:/abs/folder"   RAGTUI_EMBEDDER
    base_url = "http://127.0.0.1:8080"                    # RAGTUI_EMBED_URL
    model = "nomic-embed-text"                             # RAGTUI_EMBED_MODEL
    api_key_env = "OPENAI_API_KEY"    # the NAME of the variable holding the key
    tokenizer_file = "/abs/tokenizer.json"
    (and the HTTP client's dim, tokenize_style, tokenize_path, batch_size,
    max_batch_tokens, concurrency, timeout, retries, backoff, backoff_max,
    retry_after_max, jitter, adaptive; wordllama's batch_size; onnx's model, model_dir,
    threads, optimization, batch_size, max_batch_tokens)
    [llm]                             # the chat model of `ragtui ask` (OpenAI-compatible)
    base_url = "http://127.0.0.1:8080"                    # RAGTUI_LLM_URL
    model = "smol-135m"                                    # RAGTUI_LLM_MODEL
    api_key_env = "OPENAI_API_KEY"    # the NAME of the variable holding the key
    max_tokens = 512                  # of the answer
    temperature = 0.0
    timeout = 120                     # seconds per request
    retries = 2                       # on 429/5xx and broken connections
    context_tokens = 2000             # the pack budget of `ragtui pack` and `ragtui ask`
    context_window = 4096             # the model's context length (default: what the server says, if it does)
    [chunker]
    max_tokens = 256
    overlap = 32
    [ivf]
    nlist = 0                         # 0: derive from the index size
    nprobe = 0
    [vectors]
    scan = "f32"                      # or "i8": an int8 copy scanned first, re-scored exactly (same answers)
    [search]                          # ranking options (spec/ranking.md); flags override them
    fusion = "weighted"               # or "zscore", "rrf": how hybrid fuses (unset: fitted to the embedder)
    weight = 0.6                      # weighted fusion: the lexical share, 0..1
    rrf_k = 60                        # rrf fusion: 0..1e6
    depth = 100                       # hybrid: candidates fused from each list, whatever -k
    lexical = "bm25doc"               # hybrid's lexical side: "bm25doc", "bm25" or "bm25stem" (unset: fitted)
    chunk_weight = 0.5                # bm25doc: a chunk's own BM25 added to its document's, 0..100
    mmr = 1.0                         # 1: off; below 1 trades relevance for diversity (0..1)
    min_score = 0.0                   # a floor on the score (hybrid: its normalised 0..1 score)
    merge = false                     # merge adjacent or overlapping chunks of one document into one hit
    [rerank]                          # the cross-encoder (the onnx extra)
    n = 0                             # rerank the top n candidates (0: off)
    budget_ms = 0                     # per query; 0: no limit
    model = "ms-marco-minilm"         # a preset, or model_dir = "/abs/folder"
    threads = 2

Trust. A ``ragtui.toml`` in the current directory may have come with a
cloned repository, so it may not decide where documents and credentials go,
nor make ragtui read a file of its choosing. The keys in ``TRUSTED_ONLY``
(``base_url``, ``api_key_env``, ``tokenizer_file``, ``model_dir``, in any
table, ``[llm]`` included; the top-level ``artifacts``, since an index holds
the text it indexes; and an ``onnx:<folder>`` kind)
are taken only from a trusted file: the
user's config, a file given with ``--config FILE`` (naming it on the
command line is the trust), or a file whose real path is listed in the user
config's ``trusted_configs``. An untrusted file that sets one is refused as
a whole (``UsageError``, exit 2) with a message saying how to trust it;
nothing is read or sent first. ``trusted_configs`` is read only from the
user's config (a file cannot vouch for itself). The environment and flags
are the user's own and always count.

A key that shapes a request URL without naming its host (``tokenize_path``)
may come from any file, and is checked by the embedder as a plain path on
``base_url``'s server (no scheme, host, port, userinfo, ``..``; see
spec/embedders.md, "The API key").

Checking. Unknown keys and values of the wrong type are errors
(``UsageError``) that name the file, the key and the nearest valid key; a
typo is never silently ignored. The ranges of the embedder's options are
checked by the embedder when it is built.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ragtui.core.errors import UsageError
from ragtui.core.files import read_file

__all__ = [
    "ROOT_FLAGS", "SCHEMA", "TRUSTED_ONLY", "Settings", "default_artifacts", "load_settings", "user_cache_root",
    "user_config_path", "user_state_dir",
]

DEFAULT_ARTIFACTS = "/artifacts"
"""The contract's artifacts root: used when it exists and is writable, and never created by default."""

ROOT_FLAGS = "--artifacts DIR or RAGTUI_ARTIFACTS"
"""How to choose another artifacts root; every message about the root names them."""

TRUSTED_ONLY = frozenset({"artifacts", "base_url", "api_key_env", "tokenizer_file", "model_dir"})
"""Keys that send documents or credentials somewhere, or read a file: only a trusted config may set them.

``artifacts`` is among them because an index holds the full text of every
document ingested: a file that came with a cloned repository must not be able
to make ``ragtui ingest ~/notes`` write that text into the repository (or any
other folder it names)."""

_STR, _INT, _NUM, _STRS, _BOOL = "a string", "a whole number", "a number", "a list of strings", "true or false"

SCHEMA: dict[str, object] = {
    "artifacts": _STR,
    "index": _STR,
    "trusted_configs": _STRS,
    "embedder": {
        "kind": _STR, "base_url": _STR, "model": _STR, "api_key_env": _STR, "dim": _INT,
        "tokenize_style": _STR, "tokenize_path": _STR, "tokenizer_file": _STR, "batch_size": _INT,
        "max_batch_tokens": _INT, "concurrency": _INT, "timeout": _NUM, "retries": _INT, "backoff": _NUM,
        "backoff_max": _NUM, "retry_after_max": _NUM, "jitter": _NUM, "adaptive": _BOOL,
        "model_dir": _STR, "threads": _INT, "optimization": _STR,
    },
    "rerank": {"n": _INT, "budget_ms": _INT, "model": _STR, "model_dir": _STR, "threads": _INT},
    "chunker": {"max_tokens": _INT, "overlap": _INT},
    "ingest": {"kinds": _STRS},
    "ivf": {"nlist": _INT, "nprobe": _INT},
    "vectors": {"scan": _STR},
    "search": {
        "fusion": _STR, "weight": _NUM, "rrf_k": _NUM, "depth": _INT, "lexical": _STR, "chunk_weight": _NUM,
        "mmr": _NUM, "min_score": _NUM, "merge": _BOOL,
    },
    # After [chunker]: a top-level max_tokens is taken for chunker.max_tokens, as before [llm] had one.
    "llm": {
        "base_url": _STR, "model": _STR, "api_key_env": _STR, "max_tokens": _INT, "temperature": _NUM,
        "timeout": _NUM, "retries": _INT, "context_tokens": _INT, "context_window": _INT,
    },
}
"""Every key a ragtui.toml may hold: a table's keys, or what a value must be."""


def _writable_dir(path: Path) -> bool:
    try:
        return path.is_dir() and os.access(path, os.W_OK | os.X_OK)
    except OSError:
        return False


def _xdg(env, var: str, fallback: str) -> Path:
    """``$var``, else ``~/<fallback>``; a relative value is ignored, as the XDG base directory spec says."""
    value = env.get(var) or ""
    if not os.path.isabs(value):
        home = env.get("HOME") or str(Path.home())
        value = os.path.join(home, fallback)
    return Path(value)


def default_artifacts(environ=None, contract: str | os.PathLike = DEFAULT_ARTIFACTS) -> tuple[Path, str]:
    """(root, why) when neither a flag, RAGTUI_ARTIFACTS nor a config file names the artifacts root.

    ``contract`` (``/artifacts``) when it is a directory this process may write
    into; otherwise the user's data folder, ``$XDG_DATA_HOME/ragtui``
    (``~/.local/share/ragtui``). ``contract`` is never created here: a root
    user without ``/artifacts`` gets the data folder too, not a new folder at
    the filesystem root.
    """
    env = os.environ if environ is None else environ
    contract = Path(contract)
    if _writable_dir(contract):
        return contract, f"default: {contract} exists and is writable"
    why = "does not exist" if not os.path.lexists(contract) else "is not a writable folder"
    return (_xdg(env, "XDG_DATA_HOME", ".local/share") / "ragtui",
            f"default: {contract} {why}, so the user data folder $XDG_DATA_HOME/ragtui")


def user_cache_root(environ=None) -> Path:
    """``$XDG_CACHE_HOME/ragtui`` (``~/.cache/ragtui``): what ragtui builds for itself (``ragtui eval``'s indexes)."""
    return _xdg(os.environ if environ is None else environ, "XDG_CACHE_HOME", ".cache") / "ragtui"


def user_state_dir(environ=None) -> Path:
    """``$XDG_STATE_HOME/ragtui`` (``~/.local/state/ragtui``): the query history, the index used last."""
    return _xdg(os.environ if environ is None else environ, "XDG_STATE_HOME", ".local/state") / "ragtui"


@dataclass(frozen=True)
class Settings:
    artifacts: Path = None  # type: ignore[assignment]  # None: default_artifacts() (in __post_init__)
    """The artifacts root; when not given, ``default_artifacts()``: /artifacts only when it exists and is writable."""
    artifacts_from: str = "given"
    """What chose ``artifacts``: ``--artifacts``, ``RAGTUI_ARTIFACTS``, ``artifacts in FILE``, or ``default: <why>``."""
    index: str | None = None
    embedder: dict = field(default_factory=lambda: {"kind": "wordllama"})
    max_tokens: int = 256
    overlap: int = 32
    nlist: int | None = None
    nprobe: int | None = None
    vector_scan: str = "f32"
    """``[vectors] scan``: "f32" (default) or "i8" (core.search.quant; the same answers, a quarter of the bytes read per query)."""
    search: dict = field(default_factory=dict)
    """The ``[search]`` table, checked (``ragtui.core.search.ranking_options``); flags override it."""
    rerank: dict = field(default_factory=dict)
    """The ``[rerank]`` table: n, budget_ms, model or model_dir, threads (flags override n and budget_ms)."""
    llm: dict = field(default_factory=dict)
    """The ``[llm]`` table: the chat model of ``ragtui ask`` (``core.answer.llm.ChatClient`` checks the values)."""
    kinds: tuple[str, ...] | None = None
    """``[ingest] kinds``: the kinds of document the walk takes by name (None: every kind; spec/documents.md)."""
    config_file: Path | None = None
    """The last config file read (the project's when there is one, else the user's)."""

    def __post_init__(self) -> None:
        if self.artifacts is None:  # even a bare Settings() never points at an /artifacts it would have to create
            root, why = default_artifacts()
            object.__setattr__(self, "artifacts", root)
            object.__setattr__(self, "artifacts_from", why)

    def with_flags(self, **flags) -> Settings:
        """Apply command-line flags (``None`` means "not given")."""
        given = {k: v for k, v in flags.items() if v is not None}
        if "artifacts" in given:
            given["artifacts"] = Path(given["artifacts"]).expanduser()
            given["artifacts_from"] = "--artifacts"
        return replace(self, **given)


def user_config_path(environ=None) -> Path:
    """``$XDG_CONFIG_HOME/ragtui/ragtui.toml`` (``~/.config`` when the variable is unset or empty)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "ragtui" / "ragtui.toml"


def _is_file(path: Path) -> bool:
    """Whether something is at ``path`` (a FIFO, a folder or a device too: ``_read`` refuses those by name)."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as e:  # an unreadable config folder is the user's to fix, not a crash
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    return True


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


MAX_CONFIG_BYTES = 1 << 20
"""The largest ragtui.toml read: 1 MiB (a real one is a few hundred bytes)."""


def _read(path: Path) -> dict:
    try:
        data = read_file(path, MAX_CONFIG_BYTES, what="a ragtui.toml")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}: make it a regular file of at most 1 MiB, "
                         "or remove it") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"cannot read {path}: {e}") from None


# -- checking one file --------------------------------------------------------------------


def _type_ok(value, kind: str) -> bool:
    if kind == _STR:
        return isinstance(value, str)
    if kind == _INT:
        return type(value) is int
    if kind == _NUM:
        return type(value) in (int, float)
    if kind == _BOOL:
        return type(value) is bool
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _all_keys() -> list[str]:
    out = []
    for key, kind in SCHEMA.items():
        out += [f"{key}.{sub}" for sub in kind] if isinstance(kind, dict) else [key]
    return out


def _nearest(name: str, table: dict) -> str:
    """' (did you mean X?)' for the closest valid key, or the valid keys of that table."""
    prefix, _, leaf = name.rpartition(".")
    close = [f"{prefix}.{k}" if prefix else k for k in difflib.get_close_matches(leaf, list(table), n=1, cutoff=0.6)]
    if not close:  # a key in the wrong table: `max_tokens` at the top, `nprobe` under [chunker]
        close = [q for q in _all_keys() if difflib.get_close_matches(leaf, [q.rpartition(".")[2]], cutoff=0.8)][:1]
    if close:
        return f" (did you mean {close[0]}?)"
    where = f"[{prefix}]" if prefix else "the top level"
    return f" (keys of {where}: {', '.join(table)})"


def _check_schema(doc: dict, path: Path) -> None:
    def walk(table: dict, schema: dict, prefix: str) -> None:
        for key, value in table.items():
            name = f"{prefix}{key}"
            if key not in schema:
                raise UsageError(f"{path}: unknown key {name}{_nearest(name, schema)}")
            kind = schema[key]
            if isinstance(kind, dict):
                if not isinstance(value, dict):
                    raise UsageError(f"{path}: {name} must be a table ([{name}] followed by its keys)")
                walk(value, kind, f"{name}.")
            elif not _type_ok(value, kind):
                raise UsageError(f"{path}: {name} must be {kind} (got {json.dumps(value, default=str)})")

    walk(doc, SCHEMA, "")


def _network_keys(doc: dict) -> list[str]:
    """The ``TRUSTED_ONLY`` keys ``doc`` sets, at any depth, as dotted names."""
    found = []

    def walk(table: dict, prefix: str) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            elif key in TRUSTED_ONLY:
                found.append(f"{prefix}{key}")
            elif key == "kind" and _names_folder(value):
                found.append(f"{prefix}{key} (a model folder)")

    walk(doc, "")
    return found


def _names_folder(kind) -> bool:
    """``onnx:<folder>`` (a path, so a file of the config's choosing), not ``onnx:<preset>``."""
    if not isinstance(kind, str) or not kind.startswith("onnx:"):
        return False
    return re.fullmatch(r"[a-z0-9][a-z0-9._-]*", kind[len("onnx:"):]) is None  # as onnx_model.is_preset_name


def _refuse_untrusted(doc: dict, path: Path, user: Path) -> None:
    keys = _network_keys(doc)
    if not keys:
        return
    raise UsageError(
        f"{path} sets {', '.join(keys)}: a ragtui.toml found in the current directory may have come with "
        "a cloned repository, so it may not choose where documents and credentials go or which file is read "
        f"(nothing was sent). To trust it, pass --config {path}, or add "
        f"trusted_configs = [\"{os.path.realpath(path)}\"] to your own config {user}"
    )


def _trusted_list(doc: dict, path: Path) -> set[str]:
    """The real paths listed in the user config's ``trusted_configs``."""
    out = set()
    for entry in doc.get("trusted_configs", []):
        p = Path(entry).expanduser()
        if not p.is_absolute():
            raise UsageError(f"{path}: trusted_configs entries must be absolute paths (got {entry!r})")
        out.add(os.path.realpath(p))
    return out


# -- layering -----------------------------------------------------------------------------


def _positive(value, name: str, allow_zero: bool = False) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a whole number (got {value!r})") from None
    if n < 0 or (n == 0 and not allow_zero):
        raise UsageError(f"{name} must be {'≥ 0' if allow_zero else '≥ 1'} (got {n})")
    return n


def _embedder(current: dict, given: dict) -> dict:
    if "kind" in given and given["kind"] != current.get("kind"):
        return dict(given)  # another kind: the previous layer's options do not apply to it
    return {**current, **given}


def _apply(s: Settings, doc: dict, path: Path) -> Settings:
    chunker, ivf = doc.get("chunker", {}), doc.get("ivf", {})
    changes: dict = {"config_file": path, "embedder": _embedder(s.embedder, doc.get("embedder", {})),
                     "rerank": {**s.rerank, **doc.get("rerank", {})}, "llm": {**s.llm, **doc.get("llm", {})}}
    if "artifacts" in doc:
        changes["artifacts"] = Path(doc["artifacts"]).expanduser()
        changes["artifacts_from"] = f"artifacts in {path}"
    if "index" in doc:
        changes["index"] = doc["index"]
    if "max_tokens" in chunker:
        changes["max_tokens"] = _positive(chunker["max_tokens"], f"{path}: chunker.max_tokens")
    if "overlap" in chunker:
        changes["overlap"] = _positive(chunker["overlap"], f"{path}: chunker.overlap", allow_zero=True)
    if "kinds" in doc.get("ingest", {}):
        from ragtui.core.documents import KINDS

        kinds = tuple(doc["ingest"]["kinds"])
        known = [k.name for k in KINDS]
        unknown = [k for k in kinds if k not in known]
        if unknown:
            raise UsageError(f"{path}: ingest.kinds: unknown kind {unknown[0]!r} (the kinds are {', '.join(known)})")
        changes["kinds"] = kinds
    scan = doc.get("vectors", {}).get("scan")
    if scan is not None:  # checked where it is used (app.open_index), as the embedder's kind is
        changes["vector_scan"] = scan
    if "search" in doc:
        from ragtui.core.search.ranking_options import check_options

        changes["search"] = {**s.search, **check_options(doc["search"], f"{path}: search.")}
    for key in ("nlist", "nprobe"):
        if key in ivf:
            changes[key] = _positive(ivf[key], f"{path}: ivf.{key}", allow_zero=True) or None
    return replace(s, **changes)


def _layers(config: str | os.PathLike | None) -> list[tuple[Path, dict]]:
    """The config files to apply, in order, each read, checked and (for a project file) trust-checked."""
    user = user_config_path()
    layers: list[tuple[Path, dict]] = []
    trusted: set[str] = set()
    if _is_file(user):
        doc = _read(user)
        _check_schema(doc, user)
        trusted = _trusted_list(doc, user)
        layers.append((user, doc))
    if config is not None:
        project, explicit = Path(config).expanduser(), True
        if not _is_file(project):
            raise UsageError(f"--config {config}: no such file (give the path of a ragtui.toml)")
    else:
        project, explicit = Path(os.path.abspath("ragtui.toml")), False
        if not _is_file(project):
            return layers
    if layers and _same_file(project, user):
        return layers  # the user's config, named again (or run from its folder)
    doc = _read(project)
    if "trusted_configs" in doc:
        raise UsageError(
            f"{project}: trusted_configs is read only from the user's config ({user}), "
            "so that a file cannot vouch for itself: move it there"
        )
    if not explicit and os.path.realpath(project) not in trusted:
        _refuse_untrusted(doc, project, user)
    _check_schema(doc, project)
    layers.append((project, doc))
    return layers


def load_settings(environ: dict | None = None, *, config: str | os.PathLike | None = None) -> Settings:
    """Defaults, overlaid by the user's then the project's ragtui.toml, overlaid by RAGTUI_* variables.

    ``environ`` (default ``os.environ``) is where ``RAGTUI_*`` are looked
    up; the user's config is found through the process's own
    ``XDG_CONFIG_HOME``. ``config``: the file ``--config`` named (trusted;
    used instead of ``./ragtui.toml``). Raises ``UsageError`` for a file that cannot be
    read, breaks the schema, or is untrusted and sets a ``TRUSTED_ONLY`` key.
    """
    env = os.environ if environ is None else environ
    root, why = default_artifacts(env)  # /artifacts when usable, else the user data folder
    s = Settings(artifacts=root, artifacts_from=why)
    for path, doc in _layers(config):
        s = _apply(s, doc, path)
    if env.get("RAGTUI_ARTIFACTS"):
        s = replace(s, artifacts=Path(env["RAGTUI_ARTIFACTS"]).expanduser(), artifacts_from="RAGTUI_ARTIFACTS")
    if env.get("RAGTUI_INDEX"):
        s = replace(s, index=env["RAGTUI_INDEX"])
    emb = dict(s.embedder)
    if env.get("RAGTUI_EMBEDDER"):
        emb = _embedder(emb, {"kind": env["RAGTUI_EMBEDDER"]})
    for var, key in (("RAGTUI_EMBED_URL", "base_url"), ("RAGTUI_EMBED_MODEL", "model")):
        if env.get(var):
            emb[key] = env[var]
    llm = dict(s.llm)
    for var, key in (("RAGTUI_LLM_URL", "base_url"), ("RAGTUI_LLM_MODEL", "model")):
        if env.get(var):
            llm[key] = env[var]
    return replace(s, embedder=emb, llm=llm)

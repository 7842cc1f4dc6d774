"""Settings: flags > RAGTUI_* environment > ragtui.toml > defaults; and where files live.

``ragtui.toml`` is read from the current directory, else from
``$XDG_CONFIG_HOME/ragtui/ragtui.toml`` (``~/.config/ragtui/ragtui.toml``).
Every key is optional:

    artifacts = "/artifacts"          # RAGTUI_ARTIFACTS
    index = "docs"                    # RAGTUI_INDEX
    [embedder]
    kind = "wordllama"                # or "http"           RAGTUI_EMBEDDER
    base_url = "http://127.0.0.1:8080"                    # RAGTUI_EMBED_URL
    model = "nomic-embed-text"                             # RAGTUI_EMBED_MODEL
    api_key_env = "OPENAI_API_KEY"    # the NAME of the variable holding the key
    [chunker]
    max_tokens = 256
    overlap = 32
    [ivf]
    nlist = 0                         # 0: derive from the index size
    nprobe = 0
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ragtui.core.errors import UsageError

__all__ = ["Settings", "load_settings"]

DEFAULT_ARTIFACTS = "/artifacts"


@dataclass(frozen=True)
class Settings:
    artifacts: Path = Path(DEFAULT_ARTIFACTS)
    index: str | None = None
    embedder: dict = field(default_factory=lambda: {"kind": "wordllama"})
    max_tokens: int = 256
    overlap: int = 32
    nlist: int | None = None
    nprobe: int | None = None
    config_file: Path | None = None

    def with_flags(self, **flags) -> Settings:
        """Apply command-line flags (``None`` means "not given")."""
        given = {k: v for k, v in flags.items() if v is not None}
        if "artifacts" in given:
            given["artifacts"] = Path(given["artifacts"]).expanduser()
        return replace(self, **given)


def _config_path() -> Path | None:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    for path in (Path("ragtui.toml"), base / "ragtui" / "ragtui.toml"):
        try:
            if path.is_file():
                return path
        except OSError as e:  # an unreadable config folder is the user's to fix, not a crash
            raise UsageError(f"cannot read {path}: {e.strerror}") from None
    return None


def _positive(value, name: str, allow_zero: bool = False) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a whole number (got {value!r})") from None
    if n < 0 or (n == 0 and not allow_zero):
        raise UsageError(f"{name} must be {'≥ 0' if allow_zero else '≥ 1'} (got {n})")
    return n


def load_settings(environ: dict | None = None) -> Settings:
    """Defaults, overlaid by ragtui.toml, overlaid by RAGTUI_* variables."""
    env = os.environ if environ is None else environ
    s = Settings()
    path = _config_path()
    if path is not None:
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise UsageError(f"cannot read {path}: {e}") from None
        chunker = doc.get("chunker", {})
        ivf = doc.get("ivf", {})
        s = replace(
            s,
            config_file=path,
            artifacts=Path(doc.get("artifacts", s.artifacts)).expanduser(),
            index=doc.get("index", s.index),
            embedder={**s.embedder, **doc.get("embedder", {})},
            max_tokens=_positive(chunker.get("max_tokens", s.max_tokens), "chunker.max_tokens"),
            overlap=_positive(chunker.get("overlap", s.overlap), "chunker.overlap", allow_zero=True),
            nlist=_positive(ivf["nlist"], "ivf.nlist", allow_zero=True) or None if "nlist" in ivf else None,
            nprobe=_positive(ivf["nprobe"], "ivf.nprobe", allow_zero=True) or None if "nprobe" in ivf else None,
        )
    if env.get("RAGTUI_ARTIFACTS"):
        s = replace(s, artifacts=Path(env["RAGTUI_ARTIFACTS"]).expanduser())
    if env.get("RAGTUI_INDEX"):
        s = replace(s, index=env["RAGTUI_INDEX"])
    emb = dict(s.embedder)
    for var, key in (("RAGTUI_EMBEDDER", "kind"), ("RAGTUI_EMBED_URL", "base_url"), ("RAGTUI_EMBED_MODEL", "model")):
        if env.get(var):
            emb[key] = env[var]
    return replace(s, embedder=emb)

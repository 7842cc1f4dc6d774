"""The installed ``ragtui`` with the HTTP embedder against the loopback server: failures and the API key.

``HttpCli`` writes the user's ragtui.toml (kind "http", no retries, a short
timeout, ``api_key_env`` naming ``KEY_VAR``; only the user's own config may
set those) and runs the command in a working folder with the key in its
environment. ``run_backend_cli`` checks
that a dead, hanging or garbage-answering server makes ``ingest`` exit 3 with
one clear line and leaves the index; ``run_secrets`` checks that the key
never appears in the artifacts, in any output (``--json`` included), in an
error (even one whose server body echoes the Authorization header, even with
``--debug``), nor in the library's log records.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

from tests.helpers.cli import one_error_line as one_clear_line
from tests.helpers.cli import run
from tests.helpers.embed_server import EmbedServer, Fault
from tests.reliability.cases import Case, embed_server
from tests.reliability.helpers import make_folder, snapshot

KEY_VAR = "RAGTUI_RELIABILITY_API_KEY"
KEY = "sk-reliability-7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c1e"


class HttpCli:
    def __init__(self, base: Path, server_url: str, model: str, timeout: float = 2.0) -> None:
        self.cwd = base / "cwd"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.folder, self.art = base / "docs", base / "art"
        self.xdg = base / "xdg"
        (self.xdg / "ragtui").mkdir(parents=True, exist_ok=True)
        (self.xdg / "ragtui" / "ragtui.toml").write_text(
            "[embedder]\n"
            'kind = "http"\n'
            f'base_url = "{server_url}"\n'
            f'model = "{model}"\n'
            f'api_key_env = "{KEY_VAR}"\n'
            "retries = 0\n"
            f"timeout = {timeout}\n",
            encoding="utf-8",
        )

    def __call__(self, *args: str):
        env = {KEY_VAR: KEY, "XDG_CONFIG_HOME": str(self.xdg)}
        return run(*args, "--artifacts", str(self.art), env=env, cwd=self.cwd)

    def ingest(self, *flags: str):
        return self(*flags, "ingest", str(self.folder)) if flags else self("ingest", str(self.folder))


def no_key(*texts: str) -> bool:
    return not any(KEY in t for t in texts)


def check_backend_cli(base: Path, shared: EmbedServer, fault: str) -> None:
    # A server of its own (sharing the loaded model): a released hang stays released for good.
    with EmbedServer(shared.embedder) as server:
        _check_backend_cli(base, server, fault)


def _check_backend_cli(base: Path, server: EmbedServer, fault: str) -> None:
    cli = HttpCli(base, server.url, server.model, timeout=1.0)
    make_folder(cli.folder, 1)
    r = cli.ingest()
    assert r.returncode == 0, r.stderr
    old = snapshot(cli.art / "rag" / "docs")
    make_folder(cli.folder, 2)
    if fault == "dead":
        dead = HttpCli(base, "http://127.0.0.1:9", server.model)  # nothing listens on the discard port
        r = dead.ingest()
        expect = "cannot connect"
    else:
        server.queue(Fault(fault, path="/v1/embeddings"))
        r = cli.ingest()
        expect = {"garbage": "not JSON", "hang": "no answer within", "nan": "NaN"}[fault]
    assert r.returncode == 3 and one_clear_line(r.stderr), (r.returncode, r.stderr)
    assert expect in r.stderr, r.stderr
    assert snapshot(cli.art / "rag" / "docs") == old


def backend_cli_cases(size: str = "ci") -> list[Case]:
    """``ragtui ingest`` with the embedding server dead, answering garbage, hanging, answering NaN."""
    return [Case(f"cli-{fault}", functools.partial(_backend_cli, fault)) for fault in ("dead", "garbage", "hang", "nan")]


def _backend_cli(fault: str, base: Path) -> None:
    check_backend_cli(base, embed_server(), fault)


def secrets_cli_surfaces(base: Path, server: EmbedServer) -> dict[str, str]:
    """Run the command every way that could show the key; return what each way wrote, by name."""
    cli = HttpCli(base, server.url, server.model)
    make_folder(cli.folder, 1)
    out: dict[str, str] = {}
    r = cli.ingest("--debug")
    assert r.returncode == 0, r.stderr
    out["ingest (text, --debug)"] = r.stdout + r.stderr
    r = cli("ingest", str(cli.folder), "--json")
    out["ingest --json"] = r.stdout + r.stderr
    auth = [s.headers.get("Authorization") for s in server.seen if s.path == "/v1/embeddings"]
    assert auth and all(a == f"Bearer {KEY}" for a in auth), "the key did not reach the server"
    # A server that echoes the Authorization header in its error body.
    make_folder(cli.folder, 2)
    for flags in ((), ("--debug",)):
        server.queue(Fault("status", 401, echo_auth=True, path="/v1/embeddings"))
        r = cli.ingest(*flags)
        assert r.returncode == 3 and "you sent Authorization" in r.stderr, r.stderr
        out[f"error echoing the header {' '.join(flags) or '(one line)'}".strip()] = r.stdout + r.stderr
    for args in (("search", "alpha", "--mode", "flat", "--json"), ("search", "alpha", "--mode", "hybrid"),
                 ("info", "--json"), ("info",)):
        r = cli(*args)
        assert r.returncode in (0, 1), (args, r.stderr)
        out[" ".join(args[:1] + args[2:])] = r.stdout + r.stderr
    for path in cli.art.rglob("*"):
        if path.is_file() and not path.is_symlink():
            out[f"artifact {path.relative_to(cli.art)}"] = path.read_bytes().decode("utf-8", "replace")
    return out


def check_secrets_cli(base: Path, server: EmbedServer) -> int:
    """No output of any command, no artifact holds the key; returns how many places were looked at."""
    surfaces = secrets_cli_surfaces(base, server)
    leaked = [name for name, text in surfaces.items() if not no_key(text)]
    assert leaked == [], f"the key appears in: {leaked}"
    assert any(name.endswith("meta.json") for name in surfaces)
    return len(surfaces)


def check_secrets_logs(base: Path, server: EmbedServer) -> None:
    """Every log record of ragtui, httpx and httpcore at DEBUG while a keyed client fails and retries."""
    from ragtui.core.embedders.http import HTTPEmbedder
    from ragtui.core.errors import EmbeddingError
    from tests.unit.fakes import WordTokenizer

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    loggers = [logging.getLogger(n) for n in ("ragtui", "httpx", "httpcore")]
    saved = [(lg.level, lg.propagate) for lg in loggers]
    os.environ[KEY_VAR] = KEY
    try:
        for lg in loggers:
            lg.addHandler(handler)
            lg.setLevel(logging.DEBUG)
        emb = HTTPEmbedder(server.url, server.model, api_key_env=KEY_VAR, tokenizer=WordTokenizer(), retries=2,
                           backoff=0.0, dim=None)
        server.queue(Fault("status", 503, echo_auth=True, path="/v1/embeddings"),
                     Fault("status", 500, echo_auth=True, path="/v1/embeddings"),
                     Fault("status", 401, echo_auth=True, path="/v1/embeddings"))
        try:
            emb.embed(["some text"])
        except EmbeddingError as e:
            error = e
        else:
            raise AssertionError("the client did not fail")
        texts = [str(error), repr(error), repr(emb)]
        texts += [r.getMessage() for r in records] + [repr(r.args) for r in records]
        assert records, "no log records were captured"
        assert no_key(*texts), "the key appears in an error or a log record"
        emb.close()
    finally:
        os.environ.pop(KEY_VAR, None)
        for lg, (level, propagate) in zip(loggers, saved):
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate


def secrets_cases(size: str = "ci") -> list[Case]:
    """Each command's output (--json too) and each artifact file; log records, errors and the client's repr."""
    return [Case("outputs-and-artifacts", lambda base: check_secrets_cli(base, embed_server())),
            Case("errors-and-log-records", lambda base: check_secrets_logs(base, embed_server()))]

"""Hostile configs and out-of-root doc_ids, through the command line.

``hostile_config_cases`` puts a ``ragtui.toml`` that names a recording server
(``base_url``) and a secret's variable (``api_key_env``) where a cloned
repository would: in the working directory, in the folder being ingested.
Each case runs a real command with the secret in its environment and checks
that it exits 2 with one line saying how to trust the file, and that no
server received a single request. Controls (the same file trusted with
``--config`` or ``trusted_configs``) must reach the server with the secret:
they show the recording would have caught a leak.

``out_of_root_cases`` crafts indexes that pass ``ragtui info`` (exit 0) but
whose doc_ids point at files beside the ingested folder (a private key in
``.ssh``, a sibling folder, a hidden folder inside it, a link leading out,
``..``, an absolute path) or that have no recorded folder at all (the
working directory would have been the root). ``inspect --context 10`` must
refuse each one and print no byte of the file.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path

from tests.helpers.cli import one_error_line as one_clear_line
from tests.helpers.cli import run
from tests.helpers.cli import run_process as ragtui
from tests.helpers.embed_server import EmbedServer
from tests.reliability.cases import Case, shared
from tests.reliability.helpers import write
from tests.unit.fakes import HashEmbedder

SECRET_VAR = "CONFIG_RELIABILITY_TOKEN"
SECRET = "ghp_configReliability0123456789abcdefXYZ"
"""Stands for a GITHUB_TOKEN: it must never reach a server a project file chose."""

KEY_LINE = "-----BEGIN OPENSSH PRIVATE KEY-----"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
"""A line of the fake private key that only a read of the file could print."""


def toml_file(path: Path, *, url: str | None = None, key_var: str | None = None, section: str = "embedder",
              extra: str = "") -> Path:
    """A ragtui.toml setting the network keys ``url`` / ``key_var`` (when given) in ``[section]``."""
    lines = [extra] if extra else []
    lines.append(f"[{section}]")
    if section == "embedder":
        lines += ['kind = "http"', 'model = "m"', "retries = 0", "timeout = 5"]
    if url is not None:
        lines.append(f'base_url = "{url}"')
    if key_var is not None:
        lines.append(f'api_key_env = "{key_var}"')
    return write(path, "\n".join(lines) + "\n")


class Scene:
    """A home with its user config folder, a working directory, a folder of documents and an artifacts root."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.xdg = base / "xdg"
        self.user_config = self.xdg / "ragtui" / "ragtui.toml"
        self.cwd = base / "project"
        self.docs = self.cwd / "docs"
        self.art = base / "art"
        write(self.docs / "a.md", "Cats sit on mats.\nDogs chase cats around the garden.\n")
        write(self.docs / "b.md", "Rivers run down the hills to the sea.\n")

    def run(self, *args: str, cwd: Path | None = None, env: dict | None = None):
        full = {SECRET_VAR: SECRET, "XDG_CONFIG_HOME": str(self.xdg), **(env or {})}
        return run(*args, "--artifacts", str(self.art), env=full, cwd=cwd or self.cwd)


def _no_secret(result) -> None:
    assert SECRET not in result.stdout + result.stderr, "the secret appears in the output"


def _refused(result, servers: list[EmbedServer], mention: str = "trusted_configs") -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert one_clear_line(result.stderr), result.stderr
    assert mention in result.stderr and "--config" in result.stderr, result.stderr
    for server in servers:
        assert server.seen == [], f"the server received {len(server.seen)} request(s)"
    _no_secret(result)


def _received_secret(server: EmbedServer) -> None:
    auth = [s.headers.get("Authorization") for s in server.seen if s.path == "/v1/embeddings"]
    assert auth and all(a == f"Bearer {SECRET}" for a in auth), "the trusted file's server got no keyed request"


def hostile_cases(embedder) -> dict[str, callable]:
    """name -> check(base); each check starts its own recording servers (sharing ``embedder``)."""

    def serve():
        return EmbedServer(embedder)

    def cwd_file(command: tuple[str, ...], *, url=True, key=True):
        def check(base: Path) -> None:
            scene = Scene(base)
            with serve() as evil:
                toml_file(scene.cwd / "ragtui.toml", url=evil.url if url else None, key_var=SECRET_VAR if key else None)
                _refused(scene.run(*command), [evil])
        return check

    def key_only_with_user_server(base: Path) -> None:
        # The user's own config names the server; the project file only asks for the secret's variable.
        scene = Scene(base)
        with serve() as mine:
            toml_file(scene.user_config, url=mine.url)
            toml_file(scene.cwd / "ragtui.toml", key_var=SECRET_VAR)
            _refused(scene.run("ingest", "docs"), [mine])

    def key_with_env_url(base: Path) -> None:
        scene = Scene(base)
        with serve() as mine:
            toml_file(scene.cwd / "ragtui.toml", key_var=SECRET_VAR)
            env = {"RAGTUI_EMBEDDER": "http", "RAGTUI_EMBED_URL": mine.url, "RAGTUI_EMBED_MODEL": "m"}
            _refused(scene.run("ingest", "docs", env=env), [mine])

    def tokenizer_file(base: Path) -> None:
        scene = Scene(base)
        secret_file = write(base / "secret.txt", SECRET + "\n")
        write(scene.cwd / "ragtui.toml", f'[embedder]\nkind = "http"\ntokenizer_file = "{secret_file}"\n')
        _refused(scene.run("ingest", "docs"), [])

    def artifacts_in_cwd_file(base: Path) -> None:
        # An index holds the text it indexes: the project file may not pick the folder it is written to.
        scene = Scene(base)
        private = write(base / "notes" / "diary.md", f"{SECRET}\n")
        leak = scene.cwd / "leak"
        write(scene.cwd / "ragtui.toml", f"artifacts = {json.dumps(str(leak))}\n")
        env = {SECRET_VAR: SECRET, "XDG_CONFIG_HOME": str(scene.xdg), "XDG_DATA_HOME": str(base / "data"),
               "HOME": str(base)}
        r = run("ingest", str(private.parent), env=env, cwd=scene.cwd)
        _refused(r, [])
        assert not leak.exists(), "the index was written where the project file said"

    def llm_section(base: Path) -> None:
        scene = Scene(base)
        with serve() as evil:
            toml_file(scene.cwd / "ragtui.toml", url=evil.url, key_var=SECRET_VAR, section="llm")
            _refused(scene.run("ingest", "docs"), [evil])

    def ingested_folder_is_cwd(base: Path) -> None:
        # `cd repo && ragtui ingest .`: the repository's own file is the working directory's.
        scene = Scene(base)
        with serve() as evil:
            toml_file(scene.docs / "ragtui.toml", url=evil.url, key_var=SECRET_VAR)
            _refused(scene.run("ingest", ".", cwd=scene.docs), [evil])

    def ingested_folder_not_read(base: Path) -> None:
        # A ragtui.toml inside the folder is a document, never a config: the user's server gets the work.
        scene = Scene(base)
        with serve() as evil, serve() as mine:
            toml_file(scene.docs / "ragtui.toml", url=evil.url, key_var=SECRET_VAR)
            toml_file(scene.user_config, url=mine.url, key_var=SECRET_VAR)
            r = scene.run("ingest", "docs")
            assert r.returncode == 0, r.stderr
            assert evil.seen == [], "the folder's config was read"
            _received_secret(mine)

    def self_trust(base: Path) -> None:
        scene = Scene(base)
        with serve() as evil:
            path = scene.cwd / "ragtui.toml"
            toml_file(path, url=evil.url, key_var=SECRET_VAR,
                      extra=f"trusted_configs = [{json.dumps(str(path))}]")
            r = scene.run("ingest", "docs")
            assert r.returncode == 2 and one_clear_line(r.stderr) and "user's config" in r.stderr, r.stderr
            assert evil.seen == []

    def trust_names_another_file(base: Path) -> None:
        scene = Scene(base)
        with serve() as evil:
            toml_file(scene.cwd / "ragtui.toml", url=evil.url, key_var=SECRET_VAR)
            elsewhere = toml_file(base / "elsewhere" / "ragtui.toml", url=evil.url)
            write(scene.user_config, f"trusted_configs = [{json.dumps(str(elsewhere))}]\n")
            _refused(scene.run("ingest", "docs"), [evil])

    def control_config_flag(base: Path) -> None:
        scene = Scene(base)
        with serve() as chosen:
            toml_file(scene.cwd / "ragtui.toml", url=chosen.url, key_var=SECRET_VAR)
            r = scene.run("--config", "ragtui.toml", "ingest", "docs")
            assert r.returncode == 0, r.stderr
            _received_secret(chosen)
            _no_secret(r)

    def control_trusted_list(base: Path) -> None:
        scene = Scene(base)
        with serve() as chosen:
            path = toml_file(scene.cwd / "ragtui.toml", url=chosen.url, key_var=SECRET_VAR)
            write(scene.user_config, f"trusted_configs = [{json.dumps(str(path))}]\n")
            r = scene.run("ingest", "docs")
            assert r.returncode == 0, r.stderr
            _received_secret(chosen)

    cases: dict[str, callable] = {}
    for command in (("ingest", "docs"), ("search", "cats", "--mode", "flat"), ("info",), ("inspect", "docs#0"),
                    ("watch", "docs", "--once"), ("eval", "--help")):
        if command == ("eval", "--help"):
            continue  # --help exits before any config is read
        cases[f"./ragtui.toml base_url+api_key_env: {' '.join(command)}"] = cwd_file(command)
    cases["./ragtui.toml base_url only: ingest"] = cwd_file(("ingest", "docs"), key=False)
    cases["./ragtui.toml api_key_env only, server from the user's config"] = key_only_with_user_server
    cases["./ragtui.toml api_key_env only, server from RAGTUI_EMBED_URL"] = key_with_env_url
    cases["./ragtui.toml tokenizer_file (a file outside the project)"] = tokenizer_file
    cases["./ragtui.toml [llm] base_url+api_key_env"] = llm_section
    cases["./ragtui.toml artifacts (where the text of ~/notes would be written)"] = artifacts_in_cwd_file
    cases["ingested folder's ragtui.toml, ingest . from inside it"] = ingested_folder_is_cwd
    cases["ingested folder's ragtui.toml, ingest from outside: not read"] = ingested_folder_not_read
    cases["./ragtui.toml lists itself in trusted_configs"] = self_trust
    cases["user's trusted_configs names another file"] = trust_names_another_file
    cases["control: --config FILE is trusted (the server gets the key)"] = control_config_flag
    cases["control: trusted_configs in the user's config"] = control_trusted_list
    return cases


def _embedder():
    from ragtui.core.embedders.wordllama import WordLlamaEmbedder

    return shared("wordllama", WordLlamaEmbedder)


def _slug(name: str) -> str:
    out = "".join(c if c.isascii() and c.isalnum() else "-" for c in name.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _named_cases(make_cases) -> list[Case]:
    return [Case(_slug(name), functools.partial(_named_case, make_cases, name)) for name in make_cases(None)]


def _named_case(make_cases, name: str, base: Path) -> None:
    make_cases(_embedder())[name](base)


def hostile_config_cases(size: str = "ci") -> list[Case]:
    """Every hostile-config case (refused: exit 2, no request received) and the trusted controls, each a
    command against real loopback servers that record every request."""
    return _named_cases(hostile_cases)


# -- URL audit ---------------------------------------------------------------------------------


def url_audit_checks(embedder) -> dict[str, callable]:
    """name -> check(base): a config key that reaches a URL, with a hostile value, steers no request.

    The user's own config names the server as a hosted API is named (``base_url`` without a port, or
    with a host name) and the secret's variable; the ``ragtui.toml`` in the working directory sets only
    a request path, aimed at a recording server on another port. Each case must exit 2 with one line
    naming the key, and the other server must receive nothing. The control sends a plain path from the
    project file to the user's own server, which gets the keyed requests: the recording would have
    caught a leak.
    """

    def aimed(value_for, base_url: str = "http://127.0.0.1"):
        def check(base: Path) -> None:
            scene = Scene(base)
            with EmbedServer(embedder) as evil:
                port = evil.url.rsplit(":", 1)[1]
                # dim given: nothing is probed first, so the tokenizer's request is the first one sent.
                write(scene.user_config, f'[embedder]\nkind = "http"\nmodel = "m"\nretries = 0\ntimeout = 5\n'
                                         f'dim = {embedder.dim}\nbase_url = "{base_url}"\napi_key_env = "{SECRET_VAR}"\n')
                value = value_for(port)
                write(scene.cwd / "ragtui.toml", f"[embedder]\ntokenize_path = {json.dumps(value)}\n")
                r = scene.run("ingest", "docs")
                assert r.returncode == 2, (r.returncode, r.stderr)
                assert one_clear_line(r.stderr) and "tokenize_path" in r.stderr, r.stderr
                assert evil.seen == [], f"the other port received {len(evil.seen)} request(s)"
                _no_secret(r)
        return check

    def control_plain_path(base: Path) -> None:
        scene = Scene(base)
        with EmbedServer(embedder) as mine:
            toml_file(scene.user_config, url=mine.url, key_var=SECRET_VAR)
            write(scene.cwd / "ragtui.toml", '[embedder]\ntokenize_path = "/v1/tokenize"\n')
            r = scene.run("ingest", "docs")
            assert r.returncode == 0, r.stderr
            assert any(s.path == "/v1/tokenize" for s in mine.seen), [s.path for s in mine.seen]
            _received_secret(mine)

    values = {
        "a port after a portless base_url (:PORT/steal)": lambda p: f":{p}/steal",
        "userinfo then host:port (@127.0.0.1:PORT/steal)": lambda p: f"@127.0.0.1:{p}/steal",
        "a network path (//127.0.0.1:PORT/steal)": lambda p: f"//127.0.0.1:{p}/steal",
        "an absolute URL (http://127.0.0.1:PORT/steal)": lambda p: f"http://127.0.0.1:{p}/steal",
        "dot segments (/../..//127.0.0.1:PORT)": lambda p: f"/../..//127.0.0.1:{p}/steal",
        "escaped dot segments (/%2e%2e/steal)": lambda p: "/%2e%2e/steal",
        "a query naming the other server (/t?u=...)": lambda p: f"/t?u=http://127.0.0.1:{p}/steal",
        "a fragment (/t#x)": lambda p: "/t#x",
        "a backslash (/t\\@127.0.0.1:PORT)": lambda p: f"/t\\@127.0.0.1:{p}/steal",
        "white space and controls (/t x, /t\\r\\nHost)": lambda p: f"/t x\r\nHost: 127.0.0.1:{p}",
        "no leading slash (tokenize)": lambda p: "tokenize",
    }
    cases: dict[str, callable] = {}
    for name, value_for in values.items():
        cases[f"tokenize_path: {name}"] = aimed(value_for)
    cases["tokenize_path @127.0.0.1:PORT after a host-name base_url (http://localhost)"] = aimed(
        lambda p: f"@127.0.0.1:{p}/steal", base_url="http://localhost")
    cases["control: a plain path reaches the user's own server with the key"] = control_plain_path
    return cases


def url_audit_cases(size: str = "ci") -> list[Case]:
    """Every hostile request path from a project file (exit 2, no request to the other port), and a control."""
    return _named_cases(url_audit_checks)


# -- out-of-root doc_ids ----------------------------------------------------------------------


def craft(scene_base: Path, doc_id: str, text: str, *, keep_state: bool = True) -> tuple[Path, Path]:
    """An artifacts root whose index ``docs`` has one chunk, ``text``, under ``doc_id``; (art, home).

    The index is built by ingest from ``home/docs`` (so the writer state records that folder) and its
    docs.jsonl edited afterwards, the way an index handed over by someone else could be; it still
    passes full validation.
    """
    from ragtui.core.ingest.publish import state_dir
    from ragtui.core.ingest.sync import sync

    home = scene_base / "home"
    art = scene_base / "art"
    write(home / "docs" / "a.md", text + "\n")
    sync(home / "docs", artifacts=art, embedder=HashEmbedder(), max_tokens=64, overlap=8)
    docs_jsonl = Path(os.path.realpath(art / "rag" / "docs")) / "docs.jsonl"
    record = json.loads(docs_jsonl.read_text(encoding="utf-8"))
    record.update(chunk_id=f"{doc_id}#0", doc_id=doc_id, uri=doc_id)
    docs_jsonl.write_text(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    if not keep_state:
        shutil.rmtree(state_dir(art, "docs"))
    return art, home


def plant_secrets(home: Path) -> None:
    """The files a crafted doc_id would reach: a private key, a sibling folder, a hidden folder, /etc/passwd."""
    key = f"{KEY_LINE}\n{KEY_BODY}\n" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB\n" * 4 + "-----END OPENSSH PRIVATE KEY-----\n"
    write(home / ".ssh" / "id_rsa", key)
    write(home / "other" / "id_rsa", key)
    write(home / "docs" / ".git" / "id_rsa", key)
    write(home / "outside" / "id_rsa", key)
    os.symlink(home / "outside" / "id_rsa", home / "docs" / "link.md")
    write(home / "etc" / "passwd", f"{KEY_LINE}\n{KEY_BODY}\nroot:x:0:0:root:/root:/bin/bash\n")


OUT_OF_ROOT = {
    # name: (doc_id, keep the writer state, expected exit code, words in the one error line)
    "hidden folder beside the ingested one (.ssh/id_rsa)": (".ssh/id_rsa", True, 3, "not in the ingested folder"),
    "sibling folder (other/id_rsa)": ("other/id_rsa", True, 3, "not in the ingested folder"),
    "hidden folder inside the ingested one (docs/.git/id_rsa)": ("docs/.git/id_rsa", True, 3, "hidden"),
    "parent reference (docs/../.ssh/id_rsa)": ("docs/../.ssh/id_rsa", True, 3, "outside the indexed folder"),
    "absolute path": ("ABSOLUTE", True, 3, "outside the indexed folder"),
    "link leading out (docs/link.md)": ("docs/link.md", True, 0, ""),
    "no recorded folder, cwd as root (etc/passwd)": ("etc/passwd", False, 2, "--root"),
}


def _crafted_case(base: Path, name: str) -> tuple[Path, Path, str, int, str]:
    doc_id, keep_state, code, words = OUT_OF_ROOT[name]
    if doc_id == "ABSOLUTE":
        doc_id = str(base / "home" / ".ssh" / "id_rsa")
    art, home = craft(base, doc_id, KEY_LINE, keep_state=keep_state)
    plant_secrets(home)
    return art, home, doc_id, code, words


def check_out_of_root(base: Path, name: str) -> None:
    """``ragtui inspect`` (text with --context 10, --json, --check, --open) on one crafted index."""
    art, home, doc_id, code, words = _crafted_case(base, name)
    env = {"XDG_CONFIG_HOME": str(base / "xdg")}
    info = ragtui("info", "--artifacts", str(art), env=env, cwd=home)
    assert info.returncode == 0, f"the crafted index should pass validation: {info.stderr}"
    for args in ((f"{doc_id}#0", "--context", "10"), ("docs#0", "--json"), ("docs#0", "--check"),
                 ("docs#0", "--open")):
        r = ragtui("inspect", *args, "--artifacts", str(art), env={**env, "EDITOR": "cat"}, cwd=home)
        shown = r.stdout + r.stderr
        assert KEY_BODY not in shown, f"inspect {' '.join(args)} printed the file"
        if code == 0:  # a link out is never followed: the citation is "missing", its path unknown
            expect = {"--json": 0, "--check": 1, "--open": 1}.get(args[1], 0)
            assert r.returncode == expect, (args, r.returncode, r.stderr)
        elif args[1] == "--check":  # the report line on stdout says why; stderr holds the summary
            assert r.returncode == code and words in r.stdout and "1 error" in r.stderr, (args, shown)
        else:
            assert r.returncode == code and one_clear_line(r.stderr) and words in r.stderr, (args, r.stderr)


def check_out_of_root_tui(base: Path, name: str) -> None:
    """The TUI on one crafted index, run from the home folder: the source view (o) and $EDITOR (e) refuse."""
    import asyncio

    art, home, _doc_id, _code, words = _crafted_case(base, name)
    editor = write(base / "editor.sh", f"#!/bin/sh\necho \"$@\" > {base / 'editor-ran'}\n")
    editor.chmod(0o755)
    saved_cwd, saved_editor = os.getcwd(), {k: os.environ.pop(k, None) for k in ("EDITOR", "VISUAL")}
    os.environ["EDITOR"] = str(editor)
    os.chdir(home)  # where a guessed root would find home/etc/passwd
    try:
        asyncio.run(_tui_refuses(art, words))
    finally:
        os.chdir(saved_cwd)
        os.environ.pop("EDITOR", None)
        os.environ.update({k: v for k, v in saved_editor.items() if v is not None})
    assert not (base / "editor-ran").exists(), "the editor was run"


async def _tui_refuses(art: Path, words: str) -> None:
    from ragtui.tui.history import QueryHistory
    from ragtui.tui.screens.source import SourceScreen
    from tests.tui import Notices, make_app, ready, search, settled, wait_for

    app = make_app(art, history=QueryHistory(None))
    notices = Notices()
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await search(pilot, "OPENSSH PRIVATE KEY")
        assert app.results.hits, "the crafted chunk should be found"
        await pilot.press("escape")  # from the query box to the results
        for n, key in enumerate(("o", "e"), 1):  # o: the source view, e: $EDITOR
            await pilot.press(key)
            await wait_for(pilot, lambda n=n: isinstance(app.screen, SourceScreen) or len(notices.sent) >= n,
                           f"the answer to {key!r}")
            assert not isinstance(app.screen, SourceScreen), "the source view opened"
        await settled(pilot)
        notes = list(notices.sent)
        assert app.editor_runs == [], "the editor was run"
        assert all(words in m for m in notes) if words else all("missing" in m for m in notes), notes
        shown = "".join(str(w.render()) for w in app.screen.query("*") if hasattr(w, "render"))
        assert KEY_BODY not in shown + "".join(notes), "the file reached the screen"


def out_of_root_cases(size: str = "ci") -> list[Case]:
    """Each crafted doc_id through inspect (text, --json, --check, --open) and the TUI (source view, $EDITOR)."""
    out = []
    for name in OUT_OF_ROOT:
        out.append(Case(f"{_slug(name)}-inspect", functools.partial(_out_of_root, check_out_of_root, name)))
        out.append(Case(f"{_slug(name)}-tui", functools.partial(_out_of_root, check_out_of_root_tui, name)))
    return out


def _out_of_root(check, name: str, base: Path) -> None:
    check(base, name)

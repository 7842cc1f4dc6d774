"""`ragtui doctor`: one line per check, a fix beside each problem, exit 1 when there is one."""

from __future__ import annotations

import math
import socket

import pytest

from ragtui import cli
from ragtui.commands import doctor
from ragtui.core.answer.run import COUNT_SLACK, TEMPLATE_TOKENS, fit_budget
from tests.helpers.chat_server import ChatServer


def _doctor(capsys, *args: str) -> tuple[int, dict[str, list[str]], str]:
    code = cli.main(["doctor", *args])
    captured = capsys.readouterr()
    lines: dict[str, list[str]] = {}
    for line in captured.out.splitlines():
        status, name = line.split()[:2]
        lines.setdefault(name, []).append(line)
        assert status in ("ok", "note", "problem"), line
        assert (" — fix: " in line) == (status == "problem"), line  # every problem, and only a problem, has a fix
    return code, lines, captured.err


def test_a_writable_root_and_the_default_embedder_are_ok(capsys, tmp_path):
    code, lines, err = _doctor(capsys, "--artifacts", str(tmp_path / "new"))
    assert lines["artifacts"][0].startswith("ok ") and "does not exist yet" in lines["artifacts"][0]
    assert lines["embedder"][0].startswith("ok ") and "wordllama" in lines["embedder"][0]
    assert "llm" not in lines  # no [llm] configured: nothing to check
    problems = [line for group in lines.values() for line in group if line.startswith("problem")]
    assert code == (1 if problems else 0)
    assert (f"{len(problems)} problem(s)" in err) == bool(problems)


def test_a_root_that_is_a_file_is_a_problem_with_its_fix(capsys, tmp_path):
    root = tmp_path / "root"
    root.write_text("not a folder")
    code, lines, err = _doctor(capsys, "--artifacts", str(root))
    assert code == 1 and "problem(s)" in err
    (line,) = lines["artifacts"]
    assert line.startswith("problem") and f"{root} is not a folder" in line and "--artifacts DIR" in line


def test_an_untrusted_project_config_is_named(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ragtui.toml").write_text('[llm]\nbase_url = "http://203.0.113.9:1"\nmodel = "m"\n')
    code, lines, _ = _doctor(capsys)
    assert code == 1
    (line,) = lines["settings"]
    assert line.startswith("problem") and "base_url" in line and "fix:" in line
    assert "llm" not in lines  # nothing is sent to a server an untrusted file named


@pytest.mark.parametrize(("n_ctx", "status"), [(600, "problem"), (1024, "smaller"), (8192, "ok"), (None, "note")])
def test_the_llm_servers_context_against_what_ask_does_with_it(capsys, monkeypatch, tmp_path, n_ctx, status):
    with ChatServer(model="smol", n_ctx=n_ctx) as server:
        monkeypatch.setenv("RAGTUI_LLM_URL", server.url)
        monkeypatch.setenv("RAGTUI_LLM_MODEL", "smol")
        code, lines, _ = _doctor(capsys, "--artifacts", str(tmp_path))
        paths = [s.path for s in server.seen]
    assert lines["llm"][0].startswith("ok ") and "smol" in lines["llm"][0]
    (line,) = lines["context"]
    # ask's own arithmetic: the sources counted with slack, the chat template, the answer, the prompt.
    need = math.ceil((2000 + doctor.PROMPT_MARGIN) * COUNT_SLACK) + TEMPLATE_TOKENS + 512
    if status == "problem":
        assert line.startswith("problem") and code == 1
        assert "is 600 tokens" in line and "no room for sources" in line and f"-c {need}" in line
        assert fit_budget(2000, 600, 512, doctor.PROMPT_MARGIN) < 1  # ask refuses too
    elif status == "smaller":
        fitted = fit_budget(2000, 1024, 512, doctor.PROMPT_MARGIN)
        assert 0 < fitted < 2000
        assert line.startswith("note") and f"packs about {fitted} tokens of sources" in line and f"-c {need}" in line
    elif status == "ok":
        assert line.startswith("ok") and "8192 tokens (n_ctx in /props)" in line and f"the {need} ragtui ask" in line
    else:
        assert line.startswith("note") and "does not report its context length" in line and str(need) in line
    assert paths == []  # GETs only: the server records POST bodies, and nothing was posted


def test_a_server_serving_another_model_is_a_problem(capsys, monkeypatch, tmp_path):
    with ChatServer(model="other", n_ctx=8192) as server:
        monkeypatch.setenv("RAGTUI_LLM_URL", server.url + "/v1")
        monkeypatch.setenv("RAGTUI_LLM_MODEL", "smol")
        code, lines, _ = _doctor(capsys, "--artifacts", str(tmp_path))
    assert code == 1
    assert lines["llm"][0].startswith("problem") and "serves other, not 'smol'" in lines["llm"][0]


def test_a_server_that_is_down_or_never_answers_is_bounded(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "TIMEOUT", 0.5)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    monkeypatch.setenv("RAGTUI_LLM_MODEL", "smol")
    monkeypatch.setenv("RAGTUI_LLM_URL", f"http://127.0.0.1:{port}")
    code, lines, _ = _doctor(capsys, "--artifacts", str(tmp_path))
    assert code == 1 and "does not answer (ConnectError" in lines["llm"][0]
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setenv("RAGTUI_LLM_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        code, lines, _ = _doctor(capsys, "--artifacts", str(tmp_path))
    assert code == 1 and "does not answer (no answer within 0.5 s)" in lines["llm"][0]


def test_an_http_embedder_that_is_down_is_a_problem(capsys, monkeypatch, tmp_path):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    monkeypatch.setenv("RAGTUI_EMBEDDER", "http")
    monkeypatch.setenv("RAGTUI_EMBED_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("RAGTUI_EMBED_MODEL", "m")
    code, lines, _ = _doctor(capsys, "--artifacts", str(tmp_path))
    assert code == 1
    assert lines["embedder"][0].startswith("problem") and f"127.0.0.1:{port} does not answer" in lines["embedder"][0]


def _proc(tmp_path, watches: int, instances: int = 128):
    proc = tmp_path / "inotify"
    proc.mkdir(parents=True)
    (proc / "max_user_watches").write_text(f"{watches}\n")
    (proc / "max_user_instances").write_text(f"{instances}\n")
    return proc


def test_inotify_limits_against_a_folder(tmp_path):
    folder = tmp_path / "notes"
    for i in range(5):
        (folder / f"d{i}" / "sub").mkdir(parents=True)
    (folder / ".git" / "objects").mkdir(parents=True)  # hidden: never watched
    small = doctor.check_inotify(folder, _proc(tmp_path / "a", watches=10))
    assert small.status == "problem" and "more than 10 folders" in small.message and "sysctl" in small.fix
    enough = doctor.check_inotify(folder, _proc(tmp_path / "b", watches=11))
    assert enough.status == "ok" and "has 11 folder(s)" in enough.message
    low = doctor.check_inotify(None, _proc(tmp_path / "c", watches=1024))
    assert low.status == "problem" and "max_user_watches 1024" in low.message
    assert doctor.check_inotify(None, tmp_path / "absent").status == "note"


def test_json_lists_every_check(capsys, tmp_path):
    import json

    cli.main(["doctor", "--json", "--artifacts", str(tmp_path)])
    checks = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in checks] == ["settings", "artifacts", "embedder", "extras", "chromium", "inotify"]
    assert all(c["status"] in ("ok", "note", "problem") for c in checks)

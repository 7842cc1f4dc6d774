"""`ragtui inspect`, run in-process (a process for a real terminal): output forms, --check, --open, bad input and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.sync import sync
from tests.helpers.cli import Result, ragtui_exe, run
from tests.unit.fakes import HashEmbedder

PROSE = "".join(f"Paragraph {i} talks about topic number {i} in some detail.\n\n" for i in range(12))


def ragtui(*args: str, env: dict | None = None, cwd: Path | None = None, stdin: str | None = None) -> Result:
    """``ragtui ARGS`` in-process, with no editor of the person running the tests."""
    return run(*args, env={"EDITOR": "", "VISUAL": "", **(env or {})}, cwd=cwd, stdin=stdin)


@pytest.fixture()
def tree(tmp_path):
    """A folder indexed with the test embedder, and a working directory elsewhere."""
    docs = tmp_path / "src" / "docs"
    docs.mkdir(parents=True)
    (docs / "a.md").write_text(PROSE, encoding="utf-8")
    (docs / "notes#1.md").write_text("Hash in the file name.\nSecond line.\n" * 6, encoding="utf-8")
    (docs / "日本.md").write_text("東京 is a city. Straße and café words here.\n" * 4, encoding="utf-8")
    (docs / "crlf.txt").write_bytes(b"first line of text\r\nsecond line here\r\n" * 5)
    (docs / "hostile.txt").write_text("escape \x1b]0;title\x07 sequences \x1b[2J here\n", encoding="utf-8")
    art = tmp_path / "art"
    sync(docs, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    return docs, art, cwd


def inspect(tree, *args, **kw):
    _docs, art, cwd = tree
    return ragtui("inspect", *args, "--artifacts", str(art), cwd=cwd, **kw)


def rows(art: Path, doc_id: str) -> list[str]:
    return [r.chunk_id for r in read_index(art / "rag" / "docs").records if r.doc_id == doc_id]


# -- output ---------------------------------------------------------------------------------


def test_human_output_from_another_directory(tree):
    docs, _art, _cwd = tree
    result = inspect(tree, "docs/a.md#1", "--context", "1")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("docs/a.md#1\n")
    assert f"{docs / 'a.md'}:" in out and "fresh" in out and "n_tokens" in out and "fingerprint" in out
    marked = [line for line in out.splitlines() if line.startswith(">")]
    assert marked and all("|" in line for line in marked)
    assert "\x1b" not in out  # plain when piped


def test_json_lines_one_object_per_reference(tree):
    docs, _art, _cwd = tree
    result = inspect(tree, "docs/a.md#0", "docs/crlf.txt#1", "--json")
    assert result.returncode == 0, result.stderr
    objs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["chunk_id"] for o in objs] == ["docs/a.md#0", "docs/crlf.txt#1"]
    crlf = (docs / "crlf.txt").read_bytes().decode()
    o = objs[1]
    assert o["status"] == "fresh" and o["path"] == str(docs / "crlf.txt")
    assert crlf[o["start_char"] : o["end_char"]] == o["text"]
    assert o["start_line"] == crlf[: o["start_char"]].count("\n") + 1


def test_short_form_hash_paths_and_non_ascii(tree):
    _docs, art, _cwd = tree
    result = inspect(tree, "docs#0", rows(art, "docs/notes#1.md")[-1], "docs/日本.md#0", "--json")
    assert result.returncode == 0, result.stderr
    objs = [json.loads(line) for line in result.stdout.splitlines()]
    assert objs[0]["row"] == 0 and objs[0]["ref"] == "docs#0"
    assert objs[1]["doc_id"] == "docs/notes#1.md" and objs[2]["doc_id"] == "docs/日本.md"
    assert all(o["status"] == "fresh" for o in objs)


def test_citation_string_json_list_and_stdin(tree):
    a = inspect(tree, "[docs/a.md#2][docs/crlf.txt#0]", "--json")
    b = inspect(tree, '["docs/a.md#2", "docs/crlf.txt#0"]', "--json")
    c = inspect(tree, "-", "--json", stdin="An answer [docs/a.md#2] with prose [docs/crlf.txt#0].\n")
    for result in (a, b, c):
        assert result.returncode == 0, result.stderr
        assert [json.loads(x)["chunk_id"] for x in result.stdout.splitlines()] == ["docs/a.md#2", "docs/crlf.txt#0"]


def test_document_text_cannot_drive_the_terminal(tree):
    result = inspect(tree, "docs/hostile.txt#0")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout and "␛" in result.stdout
    as_json = inspect(tree, "docs/hostile.txt#0", "--json")
    assert "\x1b" not in as_json.stdout and "\x1b" in json.loads(as_json.stdout)["text"]


def test_terminal_output_has_colour_and_an_osc8_link(tree):
    """On a terminal: rich styling, and the path is an OSC 8 hyperlink to the file."""
    import pty

    docs, art, cwd = tree
    cmd = ragtui_exe()
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([*cmd, "inspect", "docs/a.md#1", "--artifacts", str(art)],
                            stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    out = b"".join(chunks).decode()
    assert "\x1b]8;" in out and (docs / "a.md").as_uri() in out
    assert "\x1b[" in out and "Paragraph" in out


# -- freshness, --check, --root ---------------------------------------------------------------


def test_each_verdict_after_editing(tree):
    docs, art, _cwd = tree
    a_rows = rows(art, "docs/a.md")
    first, middle, last = a_rows[0], a_rows[len(a_rows) // 2], a_rows[-1]
    records = {r.chunk_id: r for r in read_index(art / "rag" / "docs").records}
    edited = PROSE.replace(records[middle].text, "rewritten entirely")
    moved_text = records[last].text
    edited = moved_text + "\n\n" + edited.replace(moved_text, "The end.")
    (docs / "a.md").write_text(edited, encoding="utf-8")
    (docs / "crlf.txt").unlink()
    result = inspect(tree, first, middle, last, "docs/crlf.txt#0", "--json")
    assert result.returncode == 0, result.stderr
    assert [json.loads(x)["status"] for x in result.stdout.splitlines()] == ["fresh", "changed", "moved", "missing"]
    human = inspect(tree, middle)
    assert "changed" in human.stdout and "text (as indexed)" in human.stdout


def test_check_all_fresh_exits_0(tree):
    result = inspect(tree, "--check", "[docs/a.md#0][docs#1][docs/crlf.txt#0]")
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["fresh"] * 3
    assert "3 citation(s): 3 fresh" in result.stderr


def test_check_mixed_input_reports_each_citation_and_exits_1(tree):
    docs, _art, _cwd = tree
    (docs / "crlf.txt").unlink()
    answer = "Topic [docs/a.md#0], gone [docs/crlf.txt#0], invented [docs/nope.md#3], out of range [docs#999]."
    result = inspect(tree, "--check", "-", stdin=answer)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["fresh", "missing", "unknown", "unknown"]
    assert "docs/nope.md#3" in lines[2] and "no chunk_id" in lines[2]
    assert "4 citation(s): 1 fresh, 1 missing, 2 unknown" in result.stderr


def test_check_stale_only_exits_1(tree):
    docs, _art, _cwd = tree
    (docs / "a.md").write_text("Completely different text now.\n", encoding="utf-8")
    result = inspect(tree, "--check", "docs/a.md#0", "--json")
    assert result.returncode == 1
    obj = json.loads(result.stdout)
    assert obj["ok"] is False and obj["status"] == "changed"


def test_check_with_a_malformed_reference_exits_2(tree):
    result = inspect(tree, "--check", "docs/a.md#0", "docs/a.md")
    assert result.returncode == 2
    assert result.stdout.splitlines()[1].startswith("error")


def test_root_flag_and_the_remembered_root(tree, tmp_path):
    docs, _art, _cwd = tree
    new_parent = tmp_path / "moved"
    new_parent.mkdir()
    docs.rename(new_parent / "docs")
    gone = inspect(tree, "docs/a.md#0", "--json")
    assert json.loads(gone.stdout)["status"] == "missing"
    found = inspect(tree, "docs/a.md#0", "--json", "--root", str(new_parent))
    assert json.loads(found.stdout)["status"] == "fresh"
    assert json.loads(found.stdout)["path"] == str(new_parent / "docs" / "a.md")


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ref, code, words",
    [
        ("docs/nope.md#0", 1, "no chunk_id"),
        ("docs#9999", 1, "there is no chunk 9999"),
        ("docs/a.md", 2, "malformed reference"),
        ("docs/a.md#01", 2, "malformed reference"),
    ],
)
def test_bad_references_give_one_line_and_the_exit_code(tree, ref, code, words):
    result = inspect(tree, ref)
    assert result.returncode == code
    assert result.stderr.count("\n") == 1 and words in result.stderr and "Traceback" not in result.stderr


def test_a_reference_into_another_index(tree, tmp_path):
    _docs, art, _cwd = tree
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.md").write_text("Another index entirely.\n", encoding="utf-8")
    sync(other, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    result = inspect(tree, "other#0", "--index", "docs")
    assert result.returncode == 2 and "points into index 'other'" in result.stderr
    # Without --index the short form selects its index, and a chunk_id its folder's index.
    both = inspect(tree, "other#0", "docs/a.md#0", "--json")
    assert both.returncode == 0, both.stderr
    assert [json.loads(x)["index_id"] for x in both.stdout.splitlines()] == ["other", "docs"]


def test_an_index_that_fails_validation_exits_3(tree):
    _docs, art, _cwd = tree
    docs_jsonl = Path(os.path.realpath(art / "rag" / "docs")) / "docs.jsonl"
    docs_jsonl.write_bytes(docs_jsonl.read_bytes()[:-1])
    result = inspect(tree, "docs/a.md#0")
    assert result.returncode == 3 and "docs.jsonl" in result.stderr


@pytest.mark.parametrize("escape", ["../secret.md", "evil/../../secret.md", "ABSOLUTE"])
def test_a_hand_edited_doc_id_pointing_outside_exits_3_and_reads_nothing(tree, tmp_path, escape):
    _docs, art, _cwd = tree
    secret = tmp_path / "secret.md"
    secret.write_text("A secret that must never be shown.\n", encoding="utf-8")
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "a.md").write_text("A secret that must never be shown.\n", encoding="utf-8")
    sync(evil, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    doc_id = str(secret) if escape == "ABSOLUTE" else escape
    docs_jsonl = Path(os.path.realpath(art / "rag" / "evil")) / "docs.jsonl"
    record = json.loads(docs_jsonl.read_text(encoding="utf-8"))
    record.update(chunk_id=f"{doc_id}#0", doc_id=doc_id, uri=doc_id)
    docs_jsonl.write_text(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    for ref in (f"{doc_id}#0", "evil#0"):
        result = inspect(tree, ref, "--index", "evil", "--root", str(evil.parent))
        assert result.returncode == 3, result.stderr
        assert "outside the indexed folder" in result.stderr and result.stdout == ""


def test_no_index_and_bad_flags(tree, tmp_path):
    empty = ragtui("inspect", "docs#0", "--artifacts", str(tmp_path / "none"))
    assert empty.returncode == 2 and "no index" in empty.stderr
    assert inspect(tree, "docs#0", "--context", "-1").returncode == 2


def test_inspect_never_loads_the_embedder(tree):
    """Even with an embedder configured that could not start, inspect works and never imports one."""
    _docs, art, cwd = tree
    code = (
        "import sys\n"
        "from ragtui.cli import main\n"
        f"rc = main(['inspect', 'docs#0', '--json', '--artifacts', {str(art)!r}])\n"
        "loaded = [m for m in sys.modules if m.startswith('ragtui.core.embedders') or m == 'wordllama']\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
        "raise SystemExit(rc)\n"
    )
    env = {**os.environ, "RAGTUI_EMBEDDER": "http", "RAGTUI_EMBED_URL": "http://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stderr


# -- --open ----------------------------------------------------------------------------------


def fake_editor(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """An executable called ``name`` that records its arguments, one per line."""
    log = tmp_path / f"{name}.argv"
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / name
    script.write_text(f"#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{log}'\n", encoding="utf-8")
    script.chmod(0o755)
    return script, log


@pytest.mark.parametrize("name", ["vim", "nvim", "nano", "emacs", "micro"])
def test_open_uses_plus_line_for_terminal_editors(tree, tmp_path, name):
    docs, _art, _cwd = tree
    script, log = fake_editor(tmp_path, name)
    expected = json.loads(inspect(tree, "docs/a.md#2", "--json").stdout)["start_line"]
    result = inspect(tree, "docs/a.md#2", "--open", env={"EDITOR": f"{script} -n"})
    assert result.returncode == 0, result.stderr
    assert log.read_text(encoding="utf-8").splitlines() == ["-n", f"+{expected}", str(docs / "a.md")]


def test_open_uses_goto_for_vs_code_and_prefers_visual(tree, tmp_path):
    docs, _art, _cwd = tree
    script, log = fake_editor(tmp_path, "code")
    expected = json.loads(inspect(tree, "docs/a.md#2", "--json").stdout)["start_line"]
    result = inspect(tree, "docs/a.md#2", "--open", env={"VISUAL": f"{script} --wait", "EDITOR": "/nonexistent/vi"})
    assert result.returncode == 0, result.stderr
    assert log.read_text(encoding="utf-8").splitlines() == ["--wait", "--goto", f"{docs / 'a.md'}:{expected}"]


def test_open_uses_file_colon_line_for_helix(tree, tmp_path):
    docs, _art, _cwd = tree
    script, log = fake_editor(tmp_path, "hx")
    expected = json.loads(inspect(tree, "docs/a.md#2", "--json").stdout)["start_line"]
    result = inspect(tree, "docs/a.md#2", "--open", env={"EDITOR": str(script)})
    assert result.returncode == 0, result.stderr
    assert log.read_text(encoding="utf-8").splitlines() == [f"{docs / 'a.md'}:{expected}"]


def test_open_without_an_editor_says_to_set_one(tree):
    result = inspect(tree, "docs/a.md#0", "--open")
    assert result.returncode == 2 and "$EDITOR" in result.stderr

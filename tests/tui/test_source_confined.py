"""The source view and the editor jump never read or open a file outside the ingested folder.

The index is ingested from ``home/docs`` and its docs.jsonl then renamed to
point at ``home/.ssh/id_rsa`` (still a valid index): jumping to it or opening
it in $EDITOR must be refused with a notice, the detail pane must say why,
and no byte of the key may reach the screen.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ragtui.core.ingest.publish import state_dir
from ragtui.tui.screens.source import SourceScreen
from tests.files import write
from tests.tui import Notices, ingest, make_app, ready, search, settled, wait_for

KEY_LINE = "-----BEGIN OPENSSH PRIVATE KEY-----"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"


def crafted(tmp_path: Path, doc_id: str, keep_state: bool = True) -> tuple[Path, Path]:
    home = tmp_path / "home"
    write(home / "docs" / "a.md", KEY_LINE + "\n")
    art = tmp_path / "artifacts"
    ingest(home / "docs", art)
    docs_jsonl = Path(os.path.realpath(art / "rag" / "docs")) / "docs.jsonl"
    record = json.loads(docs_jsonl.read_text(encoding="utf-8"))
    record.update(chunk_id=f"{doc_id}#0", doc_id=doc_id, uri=doc_id)
    docs_jsonl.write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
    if not keep_state:
        shutil.rmtree(state_dir(art, "docs"))
    write(home / doc_id, f"{KEY_LINE}\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n")
    return art, home


def _editor(tmp_path: Path) -> Path:
    script = write(tmp_path / "editor.sh", f"#!/bin/sh\necho \"$@\" > {tmp_path / 'editor-ran'}\n")
    script.chmod(0o755)
    return script


async def _refused(app, pilot, tmp_path, words: str, notices: Notices) -> None:
    await search(pilot, "OPENSSH PRIVATE KEY")
    assert app.results.hits, "the crafted chunk should be found"
    detail = app.main.detail
    await wait_for(pilot, lambda: detail._problem is not None, "the detail pane's problem")
    assert words in detail._problem

    def refusals() -> int:  # the source view and the editor resolve in the same worker group, "jump"
        return sum(said.startswith("jump failed") and words in said for said in notices.sent)

    await pilot.press("escape")  # from the query box to the results
    for n, key in enumerate(("o", "e"), 1):  # o: the source view, e: $EDITOR
        await pilot.press(key)
        await wait_for(pilot, lambda n=n: isinstance(app.screen, SourceScreen) or refusals() == n, f"refusal {n}")
        assert not isinstance(app.screen, SourceScreen), "the source view opened"
    await settled(pilot)
    assert app.editor_runs == [] and not (tmp_path / "editor-ran").exists()
    screen_text = "".join(str(w.render()) for w in app.screen.query("*") if hasattr(w, "render"))
    assert KEY_BODY not in screen_text


async def test_a_doc_id_beside_the_ingested_folder_is_refused_by_the_source_view_and_the_editor(tmp_path,
                                                                                                monkeypatch, notices):
    monkeypatch.setenv("EDITOR", str(_editor(tmp_path)))
    art, _home = crafted(tmp_path, ".ssh/id_rsa")
    app = make_app(art)
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await _refused(app, pilot, tmp_path, notices=notices, words="not in the ingested folder 'docs'")


async def test_no_recorded_folder_is_refused_not_looked_for_in_the_current_directory(tmp_path, monkeypatch,
                                                                                    notices):
    monkeypatch.setenv("EDITOR", str(_editor(tmp_path)))
    art, home = crafted(tmp_path, "etc/passwd", keep_state=False)
    monkeypatch.chdir(home)  # where the old default would have found home/etc/passwd
    app = make_app(art)
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await _refused(app, pilot, tmp_path, notices=notices, words="--root")

"""Several indexes searched together from the picker (space marks, enter opens): each hit names its index."""

from __future__ import annotations

from ragtui.core.search.multi import search_many
from ragtui.tui import backend
from ragtui.tui.screens.indexes import IndexScreen
from ragtui.tui.screens.source import SourceScreen
from tests.tui import ingest, make_app, ready, search, settled, wait_for
from tests.tui.test_indexes import _two_indexes


async def _open_both(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen), "the index picker")
    picker = app.screen
    await wait_for(pilot, lambda: picker.names == ["demo", "faq"], "the list")
    await pilot.press("space", "down", "space")
    assert picker.marked == {"demo", "faq"}
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.several is not None and app.index_state == "ready", "both indexes")
    await wait_for(pilot, lambda: app.vectors == "ready", "the embedder")


def _shown(app) -> list[tuple[str, str, float]]:
    table = app.main.results
    return [(source, hit.chunk_id, hit.score) for source, hit in zip(table.sources, table.hits)]


async def test_marked_indexes_are_searched_together_and_each_hit_names_its_index(tmp_path):
    app = make_app(_two_indexes(tmp_path))
    async with app.run_test(size=(120, 30)) as pilot:
        await _open_both(pilot)
        assert list(app.several) == ["demo", "faq"]
        await search(pilot, "index")
        shown = _shown(app)
        assert {source for source, _, _ in shown} == {"demo", "faq"}
        for source, chunk_id, _ in shown:
            assert chunk_id.startswith(f"{source}/")  # each index holds its own folder's documents
        params = backend.search_params(app.settings, "bm25", app.fusion)
        expected = search_many(app.several, "index", mode="bm25", k=app.k, **params)
        assert shown == [(h.index_id, h.chunk_id, h.score) for h in expected.hits]
        # The chunk_id cell names the index; the mode bar says how many are searched.
        cell = str(app.main.results.get_row_at(0)[2])
        assert cell.startswith(f"{shown[0][0]}:") and shown[0][1].endswith(cell.split(":", 1)[1].lstrip("…"))
        assert "2 indexes" in str(app.main.query_one("#mode-params").render())
        assert "demo + faq" in app.main.query_one("#status").state.index
        # A vector mode too: equal to search_many's flat ranking.
        await pilot.press("escape", "1")
        await settled(pilot)
        expected = search_many(app.several, "index", mode="flat", k=app.k)
        assert _shown(app) == [(h.index_id, h.chunk_id, h.score) for h in expected.hits]
        # IVF: each index probed with its own lists and default nprobe.
        await pilot.press("2")
        await settled(pilot)
        expected = search_many(app.several, "index", mode="ivf", k=app.k)
        assert _shown(app) == [(h.index_id, h.chunk_id, h.score) for h in expected.hits]
        assert {source for source, _, _ in _shown(app)} == {"demo", "faq"}


async def test_jump_from_a_hit_of_the_second_index_opens_that_index_source(tmp_path):
    app = make_app(_two_indexes(tmp_path))
    async with app.run_test(size=(120, 30)) as pilot:
        await _open_both(pilot)
        await search(pilot, "index")
        table = app.main.results
        row = table.sources.index("faq")
        table.focus()
        table.move_cursor(row=row)
        await settled(pilot)
        hit = table.selected_hit
        assert table.selected_source == "faq"
        await wait_for(pilot, lambda: app.main.detail.citation is not None
                       and app.main.detail.citation.chunk_id == hit.chunk_id, "the detail's citation")
        assert app.main.detail.citation.path == tmp_path / "src" / "faq" / "faq.md"
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
        screen = app.screen
        assert screen.citation.chunk_id == hit.chunk_id
        assert screen.citation.path == tmp_path / "src" / "faq" / "faq.md"


async def test_one_index_actions_say_so_and_picking_one_index_leaves_several_mode(tmp_path, notices):
    app = make_app(_two_indexes(tmp_path))
    async with app.run_test(message_hook=notices, size=(120, 30)) as pilot:
        await _open_both(pilot)
        await search(pilot, "index")
        await pilot.press("escape", "p", "v", "right_square_bracket")
        await wait_for(pilot, lambda: notices.count("works on one index at a time") == 3, "three notices")
        assert app.screen is app.main and app.nprobe is None and app.packed is None
        # enter without marks opens that one index, as before.
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen), "the picker")
        picker = app.screen
        await wait_for(pilot, lambda: picker.names == ["demo", "faq"], "the list")
        await pilot.press("down", "enter")
        await ready(pilot)
        await wait_for(pilot, lambda: app.several is None and app.index_id == "faq", "one index")
        await settled(pilot)
        assert app.main.results.sources == ()
        assert {h.doc_id for h in app.results.hits} == {"faq/faq.md"}


async def test_each_of_several_indexes_reloads_when_republished(tmp_path):
    artifacts = _two_indexes(tmp_path)
    app = make_app(artifacts)
    async with app.run_test(size=(120, 30)) as pilot:
        await _open_both(pilot)
        await search(pilot, "zanzibar")
        assert app.main.results.hits == ()
        folder = tmp_path / "src" / "faq"
        (folder / "new.md").write_text("# Zanzibar\n\nzanzibar is an island.\n", encoding="utf-8")
        ingest(folder, artifacts)
        await wait_for(pilot, lambda: app.reloads >= 1, "the reload of faq")
        await settled(pilot)
        assert [(s, h.doc_id) for s, h in zip(app.main.results.sources, app.main.results.hits)] == [
            ("faq", "faq/new.md")]

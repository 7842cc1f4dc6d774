"""``p``: the results on screen packed into the token budget, written under the cache and copied."""

from __future__ import annotations

import os

from ragtui.core.answer.pack import DEFAULT_BUDGET
from tests.tui import make_app, ready, search, wait_for


async def test_p_packs_the_shown_results_to_a_file_and_the_clipboard(demo_index, tmp_path, notices):
    artifacts, _ = demo_index
    app = make_app(artifacts)
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        shown = {h.chunk_id for h in app.main.results.hits}
        await pilot.press("escape", "p")
        await wait_for(pilot, lambda: app.packed is not None, "the pack")
        outcome = app.packed
        result = outcome.pack
        # The pack's own file, under $XDG_CACHE_HOME (the fixture's), not beside the index.
        assert outcome.path.parent == tmp_path / "cache" / "ragtui" / "packs"
        assert outcome.path.name.startswith("demo-") and outcome.path.suffix == ".md"
        assert outcome.path.read_text(encoding="utf-8") == outcome.text == result.markdown()
        assert not [n for n in os.listdir(outcome.path.parent) if n != outcome.path.name]  # no temporary left
        assert app.clipboard == outcome.text
        # Counted with the index's tokenizer, within the default budget, from the results on screen.
        assert result.tokenizer == app.retriever.meta.tokenizer
        assert result.budget == DEFAULT_BUDGET and 0 < result.used <= DEFAULT_BUDGET
        assert result.snippets and {c for s in result.snippets for c in s.chunk_ids} <= shown
        said = f"packed {len(result.snippets)} snippets, {result.used}/{DEFAULT_BUDGET} tokens → {outcome.path}"
        await wait_for(pilot, lambda: notices.any(said), "the notice")
        assert not (artifacts / "rag" / "demo").joinpath(outcome.path.name).exists()


async def test_p_without_results_or_tokenizer_says_why(demo_index, notices):
    """Nothing to pack before a search; while the embedder (which brings the tokenizer) is off, p says so."""
    from ragtui.core.errors import EmbeddingError

    def broken(settings):
        raise EmbeddingError("model server down")

    app = make_app(demo_index[0], embedder_factory=broken)
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot, vectors="off")
        await pilot.press("escape", "p")
        await wait_for(pilot, lambda: notices.any("nothing to pack"), "no results")
        await pilot.press("s")
        await search(pilot, "index")
        assert app.main.results.hits  # BM25 works without the embedder
        await pilot.press("escape", "p")
        await wait_for(pilot, lambda: any("index's tokenizer" in said and "model server down" in said
                                          for said in notices.sent), "the reason")
        assert app.packed is None and app.clipboard == ""

"""Live: an ingest in another process is picked up and the query re-run; ``--watch`` runs the agent in-process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ragtui.app import DEFAULT_RECONCILE_EVERY, walk_rules
from tests.tui import make_app, ready, search, settled, wait_for

ROOT = Path(__file__).resolve().parents[2]


def ingest_in_another_process(folder: Path, artifacts: Path) -> None:
    code = "import sys; from pathlib import Path; from tests.tui import ingest; ingest(Path(sys.argv[1]), Path(sys.argv[2]))"
    subprocess.run([sys.executable, "-c", code, str(folder), str(artifacts)], cwd=ROOT, check=True, timeout=120)


async def test_an_ingest_in_another_process_reloads_and_reruns_the_query(own_demo, notices):
    artifacts, folder = own_demo
    app = make_app(artifacts, poll_seconds=0.05)
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await search(pilot, "zebra")
        assert app.results.hits == ()
        before = app.retriever.meta.n_chunks
        (folder / "zebra.md").write_text("# Zebras\n\nA zebra has stripes; ragtui finds the zebra by BM25.\n")
        ingest_in_another_process(folder, artifacts)
        await wait_for(pilot, lambda: app.reloads == 1, "the reload")
        await settled(pilot)
        assert app.retriever.meta.n_chunks == before + 1
        assert [h.chunk_id for h in app.results.hits] == ["demo/zebra.md#0"]
        assert app.results.request.query == "zebra"
        assert notices.any("index reloaded")
        await wait_for(pilot, lambda: app.main.detail.citation is not None, "the new chunk's citation")
        assert app.main.detail.citation.status == "fresh"
        # The vector modes follow the new generation too (its IVF lists are rebuilt).
        await wait_for(pilot, lambda: app.ivf_state == "built", "the IVF lists of the new generation")
        await pilot.press("f2")
        await settled(pilot)
        assert "demo/zebra.md#0" in [h.chunk_id for h in app.results.hits]


async def test_nothing_changes_when_nothing_was_published(own_demo):
    artifacts, folder = own_demo
    app = make_app(artifacts, poll_seconds=0.05)
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "index")
        ingest_in_another_process(folder, artifacts)  # same files: nothing is written
        generation = app.retriever.data.generation
        for _ in range(5):
            await wait_for(pilot, lambda: any(w.group == "reload" for w in app.workers), "a poll")
            await pilot.pause(0.05)
        assert app.reloads == 0 and app.retriever.data.generation == generation


async def test_watch_builds_the_index_and_keeps_it_fresh(tmp_path):
    folder = tmp_path / "src" / "notes"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("# Apples\n\nApples are red or green.\n")
    artifacts = tmp_path / "artifacts"
    app = make_app(artifacts, watch=folder, poll_seconds=0.05)
    async with app.run_test() as pilot:
        assert app.index_id == "notes"
        await ready(pilot)  # the agent published the first generation, the app opened it
        assert app.agent is not None and app.agent.agent.running
        # The agent `ragtui watch FOLDER` would run: the same walk rules, the same periodic reconcile.
        assert app.agent.agent.reconcile_every == DEFAULT_RECONCILE_EVERY and app.agent.agent.rules == walk_rules()
        await wait_for(pilot, lambda: app.live_text.startswith("watch:"), "the agent's activity line")
        await search(pilot, "pears")
        assert app.results.hits == ()
        (folder / "b.md").write_text("# Pears\n\nPears are sweet.\n")
        await wait_for(pilot, lambda: app.results is not None and app.results.hits, "the new file's chunk")
        assert [h.chunk_id for h in app.results.hits] == ["notes/b.md#0"]
        status = app.main.query_one("#status").state
        assert status.live.startswith("watch: ") and not status.live_error
    assert not app.agent.agent.running  # quitting stops the agent


async def test_a_publish_is_noticed_at_once_without_the_poll(own_demo):
    artifacts, folder = own_demo
    app = make_app(artifacts, poll_seconds=3600.0)  # the poll never comes: filesystem events must do it
    async with app.run_test() as pilot:
        await ready(pilot)
        assert app.follower is not None and app.follower.active
        await search(pilot, "quokka")
        (folder / "quokka.md").write_text("# Quokkas\n\nA quokka smiles.\n")
        ingest_in_another_process(folder, artifacts)
        await wait_for(pilot, lambda: app.reloads == 1, "the reload")
        await settled(pilot, "quokka")
        assert [h.chunk_id for h in app.results.hits] == ["demo/quokka.md#0"]
    assert not app.follower.active


async def test_a_save_is_announced_once_when_its_overlay_came_before_its_publish(own_demo, notices):
    """A watch agent's save is searchable through its overlay, then published: the search follows both, the
    notification says it once."""
    from ragtui.core.ingest.sync import IndexWriter
    from tests.tui import MAX_TOKENS, OVERLAP
    from tests.unit.fakes import HashEmbedder
    from tests.unit.publishfaults import save_unpublished

    artifacts, folder = own_demo
    app = make_app(artifacts, poll_seconds=0.05)
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await search(pilot, "zebra")
        writer = IndexWriter(folder, artifacts=artifacts, embedder=HashEmbedder(), max_tokens=MAX_TOKENS,
                             overlap=OVERLAP, overlay=True)
        (folder / "zebra.md").write_text("# Zebras\n\nA zebra has stripes.\n")
        save_unpublished(writer)  # the overlay is written, the publish fails
        await wait_for(pilot, lambda: app.reloads == 1, "the overlay taken")
        await settled(pilot)
        assert app.retriever.data is not app.retriever.published
        assert [h.chunk_id for h in app.results.hits] == ["demo/zebra.md#0"]
        assert writer.sync().published
        await wait_for(pilot, lambda: app.reloads == 2, "the publish taken")
        await settled(pilot)
        assert app.retriever.data is app.retriever.published
        assert [h.chunk_id for h in app.results.hits] == ["demo/zebra.md#0"]
        assert notices.count("index reloaded") == 1

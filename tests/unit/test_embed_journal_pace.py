"""The embed journal is saved by time as well as by count, and on failure (ingest/assemble.embed_pending)."""

from __future__ import annotations

import numpy as np
import pytest

from ragtui.core.errors import EmbeddingError
from ragtui.core.index.records import ChunkRecord, fingerprint
from ragtui.core.ingest.assemble import JOURNAL_SECONDS, Assembly, embed_pending
from ragtui.core.ingest.journal import EmbedJournal
from ragtui.core.ingest.report import SyncReport
from tests.unit.fakes import HashEmbedder

DIM = 16


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class PartsEmbedder(HashEmbedder):
    """Answers ``per_part`` texts at a time through ``embed_parts``, each part costing ``seconds`` of the clock."""

    def __init__(self, clock: Clock, per_part: int, seconds: float, fail_after: int | None = None) -> None:
        super().__init__(DIM)
        self.clock, self.per_part, self.seconds, self.fail_after = clock, per_part, seconds, fail_after
        self.closed = False

    def embed_parts(self, texts):
        try:
            for n, lo in enumerate(range(0, len(texts), self.per_part)):
                if self.fail_after is not None and n == self.fail_after:
                    raise EmbeddingError("the server went away")
                self.clock.now += self.seconds
                positions = list(range(lo, min(lo + self.per_part, len(texts))))
                yield positions[::-1], self.embed([texts[i] for i in positions[::-1]])  # any order
        finally:
            self.closed = True


class RecordingJournal(EmbedJournal):
    def __init__(self, tmp_path) -> None:
        super().__init__(tmp_path, "docs", "test-hash", DIM)
        self.appends: list[int] = []

    def append(self, fingerprints, vectors) -> None:
        self.appends.append(len(fingerprints))
        super().append(fingerprints, vectors)


def assembly(n: int) -> Assembly:
    texts = [f"chunk text number {i}" for i in range(n)]
    records = [ChunkRecord(f"d#{i}", "d", "file", "d", t, 4, fingerprint(t)) for i, t in enumerate(texts)]
    return Assembly(records=records, vectors=np.zeros((n, DIM), dtype=np.float32),
                    pending={r.fingerprint: [i] for i, r in enumerate(records)})


def test_a_slow_backend_is_journaled_every_few_seconds(tmp_path):
    clock = Clock()
    asm, journal = assembly(40), RecordingJournal(tmp_path)
    emb = PartsEmbedder(clock, per_part=4, seconds=JOURNAL_SECONDS * 0.6)
    embed_pending(asm, emb, journal, SyncReport("docs", "x"), lambda *a: None, clock=clock)
    assert journal.appends == [8, 8, 8, 8, 8]  # every second part: the first to reach JOURNAL_SECONDS
    np.testing.assert_allclose(asm.vectors, HashEmbedder(DIM).embed([r.text for r in asm.records]), atol=1e-6)
    assert not asm.pending


def test_what_was_answered_before_a_failure_is_journaled(tmp_path):
    clock = Clock()
    asm, journal = assembly(40), RecordingJournal(tmp_path)
    emb = PartsEmbedder(clock, per_part=4, seconds=0.0, fail_after=3)
    with pytest.raises(EmbeddingError, match="went away"):
        embed_pending(asm, emb, journal, SyncReport("docs", "x"), lambda *a: None, clock=clock)
    assert emb.closed
    kept = journal.load()
    assert len(kept) == 12 and set(kept) == {r.fingerprint for r in asm.records[:12]}


def test_a_plain_embedder_is_called_in_smaller_groups_when_slow(tmp_path):
    clock = Clock()

    class Slow(HashEmbedder):
        calls: list[int] = []

        def embed(self, texts):
            self.calls.append(len(texts))
            clock.now += 0.1 * len(texts)  # 10 texts a second
            return super().embed(texts)

    asm, journal = assembly(300), RecordingJournal(tmp_path)
    slow = Slow(DIM)
    embed_pending(asm, slow, journal, SyncReport("docs", "x"), lambda *a: None, clock=clock)
    assert slow.calls[0] == 256 and max(slow.calls[1:]) <= 20 and sum(slow.calls) == 300
    assert len(journal.load()) == 300


# --- a sync that finds nothing to do asks no server ---------------------------------------

def _http(url: str, **kw):
    from ragtui.core.embedders.http import HTTPEmbedder
    from tests.unit.fakes import WordTokenizer

    options = {"retries": 0, "timeout": 5.0, **kw}
    return HTTPEmbedder(url, "test-hash", tokenizer=WordTokenizer(), **options)


def test_a_no_change_sync_does_not_probe_the_server(tmp_path):
    from ragtui.core.ingest.sync import sync
    from tests.helpers.embed_server import EmbedServer

    folder, art = tmp_path / "docs", tmp_path / "art"
    folder.mkdir()
    (folder / "a.md").write_text("alpha beta gamma\n", encoding="utf-8")
    with EmbedServer(HashEmbedder(DIM)) as srv:
        url = srv.url
        with _http(url) as e:
            assert sync(folder, artifacts=art, embedder=e).published
    # The server is gone: a sync with nothing to do succeeds without it.
    with _http(url) as e:
        report = sync(folder, artifacts=art, embedder=e)
        assert not report.published and e.known_dim is None
    # Something changed: now the server is needed, and its absence is the error.
    (folder / "b.md").write_text("delta\n", encoding="utf-8")
    with _http(url) as e, pytest.raises(EmbeddingError, match="cannot connect"):
        sync(folder, artifacts=art, embedder=e)


def test_a_server_answering_another_dimension_under_the_same_name_rebuilds(tmp_path):
    from ragtui.core.index.index_format import read_index
    from ragtui.core.ingest.sync import sync
    from tests.helpers.embed_server import EmbedServer

    folder, art = tmp_path / "docs", tmp_path / "art"
    folder.mkdir()
    (folder / "a.md").write_text("alpha beta gamma\n", encoding="utf-8")
    with EmbedServer(HashEmbedder(DIM)) as srv, _http(srv.url) as e:
        sync(folder, artifacts=art, embedder=e)
    (folder / "b.md").write_text("delta\n", encoding="utf-8")
    with EmbedServer(HashEmbedder(8)) as srv, _http(srv.url) as e:
        report = sync(folder, artifacts=art, embedder=e)
    data = read_index(art / "rag" / "docs")
    assert report.published and data.meta.dim == 8 and data.vectors.shape == (2, 8)


def test_requests_that_timed_out_or_were_retried_are_reported_not_silent(tmp_path):
    from ragtui.core.ingest.sync import sync
    from tests.helpers.embed_server import EmbedServer, Fault

    folder, art = tmp_path / "docs", tmp_path / "art"
    folder.mkdir()
    for i in range(12):
        (folder / f"d{i}.md").write_text(" ".join(f"word{i}x{j}" for j in range(40)) + "\n", encoding="utf-8")
    with EmbedServer(HashEmbedder(DIM)) as srv:
        # One request hangs (the server too slow for it), one answers 503 once.
        srv.queue(Fault("status", status=503, path="/v1/embeddings"), Fault("hang", path="/v1/embeddings"))
        with _http(srv.url, dim=DIM, timeout=1.0, retries=2, backoff=0.0, batch_size=4) as e:
            report = sync(folder, artifacts=art, embedder=e)
    assert report.published
    stats = report.to_json()["embedding"]
    assert stats["timeouts"] == 1 and stats["resent_texts"] >= 1 and stats["lost_seconds"] > 0
    assert stats["retried"] == 1 and stats["requests"] >= 3
    warnings = "\n".join(report.warnings)
    assert "did not answer 1 request(s) within 1s" in warnings and "sent again in smaller batches" in warnings
    assert "1 request(s) to the embedding server were repeated" in warnings

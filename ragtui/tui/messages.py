"""Messages that workers and the watch agent post to the app when slow work ends.

Each worker ends with exactly one of these (or with an error, which the
app's one worker-error handler turns into a visible state). They may be
posted from any thread: ``post_message`` is thread-safe.
"""

from __future__ import annotations

import functools

from textual.message import Message

__all__ = [
    "while_running",
    "CitationReady",
    "CompareDone",
    "EmbedderReady",
    "IndexChanged",
    "IndexListed",
    "IndexOpened",
    "IndexPublished",
    "IndexReloaded",
    "IvfBuilt",
    "PackDone",
    "RerankDone",
    "RerankerReady",
    "SearchDone",
    "StatsReady",
    "WatchActivity",
]


def while_running(handler):
    """Drop a message that arrives while the app shuts down: a worker may finish after the
    widgets it would update are gone."""

    @functools.wraps(handler)
    def guarded(self, *args):
        if self.is_running:
            return handler(self, *args)
        return None

    return guarded


class IndexOpened(Message):
    """An index was opened and validated; ``retriever`` is ready for BM25 at once. ``several``: the
    indexes opened to be searched together (index id -> retriever, ``retriever`` the first), else None."""

    def __init__(self, retriever, path, several: dict | None = None) -> None:
        super().__init__()
        self.retriever = retriever
        self.path = path
        self.several = several


class IndexReloaded(Message):
    """``retriever`` moved to a new generation on disk; ``old_n`` was its previous chunk count. ``quiet``: the
    publish of the save it searched through an overlay already (nothing new to announce)."""

    def __init__(self, retriever, old_n: int, *, quiet: bool = False) -> None:
        super().__init__()
        self.retriever = retriever
        self.old_n = old_n
        self.quiet = quiet


class EmbedderReady(Message):
    """The configured embedder is loaded (vector modes can run once it matches the index); or, with
    ``per_index`` (index id -> embedder), the open indexes' own embedders, ``embedder`` the first's."""

    def __init__(self, embedder, per_index: dict | None = None) -> None:
        super().__init__()
        self.embedder = embedder
        self.per_index = per_index


class IvfBuilt(Message):
    """The IVF lists of generation ``generation`` are built (``info``: a ``backend.IvfInfo``)."""

    def __init__(self, info, generation: str) -> None:
        super().__init__()
        self.info = info
        self.generation = generation


class SearchDone(Message):
    """One search finished (``outcome``: a ``backend.SearchOutcome``); stale ones are dropped by seq."""

    def __init__(self, outcome) -> None:
        super().__init__()
        self.outcome = outcome


class RerankerReady(Message):
    """The cross-encoder is loaded; searches from now on are reranked."""

    def __init__(self, reranker) -> None:
        super().__init__()
        self.reranker = reranker


class RerankDone(Message):
    """The reranked order of a search (``outcome``: a ``backend.RerankOutcome``); stale ones are dropped."""

    def __init__(self, outcome) -> None:
        super().__init__()
        self.outcome = outcome


class PackDone(Message):
    """The shown results were packed and written (``outcome``: a ``backend.PackOutcome``)."""

    def __init__(self, outcome) -> None:
        super().__init__()
        self.outcome = outcome


class CitationReady(Message):
    """A chunk was resolved to its source (``source``: a ``backend.SourceText``) for ``purpose``:
    "detail" (the detail pane), "jump" (the source view) or "edit" ($EDITOR)."""

    def __init__(self, chunk_id: str, source, purpose: str) -> None:
        super().__init__()
        self.chunk_id = chunk_id
        self.source = source
        self.purpose = purpose


class CompareDone(Message):
    """The compare view's searches finished (``outcome``: a ``backend.CompareOutcome``)."""

    def __init__(self, outcome) -> None:
        super().__init__()
        self.outcome = outcome


class IndexListed(Message):
    """The index ids under the artifacts root, and (name, problem) of each broken entry beside them."""

    def __init__(self, names: list[str], broken: tuple | list = ()) -> None:
        super().__init__()
        self.names = names
        self.broken = list(broken)


class StatsReady(Message):
    """Stats of one index (``stats``: a ``backend.IndexStats``), or ``error`` saying why there are none."""

    def __init__(self, index_id: str, stats=None, error: str | None = None) -> None:
        super().__init__()
        self.index_id = index_id
        self.stats = stats
        self.error = error


class IndexPublished(Message):
    """The in-process watch agent published a new generation (``summary``: one line)."""

    def __init__(self, summary: str) -> None:
        super().__init__()
        self.summary = summary


class IndexChanged(Message):
    """Something was published under the open index's name (from the index follower); check it."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, IndexChanged)


class WatchActivity(Message):
    """One line about what the watch agent is doing; only the newest matters."""

    def __init__(self, text: str, error: bool = False) -> None:
        super().__init__()
        self.text = text
        self.error = error

    def can_replace(self, message: Message) -> bool:
        # A burst of agent events must not queue up: the status line shows only the latest.
        return isinstance(message, WatchActivity) and not self.error

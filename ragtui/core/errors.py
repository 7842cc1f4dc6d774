"""The one exception hierarchy of ragtui.core.

Every error that core raises on purpose is a ``RagtuiError``; the CLI maps each
class to an exit code (spec/architecture.md) and prints ``str(error)`` as one line.

    RagtuiError                       exit 2 unless a subclass says otherwise
    ├── UsageError                    bad arguments or bad input from the user (2)
    │   └── QueryError                a query that cannot be searched (too long, not UTF-8, malformed); also a ValueError
    ├── NotFoundError                 nothing found, e.g. an unknown chunk_id (1)
    ├── IndexFormatError              an index file is malformed (3)
    │   └── (carries .path: the file, .problem: what is wrong)
    ├── IndexMissingError             no index where one was expected (2)
    ├── ModelMismatchError            the index was embedded by another model / dim (2)
    ├── StorageError                  an I/O failure while reading or publishing (3)
    │   └── LockedError               another writer holds the index lock (3)
    ├── EmbeddingError                the embedding backend failed (3)
    └── LLMError                      the chat model's server failed or answered nothing usable (3)

Third-party exceptions (OSError, httpx errors, JSON errors) are wrapped at the
boundary into one of these, with a message a user can act on.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "EmbeddingError",
    "IndexFormatError",
    "IndexMissingError",
    "LLMError",
    "LockedError",
    "ModelMismatchError",
    "NotFoundError",
    "QueryError",
    "RagtuiError",
    "StorageError",
    "UsageError",
]


class RagtuiError(Exception):
    """Base of every error ragtui raises on purpose."""

    exit_code: int = 2


class UsageError(RagtuiError):
    """Bad arguments or bad input given by the user."""

    exit_code = 2


class QueryError(UsageError, ValueError):
    """A query that cannot be searched: longer than the cap, or text that is not UTF-8.

    Also a ``ValueError``, so API callers that validate input that way catch it. ``column`` is the
    1-based character of the query where a syntax mistake was found (None when the whole query is at fault).
    """

    exit_code = 2
    column: int | None = None


class NotFoundError(RagtuiError):
    """A lookup found nothing (an unknown chunk_id, an empty result)."""

    exit_code = 1


class IndexMissingError(RagtuiError):
    """No index exists where one was expected."""

    exit_code = 2


class ModelMismatchError(RagtuiError):
    """The index's embedding model or dimension differs from the configured one."""

    exit_code = 2


class IndexFormatError(RagtuiError):
    """An index file breaks the format contract.

    ``path`` names the file and ``problem`` says what is wrong with it; the
    message combines both.
    """

    exit_code = 3

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class StorageError(RagtuiError):
    """Reading or publishing failed at the operating-system level."""

    exit_code = 3


class LockedError(StorageError):
    """Another live writer holds the index lock."""

    exit_code = 3


class EmbeddingError(RagtuiError):
    """The embedding backend failed or answered something unusable."""

    exit_code = 3


class LLMError(RagtuiError):
    """The chat model's server (``ragtui ask``) failed, or answered something unusable."""

    exit_code = 3

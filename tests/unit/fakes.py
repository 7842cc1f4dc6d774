"""A small deterministic embedder for tests of the write side (the real ones have their own tests)."""

from __future__ import annotations

import hashlib
import re

import numpy as np


class WordTokenizer:
    """One token per word (a run of non-space characters), with spans that tile the text as every
    ``Tokenizer`` must: a word's token runs up to the next word, so the whitespace after a word is
    part of it and the whitespace before the first word is part of the first token. A text with no
    word at all is one token."""

    name = "test-words"
    _pattern = re.compile(r"\S+")

    def spans(self, text):
        starts = [m.start() for m in self._pattern.finditer(text)]
        if not text:
            return []
        if not starts:
            return [(0, len(text))]
        starts[0] = 0
        return list(zip(starts, [*starts[1:], len(text)]))

    def count(self, text):
        return len(self._pattern.findall(text)) or (1 if text else 0)

    def count_many(self, texts):
        return [self.count(t) for t in texts]


class HashEmbedder:
    """Bag of hashed words, L2-normalised; counts every text it embeds."""

    def __init__(self, dim: int = 16, model: str = "test-hash") -> None:
        self.dim = dim
        self.model = model
        self.tokenizer = WordTokenizer()
        self.embedded: list[str] = []

    def embed(self, texts):
        self.embedded.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[i, h % self.dim] += 1.0 if h & 1 else -1.0
            if not out[i].any():
                out[i, 0] = 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    def close(self):
        pass


class ChunkCountingEmbedder(HashEmbedder):
    """A ``HashEmbedder`` whose ``embedded`` holds only the chunks it embedded: what it embeds as queries (a
    search's, the pseudo-queries a publish calibrates its IVF lists on) goes to ``queried`` instead."""

    def __init__(self, dim: int = 16, model: str = "test-hash") -> None:
        super().__init__(dim, model)
        self.queried: list[str] = []

    def embed_query(self, texts):
        out = HashEmbedder.embed(self, texts)
        del self.embedded[len(self.embedded) - len(texts):]
        self.queried.extend(texts)
        return out

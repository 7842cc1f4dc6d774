"""ragtui.core: the headless retrieval package, one subpackage per stage of the data flow.

- ``documents``: one reader per kind of file (text, PDF, HTML, DOCX, EPUB, ODT), in worker processes.
- ``code``: the grammars and symbols of syntax-aware code chunks.
- ``embedders``: text to vectors (the embedded default, ONNX, an HTTP server) and their tokenizers.
- ``ingest``: a folder to a published index (walk, chunk, embed, write, publish).
- ``index``: the four files, their BM25 postings and the caches derived from them.
- ``search``: flat, IVF and BM25 retrieval, fusion, reranking, query syntax, the ``Retriever``.
- ``citations``: a chunk reference back to the lines of its source file, fresh or not.
- ``answer``: a pack of hits fitted to a budget, the chat model, and the check of its citations.
- ``eval``: labelled collections and the metrics over them; ``export``: the static Seekite export.
- Shared by all: ``errors`` (the exit-code classes), ``files`` (bounded, confined reads and atomic
  writes), ``fsops`` (the filesystem calls publishing makes), ``textsafe`` (text for a terminal).

Imports numpy and httpx; never textual, rich or watchdog.
"""

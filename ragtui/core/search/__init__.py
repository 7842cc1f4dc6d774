"""Searching an index: exact and IVF vector search, rank fusion, and the Retriever façade."""

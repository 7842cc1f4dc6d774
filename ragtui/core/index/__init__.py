"""The index files: the four-file format, the BM25 index and its analyzer, and the reader's caches."""

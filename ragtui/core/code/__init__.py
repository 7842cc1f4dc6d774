"""Source code: which files have a grammar (``languages``), their bounded syntax trees and definitions
(``syntax``), and the symbol paths of their chunks (``symbols``). Shared by ingest (``ingest.code_chunks``
cuts source files at their definitions) and search (the ``sym:`` filter); spec/chunker.md, "Code"."""

"""From a folder to a published index. The modules, in the order a sync uses them:

- ``sync`` (one call) and ``writer`` (``IndexWriter``): bring one index up to date with one folder.
- Reading the folder: ``walk`` (which files are documents), ``patterns`` (ignore rules), ``scan``
  (what changed, by stamp then SHA-256), ``skips`` (what the readers refused, not read again).
- Cutting: ``chunker`` (token windows) and ``code_chunks`` (source files cut at their definitions).
- Embedding: ``journal`` (vectors embedded but not yet published, kept across a failed run).
- Writing the next generation: ``assemble`` (its rows and vectors), then either ``splice`` (the
  previous generation plus the changed documents) or a full encode; ``publish`` writes the four
  files, locks, and renames the generation into place.
- After publishing: ``state`` and ``state_store`` (what the sync saw, so the next one reads less),
  ``report`` (``SyncReport``).
- Around it: ``remove`` (delete an index under its lock), ``keeper`` (which indexes a running
  ``ragtui watch`` keeps, so ``rm`` does not race it).
"""

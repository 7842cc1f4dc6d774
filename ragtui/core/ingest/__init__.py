"""From a folder to a published index: the walk, the chunker, the writer, publishing, the embedding journal."""

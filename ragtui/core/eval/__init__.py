"""Retrieval quality: labelled datasets, metrics and the evaluation runner."""

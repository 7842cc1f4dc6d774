"""ragtui.core: the headless retrieval package (formats, analyzer, BM25, flat and IVF search).

Imports numpy and httpx; never textual, rich or watchdog.
"""

"""tantivy (tantivy-py), the Lucene-class named peer of the BM25 benchmarks.

It indexes the same terms ragtui's analyzer gives (joined by spaces, split
again by tantivy's whitespace tokenizer, so both sides score the same
tokens), in RAM, with one indexing thread (ragtui's build is one thread
too), and answers a query as an OR (``Occur.Should``) of term queries:
tantivy's own BM25 (k1 1.2, b 0.75, the same idf) with block-max WAND.
Its document lengths are stored as one-byte field norms, so its scores
are close to, not equal to, the exact ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import tantivy

FIELD = "body"


class Tantivy:
    def __init__(self, doc_terms: Sequence[Sequence[str]], threads: int = 1) -> None:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field(FIELD, stored=False, tokenizer_name="ws", index_option="freq")
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema)  # in RAM
        self.index.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        writer = self.index.writer(heap_size=1_000_000_000, num_threads=threads)
        for terms in doc_terms:
            doc = tantivy.Document()
            doc.add_text(FIELD, " ".join(terms))
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        # One segment: tantivy's doc ids are then the insertion order, i.e. ragtui's chunk numbers.
        if self.searcher.num_segments != 1:
            raise RuntimeError(f"tantivy made {self.searcher.num_segments} segments; the row mapping needs one")

    def search(self, terms: Sequence[str], k: int) -> list[tuple[float, int]]:
        """(score, chunk number) of the top ``k`` for an OR of ``terms`` (repeats count again, as in ragtui)."""
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, FIELD, t)) for t in terms]
        )
        return [(score, addr.doc) for score, addr in self.searcher.search(query, k, count=False).hits]

'use strict';

/** Ranks documents for a query. */
class Retriever {
  constructor(docs) {
    this.docs = docs;
  }

  search(query, k = 10) {
    const words = query.split(/\s+/);
    return this.docs
      .map((doc, i) => [words.filter((w) => doc.includes(w)).length, i])
      .filter(([s]) => s > 0)
      .sort((a, b) => b[0] - a[0])
      .slice(0, k)
      .map(([, i]) => i);
  }
}

function makeRetriever(docs) {
  return new Retriever(docs);
}

const size = (r) => r.docs.length;

module.exports = { Retriever, makeRetriever, size };

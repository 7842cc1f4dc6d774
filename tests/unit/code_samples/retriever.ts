// A small retriever.
export interface Hit {
  doc: number;
  score: number;
}

/** Ranks documents for a query. */
export class Retriever {
  constructor(private docs: string[]) {}

  /** The best k documents for the query. */
  search(query: string, k = 10): Hit[] {
    const words = query.split(/\s+/);
    const hits: Hit[] = [];
    this.docs.forEach((doc, i) => {
      const score = words.filter((w) => doc.includes(w)).length;
      if (score > 0) {
        hits.push({ doc: i, score });
      }
    });
    hits.sort((a, b) => b.score - a.score);
    return hits.slice(0, k);
  }
}

export const rank = (r: Retriever, q: string): Hit[] => r.search(q, 3);

type Query = string;

namespace Util {
  export function words(q: Query): string[] {
    return q.split(" ");
  }
}

package rag;

import java.util.ArrayList;
import java.util.List;

/** Ranks documents for a query. */
public class Retriever {
    private final List<String> docs;

    public Retriever(List<String> docs) {
        this.docs = docs;
    }

    /** The best k documents for the query. */
    @SuppressWarnings("unused")
    public List<Integer> search(String query, int k) {
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < docs.size() && out.size() < k; i++) {
            if (docs.get(i).contains(query)) {
                out.add(i);
            }
        }
        return out;
    }

    interface Scorer {
        double score(String doc);
    }

    enum Mode { FLAT, IVF }
}

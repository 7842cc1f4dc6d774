package retriever

import "strings"

// Retriever ranks documents for a query.
type Retriever struct {
	docs []string
}

// New makes a retriever over docs.
func New(docs []string) *Retriever {
	return &Retriever{docs: docs}
}

// Search returns the best k documents for the query.
func (r *Retriever) Search(query string, k int) []int {
	words := strings.Fields(query)
	var out []int
	for i, doc := range r.docs {
		for _, w := range words {
			if strings.Contains(doc, w) {
				out = append(out, i)
				break
			}
		}
	}
	if len(out) > k {
		out = out[:k]
	}
	return out
}

func (r Retriever) Size() int { return len(r.docs) }

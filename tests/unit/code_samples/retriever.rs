//! A small retriever.

/// Ranks documents for a query.
#[derive(Debug, Clone)]
pub struct Retriever {
    docs: Vec<String>,
}

impl Retriever {
    /// Makes a retriever over docs.
    pub fn new(docs: Vec<String>) -> Self {
        Retriever { docs }
    }

    /// The best k documents for the query.
    pub fn search(&self, query: &str, k: usize) -> Vec<usize> {
        let words: Vec<&str> = query.split_whitespace().collect();
        let mut out = Vec::new();
        for (i, doc) in self.docs.iter().enumerate() {
            if words.iter().any(|w| doc.contains(w)) {
                out.push(i);
            }
        }
        out.truncate(k);
        out
    }
}

pub trait Sized2 {
    fn size(&self) -> usize;
}

impl Sized2 for Retriever {
    fn size(&self) -> usize {
        self.docs.len()
    }
}

mod tests {
    fn helper() -> usize { 1 }
}

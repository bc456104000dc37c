//! BM25 (Okapi, k1 = 1.2, b = 0.75) over a fixed set of documents, with
//! length normalisation by each document's term count and query terms
//! counted with their multiplicity.

use std::collections::HashMap;

use crate::text::for_each_term;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// An in-memory BM25 index. Documents are numbered in insertion order.
#[derive(Debug, Default)]
pub struct Bm25 {
    /// term → (document, term frequency)
    postings: HashMap<String, Vec<(u32, u32)>>,
    lengths: Vec<u32>,
    total_length: u64,
}

impl Bm25 {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a document and returns its number.
    pub fn add(&mut self, text: &str) -> usize {
        let doc = self.lengths.len() as u32;
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut len = 0u32;
        for_each_term(text, |t| {
            *counts.entry(t).or_default() += 1;
            len += 1;
        });
        for (term, tf) in counts {
            self.postings.entry(term).or_default().push((doc, tf));
        }
        self.lengths.push(len);
        self.total_length += u64::from(len);
        doc as usize
    }

    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// Scores every document against `query`; documents sharing no term
    /// score 0.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.lengths.len()];
        if self.lengths.is_empty() {
            return scores;
        }
        let n = self.lengths.len() as f64;
        let avg = (self.total_length as f64 / n).max(1.0);
        let mut query_terms: HashMap<String, u32> = HashMap::new();
        for_each_term(query, |t| *query_terms.entry(t).or_default() += 1);
        for (term, qtf) in query_terms {
            let Some(postings) = self.postings.get(&term) else {
                continue;
            };
            let df = postings.len() as f64;
            // The "+1" keeps idf positive for terms in most documents.
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(doc, tf) in postings {
                let tf = f64::from(tf);
                let len = f64::from(self.lengths[doc as usize]);
                let norm = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg));
                scores[doc as usize] += idf * norm * f64::from(qtf);
            }
        }
        scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_relevance_with_length_normalisation() {
        let mut idx = Bm25::new();
        idx.add("the deploy happens on fridays");
        idx.add(
            "deploy deploy deploy checklist for fridays and other days of the week with many words",
        );
        idx.add("unrelated text about gardening");
        let s = idx.scores("deploy fridays");
        assert!(s[0] > 0.0 && s[1] > 0.0);
        assert_eq!(s[2], 0.0);
        // The short document mentioning both terms once beats the long one.
        assert!(s[0] > s[1] * 0.8, "{s:?}");
        assert!(idx.scores("gardening")[2] > 0.0);
        assert!(idx.scores("").iter().all(|&x| x == 0.0));
    }

    #[test]
    fn rare_terms_weigh_more() {
        let mut idx = Bm25::new();
        for _ in 0..5 {
            idx.add("common words here");
        }
        idx.add("common rare");
        let s = idx.scores("rare");
        assert!(s[5] > 0.0);
        let c = idx.scores("common");
        assert!(s[5] > c[5]);
    }
}

//! BM25 (Okapi, k1 = 1.2, b = 0.75): the formula every ranking in
//! WikiOracle uses ([`idf`], [`tf_weight`]), and [`scores_docs`], one query
//! scored over a set of documents in a single pass.
//!
//! Terms are those of [`crate::terms`]; a document's length is its number
//! of words. Query terms count with their multiplicity (a term asked twice
//! weighs twice). `wo-index` keeps an inverted index and calls the formula
//! on its postings; chat retrieval asks one query per turn over documents
//! that change between turns, so [`scores_docs`] builds no index: it scans
//! each document once, counting only the query's terms and the document's
//! length, and splits large sets across threads. A caller that keeps its
//! documents between queries keeps a [`crate::postings::Postings`] instead,
//! which scores the same, bit for bit.

use std::collections::HashMap;

use crate::terms::{Scratch, for_each_term, for_each_word, for_each_word_in_xhtml};
use crate::terms::{for_each_word_term, may_have_parts};

/// Term-frequency saturation: how quickly repeats of a term stop adding.
pub const K1: f64 = 1.2;
/// Length normalisation: 0 ignores document length, 1 divides by it fully.
pub const B: f64 = 0.75;
/// Below this many documents a single thread is faster than splitting.
const PARALLEL_MIN_DOCS: usize = 4096;

/// Inverse document frequency of a term found in `df` of `n` documents.
/// The "+1" inside the logarithm keeps it positive for terms in most
/// documents (Lucene's variant), so a common term never counts against.
pub fn idf(n: f64, df: f64) -> f64 {
    ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
}

/// The weight of a term seen `tf` times in a document of `len` words, where
/// documents average `avg_len` words: saturating in `tf` ([`K1`]),
/// normalised by length ([`B`]). Multiply by [`idf`] for the term's score.
pub fn tf_weight(tf: f64, len: f64, avg_len: f64) -> f64 {
    let avg_len = avg_len.max(1.0);
    tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len))
}

/// A document to score: a plain-text part (a title) and an XHTML part (the
/// stored content), scanned without building either as one string.
#[derive(Clone, Copy, Debug)]
pub struct Doc<'a> {
    /// Plain text (a title, a speaker's name); may be empty.
    pub plain: &'a str,
    /// Stored XHTML, scanned in place ([`for_each_word_in_xhtml`]); may be empty.
    pub xhtml: &'a str,
}

/// Per-document counts for the query's terms.
struct DocStats {
    /// Words in the document.
    len: u32,
    /// Term frequency of each query term (indexed like the query terms).
    tf: Vec<u32>,
}

/// The query's distinct terms, their multiplicity, and a prefix filter.
pub(crate) struct QueryTerms {
    pub(crate) terms: Vec<String>,
    pub(crate) tf: Vec<u32>,
    /// Bit set of the first two bytes (`b0 << 8 | b1`, `b1` = 0 for
    /// one-byte terms) of every ASCII term.
    prefixes: Vec<u64>,
    /// True when some term is not ASCII (then non-ASCII words are checked
    /// without the filter).
    non_ascii: bool,
}

fn prefix_key(b: &[u8]) -> usize {
    (usize::from(b[0].to_ascii_lowercase()) << 8)
        | usize::from(b.get(1).map_or(0, |c| c.to_ascii_lowercase()))
}

impl QueryTerms {
    pub(crate) fn new(query: &str) -> Self {
        let mut q = QueryTerms {
            terms: Vec::new(),
            tf: Vec::new(),
            prefixes: vec![0; 1024],
            non_ascii: false,
        };
        for_each_term(query, |t| match q.terms.iter().position(|x| x == t) {
            Some(i) => q.tf[i] += 1,
            None => {
                if t.is_ascii() {
                    let k = prefix_key(t.as_bytes());
                    q.prefixes[k / 64] |= 1 << (k % 64);
                } else {
                    q.non_ascii = true;
                }
                q.terms.push(t.to_owned());
                q.tf.push(1);
            }
        });
        q
    }

    /// False when `word` certainly stands for no query term: it has no
    /// identifier parts and its first two letters begin none of the terms
    /// (a stem keeps its word's first two letters).
    fn may_match(&self, word: &str) -> bool {
        let b = word.as_bytes();
        let prefix_hit = if b[0] < 0x80 && b.get(1).is_none_or(|&c| c < 0x80) {
            let k = prefix_key(b);
            self.prefixes[k / 64] & (1 << (k % 64)) != 0
        } else {
            self.non_ascii
        };
        prefix_hit || may_have_parts(word)
    }
}

/// Scores every plain-text document against `query`; documents sharing no
/// term score 0.
pub fn scores<S: AsRef<str> + Sync>(docs: &[S], query: &str) -> Vec<f64> {
    let docs: Vec<Doc> = docs
        .iter()
        .map(|d| Doc {
            plain: d.as_ref(),
            xhtml: "",
        })
        .collect();
    scores_docs(&docs, query)
}

/// Scores title + XHTML documents against `query` (see [`Doc`]).
pub fn scores_docs(docs: &[Doc<'_>], query: &str) -> Vec<f64> {
    scores_docs_stats(docs, query).0
}

/// What scoring one query over a collection used: each query term's idf
/// and multiplicity (in the query's term order), whether the collection
/// holds it, and the average document length. With it a caller can tell how
/// much of the query a score covers ([`QueryStats::ideal`]) and score one
/// more document exactly as the collection's own were ([`rescore`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueryStats {
    /// Each distinct query term's [`idf`] in the collection.
    pub idf: Vec<f64>,
    /// How often the query says each term.
    pub query_tf: Vec<u32>,
    /// Whether some document of the collection holds each term.
    pub found: Vec<bool>,
    /// How many documents of the collection hold each term.
    pub df: Vec<u32>,
    /// The collection's average document length in words.
    pub avg_len: f64,
}

impl QueryStats {
    /// The score a document would reach holding every term of the query
    /// often enough to saturate (`Σ idf × (K1 + 1) × query tf`, terms the
    /// collection lacks included at their idf): no document scores as high,
    /// so `score / ideal` is the share of the query's information a
    /// document matches, in [0, 1). 0 for a query without terms.
    pub fn ideal(&self) -> f64 {
        self.idf
            .iter()
            .zip(&self.query_tf)
            .map(|(idf, tf)| idf * (K1 + 1.0) * f64::from(*tf))
            .sum()
    }

    /// The same statistics as if the collection held at least `n`
    /// documents (the terms' document counts unchanged): in a handful of
    /// documents every term looks common, and idf says little.
    pub fn at_least(&self, n: usize, actual: usize) -> QueryStats {
        let docs = n.max(actual) as f64;
        QueryStats {
            idf: self.df.iter().map(|&d| idf(docs, f64::from(d))).collect(),
            ..self.clone()
        }
    }
}

/// [`scores_docs`] and the statistics it scored with.
pub fn scores_docs_stats(docs: &[Doc<'_>], query: &str) -> (Vec<f64>, QueryStats) {
    let q = QueryTerms::new(query);
    if docs.is_empty() || q.terms.is_empty() {
        return (vec![0.0; docs.len()], QueryStats::default());
    }
    let stats = scan(docs, &q);
    let n = docs.len() as f64;
    let total: u64 = stats.iter().map(|s| u64::from(s.len)).sum();
    let avg = total as f64 / n;
    let df: Vec<usize> = (0..q.terms.len())
        .map(|i| stats.iter().filter(|s| s.tf[i] > 0).count())
        .collect();
    let idf: Vec<f64> = df.iter().map(|&d| idf(n, d as f64)).collect();
    let scores = stats
        .iter()
        .map(|s| {
            let len = f64::from(s.len);
            (0..q.terms.len())
                .filter(|&i| s.tf[i] > 0)
                .map(|i| idf[i] * tf_weight(f64::from(s.tf[i]), len, avg) * f64::from(q.tf[i]))
                .sum()
        })
        .collect();
    let query_stats = QueryStats {
        found: df.iter().map(|&d| d > 0).collect(),
        df: df.iter().map(|&d| d as u32).collect(),
        idf,
        query_tf: q.tf,
        avg_len: avg,
    };
    (scores, query_stats)
}

/// The score of `doc` for `query` under `stats` (those a collection was
/// scored with), computed from the document's own text in the same order
/// of operations as [`scores_docs`] and [`crate::postings::Postings::scores`]:
/// equal, bit for bit, to the score the collection gave it when its counts
/// were right. A cache that claims a document matched checks the claim
/// against the text with it. 0 when `stats` is not `query`'s.
pub fn rescore(doc: Doc<'_>, query: &str, stats: &QueryStats) -> f64 {
    let q = QueryTerms::new(query);
    if q.terms.len() != stats.idf.len() || q.tf != stats.query_tf {
        return 0.0;
    }
    let Some(s) = scan_part(std::slice::from_ref(&doc), &q).pop() else {
        return 0.0;
    };
    let len = f64::from(s.len);
    (0..q.terms.len())
        .filter(|&i| s.tf[i] > 0)
        .map(|i| {
            stats.idf[i] * tf_weight(f64::from(s.tf[i]), len, stats.avg_len) * f64::from(q.tf[i])
        })
        .sum()
}

fn scan(docs: &[Doc<'_>], q: &QueryTerms) -> Vec<DocStats> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || docs.len() < PARALLEL_MIN_DOCS {
        return scan_part(docs, q);
    }
    let per = docs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = docs
            .chunks(per)
            .map(|part| scope.spawn(move || scan_part(part, q)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("scoring thread panicked"))
            .collect()
    })
}

/// Counts the query's terms in each document of `docs`. A word that may
/// stand for a query term is tokenised by [`for_each_word_term`] — the same
/// function every other caller uses — once per scan: its query-term hits
/// are cached by word.
fn scan_part(docs: &[Doc<'_>], q: &QueryTerms) -> Vec<DocStats> {
    let mut cache: HashMap<Box<str>, Box<[u32]>> = HashMap::new();
    let mut scratch = Scratch::default();
    docs.iter()
        .map(|doc| {
            let mut s = DocStats {
                len: 0,
                tf: vec![0; q.terms.len()],
            };
            let mut count = |word: &str| {
                s.len += 1;
                if !q.may_match(word) {
                    return;
                }
                if let Some(hits) = cache.get(word) {
                    for &i in hits.iter() {
                        s.tf[i as usize] += 1;
                    }
                    return;
                }
                let mut hits = Vec::new();
                for_each_word_term(word, &mut scratch, |t| {
                    if let Some(i) = q.terms.iter().position(|x| x == t) {
                        hits.push(i as u32);
                    }
                });
                for &i in &hits {
                    s.tf[i as usize] += 1;
                }
                cache.insert(word.into(), hits.into_boxed_slice());
            };
            for_each_word(doc.plain, &mut count);
            for_each_word_in_xhtml(doc.xhtml, &mut count);
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terms::terms;
    use proptest::prelude::*;

    #[test]
    fn inflections_and_case_match_through_stems() {
        let docs = [
            "She PAINTED a sunrise last week",
            "Paintings of lakes",
            "he went running",
            "nothing here",
        ];
        let s = scores(&docs, "painting");
        assert!(s[0] > 0.0 && s[1] > 0.0, "{s:?}");
        assert_eq!(s[2], 0.0);
        assert!(scores(&docs, "runs")[2] > 0.0);
        // Stopwords never match, even when a document has them.
        assert!(scores(&docs, "about the here").iter().all(|&x| x == 0.0));
    }

    #[test]
    fn identifier_parts_match_words() {
        let docs = [
            "set retrievalPrefs first",
            "the HTTPServer starts",
            "nothing",
        ];
        assert!(scores(&docs, "retrieval")[0] > 0.0);
        assert!(scores(&docs, "server")[1] > 0.0);
        assert_eq!(scores(&docs, "server")[0], 0.0);
    }

    #[test]
    fn ranks_by_relevance_with_length_normalisation() {
        let docs = [
            "the deploy happens on fridays",
            "deploy deploy deploy checklist for fridays and other days of the week with many words",
            "unrelated text about gardening",
        ];
        let s = scores(&docs, "deploy fridays");
        assert!(s[0] > 0.0 && s[1] > 0.0);
        assert_eq!(s[2], 0.0);
        // The short document mentioning both terms once is competitive with
        // the long one that repeats a term.
        assert!(s[0] > s[1] * 0.8, "{s:?}");
        assert!(scores(&docs, "gardening")[2] > 0.0);
        assert!(scores(&docs, "").iter().all(|&x| x == 0.0));
        assert!(scores::<&str>(&[], "x").is_empty());
    }

    #[test]
    fn rare_terms_weigh_more_and_query_repeats_count() {
        let mut docs = vec!["common words here"; 5];
        docs.push("common rare");
        let s = scores(&docs, "rare");
        let c = scores(&docs, "common");
        assert!(s[5] > c[5]);
        let twice = scores(&docs, "rare rare");
        assert!((twice[5] - 2.0 * s[5]).abs() < 1e-9);
    }

    #[test]
    fn formula_matches_the_textbook_values() {
        // One document in ten holds the term: ln((10 - 1 + 0.5) / 1.5 + 1).
        assert!((idf(10.0, 1.0) - (9.5f64 / 1.5 + 1.0).ln()).abs() < 1e-12);
        assert!(
            idf(10.0, 10.0) > 0.0,
            "a term in every document still counts"
        );
        // At average length, tf = 1 weighs exactly 1.
        assert!((tf_weight(1.0, 7.0, 7.0) - 1.0).abs() < 1e-12);
        // Longer than average weighs less; repeats saturate below k1 + 1.
        assert!(tf_weight(1.0, 20.0, 7.0) < tf_weight(1.0, 3.0, 7.0));
        assert!(tf_weight(1e6, 7.0, 7.0) < K1 + 1.0);
    }

    #[test]
    fn xhtml_markup_is_not_scored() {
        let docs = [Doc {
            plain: "Title",
            xhtml: "<p class=\"kiln\">glaze &amp; fire</p>",
        }];
        assert_eq!(scores_docs(&docs, "kiln")[0], 0.0);
        assert!(scores_docs(&docs, "glaze")[0] > 0.0);
        assert!(scores_docs(&docs, "title")[0] > 0.0);
        assert_eq!(scores_docs(&docs, "amp")[0], 0.0);
    }

    #[test]
    fn parallel_scan_matches_serial() {
        let docs: Vec<String> = (0..(PARALLEL_MIN_DOCS * 2 + 7))
            .map(|i| format!("doc {i} kiln {}", if i % 3 == 0 { "glaze" } else { "clay" }))
            .collect();
        let parallel = scores(&docs, "glaze kiln");
        let doc_refs: Vec<Doc> = docs
            .iter()
            .map(|d| Doc {
                plain: d,
                xhtml: "",
            })
            .collect();
        let q = QueryTerms::new("glaze kiln");
        let serial = scan_part(&doc_refs, &q);
        let whole = scan(&doc_refs, &q);
        assert_eq!(whole.len(), serial.len());
        for (a, b) in whole.iter().zip(&serial) {
            assert_eq!((a.len, &a.tf), (b.len, &b.tf));
        }
        assert!(parallel[0] > parallel[1]);
        assert_eq!(parallel[3], parallel[6]);
    }

    proptest! {
        /// The scanner counts exactly the terms the tokenizer yields, and a
        /// document's length is its word count, whatever the text.
        #[test]
        fn scan_counts_agree_with_the_tokenizer(
            doc in "([a-zA-Z0-9_]{0,10}|[ .,<>&;-]|é|Ω|İ|日本){0,30}",
            query in "([a-zA-Z0-9_]{1,10}|[ ]|é|日本){1,8}",
        ) {
            let q = QueryTerms::new(&query);
            let stats = scan_part(&[Doc { plain: &doc, xhtml: "" }], &q);
            let doc_terms = terms(&doc);
            for (i, t) in q.terms.iter().enumerate() {
                let expected = doc_terms.iter().filter(|x| *x == t).count() as u32;
                prop_assert_eq!(stats[0].tf[i], expected, "term {}", t);
            }
            let mut words = 0u32;
            for_each_word(&doc, |_| words += 1);
            prop_assert_eq!(stats[0].len, words);
        }
    }
}

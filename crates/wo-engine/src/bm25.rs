//! BM25 (Okapi, k1 = 1.2, b = 0.75) of one query over a set of documents,
//! with length normalisation by each document's term count and query terms
//! counted with their multiplicity.
//!
//! Terms are those of [`crate::text`]: stopwords dropped, English stems, so
//! a document's words are stemmed before they are compared; only words whose
//! first two letters begin some query term are stemmed at all (a stem keeps
//! its word's first two letters), which keeps the scan cheap.
//!
//! Retrieval asks one query per turn, so instead of building an inverted
//! index of every term this scans each document once, counting only the
//! query's terms (and the document's length); large sets are split across
//! threads.

use std::collections::HashMap;

use crate::text::{for_each_term, term_of};

const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Below this many documents a single thread is faster than splitting.
const PARALLEL_MIN_DOCS: usize = 4096;

/// A document to score: a plain-text part (a title) and an XHTML part (the
/// stored content), scanned without building either as one string.
#[derive(Clone, Copy, Debug)]
pub struct Doc<'a> {
    pub plain: &'a str,
    pub xhtml: &'a str,
}

/// Per-document counts for the query's terms.
struct DocStats {
    len: u32,
    /// Term frequency of each query term (indexed like the query terms).
    tf: Vec<u32>,
}

/// The query's distinct terms, their multiplicity, and a prefix filter.
struct QueryTerms {
    terms: Vec<String>,
    tf: Vec<u32>,
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
    fn new(query: &str) -> Self {
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

    /// False when `word` cannot reduce to a query term: its first two
    /// letters begin none (a stem keeps its word's first two letters).
    fn may_match(&self, word: &str) -> bool {
        if word.is_ascii() {
            let k = prefix_key(word.as_bytes());
            self.prefixes[k / 64] & (1 << (k % 64)) != 0
        } else {
            self.non_ascii
        }
    }

    /// Index of the query term that `word` reduces to, if any; `buf` is
    /// scratch space for the lowercase word.
    fn find(&self, word: &str, buf: &mut String) -> Option<usize> {
        if !self.may_match(word) {
            return None;
        }
        if word.is_ascii() {
            buf.clear();
            buf.push_str(word);
            buf.make_ascii_lowercase();
        } else {
            buf.clear();
            buf.extend(word.chars().flat_map(char::to_lowercase));
        }
        let term = term_of(buf)?;
        self.terms.iter().position(|t| *t == term)
    }
}

/// Scores every document against `query`; documents sharing no term score 0.
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
    let q = QueryTerms::new(query);
    if docs.is_empty() || q.terms.is_empty() {
        return vec![0.0; docs.len()];
    }
    let stats = scan(docs, &q);
    let n = docs.len() as f64;
    let total: u64 = stats.iter().map(|s| u64::from(s.len)).sum();
    let avg = (total as f64 / n).max(1.0);
    let idf: Vec<f64> = (0..q.terms.len())
        .map(|i| {
            let df = stats.iter().filter(|s| s.tf[i] > 0).count() as f64;
            // The "+1" keeps idf positive for terms in most documents.
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        })
        .collect();
    stats
        .iter()
        .map(|s| {
            let len = f64::from(s.len);
            (0..q.terms.len())
                .filter(|&i| s.tf[i] > 0)
                .map(|i| {
                    let tf = f64::from(s.tf[i]);
                    let norm = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg));
                    idf[i] * norm * f64::from(q.tf[i])
                })
                .sum()
        })
        .collect()
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

/// Counts the query's terms in each document of `docs`. Words that pass the
/// prefix filter are looked up in a cache of the words met so far, so each
/// distinct word is lowercased and stemmed once per scan, not once per use.
fn scan_part(docs: &[Doc<'_>], q: &QueryTerms) -> Vec<DocStats> {
    let mut cache: HashMap<Box<str>, Option<usize>> = HashMap::new();
    let mut buf = String::new();
    let mut find = |word: &str| -> Option<usize> {
        if !q.may_match(word) {
            return None;
        }
        if let Some(&hit) = cache.get(word) {
            return hit;
        }
        let hit = q.find(word, &mut buf);
        cache.insert(word.into(), hit);
        hit
    };
    docs.iter()
        .map(|doc| {
            let mut s = DocStats {
                len: 0,
                tf: vec![0; q.terms.len()],
            };
            let mut count = |word: &str| {
                s.len += 1;
                if let Some(i) = find(word) {
                    s.tf[i] += 1;
                }
                if has_parts(word) {
                    for_each_part(word, |part| {
                        if let Some(i) = find(part) {
                            s.tf[i] += 1;
                        }
                    });
                }
            };
            for_each_word(doc.plain, false, &mut count);
            for_each_word(doc.xhtml, true, &mut count);
            s
        })
        .collect()
}

/// Calls `f` for each word (a run of letters, digits, `_` or non-ASCII
/// characters). In XHTML mode, `<…>` tags and `&…;` references separate
/// words and are never words themselves.
fn for_each_word(text: &str, xhtml: bool, mut f: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if xhtml && b == b'<' {
            i = memchr_gt(bytes, i);
            continue;
        }
        if xhtml && b == b'&' {
            // Skip a reference up to its ';' (short ones only).
            let end = bytes[i..].iter().take(12).position(|&c| c == b';');
            i += end.map_or(1, |e| e + 1);
            continue;
        }
        if is_word_byte(b) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            let word = &text[start..i];
            if word.is_ascii() {
                f(word);
            } else {
                // Split on non-alphanumeric Unicode (punctuation, spaces).
                for w in word.split(|c: char| !c.is_alphanumeric() && c != '_') {
                    if !w.is_empty() {
                        f(w);
                    }
                }
            }
        } else {
            i += 1;
        }
    }
}

fn memchr_gt(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&c| c == b'>')
        .map_or(bytes.len(), |p| from + p + 1)
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// True when an identifier splits into parts (snake_case, camelCase,
/// letter/digit boundaries).
fn has_parts(word: &str) -> bool {
    let b = word.as_bytes();
    b.windows(2).any(|w| {
        (w[0] != b'_' && w[1] == b'_' && w != b"__")
            || (w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
            || (w[0].is_ascii_alphabetic() && w[1].is_ascii_digit())
            || (w[0].is_ascii_digit() && w[1].is_ascii_alphabetic())
    }) || !word.is_ascii()
}

fn for_each_part(word: &str, mut f: impl FnMut(&str)) {
    let mut buf = String::new();
    crate::text::for_each_part_pub(word, &mut buf, |p| f(p));
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn parallel_scan_matches_serial() {
        let docs: Vec<String> = (0..(PARALLEL_MIN_DOCS * 2 + 7))
            .map(|i| format!("doc {i} kiln {}", if i % 3 == 0 { "glaze" } else { "clay" }))
            .collect();
        let s = scores(&docs, "glaze kiln");
        let serial: Vec<f64> = docs
            .iter()
            .map(|d| scores(std::slice::from_ref(d), "glaze kiln")[0])
            .collect();
        // Same ordering signal: glaze docs beat clay docs everywhere.
        assert!(s[0] > s[1]);
        assert_eq!(s.len(), serial.len());
        assert_eq!(s[3], s[6]);
    }
}

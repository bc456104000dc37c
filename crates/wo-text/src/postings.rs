//! An inverted index kept in memory and extended as documents arrive, for
//! a caller that asks many queries over documents that mostly only grow
//! (a long-lived server's transcript): each document is tokenised once,
//! when it is added, instead of on every query.
//!
//! [`Postings::scores`] gives exactly what [`crate::bm25::scores_docs`]
//! gives over the same documents less the excluded ones: the same terms
//! ([`crate::terms`]), the same statistics (document count, average length
//! and document frequencies computed without the excluded documents), the
//! same formula evaluated in the same order — bit for bit, which a property
//! test holds it to. So a caller may use either and send the same context.
//!
//! Kept on disk ([`Postings::to_bytes`]), the index is read back lazily
//! ([`Postings::read_lazy`]): the term directory at once, each term's list
//! only when a query or an appended document touches it, checked then — a
//! one-shot process (`wo ask`) pays for the few lists its question names,
//! not for all of them. A list found malformed makes [`Postings::scores`]
//! refuse to answer (the caller scans instead), never a wrong score.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::bm25::{Doc, QueryStats, QueryTerms, idf, tf_weight};
use crate::terms::{Scratch, for_each_word, for_each_word_in_xhtml, for_each_word_term};

/// Words longer than this many bytes are not remembered in the word cache
/// (they stand for nothing or are one-offs such as hashes; caching them
/// would only grow the cache).
const MAX_CACHED_WORD_BYTES: usize = 64;

/// One term's list: (document, term frequency), documents ascending.
#[derive(Debug)]
enum List {
    /// In memory.
    Owned(Vec<(u32, u32)>),
    /// Not read yet: `n` pairs at byte `at` of [`Postings::stored`].
    Stored { at: usize, n: usize },
}

/// Documents numbered 0, 1, 2… in the order they were added, with the
/// positions of every term in them.
#[derive(Debug, Default)]
pub struct Postings {
    /// Term → its number.
    terms: HashMap<Box<str>, u32>,
    /// For each term number, its list.
    lists: Vec<List>,
    /// The bytes [`List::Stored`] lists are read from ([`Self::read_lazy`]).
    stored: Vec<u8>,
    /// Documents the [`List::Stored`] lists cover (those read with them).
    stored_docs: usize,
    /// A stored list was malformed when an appended document needed it:
    /// [`Self::scores`] refuses to answer from then on.
    damaged: bool,
    /// Each document's length in words.
    lens: Vec<u32>,
    /// Sum of `lens`.
    total_len: u64,
    /// The term numbers each word seen so far stands for, so a word is
    /// tokenised once however often it occurs.
    words: HashMap<Box<str>, Box<[u32]>>,
    scratch: Scratch,
    /// Reused while adding a document: its term numbers, with repeats.
    doc_terms: Vec<u32>,
}

impl Postings {
    /// An empty index.
    pub fn new() -> Self {
        Postings::default()
    }

    /// Documents added.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// True when no document was added.
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Adds `doc` as the next document; returns its number.
    ///
    /// # Panics
    /// Past `u32::MAX` documents.
    pub fn push(&mut self, doc: Doc<'_>) -> u32 {
        let number = u32::try_from(self.lens.len()).expect("at most u32::MAX documents");
        let mut doc_terms = std::mem::take(&mut self.doc_terms);
        doc_terms.clear();
        let mut len = 0u32;
        let mut count = |word: &str| {
            len += 1;
            if let Some(ids) = self.words.get(word) {
                doc_terms.extend_from_slice(ids);
                return;
            }
            let mut ids = Vec::new();
            let (terms, lists) = (&mut self.terms, &mut self.lists);
            for_each_word_term(word, &mut self.scratch, |t| {
                let next = terms.len() as u32;
                let id = *terms.entry(t.into()).or_insert_with(|| {
                    lists.push(List::Owned(Vec::new()));
                    next
                });
                ids.push(id);
            });
            doc_terms.extend_from_slice(&ids);
            if word.len() <= MAX_CACHED_WORD_BYTES {
                self.words.insert(word.into(), ids.into_boxed_slice());
            }
        };
        for_each_word(doc.plain, &mut count);
        for_each_word_in_xhtml(doc.xhtml, &mut count);
        doc_terms.sort_unstable();
        for run in doc_terms.chunk_by(|a, b| a == b) {
            let id = run[0] as usize;
            if let List::Stored { at, n } = self.lists[id] {
                // Read now, checked against the documents before this one.
                let list = decode(&self.stored, at, n, number).unwrap_or_else(|_| {
                    self.damaged = true;
                    Vec::new()
                });
                self.lists[id] = List::Owned(list);
            }
            if let List::Owned(list) = &mut self.lists[id] {
                list.push((number, run.len() as u32));
            }
        }
        self.doc_terms = doc_terms;
        self.lens.push(len);
        self.total_len += u64::from(len);
        number
    }

    /// Forgets documents `keep` and after, as if only the first `keep` had
    /// been added: a caller whose documents `keep..` moved (a message
    /// inserted before them) drops them and adds them again in their new
    /// order, instead of re-tokenising every document. Terms whose lists
    /// become empty stay known with an empty list, which scores exactly as
    /// an unknown term. Costs one look at the end of every list.
    pub fn truncate(&mut self, keep: usize) {
        if keep >= self.lens.len() {
            return;
        }
        let n_docs = self.lens.len() as u32;
        let keep_doc = keep as u32;
        for list in &mut self.lists {
            if let &mut List::Stored { at, n } = list {
                // A list still on disk holds only documents read with it;
                // read it now only when some of them go.
                if keep >= self.stored_docs {
                    continue;
                }
                *list = List::Owned(decode(&self.stored, at, n, n_docs).unwrap_or_else(|_| {
                    self.damaged = true;
                    Vec::new()
                }));
            }
            if let List::Owned(pairs) = list {
                let cut = pairs.partition_point(|&(d, _)| d < keep_doc);
                pairs.truncate(cut);
            }
        }
        let dropped: u64 = self.lens[keep..].iter().map(|&l| u64::from(l)).sum();
        self.total_len -= dropped;
        self.lens.truncate(keep);
        self.stored_docs = self.stored_docs.min(keep);
    }

    /// BM25 of `query` over every document except those in `excluded`
    /// (numbers not in the index are ignored): `(document, score)` for each
    /// document sharing a term with the query, in document order. Equal,
    /// bit for bit, to [`crate::bm25::scores_docs`] over the documents not
    /// excluded. An error when a list read from disk is malformed (the
    /// index must then not be used).
    pub fn scores(&self, query: &str, excluded: &[u32]) -> Result<Vec<(u32, f64)>, BytesError> {
        self.scores_stats(query, excluded).map(|(hits, _)| hits)
    }

    /// [`Self::scores`] and the statistics it scored with (equal, bit for
    /// bit, to those [`crate::bm25::scores_docs_stats`] reports over the
    /// documents not excluded).
    pub fn scores_stats(
        &self,
        query: &str,
        excluded: &[u32],
    ) -> Result<(Vec<(u32, f64)>, QueryStats), BytesError> {
        if self.damaged {
            return Err(BytesError {
                at: 0,
                what: "a list read for an appended document is malformed",
            });
        }
        let q = QueryTerms::new(query);
        let mut ex: Vec<u32> = excluded
            .iter()
            .copied()
            .filter(|&d| (d as usize) < self.lens.len())
            .collect();
        ex.sort_unstable();
        ex.dedup();
        let n_docs = self.lens.len() - ex.len();
        if n_docs == 0 || q.terms.is_empty() {
            return Ok((Vec::new(), QueryStats::default()));
        }
        let is_excluded = |d: u32| !ex.is_empty() && ex.binary_search(&d).is_ok();
        let n = n_docs as f64;
        let total: u64 = self.total_len
            - ex.iter()
                .map(|&d| u64::from(self.lens[d as usize]))
                .sum::<u64>();
        let avg = total as f64 / n;
        let lists: Vec<Cow<'_, [(u32, u32)]>> = q
            .terms
            .iter()
            .map(|t| match self.terms.get(t.as_str()) {
                Some(&id) => self.list(id),
                None => Ok(Cow::Borrowed(&[][..])),
            })
            .collect::<Result<_, _>>()?;
        // One score per document, summed term by term in the query's term
        // order from 0.0 — the order and start `scores_docs` sums in.
        let mut score = vec![0.0_f64; self.lens.len()];
        let mut hit = vec![false; self.lens.len()];
        let mut stats = QueryStats {
            idf: Vec::with_capacity(lists.len()),
            query_tf: q.tf.clone(),
            found: Vec::with_capacity(lists.len()),
            df: Vec::with_capacity(lists.len()),
            avg_len: avg,
        };
        for (i, list) in lists.iter().enumerate() {
            let excluded_here = ex
                .iter()
                .filter(|&&d| list.binary_search_by_key(&d, |p| p.0).is_ok())
                .count();
            let df = list.len() - excluded_here;
            let idf = idf(n, df as f64);
            stats.idf.push(idf);
            stats.found.push(df > 0);
            stats.df.push(df as u32);
            for &(d, tf) in list.iter() {
                if is_excluded(d) {
                    continue;
                }
                let len = f64::from(self.lens[d as usize]);
                score[d as usize] += idf * tf_weight(f64::from(tf), len, avg) * f64::from(q.tf[i]);
                hit[d as usize] = true;
            }
        }
        let hits = hit
            .iter()
            .enumerate()
            .filter(|(_, h)| **h)
            .map(|(d, _)| (d as u32, score[d]))
            .collect();
        Ok((hits, stats))
    }

    /// Term `id`'s list, read and checked now if it is still on disk.
    fn list(&self, id: u32) -> Result<Cow<'_, [(u32, u32)]>, BytesError> {
        match &self.lists[id as usize] {
            List::Owned(list) => Ok(Cow::Borrowed(list)),
            &List::Stored { at, n } => {
                decode(&self.stored, at, n, self.lens.len() as u32).map(Cow::Owned)
            }
        }
    }
}

/// The `n` (document, frequency) pairs at byte `at` of `bytes`, checked:
/// within the input, documents ascending and below `n_docs`, frequencies at
/// least 1.
fn decode(bytes: &[u8], at: usize, n: usize, n_docs: u32) -> Result<Vec<(u32, u32)>, BytesError> {
    let raw = at
        .checked_add(n.saturating_mul(8))
        .and_then(|end| bytes.get(at..end))
        .ok_or(BytesError {
            at,
            what: "a list ends past the input",
        })?;
    let mut list = Vec::with_capacity(n);
    let mut last: Option<u32> = None;
    for (k, pair) in raw.chunks_exact(8).enumerate() {
        let d = u32::from_le_bytes(pair[..4].try_into().expect("4 bytes"));
        let tf = u32::from_le_bytes(pair[4..].try_into().expect("4 bytes"));
        if d >= n_docs || last.is_some_and(|l| l >= d) || tf == 0 {
            return Err(BytesError {
                at: at + 8 * k,
                what: "a list entry is out of order, past the last document or of frequency 0",
            });
        }
        last = Some(d);
        list.push((d, tf));
    }
    Ok(list)
}

/// Why [`Postings::from_bytes`] refused its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("recall postings at byte {at}: {what}")]
pub struct BytesError {
    /// Offset of the problem in the input.
    pub at: usize,
    /// What is wrong there.
    pub what: &'static str,
}

/// Reads the little-endian numbers of [`Postings::to_bytes`]' layout,
/// each read checked against the end of the input.
struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], BytesError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(BytesError {
                at: self.at,
                what: "ends early",
            })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, BytesError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, BytesError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn fail<T>(&self, what: &'static str) -> Result<T, BytesError> {
        Err(BytesError { at: self.at, what })
    }
}

impl Postings {
    /// The index as bytes, for a cache kept on disk (`wo ask`'s recall
    /// sidecar): document lengths, a directory of the terms, then every
    /// list, so a reader finds a term's list without reading the others.
    /// The word cache is not kept (it refills as documents are added).
    ///
    /// Layout, all numbers little-endian: `u32` documents, `u64` total
    /// length, a `u32` length per document, `u32` terms, then per term (in
    /// term-number order) `u32` byte length, its UTF-8 bytes and `u32` list
    /// length; then the lists in the same order, each that many (`u32`
    /// document, `u32` frequency) pairs (a list's place is the sum of the
    /// lengths before it).
    pub fn to_bytes(&self) -> Vec<u8> {
        let lens: Vec<usize> = self
            .lists
            .iter()
            .map(|l| match l {
                List::Owned(v) => v.len(),
                List::Stored { n, .. } => *n,
            })
            .collect();
        let pairs: usize = lens.iter().sum();
        let mut out =
            Vec::with_capacity(16 + 4 * self.lens.len() + 8 * pairs + 16 * self.terms.len());
        out.extend_from_slice(&(self.lens.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.total_len.to_le_bytes());
        for len in &self.lens {
            out.extend_from_slice(&len.to_le_bytes());
        }
        let mut by_number: Vec<&str> = vec![""; self.terms.len()];
        for (term, &id) in &self.terms {
            by_number[id as usize] = term;
        }
        out.extend_from_slice(&(by_number.len() as u32).to_le_bytes());
        for (term, n) in by_number.iter().zip(&lens) {
            out.extend_from_slice(&(term.len() as u32).to_le_bytes());
            out.extend_from_slice(term.as_bytes());
            out.extend_from_slice(&(*n as u32).to_le_bytes());
        }
        for list in &self.lists {
            match list {
                List::Owned(v) => {
                    for &(d, tf) in v {
                        out.extend_from_slice(&d.to_le_bytes());
                        out.extend_from_slice(&tf.to_le_bytes());
                    }
                }
                // Never read: copied as it was (a malformed one is found
                // when a later reader reads it).
                &List::Stored { at, n } => out.extend_from_slice(&self.stored[at..at + 8 * n]),
            }
        }
        out
    }

    /// The index [`Self::to_bytes`] wrote, checked whole: every read within
    /// the input, terms UTF-8 and distinct, lists ascending by document and
    /// within the documents, frequencies at least 1, the total length the
    /// sum of the lengths, nothing after the last list. Whatever the input,
    /// an index that scores like the one written or an error — never a
    /// panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<Postings, BytesError> {
        let mut p = Postings::read_lazy(bytes.to_vec(), 0..bytes.len())?;
        let n_docs = p.lens.len() as u32;
        for list in &mut p.lists {
            if let &mut List::Stored { at, n } = list {
                *list = List::Owned(decode(&p.stored, at, n, n_docs)?);
            }
        }
        p.stored = Vec::new();
        Ok(p)
    }

    /// The index [`Self::to_bytes`] wrote at `range` of `bytes` (which it
    /// keeps), reading the lengths and the term directory now — checked as
    /// [`Self::from_bytes`] checks them, the lists' sizes summing to the
    /// bytes after the directory exactly — and each list when it is first
    /// needed (checked then: see [`Self::scores`]). Never a panic.
    pub fn read_lazy(
        bytes: Vec<u8>,
        range: std::ops::Range<usize>,
    ) -> Result<Postings, BytesError> {
        let Some(input) = bytes.get(range.clone()) else {
            return Err(BytesError {
                at: 0,
                what: "the postings lie outside the input",
            });
        };
        let mut r = Reader {
            bytes: input,
            at: 0,
        };
        let n_docs = r.u32()?;
        let total_len = r.u64()?;
        // Each length takes four bytes: a count the input cannot hold is
        // refused before anything is allocated for it.
        if (n_docs as usize).saturating_mul(4) > input.len() {
            return r.fail("more documents than the input holds");
        }
        let lens: Vec<u32> = r
            .take(4 * n_docs as usize)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        if lens.iter().map(|&l| u64::from(l)).sum::<u64>() != total_len {
            return r.fail("the total length is not the sum of the lengths");
        }
        let n_terms = r.u32()?;
        if (n_terms as usize).saturating_mul(8) > input.len() - r.at {
            return r.fail("more terms than the input holds");
        }
        let mut terms = HashMap::with_capacity(n_terms as usize);
        let mut sizes = Vec::with_capacity(n_terms as usize);
        for number in 0..n_terms {
            let len = r.u32()? as usize;
            let Ok(term) = std::str::from_utf8(r.take(len)?) else {
                return r.fail("a term is not UTF-8");
            };
            if terms.insert(Box::<str>::from(term), number).is_some() {
                return r.fail("a term repeats");
            }
            sizes.push(r.u32()? as usize);
        }
        let mut at = range.start + r.at;
        let mut lists = Vec::with_capacity(sizes.len());
        for n in sizes {
            lists.push(List::Stored { at, n });
            at = n
                .checked_mul(8)
                .and_then(|b| at.checked_add(b))
                .filter(|&end| end <= range.end)
                .ok_or(BytesError {
                    at: at - range.start,
                    what: "the lists end past the input",
                })?;
        }
        if at != range.end {
            return Err(BytesError {
                at: at - range.start,
                what: "bytes after the last list",
            });
        }
        Ok(Postings {
            terms,
            lists,
            stored_docs: lens.len(),
            lens,
            total_len,
            stored: bytes,
            ..Postings::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bm25::scores_docs;
    use proptest::prelude::*;

    fn docs<'a>(texts: &'a [(String, String)]) -> Vec<Doc<'a>> {
        texts
            .iter()
            .map(|(p, x)| Doc { plain: p, xhtml: x })
            .collect()
    }

    #[test]
    fn scores_what_the_scan_scores() {
        let texts: Vec<(String, String)> = vec![
            ("Caroline".into(), "<p>I went to a support group</p>".into()),
            ("Melanie".into(), "<p>I painted a lake sunrise</p>".into()),
            (
                "Melanie".into(),
                "<p>glaze glaze kiln &amp; retrievalPrefs</p>".into(),
            ),
            ("Caroline".into(), "<p>kiln notes</p>".into()),
        ];
        let mut index = Postings::new();
        for d in docs(&texts) {
            index.push(d);
        }
        assert_eq!(index.len(), 4);
        let scan = scores_docs(&docs(&texts), "kiln glaze painting retrieval");
        let got = index.scores("kiln glaze painting retrieval", &[]).unwrap();
        let hits: Vec<u32> = got.iter().map(|h| h.0).collect();
        assert_eq!(hits, [1, 2, 3]);
        for (d, s) in got {
            assert_eq!(s.to_bits(), scan[d as usize].to_bits());
        }
        // Excluding a document scores the rest as if it were not there.
        let rest = scores_docs(&docs(&texts[..3]), "caroline kiln");
        let got = index.scores("caroline kiln", &[3, 3, 99]).unwrap();
        assert_eq!(got.len(), 2);
        for (d, s) in got {
            assert_eq!(s.to_bits(), rest[d as usize].to_bits());
        }
        assert!(index.scores("", &[]).unwrap().is_empty());
        assert!(index.scores("kiln", &[0, 1, 2, 3]).unwrap().is_empty());
        assert!(Postings::new().scores("kiln", &[]).unwrap().is_empty());
    }

    #[test]
    fn bytes_round_trip_and_damage_is_refused() {
        let texts: Vec<(String, String)> = vec![
            ("Caroline".into(), "<p>I went to a kiln group</p>".into()),
            ("Melanie".into(), "<p>glaze glaze kiln 日本</p>".into()),
        ];
        let mut index = Postings::new();
        for d in docs(&texts) {
            index.push(d);
        }
        let bytes = index.to_bytes();
        let mut back = Postings::from_bytes(&bytes).unwrap();
        assert_eq!(
            back.scores("kiln glaze 日本", &[1]).unwrap(),
            index.scores("kiln glaze 日本", &[1]).unwrap()
        );
        // It grows as the original would.
        let more = ("ann".to_owned(), "<p>kiln again</p>".to_owned());
        index.push(Doc {
            plain: &more.0,
            xhtml: &more.1,
        });
        back.push(Doc {
            plain: &more.0,
            xhtml: &more.1,
        });
        assert_eq!(
            back.scores("kiln ann", &[]).unwrap(),
            index.scores("kiln ann", &[]).unwrap()
        );
        assert_eq!(back.to_bytes(), index.to_bytes());
        // Cut anywhere, or one byte too many: refused, never a panic.
        for cut in 0..bytes.len() {
            assert!(Postings::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            Postings::from_bytes(&longer).unwrap_err().what,
            "bytes after the last list"
        );
        // Read lazily: the same scores, growth and bytes.
        let mut lazy = Postings::read_lazy(bytes.clone(), 0..bytes.len()).unwrap();
        assert_eq!(
            lazy.scores("kiln glaze 日本", &[1]).unwrap(),
            Postings::from_bytes(&bytes)
                .unwrap()
                .scores("kiln glaze 日本", &[1])
                .unwrap()
        );
        lazy.push(Doc {
            plain: &more.0,
            xhtml: &more.1,
        });
        assert_eq!(
            lazy.scores("kiln ann", &[]).unwrap(),
            index.scores("kiln ann", &[]).unwrap()
        );
        assert_eq!(lazy.to_bytes(), index.to_bytes());
        // Inside a larger buffer (the sidecar's header before, its checksum
        // after).
        let mut framed = b"header".to_vec();
        framed.extend_from_slice(&bytes);
        framed.extend_from_slice(b"sum!");
        let inner = Postings::read_lazy(framed.clone(), 6..framed.len() - 4).unwrap();
        assert_eq!(inner.to_bytes(), bytes);
        assert!(Postings::read_lazy(framed, 6..20_000).is_err());
        // A document count the input cannot hold allocates nothing.
        let mut huge = bytes.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Postings::from_bytes(&huge).is_err());
    }

    /// A malformed list is found when it is read, lazily: a query naming
    /// its term, or a document added to it, makes the index refuse to
    /// score (the caller scans); a query not touching it is answered.
    #[test]
    fn a_malformed_list_read_lazily_refuses_to_score() {
        let texts: Vec<(String, String)> = vec![
            ("ann".into(), "<p>kiln glaze</p>".into()),
            ("ann".into(), "<p>kiln porcelain</p>".into()),
        ];
        let mut index = Postings::new();
        for d in docs(&texts) {
            index.push(d);
        }
        let good = index.to_bytes();
        // The lists are last: "ann" (2 docs), "kiln" (2), "glaze" (1),
        // "porcelain" (1). Swap kiln's two documents: out of order.
        let kiln = good.len() - 8 * (1 + 1 + 2);
        let mut bad = good.clone();
        bad[kiln..kiln + 4].copy_from_slice(&1u32.to_le_bytes());
        bad[kiln + 8..kiln + 12].copy_from_slice(&0u32.to_le_bytes());
        assert!(Postings::from_bytes(&bad).is_err());
        let lazy = Postings::read_lazy(bad.clone(), 0..bad.len()).unwrap();
        assert!(lazy.scores("kiln", &[]).is_err());
        assert_eq!(
            lazy.scores("porcelain", &[]).unwrap(),
            index.scores("porcelain", &[]).unwrap()
        );
        let mut grown = Postings::read_lazy(bad, 0..good.len()).unwrap();
        let more = ("bob".to_owned(), "<p>kiln</p>".to_owned());
        grown.push(Doc {
            plain: &more.0,
            xhtml: &more.1,
        });
        assert!(grown.scores("porcelain", &[]).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Whatever the documents, the query and the exclusions, the index
        /// scores each remaining document exactly as the one-pass scan
        /// over the remaining documents does.
        /// Random bytes are refused or read, never a panic.
        #[test]
        fn any_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Postings::from_bytes(&bytes);
            if let Ok(mut lazy) = Postings::read_lazy(bytes.clone(), 0..bytes.len()) {
                let _ = lazy.scores("a b kiln", &[0, 1]);
                lazy.push(Doc { plain: "a b", xhtml: "<p>kiln</p>" });
                let _ = lazy.scores("a b kiln", &[]);
                let _ = lazy.to_bytes();
            }
        }

        #[test]
        fn equals_the_scan_without_the_excluded(
            texts in proptest::collection::vec(
                ("(ann|bob|Ann|)", "(<p>|</p>|[a-e]{1,6}|kiln|Kilns|fired|fire|[ .,&;]|é|HTTPServer|x_y|日本){0,12}"),
                0..24,
            ),
            query in "([a-e]{1,6}|kiln|firing|ann|Bob|[ ]|é|server|日本){0,6}",
            excluded in proptest::collection::vec(0u32..30, 0..6),
        ) {
            let mut index = Postings::new();
            for d in docs(&texts) {
                index.push(d);
            }
            let kept: Vec<usize> = (0..texts.len())
                .filter(|&i| !excluded.contains(&(i as u32)))
                .collect();
            let pool: Vec<Doc> = kept
                .iter()
                .map(|&i| Doc { plain: &texts[i].0, xhtml: &texts[i].1 })
                .collect();
            let (scan, scan_stats) = crate::bm25::scores_docs_stats(&pool, &query);
            let expected: Vec<(u32, u64)> = kept
                .iter()
                .zip(&scan)
                .filter(|(_, s)| **s > 0.0)
                .map(|(&i, s)| (i as u32, s.to_bits()))
                .collect();
            let (hits, stats) = index.scores_stats(&query, &excluded).unwrap();
            let got: Vec<(u32, u64)> = hits
                .iter()
                .map(|&(d, s)| (d, s.to_bits()))
                .collect();
            prop_assert_eq!(got, expected);
            if !pool.is_empty() {
                prop_assert_eq!(&stats, &scan_stats);
            }
            // Each hit's score is what its own text gives under the stats.
            for &(d, s) in &hits {
                let t = &texts[d as usize];
                let again = crate::bm25::rescore(Doc { plain: &t.0, xhtml: &t.1 }, &query, &stats);
                prop_assert_eq!(again.to_bits(), s.to_bits());
            }
        }

        /// Dropping the documents from `keep` on and adding others after
        /// them scores exactly as an index built from scratch over the
        /// result, for an index built in memory or read back lazily (a
        /// truncation below what was read decodes the lists first).
        #[test]
        fn truncated_and_extended_equals_built_from_scratch(
            texts in proptest::collection::vec(
                ("(ann|bob|)", "(<p>|</p>|[a-d]{1,4}|kiln|fired|[ .]|é){0,10}"),
                0..16,
            ),
            more in proptest::collection::vec(
                ("(ann|cy|)", "(<p>|</p>|[b-f]{1,4}|kiln|glaze|[ .]){0,10}"),
                0..8,
            ),
            keep in 0usize..20,
            lazy in any::<bool>(),
            query in "([a-f]{1,4}|kiln|glaze|ann|cy|[ ]){0,6}",
        ) {
            let mut index = Postings::new();
            for d in docs(&texts) {
                index.push(d);
            }
            if lazy {
                let bytes = index.to_bytes();
                index = Postings::read_lazy(bytes.clone(), 0..bytes.len()).unwrap();
            }
            index.truncate(keep);
            let kept = keep.min(texts.len());
            prop_assert_eq!(index.len(), kept);
            for d in docs(&more) {
                index.push(d);
            }
            let mut fresh = Postings::new();
            for d in docs(&texts[..kept]).into_iter().chain(docs(&more)) {
                fresh.push(d);
            }
            let bits = |p: &Postings| -> Vec<(u32, u64)> {
                p.scores(&query, &[]).unwrap().into_iter().map(|(d, s)| (d, s.to_bits())).collect()
            };
            prop_assert_eq!(bits(&index), bits(&fresh));
            let round = Postings::from_bytes(&index.to_bytes()).unwrap();
            prop_assert_eq!(bits(&round), bits(&fresh));
        }
    }
}

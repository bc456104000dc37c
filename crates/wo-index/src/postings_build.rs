//! The BM25 postings of a new index (`index.json`'s `inverted_index` and `doc_lens`), built
//! from its chunks in ref order.
//!
//! Terms are `wo_text::terms`' (the tokenizer search and chat retrieval share); a chunk's terms
//! are those of its content (images have none) and of its path. Tokenising was the largest
//! cost of an index after tree-sitter itself (29% of a code tree's CPU, most of it stemming and
//! lower-casing the same words again and again), and merging every chunk's term list into one
//! map ran on one thread. So:
//!
//! - chunks are split into contiguous blocks tokenised in parallel, each into its own
//!   [`Block`]: terms interned to small ids, postings appended per term id;
//! - inside a block, each distinct word is tokenised once ([`Block::word_terms`]: the word's
//!   term ids, kept while the block's word cache stays under [`WORD_CACHE_MAX`] entries, which
//!   bounds memory on large trees) — `for_each_word_term` is a pure function of the word, so
//!   the cache cannot change a term;
//! - blocks are merged in block order, so every term's postings are already in document order.
//!
//! Chunks whose id was in the previous index keep their previous postings, renumbered to their
//! new positions: an id fixes path and content, and terms depend on nothing else. Only new
//! chunks are tokenised, which keeps incremental runs proportional to what changed.
//!
//! The result is independent of the number of threads and of the block size (the golden test,
//! `tests/golden.rs`, and the unit test below hold it to a direct, one-map computation).

use std::collections::BTreeMap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use wo_text::terms::{Scratch, for_each_word, for_each_word_term};

use crate::model::{Chunk, Kind};

/// Postings of the previous index, kept so unchanged chunks need not be re-tokenized.
pub(crate) struct PrevPostings {
    /// Chunk ids by previous position.
    pub ids: Vec<String>,
    pub doc_lens: Vec<u32>,
    /// Delta-encoded, as stored.
    pub inverted: BTreeMap<String, Vec<u32>>,
}

/// A block's word cache is dropped when it grows past this many words (memory stays bounded
/// on trees with a huge vocabulary; the cache only saves time).
const WORD_CACHE_MAX: usize = 1 << 17;

/// Chunks per block at least: fewer would spend more on merging than on tokenising.
const MIN_BLOCK: usize = 256;

/// Terms interned to small ids, with their postings.
#[derive(Default)]
struct Terms {
    /// Term → id.
    ids: FxHashMap<Box<str>, u32>,
    /// Id → term.
    terms: Vec<Box<str>>,
    /// Id → (document, term frequency), in document order.
    lists: Vec<Vec<(u32, u32)>>,
    /// Id → frequency in the current document.
    tf: Vec<u32>,
}

impl Terms {
    fn intern(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.ids.get(term) {
            return id;
        }
        let id = self.terms.len() as u32;
        let boxed: Box<str> = term.into();
        self.ids.insert(boxed.clone(), id);
        self.terms.push(boxed);
        self.lists.push(Vec::new());
        self.tf.push(0);
        id
    }
}

/// Postings of one block of chunks.
#[derive(Default)]
struct Block {
    terms: Terms,
    /// (document, words): BM25's document length.
    doc_lens: Vec<(u32, u32)>,
    /// Word → its terms' ids, with repetitions, in the order the tokenizer gives them.
    words: FxHashMap<Box<str>, Box<[u32]>>,
    scratch: Scratch,
    /// Ids whose `tf` is non-zero.
    touched: Vec<u32>,
    /// Scratch for a word's ids before they are cached.
    found: Vec<u32>,
}

impl Block {
    /// Counts the terms of `word` in the current document.
    fn add_word(&mut self, word: &str) {
        let ids = match self.words.get(word) {
            Some(ids) => ids,
            None => {
                if self.words.len() >= WORD_CACHE_MAX {
                    self.words.clear();
                }
                let Self {
                    terms,
                    scratch,
                    found,
                    ..
                } = self;
                found.clear();
                for_each_word_term(word, scratch, |t| found.push(terms.intern(t)));
                self.words
                    .entry(word.into())
                    .or_insert(found.as_slice().into())
            }
        };
        for &id in ids.iter() {
            let n = &mut self.terms.tf[id as usize];
            if *n == 0 {
                self.touched.push(id);
            }
            *n += 1;
        }
    }

    /// Adds one chunk as document `doc`.
    fn add_chunk(&mut self, doc: u32, c: &Chunk) {
        let mut words = 0u32;
        let mut add = |w: &str| {
            words += 1;
            self.add_word(w);
        };
        if c.kind != Kind::Image {
            for_each_word(&c.content, &mut add);
        }
        for_each_word(&c.path, &mut add);
        self.doc_lens.push((doc, words));
        for &id in &self.touched {
            let n = std::mem::take(&mut self.terms.tf[id as usize]);
            self.terms.lists[id as usize].push((doc, n));
        }
        self.touched.clear();
    }

    /// Appends `other`'s postings (of later documents) to this block's.
    fn append(&mut self, other: Block) {
        self.doc_lens.extend(other.doc_lens);
        for (term, list) in other.terms.terms.into_iter().zip(other.terms.lists) {
            let id = self.terms.intern(&term);
            let into = &mut self.terms.lists[id as usize];
            if into.is_empty() {
                *into = list;
            } else {
                into.extend(list);
            }
        }
    }
}

/// Builds delta-encoded postings and per-chunk word counts for `chunks` (in ref order).
pub(crate) fn build_postings(
    chunks: &[Chunk],
    prev: Option<PrevPostings>,
) -> (BTreeMap<String, Vec<u32>>, Vec<u32>) {
    let mut doc_lens = vec![0u32; chunks.len()];
    let mut known = vec![false; chunks.len()];
    let mut all = Block::default();
    if let Some(prev) = prev {
        let new_pos: FxHashMap<&str, u32> = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.as_str(), i as u32))
            .collect();
        let old_to_new: Vec<Option<u32>> = prev
            .ids
            .iter()
            .map(|id| new_pos.get(id.as_str()).copied())
            .collect();
        for (old, new) in old_to_new.iter().enumerate() {
            if let Some(n) = new {
                known[*n as usize] = true;
                doc_lens[*n as usize] = prev.doc_lens.get(old).copied().unwrap_or(0);
            }
        }
        for (term, encoded) in prev.inverted {
            let mut pos = 0u32;
            let mut list = Vec::new();
            for (k, pair) in encoded.chunks_exact(2).enumerate() {
                pos = if k == 0 { pair[0] } else { pos + pair[0] };
                if let Some(Some(n)) = old_to_new.get(pos as usize) {
                    list.push((*n, pair[1]));
                }
            }
            if !list.is_empty() {
                let id = all.terms.intern(&term);
                all.terms.lists[id as usize] = list;
            }
        }
    }
    let fresh: Vec<u32> = (0..chunks.len() as u32)
        .filter(|&i| !known[i as usize])
        .collect();
    // A few blocks per thread, so a thread that drew large chunks does not hold the rest up.
    let block = fresh
        .len()
        .div_ceil(rayon::current_num_threads() * 4)
        .max(MIN_BLOCK);
    let blocks: Vec<Block> = fresh
        .par_chunks(block)
        .map(|docs| {
            let mut b = Block::default();
            for &doc in docs {
                b.add_chunk(doc, &chunks[doc as usize]);
            }
            b.words = FxHashMap::default();
            b
        })
        .collect();
    for b in blocks {
        all.append(b);
    }
    for (doc, n) in std::mem::take(&mut all.doc_lens) {
        doc_lens[doc as usize] = n;
    }
    let mut encoded: Vec<(String, Vec<u32>)> = all
        .terms
        .terms
        .into_iter()
        .zip(all.terms.lists)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|(term, mut list)| {
            // Previous and fresh postings interleave when both exist; fresh blocks alone are
            // already in document order.
            if !list.is_sorted() {
                list.sort_unstable();
            }
            let mut out = Vec::with_capacity(list.len() * 2);
            let mut last = 0u32;
            for (k, (pos, tf)) in list.into_iter().enumerate() {
                out.push(if k == 0 { pos } else { pos - last });
                out.push(tf);
                last = pos;
            }
            (term.into_string(), out)
        })
        .collect();
    encoded.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    (encoded.into_iter().collect(), doc_lens)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn chunk(id: &str, path: &str, kind: Kind, content: &str) -> Chunk {
        Chunk {
            id: id.to_string(),
            short_id: id.to_string(),
            slug: String::new(),
            path: path.to_string(),
            kind,
            chunk_index: 0,
            start_line: 1,
            end_line: 1,
            token_estimate: 0,
            content: content.to_string(),
            content_hash: String::new(),
            heading_path: Vec::new(),
            symbol: None,
            symbols: Vec::new(),
            address: None,
            asset_path: None,
        }
    }

    /// The plain computation: every chunk tokenised on its own into one map.
    fn direct(chunks: &[Chunk]) -> (BTreeMap<String, Vec<u32>>, Vec<u32>) {
        let mut lists: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
        let mut lens = Vec::new();
        for (doc, c) in chunks.iter().enumerate() {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut words = 0;
            let mut scratch = Scratch::default();
            let mut add = |w: &str| {
                words += 1;
                for_each_word_term(w, &mut scratch, |t| {
                    *counts.entry(t.to_string()).or_default() += 1
                });
            };
            if c.kind != Kind::Image {
                for_each_word(&c.content, &mut add);
            }
            for_each_word(&c.path, &mut add);
            lens.push(words);
            for (t, n) in counts {
                lists.entry(t).or_default().push((doc as u32, n));
            }
        }
        let inverted = lists
            .into_iter()
            .map(|(t, list)| {
                let mut out = Vec::new();
                let mut last = 0;
                for (k, (pos, tf)) in list.into_iter().enumerate() {
                    out.push(if k == 0 { pos } else { pos - last });
                    out.push(tf);
                    last = pos;
                }
                (t, out)
            })
            .collect();
        (inverted, lens)
    }

    fn corpus(n: usize) -> Vec<Chunk> {
        let words = [
            "parseConfig",
            "the",
            "HTTPServer",
            "running",
            "runs",
            "run_fast",
            "x",
            "naïve",
            "Überprüfung",
            "getHTTPResponse2",
            "___",
            "a_b_c",
            "stems",
            "stemming",
        ];
        (0..n)
            .map(|i| {
                let content: Vec<&str> = (0..(i % 23) + 1)
                    .map(|k| words[(i * 7 + k * 3) % words.len()])
                    .collect();
                let kind = if i % 17 == 0 { Kind::Image } else { Kind::Text };
                chunk(
                    &format!("id{i}"),
                    &format!("dir{}/file_{}.rs", i % 5, i % 11),
                    kind,
                    &content.join(" "),
                )
            })
            .collect()
    }

    #[test]
    fn blocks_give_what_one_map_gives() {
        // More than one block (MIN_BLOCK), so blocks are merged.
        let chunks = corpus(MIN_BLOCK * 3 + 17);
        assert_eq!(build_postings(&chunks, None), direct(&chunks));
        // On one thread too (one block per MIN_BLOCK chunks, merged in order).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(
            pool.install(|| build_postings(&chunks, None)),
            direct(&chunks)
        );
    }

    #[test]
    fn previous_postings_are_renumbered_and_merged_with_fresh_ones() {
        let old = corpus(600);
        let (inverted, doc_lens) = build_postings(&old, None);
        // The new index: every third old chunk gone, some new ones between the rest.
        let mut new: Vec<Chunk> = Vec::new();
        for (i, c) in old.iter().enumerate() {
            if i % 3 == 0 {
                continue;
            }
            new.push(c.clone());
            if i % 4 == 0 {
                let mut fresh = c.clone();
                fresh.id = format!("fresh{i}");
                fresh.content = format!("{} addedWord", c.content);
                new.push(fresh);
            }
        }
        let prev = PrevPostings {
            ids: old.iter().map(|c| c.id.clone()).collect(),
            doc_lens,
            inverted,
        };
        assert_eq!(build_postings(&new, Some(prev)), direct(&new));
    }
}

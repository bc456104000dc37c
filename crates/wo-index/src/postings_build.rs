//! The BM25 postings of a new index (`index.json`'s `inverted_index` and `doc_lens`), built
//! from its chunks in ref order.
//!
//! Terms are `wo_text::terms`' (the tokenizer search and chat retrieval share); a chunk's terms
//! are those of its content (images have none) and of its path. Tokenising was the largest
//! cost of an index after tree-sitter itself (29% of a code tree's CPU, most of it stemming and
//! lower-casing the same words again and again), and on trees of prose, word lists and JSON —
//! hundreds of thousands of distinct terms, most in one chunk only — allocating and freeing a
//! string and a postings vector per term was over half of the rest (perf: malloc, free and
//! `malloc_consolidate` 30% of a text tree's CPU). So nothing here allocates per word or per
//! term:
//!
//! - chunks are split into contiguous blocks tokenised in parallel, each into its own
//!   [`Block`]: terms interned to small ids in a [`TermTable`] (one string arena and an index
//!   table of ids), and each document's `(term id, frequency)` pairs appended to one flat
//!   vector;
//! - inside a block, each distinct word is tokenised once (the block's word cache maps the
//!   word, borrowed from the chunk, to its term ids' span in one vector, and is reset when it
//!   passes [`WORD_CACHE_MAX`] words, which bounds memory on large trees; a small
//!   direct-mapped cache of hot words in front of it answers the frequent ones) —
//!   `for_each_word_term` is a pure function of the word, so the cache cannot change a term;
//! - merging interns every block's terms into one table (in parallel, sharded by hash), ranks
//!   the terms by their text, counts each term's postings and fills one arena of `(document,
//!   frequency)` pairs in block order, so every term's postings are already in document
//!   order; only the result handed to the index (`BTreeMap<String, Vec<u32>>`, the model's
//!   type) is allocated per term, in parallel.
//!
//! Chunks whose id was in the previous index keep their previous postings, renumbered to their
//! new positions: an id fixes path and content, and terms depend on nothing else. Only new
//! chunks are tokenised, which keeps incremental runs proportional to what changed.
//!
//! The result is independent of the number of threads and of the block size (the golden test,
//! `tests/golden.rs`, and the unit test below hold it to a direct, one-map computation).

use std::collections::BTreeMap;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use rayon::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap};
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

/// A block's word cache is reset when it grows past this many words (memory stays bounded on
/// trees with a huge vocabulary; the cache only saves time).
const WORD_CACHE_MAX: usize = 1 << 17;

/// Slots of a block's hot-word cache (a power of two).
const HOT_WORDS: usize = 1 << 12;

/// Chunks per block at least: fewer would spend more on merging than on tokenising.
const MIN_BLOCK: usize = 256;

/// Strings interned to dense ids `0..len()`, all in one arena: no allocation per string.
#[derive(Default)]
struct TermTable {
    /// Ids, found by the hash of their text.
    table: HashTable<u32>,
    /// Every term's text, one after another.
    text: String,
    /// Id → end of its text in `text` (its start is the previous id's end).
    ends: Vec<u32>,
    /// Id → hash of its text: the table grows without rehashing text, and the merge shards
    /// terms by it.
    hashes: Vec<u64>,
}

fn hash_of(term: &str) -> u64 {
    FxBuildHasher.hash_one(term)
}

impl TermTable {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, id: u32) -> &str {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    fn intern(&mut self, term: &str) -> u32 {
        self.intern_hashed(term, hash_of(term))
    }

    /// [`Self::intern`] with the term's [`hash_of`] known.
    fn intern_hashed(&mut self, term: &str, hash: u64) -> u32 {
        let Self {
            table,
            text,
            ends,
            hashes,
        } = self;
        let at = |id: u32| {
            let i = id as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] as usize };
            &text[start..ends[i] as usize]
        };
        match table.entry(hash, |&id| at(id) == term, |&id| hashes[id as usize]) {
            hashbrown::hash_table::Entry::Occupied(e) => *e.get(),
            hashbrown::hash_table::Entry::Vacant(e) => {
                let id = ends.len() as u32;
                text.push_str(term);
                // An arena past 4 GiB of distinct terms is beyond any index built in memory.
                ends.push(u32::try_from(text.len()).expect("term arena under 4 GiB"));
                hashes.push(hash);
                e.insert(id);
                id
            }
        }
    }
}

/// A term of a merge source placed in a shard: (source, id in the source, id in the shard).
type Placed = (u32, u32, u32);

/// `a == b` for the short words that fill the hot-word cache, without a call to `memcmp`
/// (perf: its call and set-up were ~5% of a text tree's CPU, nearly all on cache hits). Each
/// length class compares overlapping loads that together cover every byte.
#[inline(always)]
fn same_word(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let u64_at = |x: &[u8], at: usize| u64::from_le_bytes(x[at..at + 8].try_into().unwrap());
    let u32_at = |x: &[u8], at: usize| u32::from_le_bytes(x[at..at + 4].try_into().unwrap());
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => u32_at(a, 0) == u32_at(b, 0) && u32_at(a, n - 4) == u32_at(b, n - 4),
        8..=16 => u64_at(a, 0) == u64_at(b, 0) && u64_at(a, n - 8) == u64_at(b, n - 8),
        _ => a == b,
    }
}

/// Postings of one block of chunks (borrowing their words for its cache).
#[derive(Default)]
struct Block<'a> {
    terms: TermTable,
    /// Per document, in document order: (document, words, end of its pairs in `pairs`).
    docs: Vec<(u32, u32, u32)>,
    /// (term id, frequency) of every document, one after another.
    pairs: Vec<(u32, u32)>,
    /// Word → the span of its term ids in `word_ids` (with repetitions, in the order the
    /// tokenizer gives them).
    words: FxHashMap<&'a str, (u32, u32)>,
    word_ids: Vec<u32>,
    /// A small direct-mapped cache in front of `words` (slot by hash; `""`, never a word, when
    /// empty): the frequent words of a text stay in it, in the CPU's cache, where the big
    /// map's probes missed it (perf: 11% of a text tree's CPU in the map's lookups).
    hot: Vec<(&'a str, u32, u32)>,
    scratch: Scratch,
    /// Id → frequency in the current document.
    tf: Vec<u32>,
    /// Ids whose `tf` is non-zero.
    touched: Vec<u32>,
    /// Words the cache holds at most ([`WORD_CACHE_MAX`]; smaller in tests).
    word_cache_max: usize,
}

impl<'a> Block<'a> {
    /// Counts the terms of `word` in the current document.
    fn add_word(&mut self, word: &'a str) {
        if self.hot.is_empty() {
            self.hot = vec![("", 0, 0); HOT_WORDS];
        }
        let slot = (FxBuildHasher.hash_one(word) as usize) & (HOT_WORDS - 1);
        let (start, end) = match self.hot[slot] {
            (w, start, end) if same_word(w, word) => (start, end),
            _ => {
                let span = self.cached_word(word);
                self.hot[slot] = (word, span.0, span.1);
                span
            }
        };
        for &id in &self.word_ids[start as usize..end as usize] {
            let n = &mut self.tf[id as usize];
            if *n == 0 {
                self.touched.push(id);
            }
            *n += 1;
        }
    }

    /// The span of `word`'s term ids in `word_ids`, tokenising it if the cache lacks it.
    fn cached_word(&mut self, word: &'a str) -> (u32, u32) {
        if self.words.len() >= self.word_cache_max {
            self.words.clear();
            self.word_ids.clear();
            // The hot slots point into the spans just dropped.
            self.hot.fill(("", 0, 0));
        }
        let Self {
            terms,
            scratch,
            word_ids,
            tf,
            words,
            ..
        } = self;
        *words.entry(word).or_insert_with(|| {
            let start = word_ids.len() as u32;
            for_each_word_term(word, scratch, |t| {
                let id = terms.intern(t);
                if id as usize == tf.len() {
                    tf.push(0);
                }
                word_ids.push(id);
            });
            (start, word_ids.len() as u32)
        })
    }

    /// Adds one chunk as document `doc`.
    fn add_chunk(&mut self, doc: u32, c: &'a Chunk) {
        let mut words = 0u32;
        let mut add = |w: &'a str| {
            words += 1;
            self.add_word(w);
        };
        if c.kind != Kind::Image {
            for_each_word(&c.content, &mut add);
        }
        for_each_word(&c.path, &mut add);
        for &id in &self.touched {
            let n = std::mem::take(&mut self.tf[id as usize]);
            self.pairs.push((id, n));
        }
        self.touched.clear();
        self.docs.push((doc, words, self.pairs.len() as u32));
    }
}

/// Builds delta-encoded postings and per-chunk word counts for `chunks` (in ref order).
pub(crate) fn build_postings(
    chunks: &[Chunk],
    prev: Option<PrevPostings>,
) -> (BTreeMap<String, Vec<u32>>, Vec<u32>) {
    build_postings_with(chunks, prev, WORD_CACHE_MAX)
}

/// [`build_postings`] with blocks' word caches reset past `word_cache_max` words.
fn build_postings_with(
    chunks: &[Chunk],
    prev: Option<PrevPostings>,
    word_cache_max: usize,
) -> (BTreeMap<String, Vec<u32>>, Vec<u32>) {
    let mut doc_lens = vec![0u32; chunks.len()];
    let mut known = vec![false; chunks.len()];
    // The previous index's postings that still apply: (term, absolute new position, tf).
    let mut kept: Vec<(String, Vec<(u32, u32)>)> = Vec::new();
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
                kept.push((term, list));
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
    let blocks: Vec<Block<'_>> = fresh
        .par_chunks(block)
        .map(|docs| {
            let mut b = Block {
                word_cache_max,
                ..Block::default()
            };
            for &doc in docs {
                b.add_chunk(doc, &chunks[doc as usize]);
            }
            // Only the terms and pairs are merged; the caches go now, on this thread.
            b.words = FxHashMap::default();
            b.hot = Vec::new();
            b.word_ids = Vec::new();
            b.tf = Vec::new();
            b
        })
        .collect();

    // One table of every term, block-local ids → global ids, built in parallel: terms are
    // sharded by hash, each shard interning its terms from every block in block order (one
    // serial table was 6% of the wall time of a text tree).
    let mut sources: Vec<&TermTable> = blocks.iter().map(|b| &b.terms).collect();
    let mut kept_table = TermTable::default();
    for (t, _) in &kept {
        kept_table.intern(t);
    }
    sources.push(&kept_table);
    let shards = (rayon::current_num_threads() * 4).next_power_of_two();
    // Middle bits: hashbrown places entries by the low bits and tags them with the top 7, so
    // a shard chosen by either would crowd its table.
    let shard_of = |hash: u64| (hash >> 40) as usize & (shards - 1);
    let tables: Vec<(TermTable, Vec<Placed>)> = (0..shards)
        .into_par_iter()
        .map(|shard| {
            let mut table = TermTable::default();
            let mut placed = Vec::new();
            for (src, terms) in sources.iter().enumerate() {
                for (local, &hash) in terms.hashes.iter().enumerate() {
                    if shard_of(hash) == shard {
                        let id = table.intern_hashed(terms.get(local as u32), hash);
                        placed.push((src as u32, local as u32, id));
                    }
                }
            }
            (table, placed)
        })
        .collect();
    let mut base = Vec::with_capacity(shards);
    let mut total = 0u32;
    for (table, _) in &tables {
        base.push(total);
        total += table.len() as u32;
    }
    let mut remaps: Vec<Vec<u32>> = sources.iter().map(|t| vec![0u32; t.len()]).collect();
    let mut texts: Vec<&str> = Vec::with_capacity(total as usize);
    for ((table, placed), &b) in tables.iter().zip(&base) {
        for &(src, local, id) in placed {
            remaps[src as usize][local as usize] = b + id;
        }
        texts.extend((0..table.len() as u32).map(|id| table.get(id)));
    }
    // Rank the terms by their text: the order of `inverted_index`. Sorted by their first
    // eight bytes first (big-endian, zero-padded: the same order as the bytes where they
    // differ), the text itself only on a tie, so most comparisons touch no string (sorting
    // through the texts was 4-7% of the wall time).
    let prefix = |t: &str| {
        let mut key = [0u8; 8];
        let n = t.len().min(8);
        key[..n].copy_from_slice(&t.as_bytes()[..n]);
        u64::from_be_bytes(key)
    };
    let mut keyed: Vec<(u64, u32)> = texts
        .par_iter()
        .enumerate()
        .map(|(id, t)| (prefix(t), id as u32))
        .collect();
    keyed.par_sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| texts[a.1 as usize].cmp(texts[b.1 as usize]))
    });
    let order: Vec<u32> = keyed.into_iter().map(|(_, id)| id).collect();
    let mut rank = vec![0u32; order.len()];
    for (r, &id) in order.iter().enumerate() {
        rank[id as usize] = r as u32;
    }
    // From here on a source's term ids map straight to ranks.
    remaps
        .par_iter_mut()
        .for_each(|m| m.iter_mut().for_each(|g| *g = rank[*g as usize]));
    let kept_ids: Vec<u32> = remaps.pop().unwrap_or_default();

    // Each term's postings, one arena in rank order: count, then fill in document order.
    let mut starts = vec![0usize; order.len() + 1];
    for (&r, (_, list)) in kept_ids.iter().zip(&kept) {
        starts[r as usize + 1] += list.len();
    }
    for (b, remap) in blocks.iter().zip(&remaps) {
        for &(id, _) in &b.pairs {
            starts[remap[id as usize] as usize + 1] += 1;
        }
    }
    for r in 1..starts.len() {
        starts[r] += starts[r - 1];
    }
    let mut fill = starts.clone();
    let mut arena = vec![(0u32, 0u32); starts[order.len()]];
    // Terms holding both previous and fresh postings: those interleave and are sorted below.
    let mut mixed = vec![false; order.len()];
    for (&r, (_, list)) in kept_ids.iter().zip(&kept) {
        let r = r as usize;
        mixed[r] = true;
        arena[fill[r]..fill[r] + list.len()].copy_from_slice(list);
        fill[r] += list.len();
    }
    drop(kept);
    for (b, remap) in blocks.iter().zip(&remaps) {
        let mut from = 0usize;
        for &(doc, words, end) in &b.docs {
            doc_lens[doc as usize] = words;
            for &(id, tf) in &b.pairs[from..end as usize] {
                let r = remap[id as usize] as usize;
                arena[fill[r]] = (doc, tf);
                fill[r] += 1;
            }
            from = end as usize;
        }
    }
    drop(blocks);
    for (r, is_mixed) in mixed.iter().enumerate() {
        let list = &mut arena[starts[r]..starts[r + 1]];
        if *is_mixed && !list.is_sorted() {
            list.sort_unstable();
        }
    }

    // The model's map: one string and one delta-encoded vector per term, built in parallel,
    // already in key order.
    let encoded: Vec<(String, Vec<u32>)> = order
        .par_iter()
        .enumerate()
        .map(|(r, &id)| {
            let list = &arena[starts[r]..starts[r + 1]];
            let mut out = Vec::with_capacity(list.len() * 2);
            let mut last = 0u32;
            for (k, &(pos, tf)) in list.iter().enumerate() {
                out.push(if k == 0 { pos } else { pos - last });
                out.push(tf);
                last = pos;
            }
            (texts[id as usize].to_string(), out)
        })
        .collect();
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
    fn same_word_is_equality_at_every_length() {
        let base = "abcdefghijklmnopqrstuvwxyz0123456789";
        for n in 0..base.len() {
            let a = &base[..n];
            assert!(same_word(a, a), "{a:?}");
            // One byte changed at each position, and a different length, are told apart.
            for at in 0..n {
                let mut b = a.as_bytes().to_vec();
                b[at] = b'_';
                assert!(
                    !same_word(a, std::str::from_utf8(&b).unwrap()),
                    "{a:?} at {at}"
                );
            }
            assert!(!same_word(a, &base[..n + 1]), "{a:?}");
        }
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
    fn a_word_cache_reset_changes_nothing() {
        // A cache of 3 words is reset many times in every block; the cache only saves time.
        let chunks = corpus(MIN_BLOCK * 2 + 5);
        assert_eq!(build_postings_with(&chunks, None, 3), direct(&chunks));
        assert_eq!(build_postings_with(&chunks, None, 1), direct(&chunks));
    }

    #[test]
    fn a_large_vocabulary_merges_across_blocks_and_shards() {
        // Thousands of distinct terms, most in one chunk, some shared across blocks: every
        // shard of the merge holds terms from several blocks.
        let chunks: Vec<Chunk> = (0..MIN_BLOCK * 5)
            .map(|i| {
                let content = format!(
                    "unique{i}word shared{} common Straße{} x{}y",
                    i % 97,
                    i % 13,
                    i % 7
                );
                chunk(
                    &format!("id{i}"),
                    &format!("p{}/f.md", i % 3),
                    Kind::Text,
                    &content,
                )
            })
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
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

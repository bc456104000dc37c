//! Reading an index and querying it: BM25 ranking with symbol/heading boosts and filters,
//! chunk lookup by ref or id, per-file outlines and symbol lists.
//!
//! Scoring is Okapi BM25 (`wo_text::bm25`: k1 = 1.2, b = 0.75) where document length is the
//! chunk's word count and `avgdl` is the mean over all chunks — both measured with the tokenizer
//! that reads the query (`wo_text::terms`, also chat retrieval's), so length normalisation
//! compares like with like. Query terms are weighted by how often
//! they occur in the query. A query term that also appears in the chunk's symbol names or
//! heading path adds a fraction of its IDF, so definitions and sections about a term outrank
//! passing mentions.
//!
//! The ranking (`run`) reads an index through `Corpus`: the loaded [`Index`] here, or the
//! search sidecar (`crate::sidecar`) that one-shot searches read instead of the whole file.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use wo_text::bm25;
use wo_text::terms::{for_each_term, terms};

use crate::error::Result;
use crate::ingest::{cache_dir, read_index_file};
use crate::model::{Chunk, IndexFile, Kind};
use crate::util::{single_line, truncate_chars};

/// Extra weight (× IDF) for a query term found in the chunk's symbol names.
const SYMBOL_BOOST: f64 = 1.0;
/// Extra weight (× IDF) for a query term found in the chunk's heading path.
const HEADING_BOOST: f64 = 0.5;

/// A search request.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Free text; may be empty to list chunks matching the filters.
    pub text: String,
    /// Maximum hits (0 means 10).
    pub limit: usize,
    /// Keep chunks whose path starts with this (a leading `./` is ignored).
    pub path_prefix: Option<String>,
    /// Keep chunks of this kind.
    pub kind: Option<Kind>,
    /// Keep chunks with a heading starting with this (case-insensitive).
    pub heading_prefix: Option<String>,
    /// Keep chunks with a symbol starting with this (case-insensitive; qualified or bare).
    pub symbol_prefix: Option<String>,
}

impl Query {
    /// A query for `text` with default limit and no filters.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

/// One ranked result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// Chunk ref (`c0001`).
    #[serde(rename = "ref")]
    pub chunk_ref: String,
    /// Full chunk id.
    pub id: String,
    /// Source path.
    pub path: String,
    /// Kind.
    pub kind: Kind,
    /// First line.
    pub start_line: usize,
    /// Last line.
    pub end_line: usize,
    /// Semantic label (symbol, heading breadcrumb, JSON address or slug).
    pub label: String,
    /// Relevance score (higher is better).
    pub score: f64,
    /// The first line of the chunk that contains a query term, shortened.
    pub snippet: String,
}

/// A chunk with its ref, as returned by [`Index::get_chunk`].
#[derive(Debug, Clone, Copy)]
pub struct ChunkRecord<'a> {
    /// Chunk ref.
    pub chunk_ref: &'a str,
    /// The chunk.
    pub chunk: &'a Chunk,
}

/// One heading of a file outline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutlineEntry {
    /// Ref of the chunk the heading starts.
    #[serde(rename = "ref")]
    pub chunk_ref: String,
    /// Source path.
    pub path: String,
    /// Heading depth in the path (1 = top).
    pub depth: usize,
    /// Heading text.
    pub heading: String,
    /// First line of the section.
    pub start_line: usize,
}

/// One declared symbol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SymbolEntry {
    /// Ref of the chunk holding the symbol.
    #[serde(rename = "ref")]
    pub chunk_ref: String,
    /// Source path.
    pub path: String,
    /// Qualified symbol name.
    pub symbol: String,
    /// First line of the chunk.
    pub start_line: usize,
    /// Last line of the chunk.
    pub end_line: usize,
}

/// Chunks a chat turn is offered at most ([`Index::context_chunks`]).
pub const CHUNKS_PER_TURN: usize = 5;

/// A chunk offered to a chat turn as context: what `wo ask`, `wo serve` and the browser's
/// in-page index all send for a question (`wo_engine::files` turns it into a candidate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ContextChunk {
    /// `chunk:<short id>`, recorded in a turn's `sources`.
    pub id: String,
    /// `path:start-end label`, shown to the model and the user.
    pub label: String,
    /// The chunk's text.
    pub text: String,
}

/// The label used for a chunk in search results and exports.
pub fn chunk_label(chunk: &Chunk) -> String {
    label_of(
        chunk.symbol.as_deref(),
        &chunk.heading_path,
        chunk.address.as_deref(),
        &chunk.slug,
    )
}

/// [`chunk_label`] from the fields it reads (the sidecar's build has no [`Chunk`]).
pub(crate) fn label_of(
    symbol: Option<&str>,
    heading_path: &[String],
    address: Option<&str>,
    slug: &str,
) -> String {
    if let Some(sym) = symbol.filter(|s| !s.trim().is_empty()) {
        return single_line(sym);
    }
    if !heading_path.is_empty() {
        let n = heading_path.len();
        let parts: Vec<&str> = heading_path[n.saturating_sub(2)..]
            .iter()
            .map(String::as_str)
            .collect();
        return single_line(&parts.join(" > "));
    }
    if let Some(addr) = address {
        return single_line(addr);
    }
    slug.to_string()
}

/// A loaded index, ready for queries.
#[derive(Debug, Clone)]
pub struct Index {
    root: PathBuf,
    file: IndexFile,
    by_key: HashMap<String, usize>,
    refs: Vec<String>,
}

fn path_matches(path: &str, prefix: &str) -> bool {
    let prefix = prefix.strip_prefix("./").unwrap_or(prefix);
    prefix.is_empty() || prefix == "." || path.starts_with(prefix)
}

fn starts_with_ci(text: &str, prefix: &str) -> bool {
    text.to_lowercase().starts_with(&prefix.to_lowercase())
}

impl Index {
    /// Opens `<root>/.wo-index/index.json`.
    pub fn open(root: &Path) -> Result<Self> {
        let file = read_index_file(root)?;
        Ok(Self::from_file(root, file))
    }

    /// Wraps an already-loaded index document.
    pub fn from_file(root: &Path, file: IndexFile) -> Self {
        let refs: Vec<String> = file
            .chunks
            .iter()
            .map(|c| file.chunk_refs.get(&c.id).cloned().unwrap_or_default())
            .collect();
        let mut by_key = HashMap::with_capacity(file.chunks.len() * 3);
        for (i, c) in file.chunks.iter().enumerate() {
            by_key.insert(c.id.clone(), i);
            by_key.entry(c.short_id.clone()).or_insert(i);
            by_key.insert(refs[i].clone(), i);
        }
        Self {
            root: root.to_path_buf(),
            file,
            by_key,
            refs,
        }
    }

    /// Project root the index belongs to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The cache directory (`<root>/.wo-index`).
    pub fn cache_dir(&self) -> PathBuf {
        cache_dir(&self.root)
    }

    /// The underlying index document.
    pub fn data(&self) -> &IndexFile {
        &self.file
    }

    /// Ref of the chunk at position `i` in [`IndexFile::chunks`].
    pub fn ref_at(&self, i: usize) -> &str {
        self.refs.get(i).map_or("", String::as_str)
    }

    /// Looks a chunk up by ref (`c0001`), full id or 12-character short id.
    pub fn get_chunk(&self, key: &str) -> Option<ChunkRecord<'_>> {
        let i = *self.by_key.get(key.trim())?;
        Some(ChunkRecord {
            chunk_ref: self.ref_at(i),
            chunk: &self.file.chunks[i],
        })
    }

    fn in_scope(&self, chunk: &Chunk, path: &str) -> bool {
        let path = path
            .strip_prefix("./")
            .unwrap_or(path)
            .trim_end_matches('/');
        path.is_empty()
            || path == "."
            || chunk.path == path
            || chunk
                .path
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// The [`CHUNKS_PER_TURN`] chunks most relevant to `question`, as chat context.
    pub fn context_chunks(&self, question: &str) -> Vec<ContextChunk> {
        let mut q = Query::new(question);
        q.limit = CHUNKS_PER_TURN;
        self.search(&q)
            .into_iter()
            .filter_map(|hit| {
                let rec = self.get_chunk(&hit.chunk_ref)?;
                Some(ContextChunk {
                    id: format!("chunk:{}", rec.chunk.short_id),
                    label: format!(
                        "{}:{}-{} {}",
                        hit.path, hit.start_line, hit.end_line, hit.label
                    ),
                    text: rec.chunk.content.clone(),
                })
            })
            .collect()
    }

    /// Headings of the file (or every file under the directory) `path`, in order.
    pub fn list_outline(&self, path: &str) -> Vec<OutlineEntry> {
        let mut out = Vec::new();
        let mut prev: (&str, &[String]) = ("", &[]);
        for (i, c) in self.file.chunks.iter().enumerate() {
            if !self.in_scope(c, path) || c.heading_path.is_empty() {
                continue;
            }
            let same_file = prev.0 == c.path;
            // Emit only headings that differ from the previous chunk's path (continuations of a
            // split section repeat the same heading path).
            let common = if same_file {
                prev.1
                    .iter()
                    .zip(&c.heading_path)
                    .take_while(|(a, b)| a == b)
                    .count()
            } else {
                0
            };
            if same_file && common == c.heading_path.len() && prev.1.len() == common {
                continue;
            }
            for (depth, heading) in c.heading_path.iter().enumerate().skip(common) {
                out.push(OutlineEntry {
                    chunk_ref: self.ref_at(i).to_string(),
                    path: c.path.clone(),
                    depth: depth + 1,
                    heading: heading.clone(),
                    start_line: c.start_line,
                });
            }
            prev = (&c.path, &c.heading_path);
        }
        out
    }

    /// Symbols declared in the file (or every file under the directory) `path`, in order.
    pub fn list_symbols(&self, path: &str) -> Vec<SymbolEntry> {
        let mut out = Vec::new();
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for (i, c) in self.file.chunks.iter().enumerate() {
            if !self.in_scope(c, path) {
                continue;
            }
            for sym in c.symbol.iter().chain(&c.symbols) {
                if seen.insert((&c.path, sym)) {
                    out.push(SymbolEntry {
                        chunk_ref: self.ref_at(i).to_string(),
                        path: c.path.clone(),
                        symbol: sym.clone(),
                        start_line: c.start_line,
                        end_line: c.end_line,
                    });
                }
            }
        }
        out
    }

    /// Ranks chunks for `query`. Ties are broken by ref, so results are deterministic.
    pub fn search(&self, query: &Query) -> Vec<Hit> {
        let Ok(hits) = run(self, query);
        hits
    }
}

/// Whether a chunk with these fields passes the query's filters.
pub(crate) fn passes_fields<'a>(
    path: &str,
    kind: Kind,
    mut headings: impl Iterator<Item = &'a str>,
    mut symbols: impl Iterator<Item = &'a str>,
    q: &Query,
) -> bool {
    if let Some(p) = &q.path_prefix
        && !path_matches(path, p)
    {
        return false;
    }
    if let Some(k) = q.kind
        && kind != k
    {
        return false;
    }
    if let Some(h) = &q.heading_prefix
        && !headings.any(|x| starts_with_ci(x, h))
    {
        return false;
    }
    if let Some(s) = &q.symbol_prefix {
        let hit = symbols.any(|sym| {
            let bare = sym.rsplit([':', '.']).next().unwrap_or(sym);
            starts_with_ci(sym, s) || starts_with_ci(bare, s)
        });
        if !hit {
            return false;
        }
    }
    true
}

/// Which query terms (a bit each) some text of a chunk contains: the boosts' test.
pub(crate) type MaskOf<'q> = dyn Fn(&mut dyn Iterator<Item = &str>) -> u64 + 'q;

/// What ranking reads of an index: the loaded [`Index`], or the postings sidecar
/// (`crate::sidecar`), which reads only the postings of the query's terms and the records of
/// the chunks they touch. One ranking ([`run`]) serves both, so their answers are the same by
/// construction (and a property test holds them to it).
pub(crate) trait Corpus {
    /// Why an answer could not be read (a damaged sidecar); the loaded index never fails.
    type Error;
    /// Chunks in the index (BM25's N; positions at or past it are skipped).
    fn doc_count(&self) -> usize;
    /// `stats.avg_doc_len` (BM25's avgdl).
    fn avg_doc_len(&self) -> f64;
    /// The flat postings of `term` as `index.json` stores them, if the term is indexed.
    fn postings(&self, term: &str) -> Result<Option<Cow<'_, [u32]>>, Self::Error>;
    /// `doc_lens[doc]`, 0 where the index has none.
    fn doc_len(&self, doc: usize) -> u32;
    /// Whether chunk `doc` passes the query's filters ([`passes_fields`]).
    fn passes(&self, doc: usize, q: &Query) -> Result<bool, Self::Error>;
    /// `mask_of` over chunk `doc`'s symbols (main one first), then over its heading path.
    fn boost_masks(&self, doc: usize, mask_of: &MaskOf<'_>) -> Result<(u64, u64), Self::Error>;
    /// The hit for chunk `doc` with its (rounded) score.
    fn hit(&self, doc: usize, score: f64, query_terms: &HashSet<&str>) -> Result<Hit, Self::Error>;
}

fn filtered(query: &Query) -> bool {
    query.path_prefix.is_some()
        || query.kind.is_some()
        || query.heading_prefix.is_some()
        || query.symbol_prefix.is_some()
}

/// Ranks chunks of `corpus` for `query`: the one search. Ties are broken by position (= ref
/// order), so results are deterministic.
pub(crate) fn run<C: Corpus>(corpus: &C, query: &Query) -> std::result::Result<Vec<Hit>, C::Error> {
    let limit = if query.limit == 0 { 10 } else { query.limit };
    let mut qtf: Vec<(String, f64)> = Vec::new();
    for t in terms(&query.text) {
        match qtf.iter_mut().find(|(x, _)| *x == t) {
            Some(e) => e.1 += 1.0,
            None => qtf.push((t, 1.0)),
        }
    }
    let mut scored: Vec<(usize, f64)> = if qtf.is_empty() {
        // No filter passes every chunk: the sidecar need not read a record to say so.
        let mut all = Vec::new();
        let check = filtered(query);
        for i in 0..corpus.doc_count() {
            if !check || corpus.passes(i, query)? {
                all.push((i, 0.0));
            }
        }
        all
    } else {
        bm25_scores(corpus, &qtf, query)?
    };
    let order = |a: &(usize, f64), b: &(usize, f64)| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.0.cmp(&b.0))
    };
    // Only the best `limit` need ordering.
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit - 1, order);
        scored.truncate(limit);
    }
    scored.sort_by(order);
    let query_terms: HashSet<&str> = qtf.iter().map(|(t, _)| t.as_str()).collect();
    scored
        .into_iter()
        .map(|(i, score)| corpus.hit(i, (score * 1e4).round() / 1e4, &query_terms))
        .collect()
}

/// BM25 over the postings of the query terms, plus symbol and heading
/// boosts. Scores and filter verdicts live in dense per-chunk arrays
/// (a query touching most chunks, like `src`, would otherwise hash
/// every candidate twice), and boosts are found without allocating.
fn bm25_scores<C: Corpus>(
    corpus: &C,
    qtf: &[(String, f64)],
    query: &Query,
) -> std::result::Result<Vec<(usize, f64)>, C::Error> {
    const UNKNOWN: u8 = 0;
    const PASSES: u8 = 1;
    const FILTERED: u8 = 2;
    let docs = corpus.doc_count();
    let n = docs as f64;
    let avgdl = corpus.avg_doc_len();
    let filtered = filtered(query);
    let mut scores: Vec<f64> = vec![0.0; docs];
    let mut verdict: Vec<u8> = if filtered {
        vec![UNKNOWN; docs]
    } else {
        Vec::new()
    };
    let mut touched: Vec<usize> = Vec::new();
    let mut idfs: Vec<(&str, f64, f64)> = Vec::new();
    for (term, weight) in qtf {
        let Some(postings) = corpus.postings(term)? else {
            continue;
        };
        let df = (postings.len() / 2) as f64;
        let idf = bm25::idf(n, df);
        idfs.push((term, idf, *weight));
        let mut pos = 0usize;
        for (k, pair) in postings.chunks_exact(2).enumerate() {
            pos = if k == 0 {
                pair[0] as usize
            } else {
                pos.saturating_add(pair[0] as usize)
            };
            let doc = pos;
            if doc >= docs {
                continue;
            }
            if filtered {
                if verdict[doc] == UNKNOWN {
                    verdict[doc] = if corpus.passes(doc, query)? {
                        PASSES
                    } else {
                        FILTERED
                    };
                }
                if verdict[doc] == FILTERED {
                    continue;
                }
            }
            let tf = f64::from(pair[1]);
            let dl = f64::from(corpus.doc_len(doc));
            let norm = bm25::tf_weight(tf, dl, avgdl);
            if scores[doc] == 0.0 {
                touched.push(doc);
            }
            scores[doc] += weight * idf * norm;
        }
    }
    // Query terms are few: which of them a chunk's symbols and headings
    // contain fits in a bit mask.
    let idfs = &idfs[..idfs.len().min(64)];
    let mask_of = |texts: &mut dyn Iterator<Item = &str>| -> u64 {
        let mut mask = 0u64;
        for text in texts {
            for_each_term(text, |t| {
                if let Some(i) = idfs.iter().position(|(term, _, _)| *term == t) {
                    mask |= 1 << i;
                }
            });
        }
        mask
    };
    touched
        .into_iter()
        .map(|doc| {
            let mut score = scores[doc];
            let (sym, head) = corpus.boost_masks(doc, &mask_of)?;
            for (i, (_, idf, weight)) in idfs.iter().enumerate() {
                if sym & (1 << i) != 0 {
                    score += weight * idf * SYMBOL_BOOST;
                }
                if head & (1 << i) != 0 {
                    score += weight * idf * HEADING_BOOST;
                }
            }
            Ok((doc, score))
        })
        .collect()
}

impl Corpus for Index {
    type Error = std::convert::Infallible;

    fn doc_count(&self) -> usize {
        self.file.chunks.len()
    }

    fn avg_doc_len(&self) -> f64 {
        self.file.stats.avg_doc_len
    }

    fn postings(&self, term: &str) -> std::result::Result<Option<Cow<'_, [u32]>>, Self::Error> {
        Ok(self
            .file
            .inverted_index
            .get(term)
            .map(|p| Cow::Borrowed(p.as_slice())))
    }

    fn doc_len(&self, doc: usize) -> u32 {
        self.file.doc_lens.get(doc).copied().unwrap_or(0)
    }

    fn passes(&self, doc: usize, q: &Query) -> std::result::Result<bool, Self::Error> {
        let c = &self.file.chunks[doc];
        Ok(passes_fields(
            &c.path,
            c.kind,
            c.heading_path.iter().map(String::as_str),
            c.symbol.iter().chain(&c.symbols).map(String::as_str),
            q,
        ))
    }

    fn boost_masks(
        &self,
        doc: usize,
        mask_of: &MaskOf<'_>,
    ) -> std::result::Result<(u64, u64), Self::Error> {
        let c = &self.file.chunks[doc];
        let sym = mask_of(&mut c.symbol.iter().chain(&c.symbols).map(String::as_str));
        let head = mask_of(&mut c.heading_path.iter().map(String::as_str));
        Ok((sym, head))
    }

    fn hit(
        &self,
        doc: usize,
        score: f64,
        query_terms: &HashSet<&str>,
    ) -> std::result::Result<Hit, Self::Error> {
        let c = &self.file.chunks[doc];
        Ok(Hit {
            chunk_ref: self.ref_at(doc).to_string(),
            id: c.id.clone(),
            path: c.path.clone(),
            kind: c.kind,
            start_line: c.start_line,
            end_line: c.end_line,
            label: chunk_label(c),
            score,
            snippet: snippet(&c.content, query_terms),
        })
    }
}

pub(crate) fn snippet(content: &str, query_terms: &HashSet<&str>) -> String {
    let mut first_nonempty = None;
    for line in content.lines() {
        if line.trim().is_empty() {
            continue;
        }
        first_nonempty.get_or_insert(line);
        let mut hit = false;
        for_each_term(line, |t| hit |= query_terms.contains(t));
        if hit {
            return truncate_chars(&single_line(line), 160);
        }
    }
    truncate_chars(&single_line(first_nonempty.unwrap_or("")), 160)
}

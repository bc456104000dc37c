//! The serialised index (`index.json`) and the records it is made of.
//!
//! Field names follow the seed's "Index Format" section. Everything here must serialise
//! deterministically: vectors are kept in a defined order, maps are `BTreeMap`s, and nothing
//! machine-specific (timestamps, absolute paths) is stored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::options::ChunkingConfig;

/// Version of the `index.json` schema written by this crate. Version 2: postings hold the
/// terms of `wo_text::terms` (stopwords dropped, Porter 2 stems) and `doc_lens` count words;
/// a version-1 index is rebuilt, never read with mismatched terms.
pub const INDEX_VERSION: u32 = 2;

/// What kind of content a file (and each of its chunks) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Markdown, split on headings.
    Markdown,
    /// JSON, split per top-level key or array range.
    Json,
    /// JavaScript, split by declarations.
    JavaScript,
    /// TypeScript (and TSX), split by declarations.
    TypeScript,
    /// Rust, split by items.
    Rust,
    /// Python, split by definitions.
    Python,
    /// Go, split by declarations.
    Go,
    /// HTML, tag-stripped and split on `h1`–`h6`.
    Html,
    /// Plain text (and any other text format), split on paragraphs.
    Text,
    /// An image: only its path is indexed; its bytes are exported.
    Image,
    /// Anything else that still produced chunks.
    Unknown,
}

impl Kind {
    /// Every kind, in declaration order.
    pub const ALL: [Kind; 11] = [
        Kind::Markdown,
        Kind::Json,
        Kind::JavaScript,
        Kind::TypeScript,
        Kind::Rust,
        Kind::Python,
        Kind::Go,
        Kind::Html,
        Kind::Text,
        Kind::Image,
        Kind::Unknown,
    ];

    /// The snake_case name used in files and filters (`java_script`, `markdown`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Markdown => "markdown",
            Kind::Json => "json",
            Kind::JavaScript => "java_script",
            Kind::TypeScript => "type_script",
            Kind::Rust => "rust",
            Kind::Python => "python",
            Kind::Go => "go",
            Kind::Html => "html",
            Kind::Text => "text",
            Kind::Image => "image",
            Kind::Unknown => "unknown",
        }
    }

    /// Short label used in `outline.md` headers.
    pub fn short(self) -> &'static str {
        match self {
            Kind::Markdown => "md",
            Kind::Json => "json",
            Kind::JavaScript => "js",
            Kind::TypeScript => "ts",
            Kind::Rust => "rs",
            Kind::Python => "py",
            Kind::Go => "go",
            Kind::Html => "html",
            Kind::Text => "txt",
            Kind::Image => "img",
            Kind::Unknown => "?",
        }
    }

    /// Parses a kind name; accepts the canonical names and common short forms
    /// (`md`, `js`, `javascript`, `ts`, `typescript`, `rs`, `py`, `txt`, `img`).
    pub fn parse(name: &str) -> Option<Kind> {
        let lower = name.trim().to_ascii_lowercase();
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == lower || k.short() == lower)
            .or(match lower.as_str() {
                "javascript" => Some(Kind::JavaScript),
                "typescript" => Some(Kind::TypeScript),
                "python" => Some(Kind::Python),
                "golang" => Some(Kind::Go),
                "image" | "images" => Some(Kind::Image),
                _ => None,
            })
    }

    /// True for kinds chunked by declarations with symbols.
    pub fn is_code(self) -> bool {
        matches!(
            self,
            Kind::JavaScript | Kind::TypeScript | Kind::Rust | Kind::Python | Kind::Go
        )
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Metadata for one indexed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// Normalised relative path with `/` separators.
    pub path: String,
    /// Kind detected from the file name and contents.
    pub kind: Kind,
    /// Size in bytes.
    pub bytes: u64,
    /// sha256 of the file's bytes (hex).
    pub hash: String,
    /// Number of lines (1 for an empty or single-line file; 0 for images).
    pub line_count: usize,
    /// Number of chunks produced from this file.
    pub chunk_count: usize,
}

/// One chunk of a file: the unit of search and export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// sha256(path + "\n" + content_hash + "\n" + occurrence_index), hex.
    pub id: String,
    /// First 12 hex characters of `id`.
    pub short_id: String,
    /// Deterministic semantic label (file stem + most local heading/symbol/address).
    pub slug: String,
    /// Normalised relative path of the source file.
    pub path: String,
    /// Kind of the source file.
    pub kind: Kind,
    /// Position of the chunk within its file (0-based, in chunking order).
    pub chunk_index: usize,
    /// First line (1-based, inclusive) in the original file.
    pub start_line: usize,
    /// Last line (1-based, inclusive) in the original file.
    pub end_line: usize,
    /// Chunk text (HTML is tag-stripped; images hold their path).
    pub content: String,
    /// sha256 of `content`, hex.
    pub content_hash: String,
    /// Rough token estimate (characters / 4, rounded up), as the seed defines it.
    pub token_estimate: usize,
    /// Heading ancestry (Markdown, HTML).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub heading_path: Vec<String>,
    /// Main declaration name (code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Nested declaration names inside the chunk (methods of a class, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<String>,
    /// JSON address such as `$.key` or `$[0:50]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Export path of a binary asset (`images/<path>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset_path: Option<String>,
}

/// Why a file (or part of one) was skipped or altered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// Larger than `max_file_bytes`.
    FileTooLarge,
    /// `max_total_bytes` had already been reached.
    TotalBytesExceeded,
    /// Binary content that is not a recognised image.
    Binary,
    /// Not valid UTF-8; decoded lossily.
    InvalidUtf8,
    /// Could not be parsed as its kind; chunked as text instead.
    ParseFallback,
    /// A single line longer than `chunk_max_chars` was split mid-line.
    LongLine,
    /// More than `max_chunks_per_file` chunks; the rest were dropped.
    TooManyChunks,
    /// A symbolic link that was not followed.
    Symlink,
    /// A symbolic-link loop.
    SymlinkLoop,
    /// A path that is not valid UTF-8.
    BadPath,
    /// Reading the file or directory failed.
    Unreadable,
}

/// A non-fatal problem found while indexing, attached to a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Warning {
    /// Relative path the warning is about.
    pub path: String,
    /// Category.
    pub kind: WarningKind,
    /// Human-readable detail (never file contents).
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Totals stored in the index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of files indexed.
    pub total_files: usize,
    /// Number of chunks.
    pub total_chunks: usize,
    /// Sum of file sizes.
    pub total_bytes: u64,
    /// Sum of `doc_lens`: words over all chunks (the name is the format's).
    pub total_terms: u64,
    /// Average words per chunk (BM25's `avgdl`).
    pub avg_doc_len: f64,
}

/// The whole `index.json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexFile {
    /// Schema version ([`INDEX_VERSION`]).
    pub version: u32,
    /// sha256 of the sorted `path\thash\n` lines of all files.
    pub index_id: String,
    /// Caps the chunks were made with.
    pub chunking: ChunkingConfig,
    /// Files, sorted by path.
    pub files: Vec<FileMeta>,
    /// Chunks, sorted by (path, start_line, end_line, id) — the ref order.
    pub chunks: Vec<Chunk>,
    /// `chunk id -> ref` (`c0001`, …).
    pub chunk_refs: BTreeMap<String, String>,
    /// Word count of each chunk (content and path; BM25's document length), parallel to
    /// `chunks`.
    pub doc_lens: Vec<u32>,
    /// term -> flat postings `[position, tf, gap, tf, gap, tf, …]`: the first entry is the
    /// chunk position, each later one the gap from the previous position (ascending), which
    /// keeps the numbers — and the file — small.
    pub inverted_index: BTreeMap<String, Vec<u32>>,
    /// Totals.
    pub stats: Stats,
    /// Skipped/truncated file notices, sorted.
    pub warnings: Vec<Warning>,
}

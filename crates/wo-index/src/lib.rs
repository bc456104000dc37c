//! `wo-index`: directory ingestion, search and exports for WikiOracle (the seed's "LLMX").
//!
//! The crate turns a project directory into a deterministic, chunked, searchable index kept in
//! a cache beside the project (`<root>/.wo-index/`, never inside `llm.json`), and exports it in
//! formats built for LLM agents.
//!
//! - [`index_directory`] walks the tree (`.gitignore`-aware), chunks each file by kind, and
//!   writes `index.json` with BM25 postings; unchanged files reuse their chunks.
//! - [`Index`] loads that file and answers [`Index::search`], [`Index::get_chunk`],
//!   [`Index::list_outline`] and [`Index::list_symbols`].
//! - [`pack`] writes `llm.md`, `outline.md`, `catalog.llm.md`, `manifest.llm.tsv`,
//!   `manifest.json`, `manifest.min.json`, `chunks/<ref>.md`, `export.zip`,
//!   `export.compact.zip`, `llms.txt` and `AGENTS.md`.
//!
//! Module map: [`walk`] finds files; `chunk` splits them; `ingest` builds the index; `search`
//! queries it (terms and BM25 from `wo-text`, the tokenizer chat retrieval uses too); `tokens`
//! counts BPE tokens; `export` renders artifacts; `util` holds ids, refs and line helpers.

mod chunk;
mod error;
mod export;
mod guard;
mod ingest;
mod model;
mod options;
mod postings_build;
mod search;
#[cfg(not(target_arch = "wasm32"))]
mod sidecar;
mod tokens;
mod util;
pub mod walk;

pub use chunk::{ChunkOutput, Piece, chunk_text};
pub use error::{IndexError, Result};
pub use export::{
    AUTO_ARCHIVE_MAX_CHUNKS, Layout, PackOptions, PackReport, RenderedPack, pack, render_catalog,
    render_pack,
};
pub use ingest::{
    BuildReport, INDEX_FILE, IndexReport, Phase, Progress, cache_dir, index_directory, index_files,
    parse_index_file,
};
pub use model::{Chunk, FileMeta, INDEX_VERSION, IndexFile, Kind, Stats, Warning, WarningKind};
pub use options::{ChunkingConfig, IndexOptions};
pub use search::{
    CHUNKS_PER_TURN, ChunkRecord, ContextChunk, Hit, Index, OutlineEntry, Query, SymbolEntry,
    chunk_label,
};
#[cfg(not(target_arch = "wasm32"))]
pub use sidecar::{SIDECAR_FILE, SIDECAR_VERSION, SidecarUse, search_root};
pub use tokens::{TOKENIZER, TokenCounter, count_tokens};
pub use util::{chunk_id, chunk_ref, sha256_hex};

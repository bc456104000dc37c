//! Tunable limits and switches for indexing.
//!
//! The defaults are the seed's "Performance Constraints". Every cap that changes chunking is
//! recorded in the index (see [`ChunkingConfig`]) so that an index built with other caps is
//! rebuilt rather than silently reused.

use serde::{Deserialize, Serialize};

/// Caps that determine chunk boundaries. Stored in `index.json`; a change forces a full rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkingConfig {
    /// Preferred chunk size in characters; packers stop adding units once this is reached.
    pub chunk_target_chars: usize,
    /// Hard cap on a chunk's size in characters.
    pub chunk_max_chars: usize,
    /// Maximum number of chunks kept per file; the rest are dropped with a warning.
    pub max_chunks_per_file: usize,
}

impl Default for ChunkingConfig {
    fn default() -> Self {
        Self {
            chunk_target_chars: 4_000,
            chunk_max_chars: 8_000,
            max_chunks_per_file: 2_000,
        }
    }
}

/// Options for [`crate::index_directory`].
#[derive(Debug, Clone)]
pub struct IndexOptions {
    /// Chunk size caps.
    pub chunking: ChunkingConfig,
    /// Files larger than this are skipped with a warning.
    pub max_file_bytes: u64,
    /// Once this many bytes have been accepted (in path order), further files are skipped.
    pub max_total_bytes: u64,
    /// Honour `.gitignore`, `.ignore` and `.git/info/exclude` files.
    pub respect_gitignore: bool,
    /// Include hidden files and directories (names starting with `.`).
    pub include_hidden: bool,
    /// Follow symbolic links (loops are detected and reported as warnings).
    pub follow_symlinks: bool,
    /// Reuse the recorded content hash of a file whose size and modification time are
    /// unchanged, instead of reading it again. Racy timestamps (too close to the previous
    /// run) are never trusted.
    pub trust_mtime: bool,
    /// Force a full rebuild, ignoring any previous index.
    pub full_rebuild: bool,
    /// Number of worker threads for chunking; 0 means one per core.
    pub threads: usize,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            chunking: ChunkingConfig::default(),
            max_file_bytes: 10 * 1024 * 1024,
            max_total_bytes: 50 * 1024 * 1024,
            respect_gitignore: true,
            include_hidden: false,
            follow_symlinks: false,
            trust_mtime: true,
            full_rebuild: false,
            threads: 0,
        }
    }
}

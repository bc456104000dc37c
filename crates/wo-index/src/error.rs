//! Error type of the crate.
//!
//! Only conditions that stop a whole operation are errors (the project root is missing, the
//! cache cannot be written, the index file is corrupt). Problems with individual input files
//! are never errors: they become [`crate::Warning`]s in the report so one bad file cannot block
//! indexing the rest of a tree.

use std::path::PathBuf;

/// Why an index, search or export operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The directory to index does not exist or is not a directory.
    #[error("{path}: not a directory")]
    NotADirectory {
        /// The offending path.
        path: PathBuf,
    },
    /// No index has been built for this root yet.
    #[error("{path}: no index found (run `wo index` first)")]
    NoIndex {
        /// The index file that was looked for.
        path: PathBuf,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file or folder of the index or the pack is a symbolic link, not a
    /// regular file, or too large: refused, never followed (the error names
    /// the path and why).
    #[error("{0}")]
    Refused(#[source] std::io::Error),
    /// The on-disk index could not be decoded.
    #[error("{path}: corrupt index: {reason}")]
    Corrupt {
        /// The index file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// Building an export archive failed.
    #[error("{path}: cannot write archive: {reason}")]
    Archive {
        /// The archive being written.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The export directory holds files that are not from a previous export.
    #[error("{path}: directory is not empty and is not a previous export; refusing to overwrite")]
    OutputNotEmpty {
        /// The output directory.
        path: PathBuf,
    },
    /// The BPE tokenizer could not be initialised.
    #[error("tokenizer unavailable: {reason}")]
    Tokenizer {
        /// What went wrong.
        reason: String,
    },
}

impl IndexError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        // A refused project path already names itself (and the path it
        // refused, which may be a folder above `path`).
        #[cfg(not(target_arch = "wasm32"))]
        if wo_durable::project::refusal(&source).is_some() {
            return Self::Refused(source);
        }
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result alias used across the crate.
pub type Result<T, E = IndexError> = std::result::Result<T, E>;

//! Fatal errors of the importers and exporters. Every variant names the path
//! it concerns and, where one applies, the line and JSON pointer, and ends
//! with a hint on what to do; recoverable problems are
//! [`crate::Warning`]s instead.

use std::path::{Path, PathBuf};

/// Why an import or export could not be done.
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    /// The input path does not exist.
    #[error("{}: not found (hint: {hint})", path.display())]
    NotFound { path: PathBuf, hint: String },

    /// Reading or writing failed.
    #[error("{}: {source} (hint: {hint})", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
        hint: String,
    },

    /// The file is not JSON.
    #[error("{}:{line}:{column}: invalid JSON: {message} (hint: {hint})", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
        hint: String,
    },

    /// The JSON does not have the expected shape.
    #[error("{} at {}: {message} (hint: {hint})", path.display(), if pointer.is_empty() { "(root)" } else { pointer.as_str() })]
    Shape {
        path: PathBuf,
        pointer: String,
        message: String,
        hint: String,
    },

    /// The export target exists and holds files.
    #[error("{}: the export target exists and is not empty (hint: choose a new or empty directory; nothing was written)", path.display())]
    TargetNotEmpty { path: PathBuf },

    /// A directory was expected.
    #[error("{}: not a directory (hint: {hint})", path.display())]
    NotADirectory { path: PathBuf, hint: String },

    /// A `.zip` archive, or an entry in it, could not be read.
    #[error("{}: {message} (hint: {hint})", path.display())]
    Archive {
        path: PathBuf,
        message: String,
        hint: String,
    },

    /// An SQLite database could not be read; `table` names where.
    #[error("{} (table {table}): {message} (hint: {hint})", path.display())]
    Sqlite {
        path: PathBuf,
        table: String,
        message: String,
        hint: String,
    },

    /// The format of the input could not be told from its shape.
    #[error("{}: {message} (hint: {hint})", path.display())]
    UnknownFormat {
        path: PathBuf,
        message: String,
        hint: String,
    },
}

impl InteropError {
    pub(crate) fn io(path: &Path, source: std::io::Error, hint: impl Into<String>) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            return InteropError::NotFound {
                path: path.to_owned(),
                hint: hint.into(),
            };
        }
        InteropError::Io {
            path: path.to_owned(),
            source,
            hint: hint.into(),
        }
    }

    pub(crate) fn json(path: &Path, e: &serde_json::Error, hint: impl Into<String>) -> Self {
        InteropError::Json {
            path: path.to_owned(),
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
            hint: hint.into(),
        }
    }

    /// The path the error concerns.
    pub fn path(&self) -> &Path {
        match self {
            InteropError::NotFound { path, .. }
            | InteropError::Io { path, .. }
            | InteropError::Json { path, .. }
            | InteropError::Shape { path, .. }
            | InteropError::TargetNotEmpty { path }
            | InteropError::NotADirectory { path, .. }
            | InteropError::Archive { path, .. }
            | InteropError::Sqlite { path, .. }
            | InteropError::UnknownFormat { path, .. } => path,
        }
    }
}

/// serde_json appends " at line L column C"; the error shows those itself.
pub(crate) fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

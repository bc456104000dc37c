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
    NotFound {
        /// The path that does not exist, as the user named it.
        path: PathBuf,
        /// What to do about it (check the path, export again, …).
        hint: String,
    },

    /// Reading or writing failed.
    #[error("{}: {source} (hint: {hint})", path.display())]
    Io {
        /// The file or directory concerned, as the user named it.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
        /// What to do about it (check the path, export again, …).
        hint: String,
    },

    /// The file is not JSON.
    #[error("{}:{line}:{column}: invalid JSON: {message} (hint: {hint})", path.display())]
    Json {
        /// The file or directory concerned, as the user named it.
        path: PathBuf,
        /// 1-based line of the first syntax error.
        line: usize,
        /// 1-based column of the first syntax error.
        column: usize,
        /// The parser's description of the error.
        message: String,
        /// What to do about it (check the path, export again, …).
        hint: String,
    },

    /// The JSON does not have the expected shape.
    #[error("{} at {}: {message} (hint: {hint})", path.display(), if pointer.is_empty() { "(root)" } else { pointer.as_str() })]
    Shape {
        /// The file or directory concerned, as the user named it.
        path: PathBuf,
        /// RFC 6901 pointer of the offending value; `""` for the root.
        pointer: String,
        /// What was expected there and what was found.
        message: String,
        /// What to do about it (check the path, export again, …).
        hint: String,
    },

    /// The export target exists and holds files.
    #[error("{}: the export target exists and is not empty (hint: choose a new or empty directory; nothing was written)", path.display())]
    TargetNotEmpty {
        /// The directory that already holds files.
        path: PathBuf,
    },

    /// A directory was expected.
    #[error("{}: not a directory (hint: {hint})", path.display())]
    NotADirectory {
        /// The path that is a file (or something else).
        path: PathBuf,
        /// What to do about it (check the path, export again, …).
        hint: String,
    },

    /// A `.zip` archive, or an entry in it, could not be read.
    #[error("{}: {message} (hint: {hint})", path.display())]
    Archive {
        /// The archive.
        path: PathBuf,
        /// The entry concerned, if any, and what went wrong.
        message: String,
        /// What to do about it (check the path, export again, …).
        hint: String,
    },

    /// An SQLite database could not be read; `table` names where.
    #[error("{} (table {table}): {message} (hint: {hint})", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The table being read.
        table: String,
        /// SQLite's description of the error.
        message: String,
        /// What to do about it (check the path, export again, …).
        hint: String,
    },

    /// The format of the input could not be told from its shape.
    #[error("{}: {message} (hint: {hint})", path.display())]
    UnknownFormat {
        /// The file or directory concerned, as the user named it.
        path: PathBuf,
        /// What was seen, and why it matches no format.
        message: String,
        /// What to do about it (check the path, export again, …).
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

//! Finding the files to index: a `.gitignore`-aware walk (the `ignore` crate), kind detection
//! from file names, binary sniffing, and per-file size caps.
//!
//! The walk never fails on a bad entry: unreadable directories, symlink loops and non-UTF-8
//! names become warnings. Paths are normalised to `/`-separated relative strings and sorted
//! bytewise so the result does not depend on directory iteration order.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

use crate::model::{Kind, Warning, WarningKind};
use crate::options::IndexOptions;

/// Name of the cache directory created beside the project; never indexed.
pub const CACHE_DIR: &str = ".wo-index";

/// A file found by the walk.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Normalised relative path.
    pub rel: String,
    /// Absolute (or root-joined) path for reading.
    pub abs: PathBuf,
    /// Size from metadata.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (0 if unknown).
    pub mtime_ns: u128,
}

/// Image extensions: indexed by path, exported as bytes.
const IMAGE_EXTS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "webp", "bmp", "ico", "svg", "tif", "tiff", "avif",
];

/// Kind of a file from its name alone (contents may still turn out binary).
pub fn kind_for_path(rel: &str) -> Kind {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "md" | "markdown" | "mdx" | "mdown" => Kind::Markdown,
        "json" | "jsonc" | "json5" | "ipynb" | "webmanifest" => Kind::Json,
        "js" | "mjs" | "cjs" | "jsx" => Kind::JavaScript,
        "ts" | "mts" | "cts" | "tsx" => Kind::TypeScript,
        "rs" => Kind::Rust,
        "py" | "pyi" => Kind::Python,
        "go" => Kind::Go,
        "html" | "htm" | "xhtml" => Kind::Html,
        e if IMAGE_EXTS.contains(&e) => Kind::Image,
        _ => Kind::Text,
    }
}

/// True if `bytes` look binary: a NUL byte in the first 8 KiB.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0)
}

/// Walks `root`, returning candidates sorted by relative path and walk warnings.
pub fn walk(root: &Path, opts: &IndexOptions) -> (Vec<Candidate>, Vec<Warning>) {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(!opts.include_hidden)
        .git_ignore(opts.respect_gitignore)
        .git_exclude(opts.respect_gitignore)
        .ignore(opts.respect_gitignore)
        .parents(opts.respect_gitignore)
        // A fresh tarball or test fixture has no `.git`; its `.gitignore` still applies.
        .require_git(false)
        // The user's global excludes differ per machine; they would make indexes differ too.
        .git_global(false)
        .follow_links(opts.follow_symlinks)
        .filter_entry(|entry| entry.file_name() != CACHE_DIR && entry.file_name() != ".git");
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    for result in builder.build() {
        let entry = match result {
            Ok(entry) => entry,
            Err(err) => {
                warnings.push(walk_warning(root, &err));
                continue;
            }
        };
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        let Some(rel) = relative(root, entry.path()) else {
            warnings.push(Warning {
                path: entry.path().to_string_lossy().into_owned(),
                kind: WarningKind::BadPath,
                message: "path is not valid UTF-8; skipped".to_string(),
            });
            continue;
        };
        if file_type.is_symlink() {
            warnings.push(Warning {
                path: rel,
                kind: WarningKind::Symlink,
                message: "symbolic link not followed".to_string(),
            });
            continue;
        }
        if !file_type.is_file() {
            continue;
        }
        let (size, mtime_ns) = match entry.metadata() {
            Ok(meta) => (
                meta.len(),
                meta.modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos()),
            ),
            Err(err) => {
                warnings.push(Warning {
                    path: rel,
                    kind: WarningKind::Unreadable,
                    message: format!("cannot stat: {err}"),
                });
                continue;
            }
        };
        files.push(Candidate {
            rel,
            abs: entry.path().to_path_buf(),
            size,
            mtime_ns,
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    files.dedup_by(|a, b| a.rel == b.rel);
    (files, warnings)
}

fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let mut out = String::new();
    for comp in rel.components() {
        let part = comp.as_os_str().to_str()?;
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(part);
    }
    Some(out)
}

fn walk_warning(root: &Path, err: &ignore::Error) -> Warning {
    fn find(err: &ignore::Error) -> (Option<PathBuf>, WarningKind) {
        match err {
            ignore::Error::WithPath { path, err } => {
                let (inner, kind) = find(err);
                (inner.or_else(|| Some(path.clone())), kind)
            }
            ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
                find(err)
            }
            ignore::Error::Loop { child, .. } => (Some(child.clone()), WarningKind::SymlinkLoop),
            _ => (None, WarningKind::Unreadable),
        }
    }
    let (path, kind) = find(err);
    let path = path.and_then(|p| relative(root, &p)).unwrap_or_default();
    let message = match kind {
        WarningKind::SymlinkLoop => "symbolic link loop; not followed".to_string(),
        _ => format!("cannot read: {}", strip_path(&err.to_string(), &path)),
    };
    Warning {
        path,
        kind,
        message,
    }
}

/// Removes absolute paths from an error message so warnings stay machine-independent.
fn strip_path(message: &str, rel: &str) -> String {
    match message.rsplit_once(": ") {
        Some((_, tail)) if !rel.is_empty() => tail.to_string(),
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_names() {
        assert_eq!(kind_for_path("a/README.md"), Kind::Markdown);
        assert_eq!(kind_for_path("x.TSX"), Kind::TypeScript);
        assert_eq!(kind_for_path("img/logo.PNG"), Kind::Image);
        assert_eq!(kind_for_path("Makefile"), Kind::Text);
        assert_eq!(kind_for_path("data.json"), Kind::Json);
    }

    #[test]
    fn binary_sniffing() {
        assert!(looks_binary(b"abc\0def"));
        assert!(!looks_binary("héllo".as_bytes()));
    }
}

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
        .filter_entry(|entry| {
            let name = entry.file_name();
            name != CACHE_DIR
                && name != ".git"
                && !name.to_str().is_some_and(wo_format::names::is_own_file)
        });
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

/// Selects, from files given in memory (`(relative path, bytes)`), those the directory walk
/// would index, with the walk's rules: names starting with `.` skipped unless
/// `include_hidden`; the cache folder, `.git` and WikiOracle's own files
/// ([`wo_format::names::is_own_file`]) never; with `respect_gitignore`, the
/// `.gitignore` and `.ignore` files among the inputs applied per directory as the walk applies
/// them (deeper files win within a kind, any `.ignore` match beats any `.gitignore` match, an
/// ignored directory hides everything below it), plus a root `.git/info/exclude` if given.
/// A path that is not relative and `/`-separated (empty, absolute, `.`/`..` or empty parts, a
/// backslash) is a [`WarningKind::BadPath`] warning. The result is sorted by path, duplicates
/// dropped like the walk's. Files given in memory have no parent directories, so ignore files
/// above the root (which the walk also reads) do not apply.
pub fn select<'p>(
    files: impl IntoIterator<Item = (&'p str, &'p [u8])>,
    opts: &IndexOptions,
) -> (Vec<Candidate>, Vec<Warning>) {
    let files: Vec<(&str, &[u8])> = files.into_iter().collect();
    let mut warnings = Vec::new();
    let mut valid: Vec<(&str, &[u8])> = Vec::with_capacity(files.len());
    for (path, bytes) in files {
        match bad_path(path) {
            Some(reason) => warnings.push(Warning {
                path: path.to_string(),
                kind: WarningKind::BadPath,
                message: format!("{reason}; skipped"),
            }),
            None => valid.push((path, bytes)),
        }
    }
    let rules = if opts.respect_gitignore {
        IgnoreRules::new(&valid)
    } else {
        IgnoreRules::default()
    };
    let mut out: Vec<Candidate> = valid
        .into_iter()
        .filter(|(path, _)| {
            let parts: Vec<&str> = path.split('/').collect();
            let skipped_name = |name: &str| {
                name == CACHE_DIR
                    || name == ".git"
                    || wo_format::names::is_own_file(name)
                    || (!opts.include_hidden && name.starts_with('.'))
            };
            if parts.iter().any(|p| skipped_name(p)) {
                return false;
            }
            // Each directory on the way down, then the file, as the walk meets them.
            (1..=parts.len()).all(|n| !rules.ignored(&parts[..n], n < parts.len()))
        })
        .map(|(path, bytes)| Candidate {
            rel: path.to_string(),
            abs: PathBuf::from(path),
            size: bytes.len() as u64,
            mtime_ns: 0,
        })
        .collect();
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out.dedup_by(|a, b| a.rel == b.rel);
    (out, warnings)
}

/// Why `path` is not a relative, `/`-separated path, if it is not.
fn bad_path(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        Some("empty path")
    } else if path.starts_with('/') {
        Some("absolute path (paths are relative to the folder indexed)")
    } else if path.contains('\\') {
        Some("path contains a backslash (paths are `/`-separated)")
    } else if path.contains('\0') {
        Some("path contains a NUL character")
    } else if path
        .split('/')
        .any(|p| p.is_empty() || p == "." || p == "..")
    {
        Some("path has an empty, `.` or `..` part")
    } else {
        None
    }
}

/// The ignore files found among in-memory inputs, by the directory they sit in.
#[derive(Default)]
struct IgnoreRules {
    /// `.ignore` matchers by directory (`""` = root).
    dot_ignore: std::collections::HashMap<String, ignore::gitignore::Gitignore>,
    /// `.gitignore` matchers by directory.
    gitignore: std::collections::HashMap<String, ignore::gitignore::Gitignore>,
    /// The root's `.git/info/exclude`.
    exclude: Option<ignore::gitignore::Gitignore>,
}

impl IgnoreRules {
    fn new(files: &[(&str, &[u8])]) -> Self {
        let mut rules = Self::default();
        for (path, bytes) in files {
            let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
            let build = || {
                let mut builder = ignore::gitignore::GitignoreBuilder::new("");
                for line in String::from_utf8_lossy(bytes).lines() {
                    // A bad glob is skipped, as the walk skips it.
                    let _ = builder.add_line(None, line);
                }
                builder.build().ok()
            };
            match name {
                ".ignore" => {
                    if let Some(m) = build() {
                        rules.dot_ignore.insert(dir.to_string(), m);
                    }
                }
                ".gitignore" => {
                    if let Some(m) = build() {
                        rules.gitignore.insert(dir.to_string(), m);
                    }
                }
                "exclude" if dir == ".git/info" => rules.exclude = build(),
                _ => {}
            }
        }
        rules
    }

    /// Whether the entry `parts` (a directory when `is_dir`) is ignored by the files of its
    /// ancestors: the walk's precedence (`.ignore`, then `.gitignore`, then the exclude file;
    /// within one kind the deepest directory with a match decides).
    fn ignored(&self, parts: &[&str], is_dir: bool) -> bool {
        for matchers in [&self.dot_ignore, &self.gitignore] {
            for depth in (0..parts.len()).rev() {
                let dir = parts[..depth].join("/");
                let Some(m) = matchers.get(&dir) else {
                    continue;
                };
                let rel = parts[depth..].join("/");
                let verdict = m.matched(Path::new(&rel), is_dir);
                if verdict.is_ignore() {
                    return true;
                }
                if verdict.is_whitelist() {
                    return false;
                }
            }
        }
        self.exclude
            .as_ref()
            .is_some_and(|m| m.matched(Path::new(&parts.join("/")), is_dir).is_ignore())
    }
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

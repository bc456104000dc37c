//! A question from what a face gathered: the typed prompt, text piped in
//! (`git diff | wo ask "Review this"`) and attached text files
//! (`wo ask -f src/main.rs "Explain"`), combined into the one text stored as
//! the question and sent to the model.
//!
//! The prompt comes first (it says what to do), then the piped text, then
//! each file under a `File: NAME` line; piped text and files each in a code
//! fence longer than any backtick run inside it (so their own fences cannot
//! close it), with a language when one is known (`diff` for a unified diff,
//! else from the file's extension). The question is stored by
//! `wo_format::xhtml::question_to_xhtml`, which keeps those blocks as code,
//! byte for byte.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest attached file, in bytes (the stored question has its own cap,
/// `WO_MAX_MESSAGE_BYTES`, checked by the face before asking).
pub const MAX_ATTACHMENT_BYTES: u64 = 256 * 1024;

/// One attached text file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// The name shown to the model (the path as given).
    pub name: String,
    /// Its text.
    pub text: String,
}

/// Why a file cannot be attached; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// Over the size cap.
    #[error(
        "--file {}: {size} bytes, over the cap of {cap} bytes for an attached file\nhint: attach a part of it (e.g. `head -c {cap} FILE | wo ask \"…\"`)",
        path.display()
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (at least; reading stopped past the cap).
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// Not text: a NUL byte, or not UTF-8.
    #[error(
        "--file {}: not a text file ({why}); only UTF-8 text can be attached",
        path.display()
    )]
    Binary {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        why: &'static str,
    },
    /// It could not be read (missing, a directory, no permission).
    #[error("--file {}: cannot read it: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Reads `path` as an attachment of at most `cap` bytes of UTF-8 text.
/// Never reads more than `cap + 1` bytes, whatever the file's size.
pub fn read_attachment(path: &Path, cap: u64) -> Result<Attachment, AttachError> {
    let read_err = |source| AttachError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if meta.is_dir() {
        return Err(read_err(std::io::Error::other("it is a directory")));
    }
    if meta.len() > cap {
        return Err(AttachError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            cap,
        });
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > cap {
        // It grew since (or is a device): still over.
        return Err(AttachError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            cap,
        });
    }
    if bytes.contains(&0) {
        return Err(AttachError::Binary {
            path: path.to_path_buf(),
            why: "it contains NUL bytes",
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| AttachError::Binary {
        path: path.to_path_buf(),
        why: "it is not valid UTF-8",
    })?;
    Ok(Attachment {
        name: path.display().to_string(),
        text,
    })
}

/// The question from its parts (see the module docs); `None` when every
/// part is missing or blank.
pub fn compose(prompt: Option<&str>, piped: Option<&str>, files: &[Attachment]) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    if let Some(text) = prompt.map(str::trim_end).filter(|t| !t.trim().is_empty()) {
        parts.push(text.to_owned());
    }
    if let Some(text) = piped.filter(|t| !t.trim().is_empty()) {
        // Piped text alone is the question itself (`echo "…" | wo ask`),
        // unless it is a diff; beside a prompt it is material, kept verbatim.
        match (parts.is_empty(), piped_language(text)) {
            (true, None) => parts.push(text.trim_end().to_owned()),
            (_, language) => parts.push(fenced(text, language)),
        }
    }
    for f in files {
        let block = fenced(&f.text, file_language(&f.name));
        parts.push(format!("File: {}\n\n{block}", f.name));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// `text` in a code fence longer than any backtick run inside it (so its own
/// fences cannot close it), with its language when known; trailing line
/// ends go, every other byte stays (`question_to_xhtml` keeps it as code).
fn fenced(text: &str, language: Option<&str>) -> String {
    let longest_run = text
        .split(|c: char| c != '`')
        .map(str::len)
        .max()
        .unwrap_or(0);
    let fence = "`".repeat((longest_run + 1).max(3));
    let body = text.trim_end_matches(['\n', '\r']);
    format!("{fence}{}\n{body}\n{fence}", language.unwrap_or(""))
}

/// `diff` for piped text that reads as a unified diff (`git diff`,
/// `diff -u`), else none: other piped text has no name to guess from.
fn piped_language(text: &str) -> Option<&'static str> {
    let head: Vec<&str> = text.lines().take(64).collect();
    let first = head.first().copied().unwrap_or("");
    let diff = first.starts_with("diff --git ")
        || first.starts_with("Index: ")
        || (head.iter().any(|l| l.starts_with("--- "))
            && head.iter().any(|l| l.starts_with("+++ ")));
    diff.then_some("diff")
}

/// A fence language from a file name's extension, for the common ones.
fn file_language(name: &str) -> Option<&'static str> {
    let ext = std::path::Path::new(name)
        .extension()?
        .to_str()?
        .to_ascii_lowercase();
    Some(match ext.as_str() {
        "rs" => "rust",
        "py" => "python",
        "js" | "mjs" | "cjs" => "javascript",
        "ts" | "tsx" => "typescript",
        "go" => "go",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" | "cxx" => "cpp",
        "java" => "java",
        "rb" => "ruby",
        "sh" | "bash" => "bash",
        "json" => "json",
        "toml" => "toml",
        "yaml" | "yml" => "yaml",
        "html" | "htm" => "html",
        "css" => "css",
        "md" => "markdown",
        "sql" => "sql",
        "diff" | "patch" => "diff",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_combine_in_order_and_blank_ones_vanish() {
        let f = Attachment {
            name: "notes.md".into(),
            text: "a ``` fence\n````\n".into(),
        };
        assert_eq!(
            compose(Some("Review this"), Some("diff --git a b\n+x\n"), &[f]).unwrap(),
            "Review this\n\n```diff\ndiff --git a b\n+x\n```\n\nFile: notes.md\n\n`````markdown\na ``` fence\n````\n`````"
        );
        assert_eq!(compose(Some("q"), Some("  \n"), &[]).unwrap(), "q");
        assert_eq!(
            compose(None, Some("piped only\n"), &[]).unwrap(),
            "piped only"
        );
        assert_eq!(
            compose(Some("q"), Some("  piped\n\tindented\n"), &[]).unwrap(),
            "q\n\n```\n  piped\n\tindented\n```"
        );
        assert_eq!(
            compose(None, Some("--- a/x\n+++ b/x\n-old\n+new\n"), &[]).unwrap(),
            "```diff\n--- a/x\n+++ b/x\n-old\n+new\n```"
        );
        assert_eq!(compose(Some(" "), None, &[]), None);
    }

    #[test]
    fn attachments_are_capped_and_text_only() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.txt");
        std::fs::write(&ok, "héllo\n").unwrap();
        assert_eq!(read_attachment(&ok, 100).unwrap().text, "héllo\n");
        let big = dir.path().join("big.txt");
        std::fs::write(&big, "x".repeat(101)).unwrap();
        let e = read_attachment(&big, 100).unwrap_err().to_string();
        assert!(
            e.contains("big.txt") && e.contains("cap of 100 bytes"),
            "{e}"
        );
        let bin = dir.path().join("a.bin");
        std::fs::write(&bin, b"\x7fELF\0\0").unwrap();
        let e = read_attachment(&bin, 100).unwrap_err().to_string();
        assert!(e.contains("a.bin") && e.contains("not a text file"), "{e}");
        let latin1 = dir.path().join("l1.txt");
        std::fs::write(&latin1, b"caf\xe9").unwrap();
        assert!(
            read_attachment(&latin1, 100)
                .unwrap_err()
                .to_string()
                .contains("UTF-8")
        );
        let e = read_attachment(&dir.path().join("missing"), 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing") && e.contains("cannot read"), "{e}");
        let e = read_attachment(dir.path(), 100).unwrap_err().to_string();
        assert!(e.contains("directory"), "{e}");
    }
}

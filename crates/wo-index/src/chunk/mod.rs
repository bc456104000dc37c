//! Deterministic chunking of one file's text into [`Piece`]s.
//!
//! This module owns the kind-independent parts: the line table every chunker works on, the
//! size-capped line packer (which enforces `chunk_target_chars` / `chunk_max_chars`, prefers
//! blank-line boundaries, keeps protected ranges such as code fences whole when it can, and
//! hard-splits over-long lines), and the per-kind dispatch. The per-kind submodules only decide
//! *where* sections start and what labels (heading path, symbol, address) they carry.
//!
//! Chunkers never fail: any parse problem falls back to text chunking with a warning.

mod code;
mod html;
mod json;
mod markdown;

use crate::model::{Kind, WarningKind};
use crate::options::ChunkingConfig;

/// A chunk before ids and refs are assigned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Piece {
    /// First line (1-based) in the original file.
    pub start_line: usize,
    /// Last line (1-based) in the original file.
    pub end_line: usize,
    /// Chunk text.
    pub content: String,
    /// Heading ancestry.
    pub heading_path: Vec<String>,
    /// Main declaration name.
    pub symbol: Option<String>,
    /// Nested declaration names.
    pub symbols: Vec<String>,
    /// JSON address.
    pub address: Option<String>,
}

/// Labels shared by all pieces cut from one section.
#[derive(Debug, Clone, Default)]
pub(crate) struct Labels {
    pub heading_path: Vec<String>,
    pub symbol: Option<String>,
    pub symbols: Vec<String>,
    pub address: Option<String>,
}

/// Result of chunking one file.
#[derive(Debug, Default)]
pub struct ChunkOutput {
    /// The pieces, in file order.
    pub pieces: Vec<Piece>,
    /// File-level warnings (kind, message).
    pub warnings: Vec<(WarningKind, String)>,
}

/// One line of (possibly derived) text with the original line number it came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    pub no: usize,
    pub text: &'a str,
}

/// Splits `text` into lines (`\n` separated, a trailing `\r` removed), numbered from 1.
pub(crate) fn file_lines(text: &str) -> Vec<Line<'_>> {
    let mut lines: Vec<Line<'_>> = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| Line {
            no: i + 1,
            text: l.strip_suffix('\r').unwrap_or(l),
        })
        .collect();
    // `split` yields an empty tail after a final newline; it is not a line of the file.
    if lines.len() > 1 && lines.last().is_some_and(|l| l.text.is_empty()) && text.ends_with('\n') {
        lines.pop();
    }
    lines
}

/// Collects long-line notices so each file gets one summary warning.
#[derive(Debug, Default)]
pub(crate) struct LongLines {
    count: usize,
    first: usize,
}

impl LongLines {
    fn note(&mut self, line: usize) {
        if self.count == 0 {
            self.first = line;
        }
        self.count += 1;
    }

    fn into_warning(self, max: usize) -> Option<(WarningKind, String)> {
        (self.count > 0).then(|| {
            (
                WarningKind::LongLine,
                format!(
                    "{} line(s) longer than {max} characters split mid-line (first at line {})",
                    self.count, self.first
                ),
            )
        })
    }
}

/// Size-capped packer over a slice of lines.
pub(crate) struct Packer<'c> {
    pub cfg: &'c ChunkingConfig,
    pub long_lines: LongLines,
}

impl<'c> Packer<'c> {
    pub(crate) fn new(cfg: &'c ChunkingConfig) -> Self {
        Self {
            cfg,
            long_lines: LongLines::default(),
        }
    }

    /// Packs `lines` into pieces carrying `labels`.
    ///
    /// `protected(i)` says whether a split *before* line index `i` would cut through something
    /// that should stay whole (a code fence); such splits happen only when the cap forces them.
    /// Leading and trailing blank lines are trimmed from every piece; all-blank input gives
    /// nothing.
    pub(crate) fn pack(
        &mut self,
        lines: &[Line<'_>],
        labels: &Labels,
        protected: &dyn Fn(usize) -> bool,
        out: &mut Vec<Piece>,
    ) {
        let lines = trim_blank(lines);
        if lines.is_empty() {
            return;
        }
        let max = self.cfg.chunk_max_chars.max(1);
        let target = self.cfg.chunk_target_chars.clamp(1, max);
        let lens: Vec<usize> = lines.iter().map(|l| l.text.chars().count()).collect();
        let total: usize = lens.iter().sum::<usize>() + lens.len() - 1;
        if total <= max {
            out.push(make_piece(lines, labels));
            return;
        }
        let mut start = 0usize;
        let mut cur = 0usize; // characters in lines[start..i], newlines included
        let mut i = 0usize;
        while i < lines.len() {
            let len = lens[i];
            if len > max {
                if i > start {
                    push_trimmed(&lines[start..i], labels, out);
                }
                self.long_lines.note(lines[i].no);
                split_long_line(lines[i], max, labels, out);
                i += 1;
                start = i;
                cur = 0;
                continue;
            }
            let added = if i > start { len + 1 } else { len };
            let boundary =
                lines[i].text.trim().is_empty() || (i > 0 && lines[i - 1].text.trim().is_empty());
            if i > start && (cur + added > max || (cur >= target && boundary && !protected(i))) {
                push_trimmed(&lines[start..i], labels, out);
                start = i;
                cur = len;
            } else {
                cur += added;
            }
            i += 1;
        }
        if start < lines.len() {
            push_trimmed(&lines[start..], labels, out);
        }
    }
}

fn trim_blank<'l, 'a>(lines: &'l [Line<'a>]) -> &'l [Line<'a>] {
    let first = lines.iter().position(|l| !l.text.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.text.trim().is_empty());
    match (first, last) {
        (Some(a), Some(b)) => &lines[a..=b],
        _ => &[],
    }
}

fn push_trimmed(lines: &[Line<'_>], labels: &Labels, out: &mut Vec<Piece>) {
    let lines = trim_blank(lines);
    if !lines.is_empty() {
        out.push(make_piece(lines, labels));
    }
}

fn make_piece(lines: &[Line<'_>], labels: &Labels) -> Piece {
    let mut content = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            content.push('\n');
        }
        content.push_str(line.text);
    }
    Piece {
        start_line: lines[0].no,
        end_line: lines[lines.len() - 1].no,
        content,
        heading_path: labels.heading_path.clone(),
        symbol: labels.symbol.clone(),
        symbols: labels.symbols.clone(),
        address: labels.address.clone(),
    }
}

fn split_long_line(line: Line<'_>, max: usize, labels: &Labels, out: &mut Vec<Piece>) {
    let mut rest = line.text;
    while !rest.is_empty() {
        let cut = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let part = &rest[..cut];
        rest = &rest[cut..];
        if part.trim().is_empty() {
            continue;
        }
        out.push(make_piece(
            &[Line {
                no: line.no,
                text: part,
            }],
            labels,
        ));
    }
}

/// Plain text: paragraphs (blank-line separated) packed up to the target size.
pub(crate) fn chunk_plain(text: &str, cfg: &ChunkingConfig, out: &mut ChunkOutput) {
    let lines = file_lines(text);
    let mut packer = Packer::new(cfg);
    packer.pack(&lines, &Labels::default(), &|_| false, &mut out.pieces);
    out.warnings
        .extend(packer.long_lines.into_warning(cfg.chunk_max_chars));
}

/// Chunks `text` (already decoded) of a file of `kind`.
pub fn chunk_text(kind: Kind, path: &str, text: &str, cfg: &ChunkingConfig) -> ChunkOutput {
    let mut out = ChunkOutput::default();
    match kind {
        Kind::Markdown => markdown::chunk(text, cfg, &mut out),
        Kind::Json => json::chunk(text, cfg, &mut out),
        Kind::Html => html::chunk(text, cfg, &mut out),
        Kind::JavaScript | Kind::TypeScript | Kind::Rust | Kind::Python | Kind::Go => {
            code::chunk(kind, path, text, cfg, &mut out)
        }
        Kind::Text | Kind::Unknown | Kind::Image => chunk_plain(text, cfg, &mut out),
    }
    if out.pieces.len() > cfg.max_chunks_per_file {
        let dropped = out.pieces.len() - cfg.max_chunks_per_file;
        out.pieces.truncate(cfg.max_chunks_per_file);
        out.warnings.push((
            WarningKind::TooManyChunks,
            format!(
                "{dropped} chunk(s) beyond max_chunks_per_file ({}) dropped",
                cfg.max_chunks_per_file
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(target: usize, max: usize) -> ChunkingConfig {
        ChunkingConfig {
            chunk_target_chars: target,
            chunk_max_chars: max,
            max_chunks_per_file: 2000,
        }
    }

    #[test]
    fn file_lines_handles_crlf_and_trailing_newline() {
        let lines = file_lines("a\r\nb\n");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].text, "a");
        assert_eq!(lines[1].no, 2);
        assert_eq!(file_lines("").len(), 1);
    }

    #[test]
    fn packer_respects_caps_and_prefers_paragraphs() {
        let text = "aaaa\nbbbb\n\ncccc\ndddd\n\neeee\n";
        let mut out = ChunkOutput::default();
        chunk_plain(text, &cfg(8, 12), &mut out);
        let got: Vec<(usize, usize)> = out
            .pieces
            .iter()
            .map(|p| (p.start_line, p.end_line))
            .collect();
        assert_eq!(got, vec![(1, 2), (4, 5), (7, 7)]);
        assert!(out.pieces.iter().all(|p| p.content.chars().count() <= 12));
    }

    #[test]
    fn long_lines_are_split_with_a_warning() {
        let text = "x".repeat(25);
        let mut out = ChunkOutput::default();
        chunk_plain(&text, &cfg(5, 10), &mut out);
        assert_eq!(out.pieces.len(), 3);
        assert!(
            out.pieces
                .iter()
                .all(|p| p.start_line == 1 && p.end_line == 1)
        );
        assert_eq!(out.warnings.len(), 1);
        assert_eq!(out.warnings[0].0, WarningKind::LongLine);
    }

    #[test]
    fn too_many_chunks_are_dropped_with_a_warning() {
        let text = (0..10).map(|i| format!("p{i}\n\n")).collect::<String>();
        let c = ChunkingConfig {
            chunk_target_chars: 1,
            chunk_max_chars: 3,
            max_chunks_per_file: 4,
        };
        let out = chunk_text(Kind::Text, "a.txt", &text, &c);
        assert_eq!(out.pieces.len(), 4);
        assert_eq!(out.warnings[0].0, WarningKind::TooManyChunks);
    }
}

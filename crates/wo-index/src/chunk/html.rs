//! HTML: tag-stripped text split into sections at `h1`–`h6`, with heading ancestry.
//!
//! The text comes from `wo_format::xhtml::walk_text`, the one HTML reader (what is text, what
//! breaks a line, what is never text: `<script>` and `<style>` bodies, among others, are
//! dropped, so neither code nor CSS reaches the index — the seed's safety rule). It reports the
//! source line of every event, which keeps provenance in original line numbers. Unlike
//! `html_to_text`, this keeps the source's line structure — each output line is the stripped
//! text of one source line, so a chunk's lines map back exactly — and splits at headings.

use wo_format::xhtml::{TextEvent, walk_text};

use super::{ChunkOutput, Labels, Line, Packer};
use crate::options::ChunkingConfig;
use crate::util::single_line;

#[derive(Default)]
struct Section {
    heading_path: Vec<String>,
    lines: Vec<(usize, String)>,
}

#[derive(Default)]
struct State {
    sections: Vec<Section>,
    stack: Vec<(usize, String)>,
    /// Text of the output line being built and the source line it started on.
    line: String,
    line_no: usize,
    /// Inside a heading: (level, text, source line).
    heading: Option<(usize, String, usize)>,
}

impl State {
    fn flush_line(&mut self) {
        let text = single_line(&self.line);
        self.line.clear();
        if text.is_empty() {
            return;
        }
        if self.sections.is_empty() {
            self.sections.push(Section::default());
        }
        let no = self.line_no.max(1);
        if let Some(section) = self.sections.last_mut() {
            section.lines.push((no, text));
        }
    }

    fn text(&mut self, chunk: &str, end_line: usize) {
        // The tokenizer reports the line where a text run ends; count back to where it began.
        let newlines = chunk.bytes().filter(|&b| b == b'\n').count();
        let mut line = end_line.saturating_sub(newlines).max(1);
        for (i, part) in chunk.split('\n').enumerate() {
            if i > 0 {
                if let Some(h) = self.heading.as_mut() {
                    h.1.push(' ');
                } else {
                    self.flush_line();
                }
                line += 1;
            }
            if let Some(h) = self.heading.as_mut() {
                h.1.push_str(part);
                continue;
            }
            if part.trim().is_empty() {
                // Whitespace between inline elements still separates words.
                if !self.line.is_empty() {
                    self.line.push(' ');
                }
                continue;
            }
            if self.line.trim().is_empty() {
                self.line_no = line;
            }
            self.line.push_str(part);
        }
    }
}

impl State {
    /// A block boundary: inside a heading it separates words, elsewhere it ends the line.
    fn block_boundary(&mut self) {
        if let Some(h) = self.heading.as_mut() {
            h.1.push(' ');
        } else {
            self.flush_line();
        }
    }

    fn event(&mut self, event: TextEvent<'_>, line: usize) {
        match event {
            TextEvent::Text(text) | TextEvent::Title(text) => self.text(text, line),
            TextEvent::Break | TextEvent::Cell => self.block_boundary(),
            TextEvent::HeadingStart(level) => {
                self.flush_line();
                self.heading = Some((level, String::new(), line));
            }
            TextEvent::HeadingEnd(_) => {
                if let Some((level, text, start)) = self.heading.take() {
                    let text = single_line(&text);
                    while self.stack.last().is_some_and(|(l, _)| *l >= level) {
                        self.stack.pop();
                    }
                    self.stack.push((level, text.clone()));
                    let heading_path = self.stack.iter().map(|(_, t)| t.clone()).collect();
                    self.sections.push(Section {
                        heading_path,
                        lines: Vec::new(),
                    });
                    if !text.is_empty()
                        && let Some(s) = self.sections.last_mut()
                    {
                        s.lines.push((start, text));
                    }
                }
            }
        }
    }

    /// The end of input: an unclosed heading's text becomes an ordinary line.
    fn finish(&mut self) {
        if let Some((_, text, start)) = self.heading.take() {
            self.line_no = start;
            self.line = text;
        }
        self.flush_line();
    }
}

pub(crate) fn chunk(text: &str, cfg: &ChunkingConfig, out: &mut ChunkOutput) {
    let mut state = State::default();
    walk_text(text, |event, line| state.event(event, line));
    state.finish();
    let mut packer = Packer::new(cfg);
    for section in &state.sections {
        let lines: Vec<Line<'_>> = section
            .lines
            .iter()
            .map(|(no, text)| Line {
                no: *no,
                text: text.as_str(),
            })
            .collect();
        let labels = Labels {
            heading_path: section.heading_path.clone(),
            ..Labels::default()
        };
        packer.pack(&lines, &labels, &|_| false, &mut out.pieces);
    }
    out.warnings
        .extend(packer.long_lines.into_warning(cfg.chunk_max_chars));
}

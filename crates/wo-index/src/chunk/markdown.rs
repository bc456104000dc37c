//! Markdown: one section per heading (`#`–`######`, setext too), with heading ancestry.
//!
//! pulldown-cmark finds the headings, so `#` lines inside code fences or HTML blocks are not
//! mistaken for headings, and YAML front matter is not read as a setext heading. Fenced code
//! block line ranges are passed to the packer as protected so an oversized section is not cut
//! inside a fence unless the fence alone exceeds the cap.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::{ChunkOutput, Labels, Packer, file_lines};
use crate::options::ChunkingConfig;
use crate::util::{LineIndex, single_line};

struct Heading {
    line: usize,
    level: usize,
    text: String,
}

pub(crate) fn chunk(text: &str, cfg: &ChunkingConfig, out: &mut ChunkOutput) {
    let index = LineIndex::new(text);
    let mut headings: Vec<Heading> = Vec::new();
    let mut fences: Vec<(usize, usize)> = Vec::new();
    let mut current: Option<Heading> = None;
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                current = Some(Heading {
                    line: index.line_of(range.start),
                    level: level as usize,
                    text: String::new(),
                });
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(mut h) = current.take() {
                    h.text = single_line(&h.text);
                    headings.push(h);
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) => {
                if let Some(h) = current.as_mut() {
                    h.text.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(h) = current.as_mut() {
                    h.text.push(' ');
                }
            }
            Event::Start(Tag::CodeBlock(_)) => {
                let last = index.line_of(range.end.saturating_sub(1).max(range.start));
                fences.push((index.line_of(range.start), last));
            }
            _ => {}
        }
    }

    let lines = file_lines(text);
    // A split before line `no` is protected when `no` is strictly inside a fence.
    let protected = |idx_line: usize| fences.iter().any(|&(a, b)| idx_line > a && idx_line <= b);
    let mut packer = Packer::new(cfg);
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut section_start = 1usize;
    let mut labels = Labels::default();
    let mut emit = |from: usize, to: usize, labels: &Labels, packer: &mut Packer<'_>| {
        if from > to || from > lines.len() {
            return;
        }
        let slice = &lines[from - 1..to.min(lines.len())];
        let offset = slice[0].no;
        packer.pack(slice, labels, &|i| protected(offset + i), &mut out.pieces);
    };
    for heading in &headings {
        if heading.line > section_start {
            emit(section_start, heading.line - 1, &labels, &mut packer);
        }
        while stack.last().is_some_and(|(lvl, _)| *lvl >= heading.level) {
            stack.pop();
        }
        stack.push((heading.level, heading.text.clone()));
        labels = Labels {
            heading_path: stack.iter().map(|(_, t)| t.clone()).collect(),
            ..Labels::default()
        };
        section_start = heading.line;
    }
    emit(section_start, lines.len(), &labels, &mut packer);
    out.warnings
        .extend(packer.long_lines.into_warning(cfg.chunk_max_chars));
}

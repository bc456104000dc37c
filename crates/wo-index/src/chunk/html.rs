//! HTML: tag-stripped text split into sections at `h1`–`h6`, with heading ancestry.
//!
//! html5ever's tokenizer (not the tree builder) is used because it reports the source line of
//! every token, which keeps provenance in original line numbers. `<script>` and `<style>`
//! bodies are switched to raw-text mode and dropped, so neither code nor CSS reaches the index
//! (the seed's safety rule). Text keeps the source's line structure: each output line is the
//! stripped text of one source line, so a chunk's lines map back exactly.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

use super::{ChunkOutput, Labels, Line, Packer};
use crate::options::ChunkingConfig;
use crate::util::single_line;

/// Tags after which text continues on a new output line.
const BLOCK_TAGS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "td",
    "th",
    "title",
    "tr",
    "ul",
];

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
    /// Inside `<script>`/`<style>`: text is discarded until the matching end tag.
    skipping: Option<&'static str>,
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
        let newlines = chunk.matches('\n').count();
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

struct Sink(RefCell<State>);

fn heading_level(name: &str) -> Option<usize> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, line_number: u64) -> TokenSinkResult<()> {
        let line = usize::try_from(line_number).unwrap_or(usize::MAX);
        let mut st = self.0.borrow_mut();
        match token {
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                if let Some(skip) = st.skipping {
                    if tag.kind == TagKind::EndTag && name == skip {
                        st.skipping = None;
                    }
                    return TokenSinkResult::Continue;
                }
                match (tag.kind, name) {
                    (TagKind::StartTag, "script") if !tag.self_closing => {
                        st.skipping = Some("script");
                        return TokenSinkResult::RawData(RawKind::ScriptData);
                    }
                    (TagKind::StartTag, "style") if !tag.self_closing => {
                        st.skipping = Some("style");
                        return TokenSinkResult::RawData(RawKind::Rawtext);
                    }
                    _ => {}
                }
                if let Some(level) = heading_level(name) {
                    match tag.kind {
                        TagKind::StartTag => {
                            st.flush_line();
                            st.heading = Some((level, String::new(), line));
                        }
                        TagKind::EndTag => {
                            if let Some((level, text, start)) = st.heading.take() {
                                let text = single_line(&text);
                                while st.stack.last().is_some_and(|(l, _)| *l >= level) {
                                    st.stack.pop();
                                }
                                st.stack.push((level, text.clone()));
                                let heading_path =
                                    st.stack.iter().map(|(_, t)| t.clone()).collect();
                                st.sections.push(Section {
                                    heading_path,
                                    lines: Vec::new(),
                                });
                                if !text.is_empty()
                                    && let Some(s) = st.sections.last_mut()
                                {
                                    s.lines.push((start, text));
                                }
                            }
                        }
                    }
                } else if BLOCK_TAGS.contains(&name) {
                    if let Some(h) = st.heading.as_mut() {
                        h.1.push(' ');
                    } else {
                        st.flush_line();
                    }
                }
            }
            Token::CharacterTokens(text) if st.skipping.is_none() => st.text(&text, line),
            Token::EOFToken => {
                if let Some((_, text, start)) = st.heading.take() {
                    st.line_no = start;
                    st.line = text;
                }
                st.flush_line();
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

pub(crate) fn chunk(text: &str, cfg: &ChunkingConfig, out: &mut ChunkOutput) {
    let sink = Sink(RefCell::new(State::default()));
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(text));
    // The sink never asks to pause for scripts, so one feed consumes the whole input.
    let _ = tokenizer.feed(&queue);
    tokenizer.end();
    let state = tokenizer.sink.0.take();
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

//! Stored XHTML back to Markdown: what the Markdown export writes and what
//! `wo log` prints, so code stays in fenced blocks, headings stay headings
//! and links stay links (GitHub and Obsidian render the result).
//!
//! [`message_markdown`] first tries [`crate::recover_text`]: content that
//! was plain text (what people type) comes back exactly as typed. Anything
//! else goes through [`xhtml_to_markdown`], which reads the fragment with
//! html5ever's tokenizer (the one wo-format's sanitiser uses), builds a
//! small tree and writes CommonMark + GFM tables for the elements stored
//! XHTML may hold (product §1): paragraphs, headings, `pre`/`code` (the
//! `language-*` class names the fence), emphasis, links, lists, block
//! quotes, tables and rules. Text is escaped only where Markdown would
//! otherwise read it as markup. The tree is as deep as the sanitiser lets
//! stored XHTML be ([`wo_format::xhtml::MAX_DEPTH`]): deeper elements (a
//! hand-edited file) are flattened into the deepest one, their text kept,
//! so rendering (recursive) and dropping the tree never exhaust the stack.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

use crate::text::recover_text;

/// A message's content as Markdown (exact text when it was plain text).
pub fn message_markdown(xhtml: &str) -> String {
    recover_text(xhtml).unwrap_or_else(|| xhtml_to_markdown(xhtml))
}

/// Converts an XHTML fragment to Markdown (see the module docs).
pub fn xhtml_to_markdown(xhtml: &str) -> String {
    let tree = parse(xhtml);
    let mut blocks = Vec::new();
    render_blocks(&tree, &mut blocks);
    blocks.join("\n\n").trim_matches('\n').to_owned()
}

#[derive(Debug)]
enum Node {
    Text(String),
    El {
        name: String,
        attrs: Vec<(String, String)>,
        kids: Vec<Node>,
    },
}

impl Node {
    fn attr(&self, key: &str) -> Option<&str> {
        match self {
            Node::El { attrs, .. } => attrs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str()),
            Node::Text(_) => None,
        }
    }
}

/// An element being built: its name, attributes and children so far.
type Open = (String, Vec<(String, String)>, Vec<Node>);

struct TreeSink {
    stack: RefCell<Vec<Open>>,
    /// Start tags past [`MAX_DEPTH`], not opened: their end tags are
    /// dropped with them.
    flattened: RefCell<Vec<String>>,
}

/// The deepest element nesting kept (the root is not counted).
const MAX_DEPTH: usize = wo_format::xhtml::MAX_DEPTH;

const VOID: &[&str] = &["br", "hr"];

impl TokenSink for TreeSink {
    type Handle = ();
    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut stack = self.stack.borrow_mut();
        match token {
            Token::CharacterTokens(t) => {
                let kids = &mut stack.last_mut().expect("root").2;
                if let Some(Node::Text(prev)) = kids.last_mut() {
                    prev.push_str(&t);
                } else {
                    kids.push(Node::Text(t.to_string()));
                }
            }
            Token::TagToken(tag) => {
                let name = tag.name.to_string();
                match tag.kind {
                    TagKind::StartTag => {
                        let attrs = tag
                            .attrs
                            .iter()
                            .map(|a| (a.name.local.to_string(), a.value.to_string()))
                            .collect();
                        if tag.self_closing || VOID.contains(&name.as_str()) {
                            stack.last_mut().expect("root").2.push(Node::El {
                                name,
                                attrs,
                                kids: Vec::new(),
                            });
                        } else if stack.len() > MAX_DEPTH {
                            self.flattened.borrow_mut().push(name);
                        } else {
                            stack.push((name, attrs, Vec::new()));
                        }
                    }
                    TagKind::EndTag => {
                        let mut flattened = self.flattened.borrow_mut();
                        if flattened.last() == Some(&name) {
                            flattened.pop();
                            return TokenSinkResult::Continue;
                        }
                        // Close up to the matching element; a stray end tag
                        // (none in stored XHTML) is ignored.
                        if let Some(pos) = stack.iter().rposition(|(n, _, _)| *n == name)
                            && pos > 0
                        {
                            // Whatever was flattened inside closes with it.
                            flattened.clear();
                            while stack.len() > pos {
                                close(&mut stack);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

fn close(stack: &mut Vec<Open>) {
    if let Some((name, attrs, kids)) = stack.pop() {
        stack
            .last_mut()
            .expect("root")
            .2
            .push(Node::El { name, attrs, kids });
    }
}

fn parse(xhtml: &str) -> Vec<Node> {
    let sink = TreeSink {
        stack: RefCell::new(vec![(String::new(), Vec::new(), Vec::new())]),
        flattened: RefCell::new(Vec::new()),
    };
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(xhtml));
    let tok = Tokenizer::new(sink, TokenizerOpts::default());
    let _ = tok.feed(&queue);
    tok.end();
    let mut stack = tok.sink.stack.into_inner();
    while stack.len() > 1 {
        close(&mut stack);
    }
    stack.pop().map(|(_, _, kids)| kids).unwrap_or_default()
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "pre"
            | "blockquote"
            | "ul"
            | "ol"
            | "li"
            | "table"
            | "thead"
            | "tbody"
            | "tr"
            | "hr"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
    )
}

/// Renders `nodes` as blocks; runs of inline nodes form paragraphs.
fn render_blocks(nodes: &[Node], out: &mut Vec<String>) {
    let mut run: Vec<&Node> = Vec::new();
    let flush = |run: &mut Vec<&Node>, out: &mut Vec<String>| {
        if run.is_empty() {
            return;
        }
        let mut s = String::new();
        for n in run.drain(..) {
            inline(n, &mut s);
        }
        let p = escape_line_starts(s.trim_matches(|c: char| c == '\n' || c == ' '));
        if !p.trim().is_empty() {
            out.push(p);
        }
    };
    for n in nodes {
        match n {
            Node::El { name, .. } if is_block(name) => {
                flush(&mut run, out);
                block(n, out);
            }
            _ => run.push(n),
        }
    }
    flush(&mut run, out);
}

fn block(n: &Node, out: &mut Vec<String>) {
    let Node::El { name, kids, .. } = n else {
        return;
    };
    match name.as_str() {
        "p" => render_blocks(kids, out),
        "div" | "li" | "thead" | "tbody" | "tr" => render_blocks(kids, out),
        "hr" => out.push("---".to_owned()),
        h if h.len() == 2 && h.starts_with('h') => {
            let level = usize::from(h.as_bytes()[1] - b'0');
            let mut s = String::new();
            for k in kids {
                inline(k, &mut s);
            }
            let s = s.replace('\n', " ");
            out.push(format!("{} {}", "#".repeat(level), s.trim()));
        }
        "pre" => {
            let lang = kids
                .iter()
                .find_map(|k| match k {
                    Node::El { name, .. } if name == "code" => k.attr("class"),
                    _ => None,
                })
                .and_then(|c| {
                    c.split_whitespace()
                        .find_map(|w| w.strip_prefix("language-"))
                })
                .unwrap_or("");
            let mut code = String::new();
            text_of(kids, &mut code);
            // HTML drops one newline right after `<pre>`; the sanitiser
            // doubles a leading one to keep it, so drop that one here.
            let code = code.strip_prefix('\n').unwrap_or(&code);
            out.push(fence(code, lang));
        }
        "blockquote" => {
            let mut inner = Vec::new();
            render_blocks(kids, &mut inner);
            let text = inner.join("\n\n");
            out.push(
                text.lines()
                    .map(|l| {
                        if l.is_empty() {
                            ">".to_owned()
                        } else {
                            format!("> {l}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
        "ul" | "ol" => out.push(list(kids, name == "ol")),
        "table" => out.push(table(kids)),
        _ => render_blocks(kids, out),
    }
}

fn list(items: &[Node], ordered: bool) -> String {
    let mut rendered = Vec::new();
    // A list is loose (blank lines between items) when its items hold
    // paragraphs; a tight item's text and nested list sit on adjacent lines.
    let loose = items.iter().any(|i| match i {
        Node::El { name, kids, .. } if name == "li" => kids
            .iter()
            .any(|k| matches!(k, Node::El { name, .. } if name == "p")),
        _ => false,
    });
    let mut number = 0;
    for item in items {
        let kids = match item {
            Node::El { name, kids, .. } if name == "li" => kids,
            Node::Text(t) if t.trim().is_empty() => continue,
            other => std::slice::from_ref(other),
        };
        number += 1;
        let mut blocks = Vec::new();
        render_blocks(kids, &mut blocks);
        let marker = if ordered {
            format!("{number}. ")
        } else {
            "- ".to_owned()
        };
        let pad = " ".repeat(marker.len());
        let body = blocks.join(if loose { "\n\n" } else { "\n" });
        let mut s = String::new();
        for (i, line) in body.lines().enumerate() {
            if i == 0 {
                s.push_str(&marker);
            } else {
                s.push('\n');
                if !line.is_empty() {
                    s.push_str(&pad);
                }
            }
            s.push_str(line);
        }
        if body.is_empty() {
            s.push_str(marker.trim_end());
        }
        rendered.push(s);
    }
    rendered.join(if loose { "\n\n" } else { "\n" })
}

fn table(kids: &[Node]) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    fn collect(nodes: &[Node], rows: &mut Vec<Vec<String>>) {
        for n in nodes {
            if let Node::El { name, kids, .. } = n {
                match name.as_str() {
                    "tr" => {
                        let mut row = Vec::new();
                        for c in kids {
                            if let Node::El { name, kids, .. } = c
                                && (name == "td" || name == "th")
                            {
                                let mut s = String::new();
                                for k in kids {
                                    inline(k, &mut s);
                                }
                                row.push(
                                    s.replace('\n', " ").replace('|', "\\|").trim().to_owned(),
                                );
                            }
                        }
                        rows.push(row);
                    }
                    _ => collect(kids, rows),
                }
            }
        }
    }
    collect(kids, &mut rows);
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let line = |row: &[String]| {
        let mut cells: Vec<&str> = row.iter().map(String::as_str).collect();
        cells.resize(cols, "");
        format!("| {} |", cells.join(" | "))
    };
    let mut out = Vec::new();
    let header = rows.first().cloned().unwrap_or_default();
    out.push(line(&header));
    out.push(format!("|{}", " --- |".repeat(cols)));
    for r in rows.iter().skip(1) {
        out.push(line(r));
    }
    out.join("\n")
}

/// The text inside `nodes`, without markup.
fn text_of(nodes: &[Node], out: &mut String) {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::El { name, kids, .. } => {
                if name == "br" {
                    out.push('\n');
                }
                text_of(kids, out);
            }
        }
    }
}

fn inline(n: &Node, out: &mut String) {
    match n {
        Node::Text(t) => {
            // A break is already a line end; the newline HTML writers put
            // after `<br>` would make it a paragraph break.
            let t = if out.ends_with("\\\n") {
                t.strip_prefix('\n').unwrap_or(t)
            } else {
                t
            };
            escape_into(t, out)
        }
        Node::El { name, kids, .. } => {
            let inner = |out: &mut String| {
                for k in kids {
                    inline(k, out);
                }
            };
            match name.as_str() {
                "br" => out.push_str("\\\n"),
                "strong" | "b" => wrap(out, "**", inner),
                "em" | "i" => wrap(out, "*", inner),
                "code" => {
                    let mut code = String::new();
                    text_of(kids, &mut code);
                    let longest = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
                    let ticks = "`".repeat(longest + 1);
                    let pad = if code.starts_with('`') || code.ends_with('`') {
                        " "
                    } else {
                        ""
                    };
                    out.push_str(&format!("{ticks}{pad}{code}{pad}{ticks}"));
                }
                "a" => match n.attr("href") {
                    Some(href) => {
                        let mut label = String::new();
                        for k in kids {
                            inline(k, &mut label);
                        }
                        if label.is_empty() {
                            label = href.to_owned();
                        }
                        let href = href.replace(' ', "%20").replace(')', "%29");
                        out.push_str(&format!("[{label}]({href})"));
                    }
                    None => inner(out),
                },
                _ => inner(out),
            }
        }
    }
}

fn wrap(out: &mut String, mark: &str, inner: impl FnOnce(&mut String)) {
    let mut s = String::new();
    inner(&mut s);
    // Emphasis cannot start or end with a space; move it outside.
    let lead = s.len() - s.trim_start().len();
    let trail = s.len() - s.trim_end().len();
    if s.trim().is_empty() {
        out.push_str(&s);
        return;
    }
    out.push_str(&s[..lead]);
    out.push_str(mark);
    out.push_str(s.trim());
    out.push_str(mark);
    out.push_str(&s[s.len() - trail..]);
}

/// Escapes what Markdown would read as inline markup, and only that: a
/// `*` between spaces, a `[` that no `](` follows, a `<` that starts no tag
/// stay as they are, so ordinary prose reads as written.
fn escape_into(text: &str, out: &mut String) {
    let chars: Vec<char> = text.chars().collect();
    let space = |c: Option<&char>| c.is_none_or(|c| c.is_whitespace());
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|j| chars.get(j));
        let next = chars.get(i + 1);
        let escape = match c {
            '\\' | '`' => true,
            // Emphasis needs a non-space on one side.
            '*' => !(space(prev) && space(next)),
            // Inside a word an underscore is never emphasis.
            '_' => {
                !(prev.is_some_and(|c| c.is_alphanumeric())
                    && next.is_some_and(|c| c.is_alphanumeric()))
            }
            // A link or reference needs `](`, `][` or `]:`.
            ']' => matches!(next, Some('(' | '[' | ':')),
            '[' => chars[i + 1..]
                .iter()
                .position(|&c| c == ']')
                .is_some_and(|j| matches!(chars.get(i + 2 + j), Some('(' | '[' | ':'))),
            // HTML and autolinks start with `<` and a letter, `/`, `!` or `?`.
            '<' => next.is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?')),
            _ => false,
        };
        if escape {
            out.push('\\');
            out.push(c);
        } else if c == '&' && next.is_some_and(|c| c.is_ascii_alphanumeric() || *c == '#') {
            // Would read as an entity.
            out.push_str("&amp;");
        } else {
            out.push(c);
        }
    }
}

/// Escapes line starts that Markdown would read as a block (`#`, `>`,
/// list markers, rules).
fn escape_line_starts(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        out.push_str(indent);
        let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
        let block_start = trimmed.starts_with(['#', '>', '-', '+', '='])
            || (digits > 0 && trimmed[digits..].starts_with(['.', ')']));
        if block_start {
            if digits > 0 {
                out.push_str(&trimmed[..digits]);
                out.push('\\');
                out.push_str(&trimmed[digits..]);
            } else {
                out.push('\\');
                out.push_str(trimmed);
            }
        } else {
            out.push_str(trimmed);
        }
    }
    out
}

/// A fenced code block whose fence is longer than any backtick run inside.
pub(crate) fn fence(code: &str, lang: &str) -> String {
    let longest = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let f = "`".repeat(longest.max(2) + 1);
    let body = code.strip_suffix('\n').unwrap_or(code);
    format!("{f}{lang}\n{body}\n{f}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_backticks_inside() {
        assert_eq!(fence("a\n", "rust"), "```rust\na\n```");
        assert_eq!(fence("x ```` y", ""), "`````\nx ```` y\n`````");
    }
    use wo_format::xhtml::{markdown_to_xhtml, text_to_xhtml};

    #[test]
    fn deep_nesting_is_flattened_not_a_stack_overflow() {
        // On the test thread's small stack: 100k nested elements once
        // overflowed it (recursive rendering and drop of the tree).
        let depth = 100_000;
        let x = format!(
            "<p>{}deep{}</p><p>after</p>",
            "<em><strong>".repeat(depth / 2),
            "</strong></em>".repeat(depth / 2)
        );
        let md = xhtml_to_markdown(&x);
        assert!(md.contains("deep"), "{}", &md[..md.len().min(200)]);
        assert!(
            md.ends_with("after"),
            "{}",
            &md[md.len().saturating_sub(200)..]
        );
        // Within the cap nothing changes: 40 levels render every marker.
        let x = format!("<p>{}x{}</p>", "<em>".repeat(40), "</em>".repeat(40));
        assert_eq!(xhtml_to_markdown(&x).matches('*').count(), 80);
    }

    #[test]
    fn code_blocks_become_fences_with_their_language() {
        let x =
            markdown_to_xhtml("Try:\n\n```rust\nfn main() {\n    println!(\"<hi>\");\n}\n```\n");
        let md = xhtml_to_markdown(&x);
        assert_eq!(
            md,
            "Try:\n\n```rust\nfn main() {\n    println!(\"<hi>\");\n}\n```"
        );
    }

    #[test]
    fn markdown_round_trips_through_xhtml() {
        for md in [
            "# Title\n\nSome **bold** and *em* and `code` with a [link](https://example.org).",
            "- one\n- two\n  - nested\n- three",
            "1. first\n2. second",
            "> quoted\n>\n> twice",
            "| a | b |\n| --- | --- |\n| 1 | 2 |",
            "A line  \nbroken",
            "snake_case stays, 2 * 3 is not emphasis, *this* is, a < b",
            "[not a link] but [this](https://example.org) is; \\[x\\](y) is text",
            "`code with *stars*` and <notatag",
            "---",
        ] {
            let x = markdown_to_xhtml(md);
            let back = xhtml_to_markdown(&x);
            assert_eq!(markdown_to_xhtml(&back), x, "{md:?} → {back:?}");
        }
    }

    #[test]
    fn prose_is_not_over_escaped() {
        let x = markdown_to_xhtml("2 * 3 < 7, [note] and snake_case");
        assert_eq!(xhtml_to_markdown(&x), "2 * 3 < 7, [note] and snake_case");
    }

    #[test]
    fn plain_text_comes_back_exactly() {
        let text = "a < b & *not emphasis*\n\n```\nnot a fence\n```";
        assert_eq!(message_markdown(&text_to_xhtml(text)), text);
    }

    #[test]
    fn line_starts_that_look_like_blocks_are_escaped() {
        let x = "<p># not a heading<br/>1. not a list</p>";
        let md = xhtml_to_markdown(x);
        assert_eq!(md, "\\# not a heading\\\n1\\. not a list");
        let back = markdown_to_xhtml(&md);
        assert!(back.starts_with("<p># not a heading<br"), "{back}");
        assert!(!back.contains("<h1>") && !back.contains("<ol>"), "{back}");
    }
}

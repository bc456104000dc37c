//! XHTML content: sanitising, conversion from text and Markdown, canonical
//! form for hashing, and the well-formedness/allowlist check used by
//! validation.
//!
//! Every function here is one linear pass over html5ever's tokenizer (or
//! quick-xml's reader for the check): tags, attributes, entities and
//! raw-text elements are read the way a browser reads them, but no HTML tree
//! builder runs, because its per-tag walks of the open-element stack make it
//! quadratic in nesting depth (a 4 MB nested body took about an hour). The
//! sanitiser keeps its own bounded stack instead (see [`sanitize_html`] and
//! [`MAX_DEPTH`]), writes only the allowlist of product §1, self-closes void
//! elements and balances every element, so its output is well-formed XML and
//! its own fixpoint.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
mod fast_walk;

use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

/// Elements allowed in stored XHTML (product §1).
pub const ALLOWED_ELEMENTS: &[&str] = &[
    "a",
    "b",
    "i",
    "em",
    "strong",
    "code",
    "span",
    "br",
    "p",
    "div",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "hr",
];
/// Attributes allowed on any element, besides `data-*`.
pub const ALLOWED_ATTRIBUTES: &[&str] = &["title", "class"];
/// URL schemes allowed in `href` (only on `a`).
pub const ALLOWED_URL_SCHEMES: &[&str] = &["http", "https", "mailto"];
const VOID_ELEMENTS: &[&str] = &["br", "hr"];

/// How incoming content is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentFormat {
    /// Plain text: escaped, blank lines separate paragraphs.
    Text,
    /// CommonMark (with tables and strikethrough), as models write.
    Markdown,
    /// HTML or XHTML from anywhere: sanitised.
    Html,
}

/// The deepest element nesting the sanitiser keeps. Start tags nested deeper
/// are dropped (with their matching end tags) and their text stays in the
/// deepest kept element, so a hostile or runaway answer is flattened, never
/// refused, and every later step (the browser's DOM walk included) sees a
/// bounded depth. Tables reserve room for their implied `tbody`/`tr`/`td`.
pub const MAX_DEPTH: usize = 100;

/// Elements whose whole content is dropped with them (never unwrapped into
/// text): scripts, styles, embedded documents, foreign content, form controls.
const DROP_WITH_CONTENT: &[&str] = &[
    "script", "style", "iframe", "object", "template", "noscript", "svg", "math", "textarea",
    "select", "title",
];

/// Sanitises untrusted HTML into a well-formed, allowlisted XHTML fragment.
///
/// One pass over html5ever's tokenizer (so tags, attributes, entities and
/// raw-text elements are read the way a browser reads them) with a bounded
/// stack of open elements: time is linear in the input, whatever its nesting
/// (an HTML tree builder walks its open-element stack per tag, which is
/// quadratic in depth). The tree rules applied are the subset of HTML's that
/// keep the output meaning the same when a browser parses it: a block closes
/// an open `p`, `li` closes the previous `li`, a heading closes a heading,
/// `a` closes an open `a`, table rows and cells get their implied
/// `tbody`/`tr`/`td`, end tags close what they match within their scope
/// (others are ignored), and everything still open is closed at the end.
/// Elements off the allowlist are unwrapped (their text kept), except those
/// of `DROP_WITH_CONTENT`, which go with everything inside them. Nesting
/// beyond [`MAX_DEPTH`] is flattened.
///
/// The output is its own fixpoint: `sanitize_html(&sanitize_html(x)) ==
/// sanitize_html(x)`.
pub fn sanitize_html(input: &str) -> String {
    let sink = Sanitizer {
        state: RefCell::new(SanitizeState {
            out: String::with_capacity(input.len() + 16),
            stack: Vec::new(),
            overflow: Vec::new(),
            overflow_counts: [0; ALLOWED_ELEMENTS.len()],
            skip: None,
            after_pre: false,
            pre_end: usize::MAX,
        }),
    };
    let mut state = run_tokenizer(sink, input).state.into_inner();
    state.close_to(0);
    state.out
}

/// Converts text in the given format to sanitised XHTML.
pub fn to_xhtml(input: &str, format: ContentFormat) -> String {
    match format {
        ContentFormat::Text => text_to_xhtml(input),
        ContentFormat::Markdown => markdown_to_xhtml(input),
        ContentFormat::Html => sanitize_html(input),
    }
}

/// Escapes plain text into `<p>…</p>` paragraphs: the one text → XHTML
/// conversion (a prompt as stored, an imported message, what the
/// `wikioracle` provider sends; the web client's `textToXhtml` is held to it
/// by the golden vectors). Line ends are normalised (`\r\n` and a lone `\r`
/// are `\n`); blank lines split paragraphs, leading and trailing newlines of
/// a paragraph go, and a single newline becomes `<br/>`; `& < >` are
/// escaped and characters XML forbids dropped. Blank text is `<p></p>`, so
/// a message always has content. [`recover_text`] inverts it
/// exactly on its own output.
pub fn text_to_xhtml(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(text.len() + 16);
    for para in text.split("\n\n") {
        let para = para.trim_matches('\n');
        if para.trim().is_empty() {
            continue;
        }
        out.push_str("<p>");
        for (i, line) in para.split('\n').enumerate() {
            if i > 0 {
                out.push_str("<br/>");
            }
            escape_text_into(line, &mut out);
        }
        out.push_str("</p>");
    }
    if out.is_empty() {
        out.push_str("<p></p>");
    }
    out
}

/// A question as stored: [`text_to_xhtml`]'s paragraphs, except that a
/// fenced block — a line of three or more backticks (and a language word),
/// closed by a line of at least as many — becomes `<pre><code>` (with
/// `class="language-…"` when the fence names one), its lines kept as they
/// are, indentation and all. Piped text and attached files reach the
/// question in such fences (`wo_engine::input::compose`), so a diff or a
/// source file is shown as code and comes back exactly: [`recover_text`]
/// inverts this on blocks separated by blank lines, as
/// `compose` writes them. An unclosed fence is text.
pub fn question_to_xhtml(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = String::with_capacity(text.len() + 32);
    let mut prose: Vec<&str> = Vec::new();
    let flush = |prose: &mut Vec<&str>, out: &mut String| {
        let joined = prose.join("\n");
        if !joined.trim().is_empty() {
            out.push_str(&text_to_xhtml(&joined));
        }
        prose.clear();
    };
    // A fence of `run` backticks that found no closing line: no later fence
    // of as many will either, so none is searched for again (a text of
    // unclosed fences stays linear).
    let mut unclosable = usize::MAX;
    let mut i = 0;
    while i < lines.len() {
        let closing = opening_fence(lines[i])
            .filter(|(run, _)| *run < unclosable)
            .and_then(|(run, lang)| {
                let end = lines[i + 1..].iter().position(|l| is_closing_fence(l, run));
                if end.is_none() {
                    unclosable = run;
                }
                Some((i + 1 + end?, lang))
            });
        match closing {
            Some((end, lang)) => {
                flush(&mut prose, &mut out);
                out.push_str("<pre><code");
                if let Some(lang) = lang {
                    out.push_str(" class=\"language-");
                    out.push_str(lang);
                    out.push('"');
                }
                out.push('>');
                escape_text_into(&lines[i + 1..end].join("\n"), &mut out);
                out.push_str("</code></pre>");
                i = end + 1;
            }
            None => {
                prose.push(lines[i]);
                i += 1;
            }
        }
    }
    flush(&mut prose, &mut out);
    if out.is_empty() {
        out.push_str("<p></p>");
    }
    out
}

/// A fence opening a code block: its backtick count and its language, a
/// word of letters, digits and `+-_.#` (anything else after the backticks
/// makes the line text, as a backtick there would in Markdown).
fn opening_fence(line: &str) -> Option<(usize, Option<&str>)> {
    let run = line.len() - line.trim_start_matches('`').len();
    if run < 3 {
        return None;
    }
    let info = line[run..].trim();
    if info.is_empty() {
        return Some((run, None));
    }
    info.chars()
        .all(|c| c.is_ascii_alphanumeric() || "+-_.#".contains(c))
        .then_some((run, Some(info)))
}

fn is_closing_fence(line: &str, run: usize) -> bool {
    let line = line.trim_end_matches([' ', '\t']);
    line.len() >= run && line.bytes().all(|b| b == b'`')
}

/// The text that [`text_to_xhtml`] — or, for a question with fenced code,
/// [`question_to_xhtml`] — turned into `xhtml`, or `None`
/// when `xhtml` is not of the shape those functions produce (`<p>…</p>`
/// paragraphs of escaped text and `<br/>`, and `<pre><code>` blocks, each
/// written back in a fence longer than any backtick run in it, as
/// `wo_engine::input::compose` writes them).
pub fn recover_text(xhtml: &str) -> Option<String> {
    if xhtml == "<p></p>" {
        return Some(String::new());
    }
    let mut out = String::with_capacity(xhtml.len());
    let mut rest = xhtml;
    let mut first = true;
    while !rest.is_empty() {
        if !first {
            out.push_str("\n\n");
        }
        first = false;
        if let Some(body) = rest.strip_prefix("<p>") {
            let end = body.find("</p>")?;
            unescape_paragraph(&body[..end], &mut out)?;
            rest = &body[end + 4..];
            continue;
        }
        let body = rest.strip_prefix("<pre><code")?;
        let (lang, body) = match body.strip_prefix(" class=\"language-") {
            Some(b) => {
                let q = b.find('"')?;
                (Some(&b[..q]), b[q..].strip_prefix("\">")?)
            }
            None => (None, body.strip_prefix('>')?),
        };
        let end = body.find("</code></pre>")?;
        let mut code = String::with_capacity(end);
        unescape_code(&body[..end], &mut code)?;
        let longest_run = code
            .split(|c: char| c != '`')
            .map(str::len)
            .max()
            .unwrap_or(0);
        let fence = "`".repeat((longest_run + 1).max(3));
        out.push_str(&fence);
        out.push_str(lang.unwrap_or(""));
        out.push('\n');
        out.push_str(&code);
        out.push('\n');
        out.push_str(&fence);
        rest = &body[end + "</code></pre>".len()..];
    }
    if first { None } else { Some(out) }
}

/// A code block's escaped text: only `&amp;`, `&lt;` and `&gt;`, no markup.
fn unescape_code(code: &str, out: &mut String) -> Option<()> {
    if code.contains('<') {
        return None;
    }
    let mut rest = code;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let (c, len) = if rest.starts_with("&amp;") {
            ('&', 5)
        } else if rest.starts_with("&lt;") {
            ('<', 4)
        } else if rest.starts_with("&gt;") {
            ('>', 4)
        } else {
            return None;
        };
        out.push(c);
        rest = &rest[len..];
    }
    out.push_str(rest);
    Some(())
}

fn unescape_paragraph(para: &str, out: &mut String) -> Option<()> {
    let mut rest = para;
    while let Some(i) = rest.find(['<', '&']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let (replacement, len) = if rest.starts_with("<br/>") {
            ("\n", 5)
        } else if rest.starts_with("&amp;") {
            ("&", 5)
        } else if rest.starts_with("&lt;") {
            ("<", 4)
        } else if rest.starts_with("&gt;") {
            (">", 4)
        } else {
            return None;
        };
        out.push_str(replacement);
        rest = &rest[len..];
    }
    out.push_str(rest);
    Some(())
}

/// Converts Markdown to HTML with pulldown-cmark, then sanitises it.
pub fn markdown_to_xhtml(markdown: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    let markdown = cap_markdown_nesting(markdown);
    let mut html_out = String::with_capacity(markdown.len() * 3 / 2);
    // Text goes out with only the escapes the tokenizer needs: a text of
    // 4 MB of `>` or `<` escaped as entities would be 4 million character
    // references to decode, each far slower than plain text.
    // pulldown-cmark splits text at every special character: join the
    // pieces first, so that each `<` is escaped knowing what follows it.
    use pulldown_cmark::Event;
    let mut parser = Parser::new_ext(&markdown, opts).peekable();
    let events = std::iter::from_fn(move || {
        let event = parser.next()?;
        let Event::Text(first) = event else {
            return Some(event);
        };
        let mut text = first.into_string();
        while let Some(Event::Text(more)) = parser.next_if(|e| matches!(e, Event::Text(_))) {
            text.push_str(&more);
        }
        Some(if text.contains(['<', '>', '&', '"']) {
            Event::Html(escape_for_tokenizer(&text).into())
        } else {
            Event::Text(text.into())
        })
    });
    html::push_html(&mut html_out, events);
    let mut xhtml = sanitize_html(&html_out);
    xhtml.truncate(xhtml.trim_end().len());
    xhtml
}

/// Text escaped just enough that an HTML tokenizer reads it back as the same
/// text: `<` where it could open a tag (before a letter, `/`, `!`, `?` or
/// the end) and `&` where it could start a character reference (before a
/// letter, digit, `#` or the end); `>` and other `<`/`&` stay as they are.
fn escape_for_tokenizer(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        match c {
            '<' if next.is_none_or(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')) => {
                out.push_str("&lt;")
            }
            '&' if next.is_none_or(|n| n.is_ascii_alphanumeric() || n == '#') => {
                out.push_str("&amp;")
            }
            c => out.push(c),
        }
    }
    out
}

/// Container markers (`>`, list bullets, `1.`) one Markdown line may open.
pub const MAX_MARKDOWN_NESTING: usize = 32;

/// Keeps Markdown container nesting within [`MAX_MARKDOWN_NESTING`] per line
/// and indentation within four columns per level: the marker past the limit
/// is escaped (`\>`, `\-`, `1\.`), so it and the rest of the line stay as
/// text; deeper indentation is cut to the limit. pulldown-cmark matches every
/// line against every open container, so unbounded nesting (a 4 MB line of
/// `>`, lists nested by indentation followed by many lazy lines) would cost
/// time and output far beyond the input's size.
fn cap_markdown_nesting(markdown: &str) -> std::borrow::Cow<'_, str> {
    const MAX_INDENT: usize = 4 * MAX_MARKDOWN_NESTING;
    let mut out: Option<String> = None;
    let mut done = 0; // bytes of `markdown` already in `out`
    let mut line_start = 0;
    for line in markdown.split_inclusive('\n') {
        let bytes = line.as_bytes();
        let mut pos = 0;
        let mut depth = 0;
        let mut edit: Option<(usize, usize, &str)> = None; // replace [a, b) with str
        let indent = bytes
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        if indent > MAX_INDENT {
            edit = Some((MAX_INDENT, indent, ""));
        } else {
            loop {
                while pos < bytes.len() && (bytes[pos] == b' ' || bytes[pos] == b'\t') {
                    pos += 1;
                }
                let marker = match bytes.get(pos) {
                    Some(b'>') => Some((pos, pos + 1)),
                    Some(b'-' | b'*' | b'+')
                        if matches!(bytes.get(pos + 1), Some(b' ' | b'\t')) =>
                    {
                        Some((pos, pos + 1))
                    }
                    Some(b'0'..=b'9') => {
                        let digits = bytes[pos..]
                            .iter()
                            .take_while(|b| b.is_ascii_digit())
                            .count();
                        let end = pos + digits;
                        (digits <= 9
                            && matches!(bytes.get(end), Some(b'.' | b')'))
                            && matches!(bytes.get(end + 1), Some(b' ' | b'\t')))
                        .then_some((end, end + 1))
                    }
                    _ => None,
                };
                let Some((escape_at, next)) = marker else {
                    break;
                };
                depth += 1;
                if depth > MAX_MARKDOWN_NESTING {
                    edit = Some((escape_at, escape_at, "\\"));
                    break;
                }
                pos = next;
            }
        }
        if let Some((a, b, with)) = edit {
            let out = out.get_or_insert_with(|| String::with_capacity(markdown.len() + 16));
            out.push_str(&markdown[done..line_start + a]);
            out.push_str(with);
            done = line_start + b;
        }
        line_start += line.len();
    }
    match out {
        None => std::borrow::Cow::Borrowed(markdown),
        Some(mut out) => {
            out.push_str(&markdown[done..]);
            std::borrow::Cow::Owned(out)
        }
    }
}

/// Canonical XHTML used for content-addressed ids: the fragment tokenised as
/// HTML and re-serialised with sorted attributes, one escaping style and
/// self-closed void elements, so equivalent spellings hash alike. Does not
/// sanitise: the hash covers what the file holds.
pub fn canonical_xhtml(fragment: &str) -> String {
    reserialize(fragment, true)
}

/// The visible text of a stored fragment (for titles, prompts, `wo log`):
/// [`html_to_text`] with whitespace kept as written.
pub fn to_plain_text(fragment: &str) -> String {
    html_to_text(fragment, Whitespace::AsWritten).text
}

/// How [`html_to_text`] treats the whitespace of text. The two callers
/// genuinely differ: a stored answer's line breaks are content (`<pre>`
/// code, Markdown's soft breaks) that prompts and `wo log` must keep, while
/// a fetched web page's source line breaks and indentation mean nothing in
/// HTML and would only spend a prompt's budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whitespace {
    /// Text as written; block boundaries add a line break where none is.
    AsWritten,
    /// As a browser renders it: source line breaks are spaces, runs of
    /// blanks one space, each block its own line, no blank lines.
    Collapse,
}

/// The text of an HTML document or fragment, from [`html_to_text`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HtmlText {
    /// The `<title>`, whitespace collapsed; `None` when there is none or it
    /// is blank.
    pub title: Option<String>,
    /// The visible text (the title's excluded), trimmed.
    pub text: String,
}

/// The one HTML → text conversion, for stored fragments and whole pages:
/// the events of [`walk_text`] joined, each block on its own line and the
/// cells of a table row separated by a space.
pub fn html_to_text(html: &str, whitespace: Whitespace) -> HtmlText {
    let mut text = String::with_capacity(html.len());
    let mut title = String::new();
    let collapse = whitespace == Whitespace::Collapse;
    walk_text(html, |event, _line| match event {
        TextEvent::Text(t) if collapse => {
            // Only block boundaries start a new line in a rendered page.
            text.extend(
                t.chars()
                    .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
            );
        }
        TextEvent::Text(t) => text.push_str(t),
        TextEvent::Title(t) => title.push_str(t),
        TextEvent::Break | TextEvent::HeadingStart(_) | TextEvent::HeadingEnd(_) => {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
        }
        TextEvent::Cell => {
            if !text.is_empty() && !text.ends_with(['\n', ' ']) {
                text.push(' ');
            }
        }
    });
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    HtmlText {
        title: (!title.is_empty()).then_some(title),
        text: if collapse {
            collapse_whitespace(&text)
        } else {
            text.trim().to_owned()
        },
    }
}

/// Collapses runs of spaces and tabs inside each line to one space, trims
/// each line and drops blank lines: text the way HTML renders it (also for
/// `text/plain` pages, whose blank runs carry no meaning for a prompt).
pub fn collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for line in s.lines() {
        let mut words = line.split_whitespace().peekable();
        if words.peek().is_none() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        for (i, w) in words.enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(w);
        }
    }
    out
}

/// One step of [`walk_text`]: what a reader of an HTML text needs to know,
/// in document order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextEvent<'a> {
    /// Visible text, character references decoded, whitespace as written.
    Text(&'a str),
    /// Text of the document's `<title>` (possibly in several pieces).
    Title(&'a str),
    /// A block starts or ends (`p`, `div`, `li`, `br`, `tr`, `title`, …):
    /// what follows belongs on a new line.
    Break,
    /// A table cell (`td`, `th`) starts: what follows is in the same row.
    Cell,
    /// A heading `h1`…`h6` starts (its level); the text until
    /// [`TextEvent::HeadingEnd`] is the heading's.
    HeadingStart(usize),
    /// A heading ends (its level).
    HeadingEnd(usize),
}

/// Elements whose start or end separates lines of text, so that words of
/// adjacent blocks are never glued together. Headings, cells and `title`
/// have their own events.
const BLOCK_ELEMENTS: &[&str] = &[
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
    "tr",
    "ul",
];

/// The level of a heading element.
fn heading_level(name: &str) -> Option<usize> {
    match name.as_bytes() {
        [b'h', d @ b'1'..=b'6'] => Some(usize::from(d - b'0')),
        _ => None,
    }
}

/// Walks the visible text of any HTML (a stored fragment, a whole page, a
/// truncated one) in one pass, calling `visit` with each [`TextEvent`] and
/// the source line (1-based) it was read on. The content of scripts,
/// styles, embedded documents, foreign content and form controls (the
/// sanitiser's `DROP_WITH_CONTENT`) is never text; raw-text elements are
/// read as a browser reads them. [`html_to_text`] and the directory index's
/// HTML chunker (which keeps source lines and headings) are built on it.
///
/// Tags, references and text are read the way html5ever's tokenizer reads
/// them: by a byte scanner for the shapes it reads for certain (nearly all
/// real pages; `fast_walk`), else by html5ever itself. Text may come in
/// more or fewer pieces either way; the text between two other events, and
/// the line of every character, do not change.
pub fn walk_text(html: &str, mut visit: impl FnMut(TextEvent<'_>, usize)) {
    let html = cap_attributes(html);
    if fast_walk::walk(&html, &mut WalkCore::default(), &mut visit).is_some() {
        return;
    }
    walk_text_tokenizer(&html, visit);
}

/// [`walk_text`] over html5ever's tokenizer only: the reference the fast
/// scanner is held to.
#[doc(hidden)]
pub fn walk_text_tokenizer(html: &str, visit: impl FnMut(TextEvent<'_>, usize)) {
    let sink = TextWalker {
        state: RefCell::new(WalkState {
            visit,
            core: WalkCore::default(),
        }),
    };
    run_tokenizer(sink, html);
}

/// How the tokenizer reads what follows a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadAs {
    Data,
    Rcdata,
    Rawtext,
    ScriptData,
    Plaintext,
}

impl ReadAs {
    /// The mode after the start tag `name`: the elements a browser reads
    /// as raw text must be read so here too, or markup inside them would be
    /// taken for tags.
    fn after_start_tag(name: &str) -> ReadAs {
        match name {
            "script" => ReadAs::ScriptData,
            "style" | "iframe" | "noscript" | "xmp" | "noembed" | "noframes" => ReadAs::Rawtext,
            "textarea" | "title" => ReadAs::Rcdata,
            "plaintext" => ReadAs::Plaintext,
            _ => ReadAs::Data,
        }
    }

    fn sink_result(self) -> TokenSinkResult<()> {
        use html5ever::tokenizer::states::RawKind;
        match self {
            ReadAs::Data => TokenSinkResult::Continue,
            ReadAs::Rcdata => TokenSinkResult::RawData(RawKind::Rcdata),
            ReadAs::Rawtext => TokenSinkResult::RawData(RawKind::Rawtext),
            ReadAs::ScriptData => TokenSinkResult::RawData(RawKind::ScriptData),
            ReadAs::Plaintext => TokenSinkResult::Plaintext,
        }
    }
}

/// What [`walk_text`] knows between tokens, whichever reader reads them.
#[derive(Default)]
struct WalkCore {
    skip: Option<Skip>,
    in_title: bool,
    /// The start tag that put the tokenizer in a raw-text mode: its end tag
    /// ends the mode.
    raw_end: Option<&'static str>,
}

impl WalkCore {
    /// A tag (name lower-cased): its event, if any, goes to `visit`; returns
    /// how to read on.
    fn tag(
        &mut self,
        name: &str,
        start: bool,
        self_closing: bool,
        visit: &mut impl FnMut(TextEvent<'_>),
    ) -> ReadAs {
        if Skip::swallows_named(&mut self.skip, name, start, self_closing) {
            return ReadAs::Data;
        }
        if name == "title" {
            visit(TextEvent::Break);
            self.in_title = start && !self_closing;
            if self.in_title {
                self.raw_end = Some("title");
                return ReadAs::Rcdata;
            }
        } else if let Some(level) = heading_level(name) {
            visit(if start {
                TextEvent::HeadingStart(level)
            } else {
                TextEvent::HeadingEnd(level)
            });
        } else if matches!(name, "td" | "th") {
            if start {
                visit(TextEvent::Cell);
            }
        } else if BLOCK_ELEMENTS.contains(&name) {
            visit(TextEvent::Break);
        } else if start {
            self.skip = Skip::start_named(name, self_closing);
            let mode = ReadAs::after_start_tag(name);
            if mode != ReadAs::Data {
                self.raw_end = RAW_TEXT_ELEMENTS.iter().find(|e| **e == name).copied();
            }
            return mode;
        }
        ReadAs::Data
    }

    /// Whether text read now is visible: `Some(true)` for the title's,
    /// `Some(false)` for the body's, `None` inside dropped content.
    fn text_kind(&self) -> Option<bool> {
        self.skip.is_none().then_some(self.in_title)
    }

    /// The end tag that ends the raw-text mode just entered.
    fn raw_end_name(&self) -> Option<&'static str> {
        self.raw_end
    }
}

/// Elements whose content the tokenizer reads as raw text or RCDATA.
const RAW_TEXT_ELEMENTS: &[&str] = &[
    "script",
    "style",
    "iframe",
    "noscript",
    "xmp",
    "noembed",
    "noframes",
    "textarea",
    "title",
    "plaintext",
];

struct WalkState<F> {
    visit: F,
    core: WalkCore,
}

struct TextWalker<F> {
    state: RefCell<WalkState<F>>,
}

impl<F: FnMut(TextEvent<'_>, usize)> TokenSink for TextWalker<F> {
    type Handle = ();
    fn process_token(&self, token: Token, line: u64) -> TokenSinkResult<()> {
        let line = usize::try_from(line).unwrap_or(usize::MAX);
        let mut guard = self.state.borrow_mut();
        let st = &mut *guard;
        match token {
            Token::TagToken(tag) => {
                let visit = &mut st.visit;
                st.core
                    .tag(
                        &tag.name,
                        tag.kind == TagKind::StartTag,
                        tag.self_closing,
                        &mut |event| visit(event, line),
                    )
                    .sink_result()
            }
            Token::CharacterTokens(text) => {
                match st.core.text_kind() {
                    Some(true) => (st.visit)(TextEvent::Title(&text), line),
                    Some(false) => (st.visit)(TextEvent::Text(&text), line),
                    None => {}
                }
                TokenSinkResult::Continue
            }
            _ => TokenSinkResult::Continue,
        }
    }
}

/// A problem found by [`check_fragment`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XhtmlProblem {
    /// `xhtml-well-formed` or `xhtml-allowlist`.
    pub rule: &'static str,
    /// What is wrong and where, in words.
    pub detail: String,
}

/// Checks that a stored fragment is well-formed XML and uses only allowed
/// elements, attributes and URL schemes.
pub fn check_fragment(fragment: &str) -> Result<(), XhtmlProblem> {
    use quick_xml::events::Event;
    let wrapped = format!("<wo-root>{fragment}</wo-root>");
    let mut reader = quick_xml::Reader::from_str(&wrapped);
    reader.config_mut().check_end_names = true;
    let malformed = |detail: String| XhtmlProblem {
        rule: "xhtml-well-formed",
        detail,
    };
    let disallowed = |detail: String| XhtmlProblem {
        rule: "xhtml-allowlist",
        detail,
    };
    let mut depth = 0usize;
    // The wrapper opens exactly once, as the first event; once it has closed
    // (the fragment held a stray `</wo-root>`), nothing else may follow, or
    // `</wo-root><wo-root onclick=…>` would smuggle in an unchecked element.
    let mut root_opened = false;
    let mut root_closed = false;
    loop {
        let event = reader.read_event().map_err(|e| malformed(format!("{e}")))?;
        if root_closed && !matches!(event, Event::Eof) {
            return Err(malformed("unbalanced closing tag".into()));
        }
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let is_start = matches!(event, Event::Start(_));
                let name: String = e.name().as_ref().to_owned();
                if !root_opened {
                    root_opened = true;
                    depth += 1;
                    continue;
                }
                if !ALLOWED_ELEMENTS.contains(&name.as_str()) {
                    return Err(disallowed(format!("element <{name}> is not allowed")));
                }
                // quick-xml's own duplicate check compares each attribute
                // with every earlier one (quadratic); a set is linear.
                let mut keys = std::collections::HashSet::new();
                for attr in e.attributes().with_checks(false) {
                    let attr = attr.map_err(|e| malformed(format!("{e}")))?;
                    let key: String = attr.key.as_ref().to_owned();
                    if !keys.insert(key.clone()) {
                        return Err(malformed(format!(
                            "attribute {key:?} appears twice on <{name}>"
                        )));
                    }
                    // Normalised as an XML parser (the browser, for XHTML)
                    // reads it: references resolved, tabs and newlines as spaces.
                    let value = attr
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .map_err(|e| malformed(format!("attribute {key}: {e}")))?;
                    check_attribute(&name, &key, &value).map_err(disallowed)?;
                }
                if is_start {
                    depth += 1;
                }
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                root_closed = depth == 0;
            }
            // The reader works on a `&str`: text is valid UTF-8 by construction.
            Event::Text(_) => {}
            Event::GeneralRef(r) => {
                let name: String = r.as_ref().to_owned();
                let known = matches!(name.as_str(), "amp" | "lt" | "gt" | "quot" | "apos")
                    || r.resolve_char_ref().ok().flatten().is_some();
                if !known {
                    return Err(malformed(format!(
                        "unknown entity &{name}; (XHTML allows only &amp; &lt; &gt; &quot; &apos; and numeric references)"
                    )));
                }
            }
            Event::CData(_) => return Err(disallowed("CDATA sections are not allowed".into())),
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {
                return Err(disallowed(
                    "comments, declarations and processing instructions are not allowed".into(),
                ));
            }
            Event::Eof => break,
        }
    }
    if depth != 0 {
        return Err(malformed("unclosed element".into()));
    }
    Ok(())
}

fn check_attribute(element: &str, key: &str, value: &str) -> Result<(), String> {
    if key == "href" && element == "a" {
        let scheme = value
            .split_once(':')
            .map(|(s, _)| s.trim().to_ascii_lowercase());
        return match scheme {
            Some(s) if ALLOWED_URL_SCHEMES.contains(&s.as_str()) => Ok(()),
            _ => Err(format!(
                "href {value:?} on <a> must be an absolute http, https or mailto URL"
            )),
        };
    }
    if ALLOWED_ATTRIBUTES.contains(&key) || is_data_attribute(key) {
        return Ok(());
    }
    Err(format!("attribute {key:?} on <{element}> is not allowed"))
}

/// `data-*` with a non-empty suffix of ASCII letters, digits, `-`, `_`, `.`:
/// a valid XML attribute name (HTML's tokenizer lets `"`, `<` or `'` into
/// attribute names, which no XML parser accepts).
fn is_data_attribute(key: &str) -> bool {
    key.strip_prefix("data-").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    })
}

/// Escapes text for element content.
pub fn escape_text_into(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            // XML 1.0 forbids most C0 controls even as references.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            '\u{FFFE}' | '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
}

fn escape_attr_into(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            c => escape_text_into(c.encode_utf8(&mut [0; 4]), out),
        }
    }
}

/// Re-serialises HTML tokens as XHTML (the canonical form for hashing).
fn reserialize(html: &str, sort_attributes: bool) -> String {
    let sink = XhtmlSink {
        out: RefCell::new(String::with_capacity(html.len() + 8)),
        sort_attributes,
    };
    run_tokenizer(sink, html).out.into_inner()
}

fn run_tokenizer<S: TokenSink<Handle = ()>>(sink: S, input: &str) -> S {
    let input = cap_attributes(input);
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(&input));
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let _ = tokenizer.feed(&queue);
    tokenizer.end();
    tokenizer.sink
}

/// Most attributes a tag keeps; those after are dropped before tokenising.
/// No element of the allowlist needs more than a few; the tokenizer checks
/// each attribute against all earlier ones of its tag, so a tag with tens
/// of thousands would cost quadratic time.
pub const MAX_ATTRIBUTES: usize = 256;

/// `input` with every tag's attributes after the first [`MAX_ATTRIBUTES`]
/// removed (borrowed when no tag has more). The scan follows the HTML
/// tokenizer's tag states (tag name, attribute name, `=`, quoted and
/// unquoted values, `/`), so it cuts exactly where the tokenizer would start
/// the next attribute and keeps the tag's `>`. Text that only looks like a
/// tag (inside a comment or raw text) is cut the same way; the sanitiser
/// drops or escapes it anyway. One pass, linear.
fn cap_attributes(input: &str) -> std::borrow::Cow<'_, str> {
    let b = input.as_bytes();
    let ws = |c: u8| matches!(c, b'\t' | b'\n' | b'\x0C' | b' ' | b'\r');
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let Some(lt) = memchr::memchr(b'<', &b[i..]) else {
            break;
        };
        i += lt;
        let mut j = i + 1;
        if j < b.len() && b[j] == b'/' {
            j += 1;
        }
        if !(j < b.len() && b[j].is_ascii_alphabetic()) {
            i += 1;
            continue;
        }
        // Tag name.
        while j < b.len() && !ws(b[j]) && b[j] != b'/' && b[j] != b'>' {
            j += 1;
        }
        let mut count = 0usize;
        let mut cut_from = None;
        // Attributes, until the tag's `>` (or the end of the input).
        loop {
            while j < b.len() && (ws(b[j]) || b[j] == b'/') {
                j += 1;
            }
            if j >= b.len() || b[j] == b'>' {
                break;
            }
            count += 1;
            if count > MAX_ATTRIBUTES && cut_from.is_none() {
                cut_from = Some(j);
            }
            // Name: the first character is taken even when it is `=`.
            j += 1;
            while j < b.len() && !ws(b[j]) && !matches!(b[j], b'/' | b'>' | b'=') {
                j += 1;
            }
            while j < b.len() && ws(b[j]) {
                j += 1;
            }
            if j < b.len() && b[j] == b'=' {
                j += 1;
                while j < b.len() && ws(b[j]) {
                    j += 1;
                }
                match b.get(j) {
                    Some(&q @ (b'"' | b'\'')) => {
                        j += 1;
                        j = memchr::memchr(q, &b[j..]).map_or(b.len(), |k| j + k);
                        j += 1;
                    }
                    Some(b'>') | None => {}
                    Some(_) => {
                        while j < b.len() && !ws(b[j]) && b[j] != b'>' {
                            j += 1;
                        }
                    }
                }
            }
        }
        let end = j.min(b.len());
        if let Some(from) = cut_from {
            cuts.push((from, end));
        }
        i = end;
    }
    if cuts.is_empty() {
        return std::borrow::Cow::Borrowed(input);
    }
    let mut out = String::with_capacity(input.len());
    let mut at = 0;
    for (from, to) in cuts {
        // Both ends are at ASCII bytes (or the input's end): char boundaries.
        out.push_str(&input[at..from]);
        at = to;
    }
    out.push_str(&input[at..]);
    std::borrow::Cow::Owned(out)
}

struct XhtmlSink {
    out: RefCell<String>,
    sort_attributes: bool,
}

impl TokenSink for XhtmlSink {
    type Handle = ();
    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut out = self.out.borrow_mut();
        match token {
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                let void = VOID_ELEMENTS.contains(&name);
                match tag.kind {
                    TagKind::StartTag => {
                        out.push('<');
                        out.push_str(name);
                        let mut attrs: Vec<(&str, &str)> = tag
                            .attrs
                            .iter()
                            .map(|a| (&*a.name.local, &*a.value))
                            .collect();
                        if self.sort_attributes {
                            attrs.sort();
                        }
                        for (k, v) in attrs {
                            out.push(' ');
                            out.push_str(k);
                            out.push_str("=\"");
                            escape_attr_into(v, &mut out);
                            out.push('"');
                        }
                        if void {
                            out.push_str("/>");
                        } else if tag.self_closing {
                            out.push_str("></");
                            out.push_str(name);
                            out.push('>');
                        } else {
                            out.push('>');
                        }
                    }
                    TagKind::EndTag if !void => {
                        out.push_str("</");
                        out.push_str(name);
                        out.push('>');
                    }
                    TagKind::EndTag => {}
                }
            }
            Token::CharacterTokens(text) => escape_text_into(&text, &mut out),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// The sanitiser's token sink (html5ever's sink API takes `&self`).
struct Sanitizer {
    state: RefCell<SanitizeState>,
}

/// An element the sanitiser has written a start tag for and not yet closed.
struct Open {
    name: &'static str,
    /// A `p` is open at or above the nearest table part (HTML's "p in button
    /// scope"), so a block start must close it first.
    p_open: bool,
    /// An `a` is open at or above the nearest table part.
    a_open: bool,
}

/// Inside an element dropped with its content.
struct Skip {
    name: &'static str,
    /// Nested elements of the same name still open inside it.
    nested: usize,
    /// `svg`/`math`: an HTML element such as `<p>` ends it, as in browsers.
    foreign: bool,
}

impl Skip {
    /// The skip a start tag begins: one of `DROP_WITH_CONTENT` (a
    /// self-closed `<svg/>` or `<math/>` has no content to drop).
    fn start(tag: &Tag) -> Option<Skip> {
        Skip::start_named(&tag.name, tag.self_closing)
    }

    /// [`Skip::start`] for a tag given by its (lower-case) name.
    fn start_named(name: &str, self_closing: bool) -> Option<Skip> {
        let foreign = matches!(name, "svg" | "math");
        if foreign && self_closing {
            return None;
        }
        DROP_WITH_CONTENT
            .iter()
            .find(|e| **e == name)
            .map(|name| Skip {
                name,
                nested: 0,
                foreign,
            })
    }

    /// Feeds a tag to the skip in progress, if any: true when the tag is
    /// inside the dropped element (or ends it) and must be ignored; false
    /// when nothing is skipped or the tag leaves foreign content, as a
    /// browser reads it, and is to be handled as usual.
    fn swallows(skip: &mut Option<Skip>, tag: &Tag) -> bool {
        Skip::swallows_named(
            skip,
            &tag.name,
            tag.kind == TagKind::StartTag,
            tag.self_closing,
        )
    }

    /// [`Skip::swallows`] for a tag given by its (lower-case) name.
    fn swallows_named(
        skip: &mut Option<Skip>,
        name: &str,
        start: bool,
        self_closing: bool,
    ) -> bool {
        let Some(sk) = skip.as_mut() else {
            return false;
        };
        let same = name == sk.name;
        if start && sk.foreign && breaks_out_of_foreign(name) {
            *skip = None;
            return false;
        }
        if start {
            if same && !(sk.foreign && self_closing) {
                sk.nested += 1;
            }
        } else if same {
            match sk.nested.checked_sub(1) {
                Some(n) => sk.nested = n,
                None => *skip = None,
            }
        }
        true
    }
}

/// What the tokenizer must do after the start tag `name`: the elements a
/// browser reads as raw text must be read so here too, or markup inside
/// them would be taken for tags.
fn raw_text_mode(name: &str) -> TokenSinkResult<()> {
    ReadAs::after_start_tag(name).sink_result()
}

struct SanitizeState {
    out: String,
    /// At most [`MAX_DEPTH`] entries.
    stack: Vec<Open>,
    /// Allowed start tags dropped for depth (indices into
    /// [`ALLOWED_ELEMENTS`]), innermost last, waiting for their end tags so
    /// that those do not close a kept element.
    overflow: Vec<usize>,
    /// How many of each element `overflow` holds: an end tag finds its match
    /// (or learns there is none) without a scan.
    overflow_counts: [usize; ALLOWED_ELEMENTS.len()],
    skip: Option<Skip>,
    /// The previous token was a `<pre>` start tag, so a newline starting
    /// this one is dropped (as a browser does).
    after_pre: bool,
    /// `out.len()` right after the last `<pre>` start tag written.
    pre_end: usize,
}

fn is_table_part(name: &str) -> bool {
    matches!(name, "table" | "tbody" | "thead" | "tr" | "td" | "th")
}

/// Table parts whose content is rows or cells, not flow content.
fn is_table_container(name: &str) -> bool {
    matches!(name, "table" | "tbody" | "thead" | "tr")
}

fn is_heading(name: &str) -> bool {
    matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6")
}

/// HTML's "special" elements among the allowed ones (they stop the search
/// for an open `li`).
fn is_special(name: &str) -> bool {
    !matches!(name, "a" | "b" | "i" | "em" | "strong" | "code" | "span")
}

/// How deep an element may start: a table needs room for its implied
/// `tbody`, `tr` and `td`, so those always fit once the table does.
fn depth_limit(name: &str) -> usize {
    match name {
        "table" => MAX_DEPTH - 3,
        "tbody" | "thead" => MAX_DEPTH - 2,
        "tr" => MAX_DEPTH - 1,
        _ => MAX_DEPTH,
    }
}

/// HTML elements that end foreign content (`svg`, `math`) in a browser.
fn breaks_out_of_foreign(name: &str) -> bool {
    matches!(
        name,
        "b" | "big"
            | "blockquote"
            | "body"
            | "br"
            | "center"
            | "code"
            | "dd"
            | "div"
            | "dl"
            | "dt"
            | "em"
            | "embed"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "head"
            | "hr"
            | "i"
            | "img"
            | "li"
            | "listing"
            | "menu"
            | "meta"
            | "nobr"
            | "ol"
            | "p"
            | "pre"
            | "ruby"
            | "s"
            | "small"
            | "span"
            | "strong"
            | "strike"
            | "sub"
            | "sup"
            | "table"
            | "tt"
            | "u"
            | "ul"
            | "var"
    )
}

/// An `href` kept only when, read the way a browser reads it (surrounding
/// spaces and controls trimmed, tabs and newlines removed), it is an
/// absolute URL with an allowed scheme; returned in that normalised form so
/// that [`check_fragment`] sees the scheme the browser will.
fn clean_href(value: &str) -> Option<String> {
    let url: String = value
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let (scheme, _) = url.split_once(':')?;
    let mut bytes = scheme.bytes();
    let well_formed = bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    (well_formed && ALLOWED_URL_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()))
        .then_some(url)
}

impl SanitizeState {
    fn top(&self) -> Option<&'static str> {
        self.stack.last().map(|o| o.name)
    }

    /// The index of the nearest open element matching `want`, searching from
    /// the innermost and giving up at one matching `stop`.
    fn find(&self, want: impl Fn(&str) -> bool, stop: impl Fn(&str) -> bool) -> Option<usize> {
        for (i, open) in self.stack.iter().enumerate().rev() {
            if want(open.name) {
                return Some(i);
            }
            if stop(open.name) {
                return None;
            }
        }
        None
    }

    /// Closes open elements until `len` remain. Elements dropped for depth
    /// sat inside them, so they are closed too.
    fn close_to(&mut self, len: usize) {
        while self.stack.len() > len {
            let Some(open) = self.stack.pop() else { break };
            self.out.push_str("</");
            self.out.push_str(open.name);
            self.out.push('>');
            self.clear_overflow();
        }
    }

    fn clear_overflow(&mut self) {
        if !self.overflow.is_empty() {
            self.overflow.clear();
            self.overflow_counts = [0; ALLOWED_ELEMENTS.len()];
        }
    }

    fn close_p(&mut self) {
        if self.stack.last().is_some_and(|o| o.p_open)
            && let Some(i) = self.find(|n| n == "p", is_table_part)
        {
            self.close_to(i);
        }
    }

    /// Writes a start tag and opens the element (the caller checked depth).
    fn open(&mut self, name: &'static str, attrs: &[html5ever::Attribute]) {
        let parent = self.stack.last();
        let scope_root = matches!(name, "table" | "td" | "th");
        let p_open = name == "p" || (!scope_root && parent.is_some_and(|o| o.p_open));
        let a_open = name == "a" || (!scope_root && parent.is_some_and(|o| o.a_open));
        self.write_start(name, attrs);
        self.stack.push(Open {
            name,
            p_open,
            a_open,
        });
        if name == "pre" {
            self.after_pre = true;
            self.pre_end = self.out.len();
        }
    }

    fn write_start(&mut self, name: &str, attrs: &[html5ever::Attribute]) {
        let out = &mut self.out;
        out.push('<');
        out.push_str(name);
        for attr in attrs {
            let key: &str = &attr.name.local;
            let value = if key == "href" {
                if name != "a" {
                    continue;
                }
                match clean_href(&attr.value) {
                    Some(url) => std::borrow::Cow::Owned(url),
                    None => continue,
                }
            } else if ALLOWED_ATTRIBUTES.contains(&key) || is_data_attribute(key) {
                std::borrow::Cow::Borrowed(&*attr.value)
            } else {
                continue;
            };
            out.push(' ');
            out.push_str(key);
            out.push_str("=\"");
            escape_attr_into(&value, out);
            out.push('"');
        }
        if VOID_ELEMENTS.contains(&name) {
            out.push_str("/>");
        } else {
            out.push('>');
        }
    }

    /// Content other than rows and cells inside a table goes into a cell
    /// (a browser would move it in front of the table; a cell keeps it in
    /// place).
    fn open_cell(&mut self) {
        loop {
            match self.top() {
                Some("table") => self.open("tbody", &[]),
                Some("tbody" | "thead") => self.open("tr", &[]),
                Some("tr") => self.open("td", &[]),
                _ => return,
            }
        }
    }

    fn start_tag(&mut self, index: usize, attrs: &[html5ever::Attribute]) {
        let name = ALLOWED_ELEMENTS[index];
        let void = VOID_ELEMENTS.contains(&name);
        if !self.overflow.is_empty() && !void {
            // Inside an element dropped for depth: keep flattening.
            self.overflow.push(index);
            self.overflow_counts[index] += 1;
            return;
        }
        // A void element is written even inside dropped elements, so it
        // takes the tree rules below like any other: an `hr` there must
        // still close an open `p`, or reading the output again (where
        // nothing is dropped before it) would close the `p` and move the
        // `hr` after it, and the output would not be its own fixpoint.
        if is_table_part(name) {
            if !self.table_part_start(name) {
                return;
            }
        } else {
            if self.top().is_some_and(is_table_container) {
                self.open_cell();
            }
            match name {
                "li" => {
                    let ends_search = |n: &str| is_special(n) && n != "div" && n != "p";
                    if let Some(i) = self.find(|n| n == "li", ends_search) {
                        self.close_to(i);
                    }
                    self.close_p();
                }
                "p" | "div" | "pre" | "blockquote" | "ul" | "ol" | "hr" => self.close_p(),
                h if is_heading(h) => {
                    self.close_p();
                    if self.top().is_some_and(is_heading) {
                        self.close_to(self.stack.len() - 1);
                    }
                }
                "a" => {
                    if self.stack.last().is_some_and(|o| o.a_open)
                        && let Some(i) = self.find(|n| n == "a", is_table_part)
                    {
                        self.close_to(i);
                    }
                }
                _ => {}
            }
        }
        if void {
            self.write_start(name, attrs);
        } else if self.stack.len() < depth_limit(name) {
            self.open(name, attrs);
        } else {
            self.overflow.push(index);
            self.overflow_counts[index] += 1;
        }
    }

    /// Places a table part: closes what it ends, opens what it implies.
    /// Returns false when the tag is ignored (no table to belong to).
    fn table_part_start(&mut self, name: &'static str) -> bool {
        loop {
            let top = self.top();
            if top.is_some_and(is_table_container) {
                match (name, top) {
                    ("table", _) => {
                        // A table starting among a table's rows ends it.
                        if let Some(i) = self.find(|n| n == "table", |_| false) {
                            self.close_to(i);
                        }
                        self.close_p();
                        return true;
                    }
                    ("tbody" | "thead", _) => {
                        if let Some(i) = self.find(|n| n == "table", |_| false) {
                            self.close_to(i + 1);
                        }
                        return true;
                    }
                    ("tr", Some("table")) => self.open("tbody", &[]),
                    ("tr", Some("tr")) => self.close_to(self.stack.len() - 1),
                    ("tr", _) => return true,
                    (_, Some("table")) => self.open("tbody", &[]),
                    (_, Some("tbody" | "thead")) => self.open("tr", &[]),
                    _ => return true,
                }
                continue;
            }
            if name == "table" {
                self.close_p();
                return true;
            }
            // Rows and cells inside a cell end it; outside a table they mean
            // nothing and are dropped.
            match self.find(|n| matches!(n, "td" | "th"), is_table_container) {
                Some(i) => self.close_to(i),
                None => return false,
            }
        }
    }

    fn end_tag(&mut self, index: usize) {
        let name = ALLOWED_ELEMENTS[index];
        if !self.overflow.is_empty() {
            if self.overflow_counts[index] > 0 {
                while let Some(dropped) = self.overflow.pop() {
                    self.overflow_counts[dropped] -= 1;
                    if dropped == index {
                        break;
                    }
                }
                return;
            }
            self.clear_overflow();
        }
        let found = match name {
            "table" => self.find(|n| n == "table", |_| false),
            "tbody" | "thead" => self.find(|n| n == name, |n| n == "table"),
            "tr" => self.find(|n| n == "tr", |n| matches!(n, "table" | "tbody" | "thead")),
            "td" | "th" => self.find(|n| n == name, is_table_container),
            h if is_heading(h) => self.find(is_heading, is_table_part),
            "li" => self.find(
                |n| n == "li",
                |n| is_table_part(n) || matches!(n, "ul" | "ol"),
            ),
            _ => self.find(|n| n == name, is_table_part),
        };
        if let Some(i) = found {
            self.close_to(i);
        }
    }

    fn text(&mut self, text: &str, after_pre: bool) {
        let mut text = text;
        if after_pre {
            // A browser drops one newline right after `<pre>`.
            text = text.strip_prefix('\n').unwrap_or(text);
        }
        if text.is_empty() {
            return;
        }
        if self.top().is_some_and(is_table_container)
            && !text.chars().all(|c| c.is_ascii_whitespace())
        {
            self.open_cell();
        }
        if self.out.len() == self.pre_end && text.starts_with('\n') {
            // Written right after `<pre>`: one more newline, so that
            // reading the output as HTML again keeps the text.
            self.out.push('\n');
        }
        escape_text_into(text, &mut self.out);
    }
}

impl TokenSink for Sanitizer {
    type Handle = ();
    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut st = self.state.borrow_mut();
        let after_pre = std::mem::take(&mut st.after_pre);
        match token {
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                if Skip::swallows(&mut st.skip, &tag) {
                    return TokenSinkResult::Continue;
                }
                let allowed = ALLOWED_ELEMENTS.iter().position(|e| *e == name);
                match (tag.kind, allowed) {
                    (TagKind::StartTag, Some(i)) => st.start_tag(i, &tag.attrs),
                    // A browser reads `</br>` as `<br>`.
                    (TagKind::EndTag, Some(i)) if name == "br" => st.start_tag(i, &[]),
                    (TagKind::EndTag, Some(i)) if !VOID_ELEMENTS.contains(&name) => st.end_tag(i),
                    (TagKind::EndTag, _) => {}
                    (TagKind::StartTag, None) => {
                        st.skip = Skip::start(&tag);
                        return raw_text_mode(name);
                    }
                }
            }
            Token::CharacterTokens(text) => {
                if st.skip.is_none() {
                    st.text(&text, after_pre);
                }
            }
            Token::NullCharacterToken
            | Token::CommentToken(_)
            | Token::DoctypeToken(_)
            | Token::EOFToken
            | Token::ParseError(_) => {}
        }
        TokenSinkResult::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_to_xhtml_is_pinned() {
        // What every caller relies on: the stored prompt, the importers'
        // round trip and the stateless provider's window.
        for (text, xhtml) in [
            ("", "<p></p>"),
            ("  \n\n \t", "<p></p>"),
            ("hello", "<p>hello</p>"),
            (
                "a < b & \"c\" > d\ne",
                "<p>a &lt; b &amp; \"c\" &gt; d<br/>e</p>",
            ),
            ("para one\n\npara two", "<p>para one</p><p>para two</p>"),
            ("\n\nlead\n\n\n\nnext\n", "<p>lead</p><p>next</p>"),
            ("x\r\ny\rz\r\n\r\nw", "<p>x<br/>y<br/>z</p><p>w</p>"),
            ("bell\u{7}\u{FFFE}!", "<p>bell!</p>"),
            ("  indented\n\ttab", "<p>  indented<br/>\ttab</p>"),
            ("unicode: café 😀", "<p>unicode: café 😀</p>"),
        ] {
            let out = text_to_xhtml(text);
            assert_eq!(out, xhtml, "{text:?}");
            check_fragment(&out).unwrap();
        }
    }

    #[test]
    fn html_to_text_keeps_or_collapses_whitespace() {
        let page = "<!doctype html><html><head><title>  My\n Page </title>\
            <style>body{color:red}</style><script>var x = '<p>no</p>';</script></head>\
            <body><h1>Head  line</h1><p>First\n   para &amp; more</p><div>Second</div>\
            <noscript>js off</noscript><ul><li>a</li><li>b</li></ul>\
            <table><tr><td>c1</td><td>c2</td></tr><tr><th>d</th></tr></table>\
            <svg><text>drawn</text></svg><p>end</p></body></html>";
        let doc = html_to_text(page, Whitespace::Collapse);
        assert_eq!(doc.title.as_deref(), Some("My Page"));
        assert_eq!(
            doc.text,
            "Head line\nFirst para & more\nSecond\na\nb\nc1 c2\nd\nend"
        );
        // A page cut off by the size cap still converts.
        let cut = html_to_text("<p>kept</p><p>cut in the mid", Whitespace::Collapse);
        assert_eq!(
            (cut.title, cut.text.as_str()),
            (None, "kept\ncut in the mid")
        );
        // Stored fragments keep their line breaks (code, soft breaks).
        assert_eq!(
            to_plain_text("<p>a<br/>b</p><pre>fn x() {\n    1\n}</pre><p>soft\nbreak</p>"),
            "a\nb\nfn x() {\n    1\n}\nsoft\nbreak"
        );
        assert_eq!(to_plain_text("<h1>T</h1><p>x <b>y</b></p>"), "T\nx y");
        assert_eq!(collapse_whitespace("a  b\n\n\tc \r\n"), "a b\nc");
    }

    #[test]
    fn walk_text_reports_headings_cells_and_source_lines() {
        let mut events = Vec::new();
        walk_text(
            "<h2>Sub</h2>\n<p>x</p><template>t</template><td>c",
            |e, line| events.push((format!("{e:?}"), line)),
        );
        let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(
            names,
            [
                "HeadingStart(2)",
                "Text(\"Sub\")",
                "HeadingEnd(2)",
                "Text(\"\\n\")",
                "Break",
                "Text(\"x\")",
                "Break",
                "Cell",
                "Text(\"c\")"
            ]
        );
        assert_eq!(events.last().map(|(_, l)| *l), Some(2));
    }

    #[test]
    fn sanitizer_strips_scripts_handlers_and_bad_urls() {
        let dirty = r#"<p onclick="x()">hi<script>alert(1)</script><a href="javascript:alert(1)">j</a><a href="https://e.org" rel="x" target="_blank">ok</a><img src=x onerror=alert(1)><style>p{}</style></p>"#;
        let clean = sanitize_html(dirty);
        assert_eq!(clean, r#"<p>hi<a>j</a><a href="https://e.org">ok</a></p>"#);
        check_fragment(&clean).unwrap();
    }

    #[test]
    fn sanitizer_output_is_well_formed_xhtml() {
        let clean = sanitize_html(
            "<p>a<br>b<hr><ul><li>one<li>two</ul><table><tr><td>x</table>&nbsp;&copy;",
        );
        assert_eq!(
            clean,
            "<p>a<br/>b</p><hr/><ul><li>one</li><li>two</li></ul><table><tbody><tr><td>x</td></tr></tbody></table>\u{a0}©"
        );
        check_fragment(&clean).unwrap();
    }

    #[test]
    fn sanitising_twice_keeps_a_leading_newline_in_pre() {
        let once = sanitize_html("<pre>\n\ncode</pre>");
        assert_eq!(once, "<pre>\n\ncode</pre>");
        assert_eq!(sanitize_html(&once), once);
        assert_eq!(sanitize_html("<pre>code</pre>"), "<pre>code</pre>");
    }

    #[test]
    fn text_is_escaped_into_paragraphs() {
        assert_eq!(
            text_to_xhtml("a < b & c\nnext\n\n<script>"),
            "<p>a &lt; b &amp; c<br/>next</p><p>&lt;script&gt;</p>"
        );
        assert_eq!(text_to_xhtml(""), "<p></p>");
    }

    #[test]
    fn markdown_becomes_sanitised_xhtml() {
        let x = markdown_to_xhtml(
            "# Title\n\nSome **bold** and `code`.\n\n<script>alert(1)</script>\n\n[l](javascript:x) [ok](https://a.b)",
        );
        assert_eq!(
            x,
            "<h1>Title</h1>\n<p>Some <strong>bold</strong> and <code>code</code>.</p>\n\n<p><a>l</a> <a href=\"https://a.b\">ok</a></p>"
        );
        check_fragment(&x).unwrap();
    }

    #[test]
    fn canonical_form_ignores_attribute_order_and_escaping_style() {
        let a =
            canonical_xhtml(r#"<a title='t' href="https://x.org/?a=1&amp;b=2">x&#38;y</a><br>"#);
        let b = canonical_xhtml(r#"<a href="https://x.org/?a=1&b=2" title="t">x&amp;y</a><br/>"#);
        assert_eq!(a, b);
        assert_eq!(
            a,
            r#"<a href="https://x.org/?a=1&amp;b=2" title="t">x&amp;y</a><br/>"#
        );
    }

    #[test]
    fn check_fragment_reports_rules() {
        let cases = [
            ("<p>unclosed", "xhtml-well-formed"),
            ("<p>a</b>", "xhtml-well-formed"),
            ("<p>&nbsp;</p>", "xhtml-well-formed"),
            ("<script>x</script>", "xhtml-allowlist"),
            ("<p onclick=\"x\">a</p>", "xhtml-allowlist"),
            ("<a href=\"javascript:alert(1)\">a</a>", "xhtml-allowlist"),
            ("<p style=\"color:red\">a</p>", "xhtml-allowlist"),
            ("<!-- c --><p/>", "xhtml-allowlist"),
            // A stray close of the wrapper must not let a second one in.
            ("</wo-root><wo-root onclick=\"x\">a", "xhtml-well-formed"),
            ("<p data-=\"x\">a</p>", "xhtml-allowlist"),
            ("<p data-x<y=\"1\">a</p>", "xhtml-allowlist"),
        ];
        for (input, rule) in cases {
            let err = check_fragment(input).expect_err(input);
            assert_eq!(err.rule, rule, "{input}: {}", err.detail);
        }
        check_fragment("plain text &amp; &#169; <b class=\"x\" data-k=\"v\">b</b><br/>").unwrap();
        check_fragment("").unwrap();
    }

    #[test]
    fn plain_text_extraction() {
        assert_eq!(
            to_plain_text("<h1>T</h1><p>a &amp; b<br/>c</p><ul><li>x</li><li>y</li></ul>"),
            "T\na & b\nc\nx\ny"
        );
    }
}

#[cfg(test)]
mod question_tests {
    use super::*;
    use proptest::prelude::*;

    /// A block as `compose` writes it: in a fence longer than any backtick
    /// run inside, with an optional language.
    fn fenced(code: &str, lang: &str) -> String {
        let run = code
            .split(|c: char| c != '`')
            .map(str::len)
            .max()
            .unwrap_or(0);
        let fence = "`".repeat((run + 1).max(3));
        format!("{fence}{lang}\n{code}\n{fence}")
    }

    #[test]
    fn code_blocks_are_kept_as_code_byte_for_byte() {
        let diff = "diff --git a/x b/x\n-    old();\n+\tnew(<&>);\n ```inner```";
        let text = format!("Review this\n\n{}", fenced(diff, "diff"));
        let x = question_to_xhtml(&text);
        assert_eq!(
            x,
            "<p>Review this</p><pre><code class=\"language-diff\">diff --git a/x b/x\n-    old();\n+\tnew(&lt;&amp;&gt;);\n ```inner```</code></pre>"
        );
        assert_eq!(recover_text(&x).as_deref(), Some(text.as_str()));
        // Text without fences is stored as text_to_xhtml stores it.
        assert_eq!(question_to_xhtml("a\nb\n\nc"), text_to_xhtml("a\nb\n\nc"));
        // An unclosed fence, or one with more after the language, is text.
        assert_eq!(question_to_xhtml("```\nx"), text_to_xhtml("```\nx"));
        assert_eq!(
            question_to_xhtml("```a b\nx\n```"),
            text_to_xhtml("```a b\nx\n```")
        );
        assert_eq!(question_to_xhtml(""), "<p></p>");
    }

    #[test]
    fn unclosed_fences_stay_linear() {
        // 20,000 lines opening fences that never close: each is searched
        // for once per backtick count, not once per line.
        let text = "````x\n```y\n".repeat(10_000);
        let x = question_to_xhtml(&text);
        assert!(x.starts_with("<p>````x<br/>```y"));
    }

    proptest! {
        #[test]
        fn compose_shaped_questions_come_back_exactly(
            prose in "[a-z .]{1,30}",
            code in "[ -~\t\n]{0,80}",
            lang in prop_oneof![Just(""), Just("diff"), Just("rust")],
        ) {
            let prose = prose.trim().to_owned();
            prop_assume!(!prose.is_empty());
            let code = code.trim_end_matches('\n').to_owned();
            let text = format!("{prose}\n\n{}", fenced(&code, lang));
            let x = question_to_xhtml(&text);
            prop_assert!(x.contains("<pre><code"), "{x}");
            prop_assert_eq!(recover_text(&x), Some(text));
        }
    }
}

//! HTML to plain text, and link extraction from truth-entry XHTML.
//!
//! Both use html5ever's tokenizer rather than a tree builder: we only need a linear pass over
//! text and a few tags, the tokenizer copes with any malformed input (including a page cut off
//! by the size cap), and it decodes character references for us.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

/// Elements whose start or end separates lines of text, so that words from adjacent blocks are
/// not glued together.
const BLOCK_TAGS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "td",
    "th",
    "tr",
    "ul",
];

/// Elements whose content is never readable text.
const SKIPPED_TAGS: &[&str] = &["script", "style", "noscript", "template", "svg"];

#[derive(Default)]
struct TextState {
    /// The element we are inside and dropping, until its end tag.
    skipping: Option<String>,
    in_title: bool,
    title: String,
    text: String,
}

struct TextSink(RefCell<TextState>);

impl TokenSink for TextSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut st = self.0.borrow_mut();
        match token {
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                if let Some(skip) = st.skipping.as_deref() {
                    if tag.kind == TagKind::EndTag && name == skip {
                        st.skipping = None;
                    }
                    return TokenSinkResult::Continue;
                }
                match (tag.kind, name) {
                    (TagKind::StartTag, "title") if !tag.self_closing => {
                        st.in_title = true;
                        // Tell the tokenizer to treat the title as text, as a browser would.
                        return TokenSinkResult::RawData(RawKind::Rcdata);
                    }
                    (TagKind::EndTag, "title") => st.in_title = false,
                    (TagKind::StartTag, _) if SKIPPED_TAGS.contains(&name) && !tag.self_closing => {
                        st.skipping = Some(name.to_string());
                        match name {
                            "script" => return TokenSinkResult::RawData(RawKind::ScriptData),
                            "style" => return TokenSinkResult::RawData(RawKind::Rawtext),
                            _ => {}
                        }
                    }
                    _ if BLOCK_TAGS.contains(&name) => st.text.push('\n'),
                    _ => {}
                }
            }
            Token::CharacterTokens(t) if st.skipping.is_none() => {
                if st.in_title {
                    st.title.push_str(&t);
                } else {
                    // Line breaks in the source are not meaningful in HTML; only block
                    // boundaries (pushed above) start a new line.
                    let flat = t.replace(['\n', '\r'], " ");
                    st.text.push_str(&flat);
                }
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// Collapses runs of spaces and tabs inside each line and drops blank lines.
fn collapse_whitespace(s: &str) -> String {
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

/// Plain text and `<title>` of an HTML document.
pub fn html_to_text(html: &str) -> (Option<String>, String) {
    let sink = TextSink(RefCell::new(TextState::default()));
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(html));
    // The sink never asks to pause for scripts, so one feed consumes the whole input.
    let _ = tokenizer.feed(&queue);
    tokenizer.end();
    let st = tokenizer.sink.0.take();
    let title = st.title.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = collapse_whitespace(&st.text);
    ((!title.is_empty()).then_some(title), text)
}

/// Plain text kept as served, except that runs of blanks collapse like HTML text does.
pub fn plain_text(text: &str) -> String {
    collapse_whitespace(text)
}

struct LinkSink(RefCell<Vec<String>>);

impl TokenSink for LinkSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        if let Token::TagToken(tag) = token
            && tag.kind == TagKind::StartTag
            && &*tag.name == "a"
        {
            for attr in &tag.attrs {
                if &*attr.name.local == "href" {
                    self.0.borrow_mut().push(attr.value.to_string());
                }
            }
        }
        TokenSinkResult::Continue
    }
}

/// Absolute `http`/`https` targets of the `<a href>` elements in `xhtml`, deduplicated, in
/// document order.
///
/// Relative links are skipped: a truth entry has no base URL to resolve them against.
pub fn links_in_xhtml(xhtml: &str) -> Vec<String> {
    let tokenizer = Tokenizer::new(LinkSink(RefCell::new(Vec::new())), TokenizerOpts::default());
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(xhtml));
    let _ = tokenizer.feed(&queue);
    tokenizer.end();
    let hrefs = tokenizer.sink.0.take();
    let mut out: Vec<String> = Vec::new();
    for href in hrefs {
        let Ok(url) = url::Url::parse(href.trim()) else {
            continue;
        };
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            continue;
        }
        let s = url.to_string();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_text_drops_script_style_and_collapses() {
        let html = "<!doctype html><html><head><title>  My\n Page </title>\
            <style>body{color:red}</style><script>var x = '<p>no</p>';</script></head>\
            <body><h1>Head  line</h1><p>First\n   para &amp; more</p><div>Second</div>\
            <noscript>js off</noscript><ul><li>a</li><li>b</li></ul></body></html>";
        let (title, text) = html_to_text(html);
        assert_eq!(title.as_deref(), Some("My Page"));
        assert_eq!(text, "Head line\nFirst para & more\nSecond\na\nb");
    }

    #[test]
    fn truncated_html_still_converts() {
        let (title, text) = html_to_text("<p>kept</p><p>cut in the mid");
        assert_eq!(title, None);
        assert_eq!(text, "kept\ncut in the mid");
    }

    #[test]
    fn plain_text_collapses_blanks() {
        assert_eq!(plain_text("a  b\n\n\tc \r\n"), "a b\nc");
    }

    #[test]
    fn links_are_absolute_http_deduplicated_in_order() {
        let x = r#"<p>See <a href="https://example.org/a?x=1&amp;y=2">a</a>,
            <a href="/relative">r</a>, <a href="mailto:x@y.z">m</a>,
            <a href=" http://Example.com/b ">b</a>, <a href="javascript:alert(1)">j</a>,
            <a href="https://example.org/a?x=1&amp;y=2">again</a>, <a>none</a>,
            <a href="file:///etc/passwd">f</a><a href="ftp://example.com/">ftp</a></p>"#;
        assert_eq!(
            links_in_xhtml(x),
            vec!["https://example.org/a?x=1&y=2", "http://example.com/b"]
        );
    }
}

//! Link extraction from truth-entry XHTML. (A fetched page's text comes from
//! `wo_format::xhtml::html_to_text`, the one HTML → text conversion.)
//!
//! html5ever's tokenizer rather than a tree builder: we only need a linear pass over a few tags,
//! the tokenizer copes with any malformed input, and it decodes character references for us.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

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
    web_urls(hrefs.iter().map(|h| h.trim()))
}

/// The candidates that parse as absolute `http`/`https` URLs with a host,
/// normalised, each once, in order.
fn web_urls<'a>(candidates: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for candidate in candidates {
        let Ok(url) = url::Url::parse(candidate) else {
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

/// Absolute `http`/`https` URLs written in plain text (a question typed on
/// the command line), deduplicated, in order. A URL ends at whitespace or at
/// a character that cannot end one in prose (`)`, `]`, `>`, quotes, and
/// trailing sentence punctuation), the way terminals and chat apps find them.
pub fn links_in_text(text: &str) -> Vec<String> {
    let words = text.split(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '"' | '`'));
    web_urls(words.filter_map(|word| {
        let start = word.find("http://").or_else(|| word.find("https://"))?;
        Some(word[start..].trim_end_matches(|c: char| {
            matches!(
                c,
                '.' | ',' | ';' | ':' | '!' | '?' | ')' | ']' | '}' | '\''
            )
        }))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_in_text_end_where_prose_does() {
        let t = "Read https://example.org/a?x=1, then (see http://example.com/b). \
                 Not ftp://example.com/ nor https:// alone; again https://example.org/a?x=1";
        assert_eq!(
            links_in_text(t),
            vec!["https://example.org/a?x=1", "http://example.com/b"]
        );
        assert!(links_in_text("no links here").is_empty());
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

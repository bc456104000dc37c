//! XHTML content: sanitising, conversion from text and Markdown, canonical
//! form for hashing, and the well-formedness/allowlist check used by
//! validation.
//!
//! Sanitising is done by `ammonia` (html5ever's HTML5 parser, so malformed or
//! hostile markup is parsed the way a browser would), with the allowlist of
//! SPEC §1. Its HTML output is then re-serialised as XHTML by walking
//! html5ever's tokenizer, so void elements self-close and every fragment is
//! well-formed XML.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::LazyLock;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

/// Elements allowed in stored XHTML (SPEC §1).
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

static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut b = ammonia::Builder::empty();
    b.tags(ALLOWED_ELEMENTS.iter().copied().collect())
        .generic_attributes(ALLOWED_ATTRIBUTES.iter().copied().collect())
        .generic_attribute_prefixes(HashSet::from(["data-"]))
        .add_tag_attributes("a", ["href"])
        .url_schemes(ALLOWED_URL_SCHEMES.iter().copied().collect())
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(None)
        .clean_content_tags(HashSet::from([
            "script", "style", "iframe", "object", "embed", "template", "noscript", "svg", "math",
            "textarea", "select", "title",
        ]))
        .strip_comments(true);
    b
});

/// Sanitises untrusted HTML into a well-formed, allowlisted XHTML fragment.
pub fn sanitize_html(input: &str) -> String {
    let cleaned = SANITIZER.clean(input).to_string();
    reserialize(&cleaned, false)
}

/// Converts text in the given format to sanitised XHTML.
pub fn to_xhtml(input: &str, format: ContentFormat) -> String {
    match format {
        ContentFormat::Text => text_to_xhtml(input),
        ContentFormat::Markdown => markdown_to_xhtml(input),
        ContentFormat::Html => sanitize_html(input),
    }
}

/// Escapes plain text into `<p>…</p>` paragraphs (blank lines split
/// paragraphs, single newlines become `<br/>`).
pub fn text_to_xhtml(text: &str) -> String {
    let text = text.replace("\r\n", "\n");
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

/// Converts Markdown to HTML with pulldown-cmark, then sanitises it.
pub fn markdown_to_xhtml(markdown: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    let mut html_out = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut html_out, Parser::new_ext(markdown, opts));
    let mut xhtml = sanitize_html(&html_out);
    xhtml.truncate(xhtml.trim_end().len());
    xhtml
}

/// Canonical XHTML used for content-addressed ids: the fragment tokenised as
/// HTML and re-serialised with sorted attributes, one escaping style and
/// self-closed void elements, so equivalent spellings hash alike. Does not
/// sanitise: the hash covers what the file holds.
pub fn canonical_xhtml(fragment: &str) -> String {
    reserialize(fragment, true)
}

/// Extracts the visible text of a fragment (for titles, search and prompts).
pub fn to_plain_text(fragment: &str) -> String {
    let sink = TextSink {
        out: RefCell::new(String::with_capacity(fragment.len())),
    };
    run_tokenizer(sink, fragment)
        .out
        .into_inner()
        .trim()
        .to_owned()
}

/// A problem found by [`check_fragment`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XhtmlProblem {
    /// `xhtml-well-formed` or `xhtml-allowlist`.
    pub rule: &'static str,
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
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if !root_opened {
                    root_opened = true;
                    depth += 1;
                    continue;
                }
                if !ALLOWED_ELEMENTS.contains(&name.as_str()) {
                    return Err(disallowed(format!("element <{name}> is not allowed")));
                }
                for attr in e.attributes() {
                    let attr = attr.map_err(|e| malformed(format!("{e}")))?;
                    let key = String::from_utf8_lossy(attr.key.as_ref()).into_owned();
                    let value = attr
                        .unescape_value()
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
            Event::Text(t) => {
                t.decode().map_err(|e| malformed(format!("text: {e}")))?;
            }
            Event::GeneralRef(r) => {
                let name = String::from_utf8_lossy(&r).into_owned();
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

/// Re-serialises HTML tokens as XHTML. The input is either ammonia's output
/// (balanced, allowlisted) or stored content being canonicalised.
fn reserialize(html: &str, sort_attributes: bool) -> String {
    let sink = XhtmlSink {
        out: RefCell::new(String::with_capacity(html.len() + 8)),
        sort_attributes,
        sanitizing: !sort_attributes,
        after_pre: std::cell::Cell::new(false),
    };
    run_tokenizer(sink, html).out.into_inner()
}

fn run_tokenizer<S: TokenSink<Handle = ()>>(sink: S, input: &str) -> S {
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(input));
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let _ = tokenizer.feed(&queue);
    tokenizer.end();
    tokenizer.sink
}

struct XhtmlSink {
    out: RefCell<String>,
    sort_attributes: bool,
    /// Writing sanitiser output (not the canonical form for hashing): drop
    /// attribute names that are not XML, and keep `<pre>` polyglot.
    sanitizing: bool,
    /// The last token was a `<pre>` start tag.
    after_pre: std::cell::Cell<bool>,
}

impl TokenSink for XhtmlSink {
    type Handle = ();
    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut out = self.out.borrow_mut();
        let after_pre = self.after_pre.replace(false);
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
                            .filter(|(k, _)| !self.sanitizing || is_xml_attribute_name(k))
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
                            self.after_pre.set(name == "pre");
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
            Token::CharacterTokens(text) => {
                // An HTML parser drops one newline right after `<pre>`; when
                // the text starts with one, write one more so that reading
                // the output as HTML (as the sanitiser does) keeps the text.
                if after_pre && self.sanitizing && text.starts_with('\n') {
                    out.push('\n');
                }
                escape_text_into(&text, &mut out)
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// Attribute names that are well-formed XML as written (HTML's tokenizer
/// accepts names such as `data-a"b`); others are dropped on re-serialising.
fn is_xml_attribute_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

struct TextSink {
    out: RefCell<String>,
}

impl TokenSink for TextSink {
    type Handle = ();
    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut out = self.out.borrow_mut();
        match token {
            Token::CharacterTokens(text) => out.push_str(&text),
            Token::TagToken(tag) => {
                let block = matches!(
                    &*tag.name,
                    "p" | "div"
                        | "br"
                        | "li"
                        | "pre"
                        | "blockquote"
                        | "tr"
                        | "h1"
                        | "h2"
                        | "h3"
                        | "h4"
                        | "h5"
                        | "h6"
                        | "hr"
                );
                if block && !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                } else if matches!(&*tag.name, "td" | "th")
                    && tag.kind == TagKind::StartTag
                    && !out.ends_with(['\n', ' '])
                    && !out.is_empty()
                {
                    out.push(' ');
                }
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

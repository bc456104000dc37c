//! A byte scanner that reads the common shapes of HTML exactly as html5ever's tokenizer
//! reads them, for [`super::walk_text`].
//!
//! html5ever builds a tag with interned names and an attribute list for every tag and runs
//! a state machine per character; on documentation pages (markup-heavy: rustdoc, man pages
//! rendered to HTML) that was most of the cost of indexing them. Reading text needs much
//! less: where each tag starts and ends, its lower-cased name, whether it closes itself, and
//! the text between, character references decoded. This scanner finds those with `memchr`
//! and a small state machine over attribute bytes, following the WHATWG tokenizer's states
//! (those html5ever implements) for everything it accepts: tag names, attribute names and
//! quoted/unquoted values (only their extent matters), comments that end plainly, doctypes
//! and bogus comments (both end at the first `>`), stray `<` and `&`, named and numeric
//! character references, CR and CRLF line ends, and the raw-text, RCDATA and plaintext
//! modes the walker asks for.
//!
//! Whatever it does not read for certain — a NUL byte, a comment that ends oddly (`<!-->`,
//! `--!>`, a nested `<!--`), `<!` inside a script, a named reference that runs into the end
//! of the input, any construct cut by the end of the input — makes it give up ([`None`]),
//! and the caller reads the whole document with html5ever instead. Events are collected,
//! not sent, until the scan has succeeded, so a document is never half read by one reader
//! and half by the other.
//!
//! The events it gives may cut text differently from html5ever's (html5ever sends a line
//! feed or a decoded reference as a token of its own), but the text between two structural
//! events, and the line every character is on, are the same; the tests hold the two readers
//! to that on generated input and on real pages.

use html5ever::data::{C1_REPLACEMENTS, NAMED_ENTITIES};
use memchr::{memchr, memchr2, memchr3, memmem};

use super::{ReadAs, TextEvent, WalkCore};

/// Text of an event: a span of the input, a fixed string or a decoded reference.
#[derive(Clone, Copy)]
enum Piece {
    Span(usize, usize),
    Lit(&'static str),
    /// Up to two characters, UTF-8 encoded.
    Chars([u8; 8], u8),
}

/// An event read by the scanner, replayed once the whole input has been read.
#[derive(Clone, Copy)]
enum Event {
    Text {
        piece: Piece,
        title: bool,
        line: usize,
    },
    Other(OtherEvent, usize),
}

/// The events without text.
#[derive(Clone, Copy)]
enum OtherEvent {
    Break,
    Cell,
    HeadingStart(usize),
    HeadingEnd(usize),
}

/// Reads `html` with the walker's state `core`, calling `visit` with every event; `None`
/// (having called nothing) when the input holds something this scanner does not read.
pub(super) fn walk(
    html: &str,
    core: &mut WalkCore,
    visit: &mut impl FnMut(TextEvent<'_>, usize),
) -> Option<()> {
    let mut scanner = Scanner {
        html,
        b: html.as_bytes(),
        pos: 0,
        line: 1,
        counted: 0,
        events: Vec::with_capacity(html.len() / 32),
    };
    if memchr(0, scanner.b).is_some() {
        return None;
    }
    scanner.run(core)?;
    for event in &scanner.events {
        match *event {
            Event::Text { piece, title, line } => {
                let buf;
                let text = match piece {
                    Piece::Span(a, b) => &html[a..b],
                    Piece::Lit(s) => s,
                    Piece::Chars(bytes, len) => {
                        buf = bytes;
                        // Encoded from chars just above: always UTF-8.
                        std::str::from_utf8(&buf[..usize::from(len)]).unwrap_or("")
                    }
                };
                visit(
                    if title {
                        TextEvent::Title(text)
                    } else {
                        TextEvent::Text(text)
                    },
                    line,
                );
            }
            Event::Other(other, line) => visit(
                match other {
                    OtherEvent::Break => TextEvent::Break,
                    OtherEvent::Cell => TextEvent::Cell,
                    OtherEvent::HeadingStart(l) => TextEvent::HeadingStart(l),
                    OtherEvent::HeadingEnd(l) => TextEvent::HeadingEnd(l),
                },
                line,
            ),
        }
    }
    Some(())
}

fn is_space(c: u8) -> bool {
    // The tokenizer turns CR into LF before its states see it.
    matches!(c, b'\t' | b'\n' | b'\x0C' | b' ' | b'\r')
}

/// Where a tag's name ends: white space, `/` or `>`.
fn is_name_end(c: u8) -> bool {
    is_space(c) || c == b'/' || c == b'>'
}

/// The attribute states of the tokenizer (only where they end matters).
#[derive(Clone, Copy)]
enum Attr {
    BeforeName,
    Name,
    AfterName,
    BeforeValue,
    Double,
    Single,
    Unquoted,
    AfterQuoted,
    SelfClosing,
}

struct Scanner<'h> {
    html: &'h str,
    b: &'h [u8],
    pos: usize,
    /// Line of byte `counted` (1-based): CR, CRLF and LF each end one line.
    line: usize,
    counted: usize,
    events: Vec<Event>,
}

impl Scanner<'_> {
    /// The line the tokenizer is on once it has read the bytes before `at` (`at` never goes
    /// back).
    fn line_at(&mut self, at: usize) -> usize {
        let from = self.counted;
        if at > from {
            let span = &self.b[from..at];
            let mut n = 0;
            for i in memchr::memchr2_iter(b'\n', b'\r', span) {
                let abs = from + i;
                if self.b[abs] == b'\r' || abs == 0 || self.b[abs - 1] != b'\r' {
                    n += 1;
                }
            }
            self.line += n;
            self.counted = at;
        }
        self.line
    }

    fn push_text(&mut self, core: &WalkCore, piece: Piece, end: usize) {
        if let Some(title) = core.text_kind() {
            let line = self.line_at(end);
            self.events.push(Event::Text { piece, title, line });
        }
    }

    /// Sends the text from `pos` up to the byte the scan stopped at (`found`,
    /// an offset from `pos`) and returns that byte's place; without one, the
    /// rest of the input is text, `pos` moves to the end and `None` is returned.
    fn text_to(&mut self, core: &WalkCore, found: Option<usize>) -> Option<usize> {
        let Some(i) = found else {
            let end = self.b.len();
            if self.pos < end {
                self.push_text(core, Piece::Span(self.pos, end), end);
            }
            self.pos = end;
            return None;
        };
        let at = self.pos + i;
        if i > 0 {
            self.push_text(core, Piece::Span(self.pos, at), at);
        }
        Some(at)
    }

    fn push_other(&mut self, other: OtherEvent, line: usize) {
        self.events.push(Event::Other(other, line));
    }

    fn run(&mut self, core: &mut WalkCore) -> Option<()> {
        let mut mode = ReadAs::Data;
        while self.pos < self.b.len() {
            mode = match mode {
                ReadAs::Data => self.data(core)?,
                ReadAs::Plaintext => {
                    self.text_until_end(core);
                    ReadAs::Plaintext
                }
                raw => self.raw(core, raw)?,
            };
        }
        Some(())
    }

    /// Text up to the end of the input, line ends normalised (plaintext).
    fn text_until_end(&mut self, core: &WalkCore) {
        while self.pos < self.b.len() {
            if let Some(at) = self.text_to(core, memchr(b'\r', &self.b[self.pos..])) {
                self.carriage_return(core, at);
            }
        }
    }

    /// A CR at `at` (and the LF after it): one line feed of text.
    fn carriage_return(&mut self, core: &WalkCore, at: usize) {
        self.push_text(core, Piece::Lit("\n"), at + 1);
        self.pos = if self.b.get(at + 1) == Some(&b'\n') {
            at + 2
        } else {
            at + 1
        };
    }

    /// Reads from `pos` in the data state up to and including the next tag (or the end);
    /// returns how to read what follows.
    fn data(&mut self, core: &mut WalkCore) -> Option<ReadAs> {
        loop {
            let found = memchr3(b'<', b'&', b'\r', &self.b[self.pos..]);
            let Some(at) = self.text_to(core, found) else {
                return Some(ReadAs::Data);
            };
            match self.b[at] {
                b'\r' => self.carriage_return(core, at),
                b'&' => self.char_ref(core, at)?,
                _ => {
                    if let Some(next) = self.tag_open(core, at)? {
                        return Some(next);
                    }
                }
            }
        }
    }

    /// A character reference at `at` (`&`), in data or RCDATA: its characters, or `&` as
    /// text when it is none.
    fn char_ref(&mut self, core: &WalkCore, at: usize) -> Option<()> {
        let b = self.b;
        let first = *b.get(at + 1)?;
        if first.is_ascii_alphanumeric() {
            // The longest name of the table that the input continues, as the tokenizer
            // finds it: one character at a time while the text so far begins a name.
            let mut best: Option<((u32, u32), usize)> = None;
            let mut i = at + 1;
            loop {
                let c = *b.get(i)?;
                if !c.is_ascii() {
                    break;
                }
                match NAMED_ENTITIES.get(&self.html[at + 1..=i]) {
                    Some(&m) => {
                        if m.0 != 0 {
                            best = Some((m, i + 1));
                        }
                        i += 1;
                    }
                    None => break,
                }
            }
            match best {
                Some(((c1, c2), end)) => {
                    let mut chars = [0u8; 8];
                    let mut len = 0;
                    for c in [c1, c2] {
                        if c == 0 {
                            continue;
                        }
                        let ch = char::from_u32(c)?;
                        len += ch.encode_utf8(&mut chars[len..]).len();
                    }
                    self.push_text(core, Piece::Chars(chars, len as u8), end);
                    self.pos = end;
                }
                None => self.literal_ampersand(core, at),
            }
            return Some(());
        }
        if first != b'#' {
            self.literal_ampersand(core, at);
            return Some(());
        }
        let mut i = at + 2;
        let hex = matches!(b.get(i), Some(b'x' | b'X'));
        if hex {
            i += 1;
        }
        let digits_start = i;
        let mut value: u64 = 0;
        while let Some(&c) = b.get(i) {
            let d = match c {
                b'0'..=b'9' => u64::from(c - b'0'),
                b'a'..=b'f' if hex => u64::from(c - b'a' + 10),
                b'A'..=b'F' if hex => u64::from(c - b'A' + 10),
                _ => break,
            };
            value = (value * if hex { 16 } else { 10 } + d).min(0x11_0000);
            i += 1;
        }
        if i == b.len() {
            return None;
        }
        if i == digits_start {
            // No digits: `&` is text and `#`, `#x` are read again as text.
            self.literal_ampersand(core, at);
            return Some(());
        }
        let end = if b[i] == b';' { i + 1 } else { i };
        let ch = match value {
            0 | 0xD800..=0xDFFF | 0x11_0000.. => '\u{fffd}',
            0x80..=0x9F => {
                C1_REPLACEMENTS[(value - 0x80) as usize].or_else(|| char::from_u32(value as u32))?
            }
            n => char::from_u32(n as u32)?,
        };
        let mut chars = [0u8; 8];
        let len = ch.encode_utf8(&mut chars).len();
        self.push_text(core, Piece::Chars(chars, len as u8), end);
        self.pos = end;
        Some(())
    }

    fn literal_ampersand(&mut self, core: &WalkCore, at: usize) {
        self.push_text(core, Piece::Lit("&"), at + 1);
        self.pos = at + 1;
    }

    /// A `<` at `at` in the data state. `Some(Some(mode))` after a tag (how to read on),
    /// `Some(None)` when what followed was text, a comment or a doctype.
    fn tag_open(&mut self, core: &mut WalkCore, at: usize) -> Option<Option<ReadAs>> {
        let b = self.b;
        let next = *b.get(at + 1)?;
        match next {
            c if c.is_ascii_alphabetic() => {
                let (name_end, gt, self_closing) = self.tag_extent(at + 1)?;
                self.pos = gt + 1;
                let mut lower = [0u8; 16];
                let name = lower_name(&self.html[at + 1..name_end], &mut lower);
                Some(Some(self.emit_tag(core, name, true, self_closing, gt)))
            }
            b'/' => {
                let c = *b.get(at + 2)?;
                if c.is_ascii_alphabetic() {
                    let (name_end, gt, self_closing) = self.tag_extent(at + 2)?;
                    self.pos = gt + 1;
                    let mut lower = [0u8; 16];
                    let name = lower_name(&self.html[at + 2..name_end], &mut lower);
                    Some(Some(self.emit_tag(core, name, false, self_closing, gt)))
                } else if c == b'>' {
                    self.pos = at + 3;
                    Some(None)
                } else {
                    self.pos = at + 2 + memchr(b'>', &b[at + 2..])? + 1;
                    Some(None)
                }
            }
            b'!' => {
                if b[at + 2..].starts_with(b"--") {
                    let body = at + 4;
                    let rest = &b[body..];
                    if rest.first() == Some(&b'>') || rest.starts_with(b"->") {
                        return None;
                    }
                    let dashes = body + memmem::find(rest, b"--")?;
                    let mut k = dashes + 2;
                    while b.get(k) == Some(&b'-') {
                        k += 1;
                    }
                    if b.get(k) != Some(&b'>') {
                        return None;
                    }
                    self.pos = k + 1;
                } else {
                    // A doctype, CDATA outside foreign content or any other `<!`: each ends
                    // at the first `>`.
                    self.pos = at + 2 + memchr(b'>', &b[at + 2..])? + 1;
                }
                Some(None)
            }
            b'?' => {
                self.pos = at + 1 + memchr(b'>', &b[at + 1..])? + 1;
                Some(None)
            }
            _ => {
                // The tokenizer sends `<` once it has read the character after it (which it
                // then reads again): on that character's line.
                self.push_text(core, Piece::Lit("<"), at + 2);
                self.pos = at + 1;
                Some(None)
            }
        }
    }

    /// Sends a tag to the walker; its events go to the list.
    fn emit_tag(
        &mut self,
        core: &mut WalkCore,
        name: &str,
        start: bool,
        self_closing: bool,
        gt: usize,
    ) -> ReadAs {
        let line = self.line_at(gt + 1);
        let mut others: [Option<OtherEvent>; 1] = [None];
        let mode = core.tag(name, start, self_closing, &mut |event| {
            others[0] = Some(match event {
                TextEvent::Cell => OtherEvent::Cell,
                TextEvent::HeadingStart(l) => OtherEvent::HeadingStart(l),
                TextEvent::HeadingEnd(l) => OtherEvent::HeadingEnd(l),
                _ => OtherEvent::Break,
            });
        });
        if let Some(other) = others[0] {
            self.push_other(other, line);
        }
        mode
    }

    /// The extent of a tag whose name starts at `name_start`: where the name ends, the
    /// position of the closing `>`, and whether it closes itself (`/>`). `None` at the end
    /// of the input inside the tag.
    fn tag_extent(&self, name_start: usize) -> Option<(usize, usize, bool)> {
        let b = self.b;
        let mut i = name_start;
        while !is_name_end(*b.get(i)?) {
            i += 1;
        }
        let name_end = i;
        let state = match b[i] {
            b'>' => return Some((name_end, i, false)),
            b'/' => Attr::SelfClosing,
            _ => Attr::BeforeName,
        };
        let (gt, self_closing) = self.attributes(i + 1, state)?;
        Some((name_end, gt, self_closing))
    }

    /// Runs the attribute states from `i` in `state` to the tag's `>`.
    fn attributes(&self, mut i: usize, mut state: Attr) -> Option<(usize, bool)> {
        let b = self.b;
        loop {
            match state {
                Attr::Double => {
                    i += memchr(b'"', &b[i..])? + 1;
                    state = Attr::AfterQuoted;
                    continue;
                }
                Attr::Single => {
                    i += memchr(b'\'', &b[i..])? + 1;
                    state = Attr::AfterQuoted;
                    continue;
                }
                _ => {}
            }
            let c = *b.get(i)?;
            state = match state {
                Attr::BeforeName => match c {
                    c if is_space(c) => Attr::BeforeName,
                    b'/' => Attr::SelfClosing,
                    b'>' => return Some((i, false)),
                    _ => Attr::Name,
                },
                Attr::Name => match c {
                    c if is_space(c) => Attr::AfterName,
                    b'/' => Attr::SelfClosing,
                    b'>' => return Some((i, false)),
                    b'=' => Attr::BeforeValue,
                    _ => Attr::Name,
                },
                Attr::AfterName => match c {
                    c if is_space(c) => Attr::AfterName,
                    b'/' => Attr::SelfClosing,
                    b'=' => Attr::BeforeValue,
                    b'>' => return Some((i, false)),
                    _ => Attr::Name,
                },
                Attr::BeforeValue => match c {
                    // The tokenizer skips these without counting the line they end.
                    b'\n' | b'\r' => return None,
                    c if is_space(c) => Attr::BeforeValue,
                    b'"' => Attr::Double,
                    b'\'' => Attr::Single,
                    b'>' => return Some((i, false)),
                    _ => Attr::Unquoted,
                },
                Attr::Unquoted => match c {
                    c if is_space(c) => Attr::BeforeName,
                    b'>' => return Some((i, false)),
                    _ => Attr::Unquoted,
                },
                Attr::AfterQuoted => match c {
                    c if is_space(c) => Attr::BeforeName,
                    b'/' => Attr::SelfClosing,
                    b'>' => return Some((i, false)),
                    // Read again as the start of an attribute name.
                    _ => {
                        state = Attr::BeforeName;
                        continue;
                    }
                },
                Attr::SelfClosing => match c {
                    b'>' => return Some((i, true)),
                    _ => {
                        state = Attr::BeforeName;
                        continue;
                    }
                },
                Attr::Double | Attr::Single => unreachable!("handled above"),
            };
            i += 1;
        }
    }

    /// Raw text, RCDATA or script data after the start tag `name`, up to its end tag (which
    /// is sent) or the end of the input.
    fn raw(&mut self, core: &mut WalkCore, mode: ReadAs) -> Option<ReadAs> {
        let name = core.raw_end_name()?;
        let rcdata = mode == ReadAs::Rcdata;
        loop {
            let rest = &self.b[self.pos..];
            let found = if rcdata {
                memchr3(b'<', b'&', b'\r', rest)
            } else {
                memchr2(b'<', b'\r', rest)
            };
            let Some(at) = self.text_to(core, found) else {
                return Some(mode);
            };
            match self.b[at] {
                b'\r' => self.carriage_return(core, at),
                b'&' => self.char_ref(core, at)?,
                _ => {
                    let b = self.b;
                    let next = *b.get(at + 1)?;
                    if next == b'!' && mode == ReadAs::ScriptData {
                        // Script data's escape states: not read here.
                        return None;
                    }
                    let name_start = at + 2;
                    let name_end = name_start + name.len();
                    if next == b'/'
                        && b.len() > name_end
                        && b[name_start..name_end].eq_ignore_ascii_case(name.as_bytes())
                        && is_name_end(b[name_end])
                    {
                        let (gt, self_closing) = match b[name_end] {
                            b'>' => (name_end, false),
                            b'/' => self.attributes(name_end + 1, Attr::SelfClosing)?,
                            _ => self.attributes(name_end + 1, Attr::BeforeName)?,
                        };
                        self.pos = gt + 1;
                        return Some(self.emit_tag(core, name, false, self_closing, gt));
                    }
                    if next != b'/' {
                        // Sent once the character after it is read: on its line.
                        self.push_text(core, Piece::Lit("<"), at + 2);
                        self.pos = at + 1;
                        continue;
                    }
                    // `</` and the letters after it are text, sent once the first character
                    // after them is read (on its line), which is then read again.
                    let mut k = name_start;
                    while b.get(k).is_some_and(u8::is_ascii_alphabetic) {
                        k += 1;
                    }
                    if k >= b.len() {
                        // Cut by the end of the input.
                        return None;
                    }
                    self.push_text(core, Piece::Span(at, k), k + 1);
                    self.pos = k;
                }
            }
        }
    }
}

/// `name` with ASCII letters lower-cased, in `buf` when it fits; a longer name is no name
/// the walker knows, so it becomes one that matches none (`"\u{0}"`: a tag name never holds
/// NUL, which the scanner refuses).
fn lower_name<'b>(name: &str, buf: &'b mut [u8; 16]) -> &'b str {
    if name.len() > buf.len() {
        return "\u{0}";
    }
    let out = &mut buf[..name.len()];
    out.copy_from_slice(name.as_bytes());
    out.make_ascii_lowercase();
    std::str::from_utf8(out).unwrap_or("\u{0}")
}

#[cfg(test)]
mod tests {
    use super::super::{TextEvent, WalkCore, cap_attributes, walk_text, walk_text_tokenizer};
    use proptest::prelude::*;

    /// An event in a form both readers must agree on: text merged while each piece starts
    /// on the line the previous one ended on.
    #[derive(Debug, PartialEq, Eq)]
    enum Norm {
        Text {
            title: bool,
            text: String,
            first_line: usize,
            last_line: usize,
        },
        Break(usize),
        Cell(usize),
        HeadingStart(usize, usize),
        HeadingEnd(usize, usize),
    }

    fn normalise(read: impl FnOnce(&mut dyn FnMut(TextEvent<'_>, usize))) -> Vec<Norm> {
        let mut out: Vec<Norm> = Vec::new();
        read(&mut |event, line| {
            let (title, text) = match event {
                TextEvent::Text(t) => (false, t),
                TextEvent::Title(t) => (true, t),
                TextEvent::Break => return out.push(Norm::Break(line)),
                TextEvent::Cell => return out.push(Norm::Cell(line)),
                TextEvent::HeadingStart(l) => return out.push(Norm::HeadingStart(l, line)),
                TextEvent::HeadingEnd(l) => return out.push(Norm::HeadingEnd(l, line)),
            };
            let first = line - text.matches('\n').count();
            if let Some(Norm::Text {
                title: t,
                text: prev,
                last_line,
                ..
            }) = out.last_mut()
                && *t == title
                && *last_line == first
            {
                prev.push_str(text);
                *last_line = line;
                return;
            }
            out.push(Norm::Text {
                title,
                text: text.to_string(),
                first_line: first,
                last_line: line,
            });
        });
        out
    }

    fn reference(html: &str) -> Vec<Norm> {
        normalise(|v| walk_text_tokenizer(html, v))
    }

    /// The scanner's reading, or `None` when it gives up.
    fn fast(html: &str) -> Option<Vec<Norm>> {
        let html = cap_attributes(html);
        let mut ok = None;
        let events = normalise(|v| {
            let mut visit = |e: TextEvent<'_>, l: usize| v(e, l);
            ok = super::walk(&html, &mut WalkCore::default(), &mut visit);
        });
        ok.map(|()| events)
    }

    fn assert_same(html: &str) {
        if let Some(got) = fast(html) {
            assert_eq!(got, reference(html), "input: {html:?}");
        }
        assert_eq!(
            normalise(|v| walk_text(html, v)),
            reference(html),
            "input: {html:?}"
        );
    }

    #[test]
    fn reads_common_pages_without_giving_up() {
        for html in [
            "<!DOCTYPE html><html><head><title>T &amp; t</title><script>var a = '<p>';</script>\
             </head><body><h1 id=\"x\">Head</h1>\n<p class='c'>a &lt;b&gt; &copy; &#x41;&#66;\
             </p><!-- note --><table><tr><td>1</td><th>2</th></tr></table></body></html>",
            "<p>crlf\r\nline\rcr</p>",
            "a < b <= c & d &amp e",
        ] {
            assert!(fast(html).is_some(), "gave up on {html:?}");
            assert_same(html);
        }
    }

    #[test]
    fn gives_up_on_what_it_does_not_read() {
        for html in [
            "<p>a\u{0}b</p>",
            "<!-->x",
            "<!-- a --!> b",
            "<!-- <!-- x -->",
            "<script>a <!-- b</script>",
            "<p>cut <a href=\"x",
            "a &amp",
            "<",
            "</scr",
        ] {
            assert!(fast(html).is_none(), "read {html:?}");
            assert_same(html);
        }
    }

    const PARTS: &[&str] = &[
        "<p>",
        "</p>",
        "<P CLASS='a>b'>",
        "<p/>",
        "<p a=\"1\"/>",
        "<p x = y>",
        "<p a='1'b>",
        "<p/x>",
        "<h1>",
        "</h1>",
        "<h2 id=x>",
        "</H2>",
        "<h7>",
        "<td>",
        "<th/>",
        "</td>",
        "<br/>",
        "<tr>",
        "<title>",
        "</title>",
        "<TITLE>",
        "</title x>",
        "<script>",
        "</script>",
        "</SCRIPT >",
        "</script/>",
        "</scriptx>",
        "<style>",
        "</style>",
        "<svg>",
        "</svg>",
        "<svg/>",
        "<math>",
        "</math>",
        "<textarea>",
        "</textarea>",
        "<select>",
        "<plaintext>",
        "<!-- c -->",
        "<!--",
        "-->",
        "--!>",
        "<!-->",
        "<!--->",
        "<!---->",
        "<!doctype html>",
        "<!DOCTYPE x 'a>'>",
        "<!x>",
        "<?pi?>",
        "</>",
        "</ x>",
        "</3>",
        "<",
        ">",
        "&",
        "&amp;",
        "&amp",
        "&AMP;",
        "&lt",
        "&notin;",
        "&noti;",
        "&not",
        "&#65;",
        "&#x41",
        "&#0;",
        "&#x80;",
        "&#x81;",
        "&#xD800;",
        "&#99999999;",
        "&#;",
        "&#x;",
        "&zz;",
        "&copyx",
        "\r",
        "\n",
        "\r\n",
        " ",
        "\t",
        "\x0C",
        "text",
        "word",
        "\u{e9}",
        "\u{65e5}\u{672c}",
        "=",
        "\"",
        "'",
        "/",
        "a",
        "<a href=\"x&amp;y\">",
        "</a>",
        "<a b=c d='e' f>",
        "<!",
        "<-",
        "<3",
        "<![CDATA[x]]>",
        "<iframe>",
        "</iframe>",
        "<xmp>",
        "</xmp>",
        "<noscript>",
        "</noscript>",
        "<font color=red>",
        "<b>",
        "</b>",
        "<li>",
        "<div\n class=x\r\n>",
        "<A\rHREF=y>",
        "<p\u{e9}>",
        "<abcdefghijklmnopqrstu>",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn the_scanner_reads_as_html5ever_does(parts in prop::collection::vec(0..PARTS.len(), 0..40)) {
            let html: String = parts.iter().map(|&i| PARTS[i]).collect();
            assert_same(&html);
        }

        #[test]
        fn any_text_reads_the_same(html in "[<>/!a-z&#;0-9 \\n\\r\"'=\u{e9}-]{0,80}") {
            assert_same(&html);
        }
    }

    /// Every `.html`/`.htm` file under `WO_HTML_CORPUS` (a folder) read by both readers:
    /// `cargo test -p wo-format --release --lib fast_walk -- --ignored --nocapture`.
    #[test]
    #[ignore = "needs WO_HTML_CORPUS, a folder of HTML files"]
    fn a_corpus_reads_the_same() {
        let Ok(root) = std::env::var("WO_HTML_CORPUS") else {
            return;
        };
        let (mut files, mut fast_read, mut differ) = (0, 0, Vec::new());
        let mut stack = vec![std::path::PathBuf::from(root)];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let is_html = path.extension().is_some_and(|e| {
                    e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm")
                });
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                if !is_html {
                    continue;
                }
                let html = String::from_utf8_lossy(&bytes);
                files += 1;
                let want = reference(&html);
                if let Some(got) = fast(&html) {
                    fast_read += 1;
                    if got != want {
                        differ.push(path.display().to_string());
                    }
                }
            }
        }
        println!(
            "{files} files, {fast_read} read by the scanner, {} differ",
            differ.len()
        );
        assert!(differ.is_empty(), "differ: {differ:?}");
    }
}

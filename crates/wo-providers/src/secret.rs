//! A string that must never be shown: API keys.
//!
//! `Debug` and `Display` print `***`, there is no `Serialize`, and the only
//! way to read the value is the explicitly named [`Secret::expose`], so a key
//! cannot reach a log line, an error message or `llm.json` by accident.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// An API key or bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a key.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The key itself, for building the one request header that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// Replace every occurrence of this key in `text` with `***` (server
    /// error bodies sometimes echo the key back).
    ///
    /// Echoes are found in the forms a server or proxy writes them: plain,
    /// URL-encoded (`%73k-…`, either hex case), JSON-escaped (`\u0073`,
    /// `\/`), split by whitespace or escaped newlines, and base64 (standard
    /// or URL-safe, at any alignment, as in `Basic dXNlcjpzay0…`). A key cut
    /// off at the very end of `text` (a body read up to a size cap) is
    /// scrubbed too once 8 or more of its characters are there.
    ///
    /// Callers must scrub *before* shortening a message: a key cut in half
    /// by truncation is no longer recognisable.
    pub fn scrub(&self, text: &str) -> String {
        // Very short "keys" would scrub ordinary words; real keys are long.
        if self.0.len() < MIN_SCRUB_LEN {
            return text.to_owned();
        }
        let sk = Skeleton::of(text);
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for target in self.encodings() {
            if target.len() < MIN_SCRUB_LEN {
                continue;
            }
            for (pos, m) in sk.text.match_indices(target.as_str()) {
                spans.push(sk.original(pos, pos + m.len()));
            }
        }
        // A key cut off at the end of the text: its longest prefix there.
        let key = self.0.as_str();
        let longest = (MIN_SCRUB_LEN..key.len())
            .rev()
            .find(|&n| key.is_char_boundary(n) && sk.text.ends_with(&key[..n]));
        if let Some(n) = longest {
            let end = sk.text.len();
            spans.push(sk.original(end - n, end));
        }
        // A key with `%` or `\\` in it is itself changed by the decoding
        // above; look for it verbatim as well.
        for (pos, m) in text.match_indices(key) {
            spans.push((pos, pos + m.len()));
        }
        if spans.is_empty() {
            return text.to_owned();
        }
        spans.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (start, end) in spans {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in merged {
            out.push_str(&text[at..start]);
            out.push_str("***");
            at = end;
        }
        out.push_str(&text[at..]);
        out
    }

    /// The key as it may appear in a body after decoding: itself and its
    /// base64 forms (the stable inner part at each of the three alignments,
    /// since the key may sit anywhere inside a longer encoded string).
    fn encodings(&self) -> Vec<String> {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        let key = self.0.as_bytes();
        let mut out = vec![self.0.clone()];
        for offset in 0..3usize {
            let mut buf = vec![0u8; offset];
            buf.extend_from_slice(key);
            // Characters carrying bits of the filler in front, and a last
            // character carrying bits of whatever follows, differ by context.
            let skip_front = [0, 2, 3][offset];
            let skip_back = usize::from((buf.len() * 8) % 6 != 0);
            for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                let enc = engine.encode(&buf);
                if enc.len() > skip_front + skip_back {
                    let inner = enc[skip_front..enc.len() - skip_back].to_owned();
                    if !out.contains(&inner) {
                        out.push(inner);
                    }
                }
            }
        }
        out
    }
}

/// Keys shorter than this are not scrubbed (see [`Secret::scrub`]).
const MIN_SCRUB_LEN: usize = 8;

/// `text` with whitespace dropped and URL/JSON escapes decoded, remembering
/// for each byte of the result where it came from, so a match found here
/// can be cut out of the original.
struct Skeleton {
    text: String,
    /// For each byte of `text`: the original byte range of its character.
    from: Vec<(usize, usize)>,
}

impl Skeleton {
    fn of(src: &str) -> Self {
        let b = src.as_bytes();
        let mut text = String::with_capacity(src.len());
        let mut from = Vec::with_capacity(src.len());
        let mut push = |c: char, start: usize, end: usize, text: &mut String| {
            text.push(c);
            for _ in 0..c.len_utf8() {
                from.push((start, end));
            }
        };
        let mut i = 0;
        while i < b.len() {
            let c = src[i..].chars().next().unwrap_or('\u{fffd}');
            let n = c.len_utf8();
            if c.is_whitespace() {
                i += n;
                continue;
            }
            if c == '%'
                && let Some(v) = hex(b.get(i + 1..i + 3))
            {
                push(char::from(v as u8), i, i + 3, &mut text);
                i += 3;
                continue;
            }
            if c == '\\' {
                match b.get(i + 1) {
                    Some(b'n' | b'r' | b't') => {
                        i += 2;
                        continue;
                    }
                    Some(&e @ (b'/' | b'\\' | b'"')) => {
                        push(char::from(e), i, i + 2, &mut text);
                        i += 2;
                        continue;
                    }
                    Some(b'u') => {
                        if let Some(ch) = hex(b.get(i + 2..i + 6)).and_then(char::from_u32) {
                            push(ch, i, i + 6, &mut text);
                            i += 6;
                            continue;
                        }
                    }
                    _ => {}
                }
            }
            push(c, i, i + n, &mut text);
            i += n;
        }
        Self { text, from }
    }

    /// The original byte range behind `text[start..end]` (`end > start`).
    fn original(&self, start: usize, end: usize) -> (usize, usize) {
        (self.from[start].0, self.from[end - 1].1)
    }
}

fn hex(digits: Option<&[u8]>) -> Option<u32> {
    let d = digits?;
    let s = std::str::from_utf8(d).ok()?;
    if s.bytes().all(|c| c.is_ascii_hexdigit()) {
        u32::from_str_radix(s, 16).ok()
    } else {
        None
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret)
    }
}

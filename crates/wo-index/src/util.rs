//! Small shared helpers: hashing, stable ids and refs, slugs, line bookkeeping.
//!
//! The id and ref rules here are the seed's "Stable Chunk IDs" and "Chunk references" rules;
//! they are what makes exports and citations stable across runs and machines.

use sha2::{Digest, Sha256};

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.push(HEX[(byte >> 4) as usize] as char);
        out.push(HEX[(byte & 0xf) as usize] as char);
    }
    out
}

/// Chunk id: sha256(path + "\n" + content_hash + "\n" + occurrence_index).
pub fn chunk_id(path: &str, content_hash: &str, occurrence: usize) -> String {
    sha256_hex(format!("{path}\n{content_hash}\n{occurrence}").as_bytes())
}

/// Ref for the `n`-th chunk (1-based) in ref order: `c` + base36, zero-padded to four digits.
pub fn chunk_ref(n: usize) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut digits = Vec::new();
    let mut value = n;
    while value > 0 {
        digits.push(DIGITS[value % 36]);
        value /= 36;
    }
    while digits.len() < 4 {
        digits.push(b'0');
    }
    digits.reverse();
    let mut out = String::with_capacity(digits.len() + 1);
    out.push('c');
    out.extend(digits.iter().map(|&d| d as char));
    out
}

/// Lower-case ASCII slug: alphanumerics kept, every other run becomes one `-`.
pub fn slugify(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    let mut dash = false;
    for ch in input.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
            dash = false;
        } else if !dash && !out.is_empty() {
            out.push('-');
            dash = true;
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// Truncates to at most `max` characters (not bytes), trimming trailing spaces.
pub fn truncate_chars(input: &str, max: usize) -> String {
    match input.char_indices().nth(max) {
        None => input.to_string(),
        Some((cut, _)) => input[..cut].trim_end().to_string(),
    }
}

/// One-line form of a label: control characters become spaces, whitespace runs collapse.
pub fn single_line(input: &str) -> String {
    // Byte by byte over ASCII (a separator there is a control character or a space), a
    // character at a time elsewhere: the same words as splitting on
    // `char::is_whitespace || char::is_control`, without a call per character (this ran
    // on every line of every HTML page indexed).
    let b = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut word: Option<usize> = None;
    let mut i = 0;
    let push = |out: &mut String, word: &str| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    };
    while i < b.len() {
        let (separator, len) = if b[i] < 0x80 {
            (b[i] <= b' ' || b[i] == 0x7F, 1)
        } else {
            let c = input[i..].chars().next().unwrap_or(' ');
            (c.is_whitespace() || c.is_control(), c.len_utf8())
        };
        if separator {
            if let Some(start) = word.take() {
                push(&mut out, &input[start..i]);
            }
        } else if word.is_none() {
            word = Some(i);
        }
        i += len;
    }
    if let Some(start) = word {
        push(&mut out, &input[start..]);
    }
    out
}

/// Byte offsets of line starts, for mapping byte offsets to 1-based line numbers.
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    /// Builds the index of `text`.
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(memchr_newlines(text.as_bytes()).map(|i| i + 1));
        Self { starts }
    }

    /// 1-based line containing byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

fn memchr_newlines(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .iter()
        .enumerate()
        .filter_map(|(i, &b)| (b == b'\n').then_some(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_base36_padded() {
        assert_eq!(chunk_ref(1), "c0001");
        assert_eq!(chunk_ref(35), "c000z");
        assert_eq!(chunk_ref(36), "c0010");
        assert_eq!(chunk_ref(36usize.pow(4)), "c10000");
    }

    #[test]
    fn id_matches_the_seed_formula() {
        let h = sha256_hex(b"hello");
        assert_eq!(
            h,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(
            chunk_id("a.md", &h, 0),
            sha256_hex(format!("a.md\n{h}\n0").as_bytes())
        );
        assert_ne!(chunk_id("a.md", &h, 0), chunk_id("a.md", &h, 1));
    }

    #[test]
    fn line_index_maps_offsets() {
        let idx = LineIndex::new("a\nbb\n\nccc\n");
        assert_eq!(idx.line_of(0), 1);
        assert_eq!(idx.line_of(2), 2);
        assert_eq!(idx.line_of(5), 3);
        assert_eq!(idx.line_of(6), 4);
    }

    #[test]
    fn slug_and_truncate() {
        assert_eq!(slugify("  Hello, World! v2 "), "hello-world-v2");
        assert_eq!(truncate_chars("héllo wörld", 6), "héllo");
        assert_eq!(single_line("a\tb\n\nc"), "a b c");
    }
}

#[cfg(test)]
mod single_line_tests {
    use super::single_line;
    use proptest::prelude::*;

    /// The definition: words between whitespace and control characters, joined by a space.
    fn by_split(input: &str) -> String {
        input
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn separators_of_every_kind() {
        for s in [
            "",
            " a  b\t\nc\r\u{b}d\u{c}e\u{7f}f\u{0}g ",
            "\u{85}x\u{a0}y\u{2028}z\u{3000}w\u{9f}v\u{200b}u",
            "caf\u{e9} \u{65e5}\u{672c}\u{1f600}",
        ] {
            assert_eq!(single_line(s), by_split(s), "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn the_same_words_as_splitting(s in "[ a-z\t\n\r\u{0}-\u{20}\u{7f}-\u{a0}\u{1680}\u{2000}-\u{200b}\u{2028}\u{3000}\u{e9}\u{1f600}]{0,40}") {
            prop_assert_eq!(single_line(&s), by_split(&s));
        }
    }
}

//! The one tokenizer for retrieval: what the words of a text are, and which
//! search terms each word stands for. Chat retrieval and the directory index
//! both use it, on documents and on queries alike, so that a query term
//! meets the same term in every document and BM25's length normalisation
//! compares like with like.
//!
//! A *word* is a maximal run of letters, digits and `_` (any script). A
//! word stands for:
//! * its identifier parts, split on `_`, lower→upper case changes
//!   (`retrievalPrefs` → retrieval, prefs), an upper-case run before a
//!   capitalised word (`HTTPServer` → http, server) and letter/digit
//!   boundaries (`utf8` → utf, 8), where a part differs from the whole word;
//! * then the whole word, lowercased.
//!
//! Each of these becomes a *term* ([`term_of`]): dropped when it is an
//! English stopword (the Snowball list), shorter than [`MIN_TERM_CHARS`] or
//! only underscores; otherwise reduced to its Snowball English (Porter 2)
//! stem when it is plain ASCII letters, so "painted" finds "painting".
//! Identifiers with digits or underscores and other scripts are kept as
//! they are. Words longer than [`MAX_WORD_CHARS`] (hashes, base64,
//! minified code) stand for nothing.
//!
//! The length of a document, for BM25, is its number of words
//! ([`for_each_word`]), stopwords included: cheap to count while scanning,
//! and the same for every caller.

use std::borrow::Cow;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Longest word (in characters) that yields terms; longer runs are noise.
pub const MAX_WORD_CHARS: usize = 48;

/// Shortest term (in characters) kept: single letters and digits match too
/// much to rank anything (and would bloat an index's postings).
pub const MIN_TERM_CHARS: usize = 2;

/// English stopwords: the Snowball project's list (the one NLTK and Lucene's
/// English analyser also derive from), plus the contraction pieces left when
/// words are split on apostrophes (`don't` → `don`, `t`). Sorted, so lookups
/// binary-search.
pub const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "couldn",
    "d",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "me",
    "more",
    "most",
    "mustn",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "o",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "shan",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "wasn",
    "we",
    "were",
    "weren",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "won",
    "would",
    "wouldn",
    "y",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Longest stopword, in bytes: a longer word is never one.
const STOPWORD_MAX_BYTES: usize = max_len(STOPWORDS);

/// Per first letter (`a`..=`z`), the range of [`STOPWORDS`] that starts with it.
const STOPWORDS_BY_FIRST: [(u16, u16); 26] = ranges_by_first_letter(STOPWORDS);

const fn max_len(words: &[&str]) -> usize {
    let (mut i, mut max) = (0, 0);
    while i < words.len() {
        if words[i].len() > max {
            max = words[i].len();
        }
        i += 1;
    }
    max
}

/// The list is sorted and every stopword starts with `a`..=`z` (checked at compile time),
/// so the words sharing a first letter are one contiguous run.
const fn ranges_by_first_letter(words: &[&str]) -> [(u16, u16); 26] {
    let mut ranges = [(0u16, 0u16); 26];
    let mut i = 0;
    while i < words.len() {
        let first = words[i].as_bytes()[0];
        assert!(first.is_ascii_lowercase(), "stopwords start with a-z");
        let slot = (first - b'a') as usize;
        if ranges[slot].1 == 0 {
            ranges[slot].0 = i as u16;
        }
        ranges[slot].1 = i as u16 + 1;
        i += 1;
    }
    ranges
}

/// True when `lower` (already lowercase) is a stopword.
///
/// Runs on every term of every distinct word an index meets, so it looks only at the
/// stopwords sharing the word's first letter (a handful) and rejects long words and words
/// not starting with a letter without a comparison.
pub fn is_stopword(lower: &str) -> bool {
    let Some(&first) = lower.as_bytes().first() else {
        return false;
    };
    if lower.len() > STOPWORD_MAX_BYTES || !first.is_ascii_lowercase() {
        return false;
    }
    let (start, end) = STOPWORDS_BY_FIRST[(first - b'a') as usize];
    STOPWORDS[start as usize..end as usize]
        .binary_search(&lower)
        .is_ok()
}

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// The term a lowercase word or identifier part stands for: its English
/// stem, or `None` for a stopword, a piece shorter than [`MIN_TERM_CHARS`]
/// or a run of underscores.
pub fn term_of(lower: &str) -> Option<Cow<'_, str>> {
    let short = lower.chars().nth(MIN_TERM_CHARS - 1).is_none();
    if short || is_stopword(lower) || lower.bytes().all(|c| c == b'_') {
        return None;
    }
    // The stemmer is for words; identifiers with digits or underscores and
    // non-Latin scripts pass through unchanged.
    if lower.bytes().all(|c| c.is_ascii_lowercase()) {
        Some(stemmer().stem(lower))
    } else {
        Some(Cow::Borrowed(lower))
    }
}

/// Characters below U+0800 (Latin, Greek, Cyrillic, Armenian, Hebrew,
/// Arabic…) with their classes, one byte each, taken once from `char`'s own
/// methods: on text trees the Unicode tables' binary searches behind
/// `is_alphanumeric` and friends were ~7% of an index's CPU, nine in ten
/// non-ASCII characters there lie below U+0800, and 2 KiB fill in
/// microseconds the first time a non-ASCII word is met.
const CLASSED_BELOW: u32 = 0x800;
const ALNUM: u8 = 1;
const ALPHA: u8 = 2;
const LOWER: u8 = 4;
const UPPER: u8 = 8;

fn classes_of(c: char) -> u8 {
    (if c.is_alphanumeric() { ALNUM } else { 0 })
        | (if c.is_alphabetic() { ALPHA } else { 0 })
        | (if c.is_lowercase() { LOWER } else { 0 })
        | (if c.is_uppercase() { UPPER } else { 0 })
}

/// [`classes_of`] for every character below [`CLASSED_BELOW`].
fn class_table() -> &'static [u8; CLASSED_BELOW as usize] {
    static TABLE: OnceLock<[u8; CLASSED_BELOW as usize]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0u8; CLASSED_BELOW as usize];
        for (code, slot) in t.iter_mut().enumerate() {
            // Below U+0800 every code point is a char (surrogates start at U+D800).
            if let Some(c) = char::from_u32(code as u32) {
                *slot = classes_of(c);
            }
        }
        t
    })
}

/// The classes of `c` ([`ALNUM`], [`ALPHA`], [`LOWER`], [`UPPER`]), from the
/// table where it covers `c`: the same answers as `char`'s methods.
#[inline]
fn classes(c: char) -> u8 {
    if (c as u32) < CLASSED_BELOW {
        class_table()[c as usize]
    } else {
        classes_of(c)
    }
}

/// Whether `c` separates words (neither alphanumeric nor `_`).
#[inline]
fn separates_words(c: char) -> bool {
    let alphanumeric = if (c as u32) < CLASSED_BELOW {
        class_table()[c as usize] & ALNUM != 0
    } else {
        // One lookup, not the four of `classes_of`.
        c.is_alphanumeric()
    };
    !alphanumeric && c != '_'
}

/// Scratch space reused from word to word, so that tokenising a long text
/// allocates little.
#[derive(Debug, Default)]
pub struct Scratch {
    lower: String,
    part: String,
    /// A word's characters while it is split into identifier parts.
    chars: Vec<Classed>,
}

/// Calls `emit` with each term one word stands for (see the module docs):
/// its identifier parts that differ from the whole word, then the whole
/// word. `word` is one word as [`for_each_word`] yields it.
pub fn for_each_word_term(word: &str, scratch: &mut Scratch, mut emit: impl FnMut(&str)) {
    if word.len() > MAX_WORD_CHARS && word.chars().nth(MAX_WORD_CHARS).is_some() {
        return;
    }
    let Scratch { lower, part, chars } = scratch;
    lower.clear();
    if word.is_ascii() {
        lower.push_str(word);
        lower.make_ascii_lowercase();
    } else {
        lower.extend(word.chars().flat_map(char::to_lowercase));
    }
    if may_have_parts(word) {
        for_each_part(word, part, chars, |p| {
            if p != lower.as_str()
                && let Some(t) = term_of(p)
            {
                emit(&t);
            }
        });
    }
    if let Some(t) = term_of(lower) {
        emit(&t);
    }
}

/// Calls `emit` for each term of `text`, in order, with repetitions. Terms
/// are lent from reused buffers.
pub fn for_each_term(text: &str, mut emit: impl FnMut(&str)) {
    let mut scratch = Scratch::default();
    for_each_word(text, |w| for_each_word_term(w, &mut scratch, &mut emit));
}

/// All terms of `text`, in order, with repetitions.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |t| out.push(t.to_owned()));
    out
}

/// Calls `f` with each word of `text`: a maximal run of letters, digits and
/// `_`. Plain ASCII is scanned byte by byte; a run holding other characters
/// is split on the non-alphanumeric ones. Words are slices of `text` (so a
/// caller may keep them as long as the text, e.g. as cache keys).
pub fn for_each_word<'t>(text: &'t str, f: impl FnMut(&'t str)) {
    scan_words(text, false, f);
}

/// [`for_each_word`] over stored XHTML, scanned in place: `<…>` tags and
/// `&…;` references separate words and are never words themselves (a
/// reference is not decoded; scoring needs no exact rendering, and this
/// avoids building the text of every document on every query).
pub fn for_each_word_in_xhtml<'t>(xhtml: &'t str, f: impl FnMut(&'t str)) {
    scan_words(xhtml, true, f);
}

fn scan_words<'t>(text: &'t str, xhtml: bool, mut f: impl FnMut(&'t str)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if xhtml && b == b'<' {
            i = bytes[i..]
                .iter()
                .position(|&c| c == b'>')
                .map_or(bytes.len(), |p| i + p + 1);
            continue;
        }
        if xhtml && b == b'&' {
            // Skip a reference up to its ';' (short ones only).
            let end = bytes[i..].iter().take(12).position(|&c| c == b';');
            i += end.map_or(1, |e| e + 1);
            continue;
        }
        if is_word_byte(b) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            let word = &text[start..i];
            if word.is_ascii() {
                f(word);
            } else {
                for w in word.split(separates_words) {
                    if !w.is_empty() {
                        f(w);
                    }
                }
            }
        } else {
            i += 1;
        }
    }
}

/// ASCII letters, digits, `_`, and every byte of a non-ASCII character
/// (which [`scan_words`] then splits by character class).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// False only when `word` certainly has no identifier part that differs
/// from the whole word. A cheap byte check run on every scanned word; it
/// may say true needlessly (any non-ASCII word), never false wrongly (a
/// property test holds it to [`split_identifier`]).
pub fn may_have_parts(word: &str) -> bool {
    // One pass: scanning runs on every word of every document.
    let (mut prev2, mut prev) = (0u8, 0u8);
    for &c in word.as_bytes() {
        if c >= 0x80 || c == b'_' {
            return true;
        }
        if prev != 0
            && ((prev.is_ascii_lowercase() && c.is_ascii_uppercase())
                || prev.is_ascii_alphabetic() != c.is_ascii_alphabetic()
                || (prev2.is_ascii_uppercase()
                    && prev.is_ascii_uppercase()
                    && c.is_ascii_lowercase()))
        {
            return true;
        }
        (prev2, prev) = (prev, c);
    }
    false
}

/// A character with its case and letter classes, each looked up once (the
/// Unicode tables are the cost of splitting non-ASCII words).
#[derive(Debug, Clone, Copy)]
struct Classed {
    c: char,
    lower: bool,
    upper: bool,
    alpha: bool,
}

/// Calls `emit` with each lowercase identifier part of `word` (see
/// [`split_identifier`]), using `buf` and `chars` as scratch space (this
/// runs on every distinct non-ASCII word of an index: no allocation each).
fn for_each_part(
    word: &str,
    buf: &mut String,
    chars: &mut Vec<Classed>,
    mut emit: impl FnMut(&str),
) {
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        chars.clear();
        chars.extend(piece.chars().map(|c| {
            let k = classes(c);
            Classed {
                c,
                lower: k & LOWER != 0,
                upper: k & UPPER != 0,
                alpha: k & ALPHA != 0,
            }
        }));
        let mut start = 0;
        for i in 1..=chars.len() {
            let boundary = i == chars.len() || {
                let (prev, cur) = (chars[i - 1], chars[i]);
                let next_lower = chars.get(i + 1).is_some_and(|c| c.lower);
                (prev.lower && cur.upper)
                    || (prev.upper && cur.upper && next_lower)
                    || (prev.alpha != cur.alpha)
            };
            if boundary {
                buf.clear();
                buf.extend(chars[start..i].iter().flat_map(|c| c.c.to_lowercase()));
                emit(buf);
                start = i;
            }
        }
    }
}

/// The lowercase identifier parts of a word: split on `_`, on lower→upper
/// case changes, before the last capital of an upper-case run followed by
/// lowercase, and between letters and digits: `getHTTPResponse2` → get,
/// http, response, 2.
pub fn split_identifier(word: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let (mut buf, mut chars) = (String::new(), Vec::new());
    for_each_part(word, &mut buf, &mut chars, |p| parts.push(p.to_owned()));
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_identifiers() {
        assert_eq!(split_identifier("retrievalPrefs"), ["retrieval", "prefs"]);
        assert_eq!(split_identifier("HTTPServer2"), ["http", "server", "2"]);
        assert_eq!(split_identifier("max_entries"), ["max", "entries"]);
        assert_eq!(
            split_identifier("getHTTPResponse2"),
            ["get", "http", "response", "2"]
        );
        assert_eq!(split_identifier("Plain"), ["plain"]);
        assert_eq!(split_identifier("__init__"), ["init"]);
    }

    #[test]
    fn terms_are_parts_then_the_whole_word_without_stopwords() {
        assert_eq!(
            terms("What is the max_entries of retrievalPrefs?"),
            [
                "max",
                "entri",
                "max_entries",
                "retriev",
                "pref",
                "retrievalpref"
            ]
        );
        assert_eq!(terms("Élan VITAL"), ["élan", "vital"]);
        // The standard list, not a short one: "about", "did", "her" go.
        assert_eq!(
            terms("What did she say about her painting?"),
            ["say", "paint"]
        );
        // A leading underscore is a part boundary too, so `private` finds
        // `_private` and `init` finds `__init__`.
        assert_eq!(
            terms("_private __init__"),
            ["privat", "_private", "init", "__init__"]
        );
        assert_eq!(terms("HTTPServer"), ["http", "server", "httpserver"]);
        assert_eq!(
            terms("fn loginUser(a, b_c)"),
            ["fn", "login", "user", "loginus", "b_c"]
        );
    }

    #[test]
    fn short_long_and_underscore_words_stand_for_nothing() {
        assert!(terms("x 7 _ ___").is_empty());
        assert!(terms(&"x".repeat(MAX_WORD_CHARS + 1)).is_empty());
        assert_eq!(terms(&"y".repeat(MAX_WORD_CHARS)).len(), 1);
        // A long word is judged by characters, not bytes.
        assert_eq!(terms(&"é".repeat(MAX_WORD_CHARS)).len(), 1);
        assert_eq!(terms("May 7 2023"), ["may", "2023"]);
    }

    #[test]
    fn stems_so_inflections_match() {
        assert_eq!(terms("painted paintings painting"), ["paint"; 3]);
        assert_eq!(terms("adopted adoption"), terms("adopt adopt"));
        assert_eq!(terms("running runs"), ["run", "run"]);
    }

    #[test]
    fn stopword_list_is_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_stopword("about") && is_stopword("the") && !is_stopword("kiln"));
    }

    #[test]
    fn xhtml_words_skip_tags_and_references() {
        let mut words = Vec::new();
        for_each_word_in_xhtml(
            "<p class=\"x\">a&amp;b<br/>caf&#233; &bogus text</p><i>end",
            |w| words.push(w.to_owned()),
        );
        assert_eq!(words, ["a", "b", "caf", "bogus", "text", "end"]);
        let mut plain = Vec::new();
        for_each_word("<p>x</p> naïve—word", |w| plain.push(w.to_owned()));
        assert_eq!(plain, ["p", "x", "p", "naïve", "word"]);
    }

    /// The terms as the module docs define them, computed the slow way.
    fn reference_terms(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in text.split(|c: char| !c.is_alphanumeric() && c != '_') {
            if word.is_empty() || word.chars().count() > MAX_WORD_CHARS {
                continue;
            }
            let lower: String = word.chars().flat_map(char::to_lowercase).collect();
            for part in split_identifier(word) {
                if part != lower
                    && let Some(t) = term_of(&part)
                {
                    out.push(t.into_owned());
                }
            }
            if let Some(t) = term_of(&lower) {
                out.push(t.into_owned());
            }
        }
        out
    }

    proptest! {
        /// The fast path (byte scanner, `may_have_parts` shortcut) agrees
        /// with the definition on any text, identifiers and scripts mixed.
        #[test]
        fn fast_tokenizer_matches_the_definition(
            text in "([a-zA-Z0-9_]{0,12}|[ .,;:<>&'-]|é|Ω|ß|İ|Σ|日本|٣){0,24}"
        ) {
            prop_assert_eq!(terms(&text), reference_terms(&text));
        }

        /// The first-letter lookup answers as a search of the whole list does,
        /// on near-stopwords, other scripts and the empty word alike.
        #[test]
        fn stopword_lookup_matches_the_whole_list(
            word in "([a-z]{0,11}|[a-z]{1,3}_|[0-9]|é|ß|[A-Z]){0,3}"
        ) {
            prop_assert_eq!(is_stopword(&word), STOPWORDS.binary_search(&word.as_str()).is_ok());
        }
    }

    #[test]
    fn the_class_table_answers_as_char_does() {
        let check = |c: char| {
            let k = classes(c);
            assert_eq!(k & ALPHA != 0, c.is_alphabetic(), "{c:?}");
            assert_eq!(k & LOWER != 0, c.is_lowercase(), "{c:?}");
            assert_eq!(k & UPPER != 0, c.is_uppercase(), "{c:?}");
            assert_eq!(
                separates_words(c),
                !c.is_alphanumeric() && c != '_',
                "{c:?}"
            );
        };
        // The whole table, the characters just past it, and some far beyond.
        (0..CLASSED_BELOW + 64)
            .filter_map(char::from_u32)
            .for_each(check);
        ['日', 'İ', 'ǅ', '٣', '𝔸', '\u{10FFFF}']
            .into_iter()
            .for_each(check);
    }

    #[test]
    fn every_stopword_and_only_those_is_one() {
        assert!(
            STOPWORDS.windows(2).all(|w| w[0] < w[1]),
            "STOPWORDS sorted"
        );
        for w in STOPWORDS {
            assert!(is_stopword(w), "{w}");
            assert!(
                !is_stopword(&format!("{w}x")) || STOPWORDS.contains(&format!("{w}x").as_str())
            );
        }
        for w in ["", "zebra", "themselvesx", "Ăa", "9", "_"] {
            assert!(!is_stopword(w), "{w:?}");
        }
    }
}

//! Tokenising text for retrieval: lowercase word pieces, with identifiers
//! split on camelCase and snake_case so `retrievalPrefs` matches "retrieval",
//! English stopwords dropped and every term reduced to its Snowball (Porter 2)
//! stem, so "painted" finds "painting". Also a fast text extraction from
//! stored XHTML for scoring.

use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

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

/// True when `lower` (already lowercase) is a stopword.
pub fn is_stopword(lower: &str) -> bool {
    STOPWORDS.binary_search(&lower).is_ok()
}

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// The retrieval term of a lowercase word: its English stem, or `None` for
/// a stopword or a run of underscores.
pub fn term_of(lower: &str) -> Option<std::borrow::Cow<'_, str>> {
    if is_stopword(lower) || lower.bytes().all(|c| c == b'_') {
        return None;
    }
    // The stemmer is for words; identifiers with digits or underscores and
    // non-Latin scripts pass through unchanged.
    if lower.bytes().all(|c| c.is_ascii_lowercase()) {
        Some(stemmer().stem(lower))
    } else {
        Some(std::borrow::Cow::Borrowed(lower))
    }
}

/// Calls `emit` for each retrieval term of `text`, in order. Terms are
/// lent from a reused buffer, so scanning allocates little per word.
pub fn for_each_term(text: &str, mut emit: impl FnMut(&str)) {
    let mut lower = String::new();
    let mut part = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '_') {
        if word.is_empty() {
            continue;
        }
        lower.clear();
        lower.extend(word.chars().flat_map(char::to_lowercase));
        if needs_split(word) {
            for_each_part(word, &mut part, |p| {
                if let Some(t) = term_of(p) {
                    emit(&t);
                }
            });
        }
        if let Some(t) = term_of(&lower) {
            emit(&t);
        }
    }
}

/// All retrieval terms of `text`.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |t| out.push(t.to_owned()));
    out
}

/// True when a word has more than one identifier part.
fn needs_split(word: &str) -> bool {
    let mut prev: Option<char> = None;
    for c in word.chars() {
        if c == '_' {
            return word.trim_matches('_').contains('_');
        }
        if let Some(p) = prev
            && ((p.is_lowercase() && c.is_uppercase()) || (p.is_alphabetic() != c.is_alphabetic()))
        {
            return true;
        }
        prev = Some(c);
    }
    false
}

/// Calls `emit` with each lowercase part of an identifier (see
/// [`split_identifier`]), using `buf` as scratch space.
pub fn for_each_part_pub(word: &str, buf: &mut String, emit: impl FnMut(&str)) {
    for_each_part(word, buf, emit)
}

fn for_each_part(word: &str, buf: &mut String, mut emit: impl FnMut(&str)) {
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<char> = piece.chars().collect();
        let mut start = 0;
        for i in 1..=chars.len() {
            let boundary = i == chars.len() || {
                let (prev, cur) = (chars[i - 1], chars[i]);
                let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
                (prev.is_lowercase() && cur.is_uppercase())
                    || (prev.is_uppercase() && cur.is_uppercase() && next_lower)
                    || (prev.is_alphabetic() != cur.is_alphabetic())
            };
            if boundary {
                buf.clear();
                buf.extend(chars[start..i].iter().flat_map(|c| c.to_lowercase()));
                emit(buf);
                start = i;
            }
        }
    }
}

/// Splits `fooBarBaz`, `foo_bar`, `HTTPServer` into lowercase parts.
pub fn split_identifier(word: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut buf = String::new();
    for_each_part(word, &mut buf, |p| parts.push(p.to_owned()));
    parts
}

/// The text of an XHTML fragment for scoring: tags dropped (a space in
/// their place), the XML entities and numeric references decoded. Much
/// cheaper than a full HTML tokenizer; exact rendering is not needed here.
pub fn searchable_text(xhtml: &str) -> std::borrow::Cow<'_, str> {
    if !xhtml.contains(['<', '&']) {
        return std::borrow::Cow::Borrowed(xhtml);
    }
    let mut out = String::with_capacity(xhtml.len());
    let mut rest = xhtml;
    while let Some(i) = rest.find(['<', '&']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if rest.starts_with('<') {
            match rest.find('>') {
                Some(end) => {
                    out.push(' ');
                    rest = &rest[end + 1..];
                }
                None => {
                    rest = "";
                }
            }
        } else {
            let end = rest[1..].find(';').map(|e| e + 1).filter(|&e| e <= 10);
            let decoded = end.and_then(|e| decode_entity(&rest[1..e]));
            match (end, decoded) {
                (Some(e), Some(c)) => {
                    out.push(c);
                    rest = &rest[e + 1..];
                }
                _ => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

fn decode_entity(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some('\u{a0}'),
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_identifiers_and_drops_stopwords() {
        assert_eq!(split_identifier("retrievalPrefs"), ["retrieval", "prefs"]);
        assert_eq!(split_identifier("HTTPServer2"), ["http", "server", "2"]);
        assert_eq!(split_identifier("max_entries"), ["max", "entries"]);
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
        assert_eq!(terms("_private __init__"), ["_private", "__init__"]);
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
    fn searchable_text_strips_tags_and_decodes() {
        assert_eq!(
            searchable_text("<p>a &amp; b<br/>c&#233;&#x41;</p><p>&bogus; & x</p>"),
            " a & b c\u{e9}A  &bogus; & x "
        );
        assert_eq!(searchable_text("plain"), "plain");
        assert_eq!(searchable_text("<p unclosed"), "");
    }
}

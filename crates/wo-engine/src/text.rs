//! Tokenising text for retrieval: lowercase word pieces, with identifiers
//! split on camelCase and snake_case so `retrievalPrefs` matches "retrieval".
//! Also a fast text extraction from stored XHTML for scoring.

/// Words too common to help ranking.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "how", "i", "if", "in",
    "into", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "we", "what",
    "when", "where", "which", "who", "why", "will", "with", "you", "your", "do", "does", "can",
];

/// Calls `emit` for each retrieval term of `text`, in order. Terms are
/// lent from a reused buffer, so scanning allocates nothing per word.
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
                if keep(p) {
                    emit(p);
                }
            });
        }
        if keep(&lower) {
            emit(&lower);
        }
    }
}

/// All retrieval terms of `text`.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |t| out.push(t.to_owned()));
    out
}

fn keep(term: &str) -> bool {
    !STOPWORDS.contains(&term) && !term.bytes().all(|c| c == b'_')
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
                "entries",
                "max_entries",
                "retrieval",
                "prefs",
                "retrievalprefs"
            ]
        );
        assert_eq!(terms("Élan VITAL"), ["élan", "vital"]);
        assert_eq!(terms("_private __init__"), ["_private", "__init__"]);
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

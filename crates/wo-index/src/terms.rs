//! Search-term extraction shared by indexing and querying.
//!
//! Identifier-aware: a word such as `parseHTTPRequest` or `max_file_bytes` yields the whole
//! lower-cased word *and* its parts (`parse`, `http`, `request`; `max`, `file`, `bytes`), so a
//! query can hit either the exact identifier or its vocabulary. Using the same function on both
//! sides keeps document and query term counts consistent, which BM25's length normalisation
//! depends on.

/// Longest term kept; longer runs (base64, hashes, minified code) are noise.
const MAX_TERM_CHARS: usize = 48;

/// Calls `emit` for every term of `text`, in order, with repetitions.
pub fn for_each_term(text: &str, mut emit: impl FnMut(&str)) {
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    loop {
        let next = chars.next();
        match next {
            Some(c) if c.is_alphanumeric() || c == '_' => word.push(c),
            _ => {
                if !word.is_empty() {
                    emit_word(&word, &mut emit);
                    word.clear();
                }
                if next.is_none() {
                    break;
                }
            }
        }
    }
}

/// All terms of `text` as owned strings.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |t| out.push(t.to_string()));
    out
}

fn emit_word(word: &str, emit: &mut impl FnMut(&str)) {
    let trimmed = word.trim_matches('_');
    if trimmed.is_empty() || trimmed.chars().count() > MAX_TERM_CHARS {
        return;
    }
    let whole = trimmed.to_lowercase();
    let parts = split_identifier(trimmed);
    if whole.chars().count() >= 2 {
        emit(&whole);
    }
    if parts.len() > 1 {
        for part in parts {
            if part.chars().count() >= 2 && part != whole {
                emit(&part);
            }
        }
    }
}

/// Splits an identifier on `_` and case changes: `getHTTPResponse2` → get, http, response2.
pub fn split_identifier(word: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<char> = piece.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let prev = chars[i - 1];
            let cur = chars[i];
            let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let boundary = (prev.is_lowercase() && cur.is_uppercase())
                || (prev.is_uppercase() && cur.is_uppercase() && next_lower);
            if boundary {
                parts.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        parts.push(chars[start..].iter().collect::<String>().to_lowercase());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_identifiers() {
        assert_eq!(
            split_identifier("getHTTPResponse"),
            vec!["get", "http", "response"]
        );
        assert_eq!(
            split_identifier("max_file_bytes"),
            vec!["max", "file", "bytes"]
        );
        assert_eq!(split_identifier("Plain"), vec!["plain"]);
    }

    #[test]
    fn terms_keep_whole_and_parts() {
        assert_eq!(
            terms("fn loginUser(a, b_c)"),
            vec!["fn", "loginuser", "login", "user", "b_c"]
        );
        assert_eq!(terms("Ünïcode wörds"), vec!["ünïcode", "wörds"]);
        assert!(terms(&"x".repeat(100)).is_empty());
    }
}

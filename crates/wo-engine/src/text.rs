//! Tokenising text for retrieval: lowercase word pieces, with identifiers
//! split on camelCase and snake_case so `retrievalPrefs` matches "retrieval".

/// Words too common to help ranking.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "how", "i", "if", "in",
    "into", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "we", "what",
    "when", "where", "which", "who", "why", "will", "with", "you", "your", "do", "does", "can",
];

/// Calls `emit` for each retrieval term of `text`, in order.
pub fn for_each_term(text: &str, mut emit: impl FnMut(String)) {
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '_') {
        if word.is_empty() {
            continue;
        }
        let lower = word.to_lowercase();
        let parts = split_identifier(word);
        if parts.len() > 1 {
            for p in parts {
                if keep(&p) {
                    emit(p);
                }
            }
        }
        if keep(&lower) {
            emit(lower);
        }
    }
}

/// All retrieval terms of `text`.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_term(text, |t| out.push(t));
    out
}

fn keep(term: &str) -> bool {
    !STOPWORDS.contains(&term) && !term.chars().all(|c| c == '_')
}

/// Splits `fooBarBaz`, `foo_bar`, `HTTPServer` into lowercase parts.
pub fn split_identifier(word: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<char> = piece.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (prev, cur) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let boundary = (prev.is_lowercase() && cur.is_uppercase())
                || (prev.is_uppercase() && cur.is_uppercase() && next_lower)
                || (prev.is_alphabetic() != cur.is_alphabetic());
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
    }
}

//! Content-addressed ids (product §1): never random, always derivable, so the
//! same message exported from two devices merges into one.

use sha2::{Digest, Sha256};

use crate::xhtml::canonical_xhtml;

/// `m_` + first 16 hex of sha256(`username|timestamp|canonical_xhtml(content)`).
pub fn message_id(username: &str, timestamp: &str, content: &str) -> String {
    prefixed_hash("m_", username, timestamp, content)
}

/// `t_` + first 16 hex of sha256(`title|timestamp|canonical_xhtml(content)`).
pub fn truth_id(title: &str, timestamp: &str, content: &str) -> String {
    prefixed_hash("t_", title, timestamp, content)
}

fn prefixed_hash(prefix: &str, who: &str, timestamp: &str, content: &str) -> String {
    let mut h = Sha256::new();
    h.update(who.as_bytes());
    h.update(b"|");
    h.update(timestamp.as_bytes());
    h.update(b"|");
    h.update(canonical_xhtml(content).as_bytes());
    let digest = h.finalize();
    let mut out = String::with_capacity(prefix.len() + 16);
    out.push_str(prefix);
    for b in &digest[..8] {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_follow_the_spec_formula() {
        let id = message_id("alec", "2026-02-22T20:11:05Z", "<p>Summarize…</p>");
        let mut h = Sha256::new();
        h.update("alec|2026-02-22T20:11:05Z|<p>Summarize…</p>".as_bytes());
        let hex: String = h.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(id, format!("m_{hex}"));
        assert_eq!(id.len(), 18);
    }

    #[test]
    fn equivalent_markup_gives_the_same_id() {
        let a = truth_id(
            "T",
            "2026-01-01T00:00:00Z",
            "<a title='x' href='https://a.b'>l</a>",
        );
        let b = truth_id(
            "T",
            "2026-01-01T00:00:00Z",
            r#"<a href="https://a.b" title="x">l</a>"#,
        );
        assert_eq!(a, b);
        assert_ne!(
            a,
            truth_id("T2", "2026-01-01T00:00:00Z", "<a href='https://a.b'>l</a>")
        );
    }
}

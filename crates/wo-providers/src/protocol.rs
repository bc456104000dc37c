//! Plain text as an XHTML fragment, for what the `wikioracle` provider
//! sends a stateless server. The wire types themselves (requests, events,
//! state patches) live in the `wo_wire` crate, shared with the server.

/// Escape plain text into an XHTML fragment: paragraphs split on blank
/// lines, `<br/>` for single newlines, `& < > "` escaped.
pub fn text_to_xhtml(text: &str) -> String {
    let mut out = String::new();
    for para in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
        out.push_str("<p>");
        for (i, line) in para.trim_matches('\n').split('\n').enumerate() {
            if i > 0 {
                out.push_str("<br/>");
            }
            for c in line.chars() {
                match c {
                    '&' => out.push_str("&amp;"),
                    '<' => out.push_str("&lt;"),
                    '>' => out.push_str("&gt;"),
                    '"' => out.push_str("&quot;"),
                    c => out.push(c),
                }
            }
        }
        out.push_str("</p>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xhtml_escape() {
        assert_eq!(
            text_to_xhtml("a < b & \"c\"\nd\n\ne"),
            "<p>a &lt; b &amp; &quot;c&quot;<br/>d</p><p>e</p>"
        );
    }
}

//! Message titles: the one rule for every message WikiOracle makes a title
//! for (a chat turn's question and answer, an imported message, an MCP
//! write). A title is a short label for lists and `wo log`, never the
//! content: the first sentence or line of the text, whitespace collapsed,
//! control characters dropped, at most [`MAX_TITLE_CHARS`] characters cut
//! at a word boundary with `…`.
//!
//! A title a person gives (renaming a conversation) follows
//! [`given_title`] instead: cleaned the same way, never cut, refused when
//! empty or longer than [`MAX_GIVEN_TITLE_CHARS`].

/// The longest title, in characters (the `…` of a cut included).
pub const MAX_TITLE_CHARS: usize = 60;

/// The title of a text (plain text: convert XHTML with
/// [`crate::xhtml::to_plain_text`] first); `(empty)` when the text has no
/// visible character.
pub fn title_for(text: &str) -> String {
    let first = first_sentence(text);
    if first.is_empty() {
        return "(empty)".to_owned();
    }
    if first.chars().count() <= MAX_TITLE_CHARS {
        return first;
    }
    let room = MAX_TITLE_CHARS - 1;
    let mut title = String::new();
    let mut len = 0;
    for word in first.split(' ') {
        let need = len + usize::from(len > 0) + word.chars().count();
        if need > room {
            break;
        }
        if len > 0 {
            title.push(' ');
        }
        title.push_str(word);
        len = need;
    }
    if title.is_empty() {
        // One word longer than a title: cut inside it.
        title = first.chars().take(room).collect();
    }
    title.push('…');
    title
}

/// The first non-blank sentence or line of `text`, whitespace collapsed. A
/// sentence ends at `.`, `?` or `!` followed by whitespace or the end of the
/// line (so `v1.2` and `example.org` are not cut), the marks themselves left
/// out.
fn first_sentence(text: &str) -> String {
    for line in text.lines() {
        let line: String = line
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let ends = matches!(c, '.' | '?' | '!')
                && chars.peek().is_none_or(|&(_, next)| next.is_whitespace());
            if ends {
                let sentence = collapse(line[start..i].trim_end_matches(['.', '?', '!']));
                if !sentence.is_empty() {
                    return sentence;
                }
                start = i + c.len_utf8();
            }
        }
        let rest = collapse(&line[start..]);
        if !rest.is_empty() {
            return rest;
        }
    }
    String::new()
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The longest title a person may give, in characters (Unicode scalar
/// values): longer than the automatic ones, since a person's title is never
/// cut silently.
pub const MAX_GIVEN_TITLE_CHARS: usize = 200;

/// Why [`given_title`] refused a title; the message is written for the person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GivenTitleError {
    /// Nothing visible is left once whitespace and control characters go.
    #[error("the title is empty")]
    Empty,
    /// More than [`MAX_GIVEN_TITLE_CHARS`] characters.
    #[error("the title has {chars} characters; at most {max} are allowed", max = MAX_GIVEN_TITLE_CHARS)]
    TooLong {
        /// How many characters the cleaned title has.
        chars: usize,
    },
}

/// The title a person typed, as kept: plain text (markup is text), runs of
/// whitespace (Unicode `White_Space`, newlines included) one space and
/// trimmed, other control characters (`Cc`) dropped; refused when empty or
/// longer than [`MAX_GIVEN_TITLE_CHARS`]. The web client's stateless
/// re-implementation is held to it by the golden vectors.
pub fn given_title(raw: &str) -> Result<String, GivenTitleError> {
    let mut out = String::with_capacity(raw.len());
    let mut pending_space = false;
    for c in raw.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
        } else if !c.is_control() {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err(GivenTitleError::Empty);
    }
    let chars = out.chars().count();
    if chars > MAX_GIVEN_TITLE_CHARS {
        return Err(GivenTitleError::TooLong { chars });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentence_or_line() {
        assert_eq!(title_for("What is BM25? Explain."), "What is BM25");
        assert_eq!(title_for("\n\n  hello   world\nmore"), "hello world");
        assert_eq!(title_for("First answer ..."), "First answer");
        assert_eq!(title_for("... then it rained. Later"), "then it rained");
        assert_eq!(
            title_for("Upgrade to v1.2 of example.org now"),
            "Upgrade to v1.2 of example.org now"
        );
        assert_eq!(title_for("tab\there\u{7}bell"), "tab here bell");
    }

    #[test]
    fn long_titles_are_cut_at_words() {
        let t = title_for(&"word ".repeat(30));
        assert!(
            t.chars().count() <= MAX_TITLE_CHARS && t.ends_with('…'),
            "{t}"
        );
        assert!(
            t.trim_end_matches('…').split(' ').all(|w| w == "word"),
            "{t}"
        );
        let one = title_for(&"x".repeat(100));
        assert_eq!(one.chars().count(), MAX_TITLE_CHARS);
        assert!(one.ends_with('…'));
        let exact = "y".repeat(MAX_TITLE_CHARS);
        assert_eq!(title_for(&exact), exact);
    }

    #[test]
    fn blank_text_is_empty() {
        assert_eq!(title_for(""), "(empty)");
        assert_eq!(title_for("  \n\t\n"), "(empty)");
        assert_eq!(title_for("?!. ..."), "(empty)");
    }
}

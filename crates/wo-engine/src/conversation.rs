//! Conversations as faces meet them: which stored conversation a client
//! that keeps its own history continues ([`continued_by`]), and renaming one.
//!
//! **Threads of clients that keep their history** (the OpenAI-compatible
//! face): a request carries the client's earlier turns. It continues the
//! stored conversation whose branch holds exactly those turns, in order
//! (compared as the text a turn stores, whitespace collapsed); with no such
//! conversation it starts a new one. It never continues whatever the file's
//! newest message is, so two clients, or a client and the browser, never
//! write into each other's threads.
//!
//! **Renaming**: a person's title for a message (the web app renames a
//! conversation's root). The one rule for what such a title may be, shared
//! by every face: `wo serve`'s `PATCH /api/messages/{id}` applies it to the
//! store, and the web client's stateless mode calls the same `wo_format`
//! functions through wo-wasm (`renameMessage`). The title follows
//! `wo_format::title::given_title` (plain text, whitespace collapsed,
//! control characters dropped, 1 to [`MAX_RENAME_CHARS`] characters). The
//! message's content, and so its content-addressed id, never change.

use wo_format::title::{GivenTitleError, given_title};
use wo_format::xhtml::{markdown_to_xhtml, text_to_xhtml, to_plain_text};
use wo_format::{Message, Role, State, Timestamp};

/// How many stored messages that look like the client's latest turn are
/// checked in full (newest first) before a request is given a new
/// conversation: bounds the work a request can cause.
const MAX_THREAD_CANDIDATES: usize = 64;

/// A turn's text as stored and compared: the plain text of its XHTML,
/// whitespace collapsed.
fn comparable(xhtml: &str) -> String {
    to_plain_text(xhtml)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// One client turn in the forms a stored message may hold it: as a typed
/// question stores it (plain text) and as an answer stores it (Markdown).
struct ClientTurn {
    role: Role,
    forms: [String; 2],
}

impl ClientTurn {
    fn new(role: Role, text: &str) -> Self {
        ClientTurn {
            role,
            forms: [
                comparable(&text_to_xhtml(text)),
                comparable(&markdown_to_xhtml(text)),
            ],
        }
    }

    fn matches<S: AsRef<str>>(&self, m: &Message, known_models: &[S]) -> bool {
        if m.role_with_models(known_models) != self.role {
            return false;
        }
        let stored = comparable(&m.content);
        self.forms.contains(&stored)
    }

    /// A word every message holding this turn contains in its raw XHTML
    /// (letters and digits are never escaped): a cheap filter before the
    /// full comparison. `None` when the turn has no such word.
    fn probe(&self) -> Option<&str> {
        self.forms[0]
            .split(|c: char| !c.is_alphanumeric())
            .max_by_key(|w| w.len())
            .filter(|w| !w.is_empty())
    }
}

/// The stored message a client's request continues: the end of the branch
/// whose messages are exactly `turns` (the client's earlier turns, oldest
/// first, without its system message and its new question), in order and
/// with the same roles. `None` — the request starts a new conversation —
/// when `turns` is empty or no branch holds them. Of several such branches
/// the newest wins. `known_models`: names that make a stored message the
/// assistant's (`Message::role_with_models`).
pub fn continued_by<'s, S: AsRef<str>>(
    state: &'s State,
    turns: &[(Role, String)],
    known_models: &[S],
) -> Option<&'s Message> {
    let wanted: Vec<ClientTurn> = turns.iter().map(|(r, t)| ClientTurn::new(*r, t)).collect();
    let last = wanted.last()?;
    let probe = last.probe();
    state
        .messages()
        .iter()
        .rev()
        .filter(|m| probe.is_none_or(|w| m.content.contains(w)))
        .filter(|m| last.matches(m, known_models))
        .take(MAX_THREAD_CANDIDATES)
        .find(|m| {
            let branch = state.branch(&m.id);
            branch.len() == wanted.len()
                && branch
                    .iter()
                    .zip(&wanted)
                    .all(|(stored, turn)| turn.matches(stored, known_models))
        })
}

/// The longest title a person may give, in characters.
pub use wo_format::title::MAX_GIVEN_TITLE_CHARS as MAX_RENAME_CHARS;

/// Why a rename was refused; the message is written for the person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenameError {
    /// The title is empty or too long.
    #[error(transparent)]
    Title(#[from] GivenTitleError),
    /// No message has this id.
    #[error("no message {0:?}")]
    NotFound(String),
}

/// The title `raw` stands for (see `wo_format::title::given_title`).
pub fn clean_title(raw: &str) -> Result<String, RenameError> {
    Ok(given_title(raw)?)
}

/// Gives the message `id` the title `raw` (cleaned by [`clean_title`]) at
/// `now` (the rename's stamp, so it wins a merge against older copies:
/// `State::set_message_title`); returns the message as changed. The state
/// is unchanged on an error.
pub fn rename<'s>(
    state: &'s mut State,
    id: &str,
    raw: &str,
    now: Timestamp,
) -> Result<&'s Message, RenameError> {
    let title = clean_title(raw)?;
    state
        .set_message_title(id, title, now)
        .ok_or_else(|| RenameError::NotFound(id.to_owned()))
}

/// Archives (`hidden`) or restores the conversation `id` names — its root
/// or any of its messages, a unique prefix being enough — at `now`: hidden
/// from conversation lists, every message kept (`State::set_archived` on
/// its root). Returns the root's id; an unknown or ambiguous id is refused
/// and nothing changes.
pub fn archive(
    state: &mut State,
    id: &str,
    hidden: bool,
    now: Timestamp,
) -> Result<String, String> {
    let root = wo_format::conversation::find(state, id.trim())?.to_owned();
    state
        .set_archived(&root, hidden, now)
        .map(|m| m.id.clone())
        .ok_or_else(|| format!("no message {root:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wo_format::{Timestamp, to_canonical_vec};

    fn state_with(n: usize) -> State {
        let mut s = State::new(Timestamp::parse("2026-01-01T00:00:00Z").unwrap());
        for i in 0..n {
            let ts = Timestamp::parse(&format!("2026-01-01T00:00:0{i}Z")).unwrap();
            s.push_message(Message::new(
                "alice",
                ts,
                format!("m{i}"),
                format!("<p>message {i}</p>"),
            ));
        }
        s
    }

    #[test]
    fn cleans_whitespace_and_control_characters() {
        assert_eq!(clean_title("  Trip\n\tplans  ").unwrap(), "Trip plans");
        assert_eq!(clean_title("a\u{0}b\u{7f}c\u{9f}d").unwrap(), "abcd");
        assert_eq!(clean_title("a\u{3000}\u{2028}b").unwrap(), "a b");
        // Markup is text: kept as typed, escaped wherever it is shown.
        assert_eq!(
            clean_title("<script>x</script>").unwrap(),
            "<script>x</script>"
        );
        assert_eq!(clean_title("\u{feff}x").unwrap(), "\u{feff}x");
    }

    #[test]
    fn refuses_empty_and_oversized_titles() {
        assert_eq!(
            clean_title(""),
            Err(RenameError::Title(GivenTitleError::Empty))
        );
        assert_eq!(
            clean_title(" \n\u{1}\u{85} "),
            Err(RenameError::Title(GivenTitleError::Empty))
        );
        let long = "é".repeat(MAX_RENAME_CHARS);
        assert_eq!(clean_title(&long).unwrap(), long);
        let err = clean_title(&format!("{long}x")).unwrap_err();
        assert_eq!(
            err,
            RenameError::Title(GivenTitleError::TooLong {
                chars: MAX_RENAME_CHARS + 1
            })
        );
        assert!(err.to_string().contains("201 characters"), "{err}");
    }

    #[test]
    fn renames_one_message_and_keeps_its_id_and_content() {
        let mut s = state_with(3);
        let id = s.messages()[1].id.clone();
        let content = s.messages()[1].content.clone();
        let m = rename(&mut s, &id, " Holiday  plans ", at("2026-02-01T00:00:00Z")).unwrap();
        assert_eq!(m.title, "Holiday plans");
        assert_eq!(
            (m.id.as_str(), m.content.as_str()),
            (id.as_str(), content.as_str())
        );
        assert_eq!(s.messages()[0].title, "m0");
        assert_eq!(s.messages()[2].title, "m2");
        // The save re-serialises the renamed message, not a cached copy.
        let text = String::from_utf8(to_canonical_vec(&s)).unwrap();
        assert!(text.contains("\"title\": \"Holiday plans\""), "{text}");
        assert!(
            text.contains("\"retitled\": \"2026-02-01T00:00:00Z\""),
            "{text}"
        );
    }

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    /// The reason a rename is stamped: merging an older export back (it
    /// still has the old title, which may sort larger) keeps the new one,
    /// in either order, and of two renames the later wins wherever merged.
    #[test]
    fn a_rename_survives_merging_older_copies_back() {
        let old = state_with(2);
        let id = old.messages()[1].id.clone();
        let mut home = old.clone();
        rename(&mut home, &id, "A trip", at("2026-02-01T00:00:00Z")).unwrap();
        for (base, incoming) in [(&home, &old), (&old, &home)] {
            let mut merged = base.clone();
            wo_format::merge::merge_into(&mut merged, incoming);
            assert_eq!(merged.message(&id).unwrap().title, "A trip");
        }
        let mut phone = old.clone();
        rename(&mut phone, &id, "Zoo visit", at("2026-01-15T00:00:00Z")).unwrap();
        for (base, incoming) in [(&home, &phone), (&phone, &home)] {
            let mut merged = base.clone();
            wo_format::merge::merge_into(&mut merged, incoming);
            let m = merged.message(&id).unwrap();
            assert_eq!(m.title, "A trip");
            assert_eq!(m.retitled(), Some(at("2026-02-01T00:00:00Z")));
        }
        // A clock behind the last rename still moves the stamp forward.
        rename(&mut home, &id, "Again", at("2026-01-01T00:00:00Z")).unwrap();
        assert!(home.message(&id).unwrap().retitled() > Some(at("2026-02-01T00:00:00Z")));
    }

    #[test]
    fn refusals_leave_the_state_unchanged() {
        let mut s = state_with(2);
        let before = to_canonical_vec(&s);
        assert_eq!(
            rename(&mut s, "m_nope", "x", at("2026-02-01T00:00:00Z")).unwrap_err(),
            RenameError::NotFound("m_nope".into())
        );
        let id = s.messages()[0].id.clone();
        assert_eq!(
            rename(&mut s, &id, "\n", at("2026-02-01T00:00:00Z")).unwrap_err(),
            RenameError::Title(GivenTitleError::Empty)
        );
        assert_eq!(to_canonical_vec(&s), before);
    }
}

//! Updating the `context` from new messages (product §3): a model rewrites the
//! old context plus the messages since the last update into a draft; the
//! user sees a line diff and confirms; applying records the change as a
//! truth entry (kind `event`, tag `context-update`) so it is auditable and
//! so the next draft knows where "new" starts.

use similar::{ChangeTag, TextDiff};
use wo_format::xhtml::{markdown_to_xhtml, to_plain_text};
use wo_format::{Message, State, Timestamp, TruthEntry, TruthKind};
use wo_providers::{ChatMessage, ChatRequest};

/// The tag of the truth entries that record applied updates.
pub const UPDATE_TAG: &str = "context-update";
/// Messages sent to the model at most (the most recent ones).
pub const MAX_MESSAGES: usize = 40;
/// Characters of each message sent at most.
pub const MAX_MESSAGE_CHARS: usize = 1500;

/// One line of the diff between the current context and a draft.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DiffLine {
    /// `keep`, `add` or `remove`.
    pub op: &'static str,
    /// The line, as plain text (the context's XHTML converted, trimmed).
    pub text: String,
}

/// A proposed context, not yet applied.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Draft {
    /// The context the draft was made from (XHTML).
    pub current: String,
    /// The proposed context (sanitised XHTML).
    pub draft: String,
    /// How many messages were new since the last update.
    pub new_messages: usize,
    /// When the last update was applied, if ever.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// The draft against the current context, line by line (plain text).
    pub diff: Vec<DiffLine>,
}

/// When the context was last updated: the newest `context-update` entry.
pub fn last_update(state: &State) -> Option<Timestamp> {
    state
        .truth
        .trust
        .iter()
        .filter(|t| {
            t.tags
                .as_ref()
                .is_some_and(|tags| tags.iter().any(|x| x == UPDATE_TAG))
        })
        .map(|t| t.timestamp.clone())
        .max()
}

/// The messages after the last update, oldest first.
pub fn new_messages(state: &State) -> Vec<&Message> {
    let since = last_update(state);
    state
        .messages()
        .iter()
        .filter(|m| since.as_ref().is_none_or(|s| &m.timestamp > s))
        .collect()
}

/// The request that asks a model for a new context.
pub fn draft_request(context: &str, messages: &[&Message], model: Option<String>) -> ChatRequest {
    let mut transcript = String::new();
    let start = messages.len().saturating_sub(MAX_MESSAGES);
    for m in &messages[start..] {
        let text: String = to_plain_text(&m.content)
            .chars()
            .take(MAX_MESSAGE_CHARS)
            .collect();
        transcript.push_str(&format!(
            "{} ({}): {}\n\n",
            m.username,
            m.effective_role().as_str(),
            text
        ));
    }
    let old = to_plain_text(context);
    let prompt = format!(
        "Current context:\n{}\n\nNew messages:\n{}\nRewrite the context so it also covers \
         what the new messages establish about the project, its goals and decisions. Keep \
         what is still true, drop what the messages contradict, stay under 200 words. \
         Answer with the new context only.",
        if old.trim().is_empty() {
            "(empty)"
        } else {
            old.trim()
        },
        transcript
    );
    ChatRequest {
        model,
        messages: vec![
            ChatMessage::system(
                "You maintain the short standing context of a project: plain statements, one per \
                 line."
                    .to_owned(),
            ),
            ChatMessage::user(prompt),
        ],
        temperature: Some(0.2),
        max_tokens: Some(400),
        top_k: None,
        json_schema: None,
    }
}

/// The draft for a model's answer: sanitised XHTML and its line diff
/// against `current`.
pub fn draft_from_answer(
    current: &str,
    answer: &str,
    new_messages: usize,
    since: Option<Timestamp>,
) -> Draft {
    let draft = markdown_to_xhtml(answer.trim());
    Draft {
        current: current.to_owned(),
        diff: diff_lines(current, &draft),
        draft,
        new_messages,
        since,
    }
}

/// Line diff of the plain text of two XHTML fragments.
pub fn diff_lines(old: &str, new: &str) -> Vec<DiffLine> {
    let old = lines_of(old);
    let new = lines_of(new);
    TextDiff::from_lines(&old, &new)
        .iter_all_changes()
        .map(|c| DiffLine {
            op: match c.tag() {
                ChangeTag::Equal => "keep",
                ChangeTag::Insert => "add",
                ChangeTag::Delete => "remove",
            },
            text: c.value().trim_end_matches('\n').to_owned(),
        })
        .collect()
}

fn lines_of(xhtml: &str) -> String {
    let mut out = String::new();
    for line in to_plain_text(xhtml)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Why a draft was not applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApplyError {
    /// The context changed after the draft was made (by hand or another
    /// apply): applying it would undo that change.
    #[error("the context changed since this draft was made; make a new draft")]
    Stale,
    /// The draft says what the context already says.
    #[error("the draft is the current context; nothing to apply")]
    Unchanged,
}

/// Sets the context to a reviewed draft (sanitised here again: it came back
/// from a browser) and records the change as a truth entry; returns its id.
pub fn apply(
    state: &mut State,
    current: &str,
    draft: &str,
    now: Timestamp,
) -> Result<String, ApplyError> {
    if state.context != current {
        return Err(ApplyError::Stale);
    }
    let draft = wo_format::xhtml::sanitize_html(draft);
    if draft == state.context {
        return Err(ApplyError::Unchanged);
    }
    // Dated no earlier than the newest message it covers: answers can be
    // dated a second ahead (turn ids), and must not count as new next time.
    let newest = state.messages().iter().map(|m| m.timestamp.clone()).max();
    let at = newest.map_or(now.clone(), |n| n.max(now));
    let entry = audit_entry(&state.context, &draft, at);
    let id = entry.id.clone();
    state.context = draft;
    state.add_truth(entry);
    Ok(id)
}

/// The truth entry that records a context change: lines added and removed.
pub fn audit_entry(old: &str, new: &str, now: Timestamp) -> TruthEntry {
    let mut content = String::new();
    for line in diff_lines(old, new).into_iter().filter(|l| l.op != "keep") {
        content.push_str(if line.op == "add" { "<p>+ " } else { "<p>− " });
        wo_format::xhtml::escape_text_into(&line.text, &mut content);
        content.push_str("</p>");
    }
    if content.is_empty() {
        content.push_str("<p>(formatting only)</p>");
    }
    let mut entry = TruthEntry::new("Context updated", now, 1.0, content);
    entry.kind = Some(TruthKind::Event);
    entry.tags = Some(vec![UPDATE_TAG.to_owned()]);
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with(context: &str) -> State {
        let mut s = State::new(Timestamp::from_unix(1_700_000_000));
        s.context = context.to_owned();
        s
    }

    #[test]
    fn diff_marks_added_and_removed_lines() {
        let d = diff_lines("<p>a</p><p>b</p>", "<p>a</p><p>c</p>");
        let ops: Vec<(&str, &str)> = d.iter().map(|l| (l.op, l.text.as_str())).collect();
        assert_eq!(ops, [("keep", "a"), ("remove", "b"), ("add", "c")]);
    }

    #[test]
    fn apply_records_an_audit_entry_and_moves_the_new_messages_mark() {
        let mut s = state_with("<p>old</p>");
        let mut m = Message::new(
            "ann",
            Timestamp::from_unix(1_700_000_100),
            "q",
            "<p>we chose rust</p>",
        );
        m.role = Some(wo_format::Role::User);
        s.push_message(m);
        assert_eq!(new_messages(&s).len(), 1);
        let id = apply(
            &mut s,
            "<p>old</p>",
            "<p>we use rust</p><script>x</script>",
            Timestamp::from_unix(1_700_000_200),
        )
        .unwrap();
        assert_eq!(s.context, "<p>we use rust</p>", "sanitised again on apply");
        let entry = s.truth_entry(&id).unwrap();
        assert!(entry.content.contains("+ we use rust") && entry.content.contains("− old"));
        assert_eq!(last_update(&s), Some(Timestamp::from_unix(1_700_000_200)));
        assert!(
            new_messages(&s).is_empty(),
            "messages before the update are no longer new"
        );
    }

    #[test]
    fn apply_refuses_a_stale_or_empty_draft() {
        let mut s = state_with("<p>now</p>");
        assert_eq!(
            apply(&mut s, "<p>then</p>", "<p>x</p>", Timestamp::now()),
            Err(ApplyError::Stale)
        );
        assert_eq!(
            apply(&mut s, "<p>now</p>", "<p>now</p>", Timestamp::now()),
            Err(ApplyError::Unchanged)
        );
        assert_eq!(s.context, "<p>now</p>");
        assert!(s.truth.trust.is_empty());
    }

    #[test]
    fn the_request_carries_the_old_context_and_the_new_messages() {
        let m = Message::new(
            "ann",
            Timestamp::from_unix(1_700_000_100),
            "q",
            "<p>deadline is May</p>",
        );
        let req = draft_request("<p>a kiln project</p>", &[&m], None);
        let prompt = &req.messages[1].content;
        assert!(prompt.contains("a kiln project") && prompt.contains("deadline is May"));
    }
}

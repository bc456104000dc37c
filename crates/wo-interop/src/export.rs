//! Exports for people and other tools, as pure functions from a state to
//! bytes (the CLI writes them):
//!
//! - [`markdown_document`]: every conversation in one Markdown document;
//!   [`markdown_files`]: one document per conversation, with file names.
//!   Headings carry titles, speakers and UTC times; code stays in fenced
//!   blocks ([`crate::markdown`]), so GitHub and Obsidian render them.
//! - [`jsonl`]: one stored message per line, plus its conversation and its
//!   text as Markdown.
//! - the ChatGPT shape is [`crate::chatgpt::export`].
//!
//! A conversation is a root message (no `parent`, or a parent not in the
//! file) and its descendants ([`conversations`]), in time order; a message
//! that does not answer the one shown before it (another branch) says which
//! it answers.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use wo_format::{Message, Role, State};

use crate::markdown::message_markdown;

/// One conversation of a state.
#[derive(Clone, Debug)]
pub struct ConversationView<'a> {
    /// Its title: the imported conversation's, else the root message's.
    pub title: String,
    /// The root first, then its descendants by (timestamp, id).
    pub messages: Vec<&'a Message>,
}

/// The state's conversations, ordered by their roots (see the module docs).
/// Every message is in exactly one.
pub fn conversations(state: &State) -> Vec<ConversationView<'_>> {
    let messages = state.messages();
    let ids: HashMap<&str, usize> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); messages.len()];
    let mut is_root = vec![false; messages.len()];
    for (i, m) in messages.iter().enumerate() {
        match m.parent.as_deref().and_then(|p| ids.get(p)) {
            Some(&p) if p != i => children[p].push(i),
            _ => is_root[i] = true,
        }
    }
    let mut seen = vec![false; messages.len()];
    let mut out = Vec::new();
    let collect = |root: usize, seen: &mut Vec<bool>| {
        let mut members = Vec::new();
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            members.push(i);
            stack.extend(children[i].iter().copied());
        }
        members.sort_unstable();
        // The root first; the rest in the state's (timestamp, id) order.
        members.retain(|&i| i != root);
        members.insert(0, root);
        let root_msg = &messages[root];
        ConversationView {
            title: conversation_title(root_msg),
            messages: members.into_iter().map(|i| &messages[i]).collect(),
        }
    };
    for i in 0..messages.len() {
        if is_root[i] && !seen[i] {
            out.push(collect(i, &mut seen));
        }
    }
    // Messages left are on a cycle of parent links: each cycle becomes a
    // conversation rooted at its earliest message.
    for i in 0..messages.len() {
        if !seen[i] {
            out.push(collect(i, &mut seen));
        }
    }
    out
}

/// A conversation's title from its root message: the imported
/// conversation's title (kept under `x_import`), else the root's own, else
/// "Untitled" — `wo_format::conversation::title`, the one rule every list
/// of conversations uses (`wo log --conversations`, the server's list).
pub fn conversation_title(root: &Message) -> String {
    wo_format::conversation::title(root)
}

/// `2026-02-22 20:11:05 UTC` from a stored timestamp.
fn human_time(m: &Message) -> String {
    let t = m.timestamp.as_str();
    let base = t.get(..19).unwrap_or(t).replace('T', " ");
    format!("{base} UTC")
}

fn speaker(m: &Message) -> String {
    match m.effective_role() {
        Role::User => m.username.clone(),
        Role::Assistant => format!("{} (assistant)", m.username),
        Role::System => {
            if m.username.eq_ignore_ascii_case("system") {
                "system".to_owned()
            } else {
                format!("{} (system)", m.username)
            }
        }
    }
}

/// One line of heading text: no newlines, no `#` run at the end eaten.
fn heading_text(s: &str) -> String {
    let one: String = s
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    one.chars().filter(|c| !c.is_control()).collect()
}

/// One conversation as Markdown, its title at heading `level`.
fn render_conversation(c: &ConversationView<'_>, level: usize, out: &mut String) {
    let h = "#".repeat(level);
    let h2 = "#".repeat(level + 1);
    let first = c.messages[0];
    let last = c.messages[c.messages.len() - 1];
    out.push_str(&format!("{h} {}\n\n", heading_text(&c.title)));
    out.push_str(&format!(
        "*{} message{}, {} – {}*\n\n",
        c.messages.len(),
        if c.messages.len() == 1 { "" } else { "s" },
        human_time(first),
        human_time(last)
    ));
    let by_id: HashMap<&str, &Message> = c.messages.iter().map(|m| (m.id.as_str(), *m)).collect();
    let mut previous: Option<&str> = None;
    for m in &c.messages {
        out.push_str(&format!(
            "{h2} {} · {}\n\n",
            heading_text(&speaker(m)),
            human_time(m)
        ));
        if let (Some(p), Some(prev)) = (m.parent.as_deref(), previous)
            && p != prev
            && let Some(pm) = by_id.get(p)
        {
            out.push_str(&format!(
                "*Another branch: answers {} at {}.*\n\n",
                heading_text(&speaker(pm)),
                human_time(pm)
            ));
        }
        let body = message_markdown(&m.content);
        out.push_str(body.trim_end());
        out.push_str("\n\n");
        previous = Some(m.id.as_str());
    }
}

/// Every conversation in one Markdown document.
pub fn markdown_document(state: &State) -> String {
    let convs = conversations(state);
    let mut out = String::from("# Conversations\n\n");
    if convs.is_empty() {
        out.push_str("*No messages.*\n");
        return out;
    }
    for c in &convs {
        render_conversation(c, 2, &mut out);
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// One Markdown document per conversation: `(file name, text)`. Names are
/// `YYYY-MM-DD-<title words>.md`, unique (`-2`, `-3`… on a clash), ASCII.
pub fn markdown_files(state: &State) -> Vec<(String, String)> {
    let mut used: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    for c in conversations(state) {
        let mut text = String::new();
        render_conversation(&c, 1, &mut text);
        text.truncate(text.trim_end().len());
        text.push('\n');
        let date = c.messages[0]
            .timestamp
            .as_str()
            .get(..10)
            .unwrap_or("undated")
            .to_owned();
        let slug = slug(&c.title);
        let base = if slug.is_empty() {
            date
        } else {
            format!("{date}-{slug}")
        };
        let mut name = format!("{base}.md");
        let mut n = 2;
        while !used.insert(name.to_ascii_lowercase()) {
            name = format!("{base}-{n}.md");
            n += 1;
        }
        out.push((name, text));
    }
    out
}

/// Lower-case ASCII words joined by `-`, at most 60 characters.
fn slug(title: &str) -> String {
    let mut s = String::new();
    for word in title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if s.len() + word.len() + 1 > 60 {
            break;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&word.to_ascii_lowercase());
    }
    s
}

/// One JSON object per line: the stored message plus `conversation` (its
/// root's id) and `text` (its content as Markdown), in conversation order.
pub fn jsonl(state: &State) -> String {
    let mut out = String::new();
    for c in conversations(state) {
        let root = c.messages[0].id.clone();
        for m in c.messages {
            let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
            if let Value::Object(o) = &mut v {
                o.insert("conversation".into(), root.clone().into());
                o.insert("text".into(), message_markdown(&m.content).into());
            }
            out.push_str(&v.to_string());
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wo_format::Timestamp;

    fn msg(user: &str, t: &str, text: &str, parent: Option<&Message>) -> Message {
        let mut m = Message::new(
            user,
            Timestamp::parse(t).unwrap(),
            text,
            wo_format::xhtml::markdown_to_xhtml(text),
        );
        m.parent = parent.map(|p| p.id.clone());
        if user != "alec" {
            m.role = Some(Role::Assistant);
        }
        m
    }

    #[test]
    fn conversations_are_roots_and_descendants() {
        let a = msg("alec", "2026-01-01T00:00:00Z", "Question one", None);
        let b = msg("gpt", "2026-01-01T00:00:01Z", "Answer", Some(&a));
        let c = msg("gpt", "2026-01-01T00:00:02Z", "Other answer", Some(&a));
        let d = msg("alec", "2026-01-02T00:00:00Z", "New topic", None);
        let mut s = State::new(Timestamp::parse("2026-01-02T00:00:00Z").unwrap());
        for m in [d.clone(), c.clone(), b.clone(), a.clone()] {
            s.push_message(m);
        }
        let convs = conversations(&s);
        assert_eq!(convs.len(), 2);
        assert_eq!(convs[0].messages.len(), 3);
        assert_eq!(convs[0].title, "Question one");
        assert_eq!(convs[1].messages[0].id, d.id);

        let doc = markdown_document(&s);
        assert!(doc.contains("## Question one\n"), "{doc}");
        assert!(
            doc.contains("### gpt (assistant) · 2026-01-01 00:00:01 UTC"),
            "{doc}"
        );
        assert!(
            doc.contains("*Another branch: answers alec at 2026-01-01 00:00:00 UTC.*"),
            "{doc}"
        );

        let files = markdown_files(&s);
        assert_eq!(files[0].0, "2026-01-01-question-one.md");
        assert_eq!(files[1].0, "2026-01-02-new-topic.md");
        assert!(files[1].1.starts_with("# New topic\n"));

        let lines: Vec<Value> = jsonl(&s)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[1]["conversation"], a.id.as_str());
    }

    #[test]
    fn slugs_are_short_ascii() {
        assert_eq!(slug("Héllo, World! 2"), "h-llo-world-2");
        assert_eq!(slug("???"), "");
        assert!(slug(&"word ".repeat(40)).len() <= 60);
    }
}

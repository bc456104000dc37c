//! Conversations: a root message and its descendants, by the same links
//! [`State::branch`] follows (`llm_state_v1.md`, Message `parent` and
//! `new_conversation`), so a conversation listed here is exactly what a
//! turn continuing it sends as its recent window.
//!
//! Each message belongs to one conversation:
//! - a message with a `parent` in the file belongs to its parent's;
//! - a message marked `new_conversation` (no `parent`) is a root;
//! - any other message (no `parent`, or a `parent` not in the file) follows
//!   the latest earlier [unlinked](Message::is_unlinked) message — a legacy
//!   transcript is one conversation — or is a root when there is none.
//!   Messages with links never join that chain, so adding conversations
//!   (an import, New chat) never moves an unlinked message to another.
//!
//! Which conversation a new question continues is [`continue_from`]'s rule
//! (documented there): the conversation this device last used, never simply
//! the newest message, so messages merged in from another device do not
//! take the conversation over.

use std::collections::HashMap;

use crate::model::Message;
use crate::state::State;
use crate::timestamp::Timestamp;

/// One conversation of a state, as [`list`] gives it.
#[derive(Clone, Debug)]
pub struct Conversation<'a> {
    /// Its root (the first message).
    pub root: &'a Message,
    /// Its newest message by (timestamp, id): where a question continuing
    /// the conversation follows.
    pub latest: &'a Message,
    /// How many messages it holds.
    pub count: usize,
}

impl Conversation<'_> {
    /// When it was last added to.
    pub fn updated(&self) -> &Timestamp {
        &self.latest.timestamp
    }
}

/// For each message (by index in `state.messages()`), the index of its
/// conversation's root. Linear in the number of messages; hand-edited
/// parent cycles end at the message where the cycle was entered.
pub fn roots(state: &State) -> Vec<usize> {
    let messages = state.messages();
    let index: HashMap<&str, usize> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let previous_parentless = crate::state::implicit_chain(messages);
    // What each message follows; `None`: it is a root.
    let next = |i: usize| -> Option<usize> {
        let m = &messages[i];
        match &m.parent {
            Some(p) => index.get(p.as_str()).copied().or(previous_parentless[i]),
            None if m.starts_conversation() => None,
            None => previous_parentless[i],
        }
    };
    const UNKNOWN: usize = usize::MAX;
    let mut root = vec![UNKNOWN; messages.len()];
    let mut on_path = vec![false; messages.len()];
    let mut path = Vec::new();
    for start in 0..messages.len() {
        let mut cur = start;
        let found = loop {
            if root[cur] != UNKNOWN {
                break root[cur];
            }
            if std::mem::replace(&mut on_path[cur], true) {
                break cur; // a cycle: the message it closes on is the root
            }
            path.push(cur);
            match next(cur) {
                Some(n) => cur = n,
                None => break cur,
            }
        };
        for i in path.drain(..) {
            root[i] = found;
            on_path[i] = false;
        }
    }
    root
}

/// The state's conversations, least recently updated first (the newest
/// last, as `wo log` lists messages).
pub fn list(state: &State) -> Vec<Conversation<'_>> {
    let messages = state.messages();
    grouped(&roots(state))
        .into_iter()
        .map(|g| g.conversation(messages))
        .collect()
}

/// A conversation by message indexes: its root, its latest message, its size.
#[derive(Clone, Copy)]
struct Group {
    root: usize,
    latest: usize,
    count: usize,
}

impl Group {
    fn conversation(self, messages: &[Message]) -> Conversation<'_> {
        Conversation {
            root: &messages[self.root],
            latest: &messages[self.latest],
            count: self.count,
        }
    }
}

/// The conversations of [`roots`]' answer, least recently updated first.
fn grouped(roots: &[usize]) -> Vec<Group> {
    // Messages are in (timestamp, id) order, so the last one seen of a
    // conversation is its latest.
    let mut by_root: HashMap<usize, Group> = HashMap::new();
    for (i, &r) in roots.iter().enumerate() {
        let g = by_root.entry(r).or_insert(Group {
            root: r,
            latest: i,
            count: 0,
        });
        g.latest = i;
        g.count += 1;
    }
    let mut out: Vec<Group> = by_root.into_values().collect();
    out.sort_unstable_by_key(|g| g.latest);
    out
}

/// The root id of the conversation `id` belongs to; `None` when no message
/// has that id.
pub fn root_of<'a>(state: &'a State, id: &str) -> Option<&'a str> {
    let i = state.messages().iter().position(|m| m.id == id)?;
    Some(state.messages()[roots(state)[i]].id.as_str())
}

/// The newest message of the conversation rooted at `root_id`, if that
/// root is in the file.
pub fn latest_of<'a>(state: &'a State, root_id: &str) -> Option<&'a Message> {
    let messages = state.messages();
    let r = messages.iter().position(|m| m.id == root_id)?;
    let roots = roots(state);
    roots.iter().rposition(|&x| x == r).map(|i| &messages[i])
}

/// Finds a conversation by an id or an id prefix — of its root (what `wo
/// log --conversations` lists) or of any message in it. A prefix is enough
/// when the roots it matches, else the messages it matches, all belong to
/// one conversation. Returns the root's id; the error names the absence or
/// the ambiguity (with a few of the candidates).
pub fn find<'a>(state: &'a State, prefix: &str) -> Result<&'a str, String> {
    let messages = state.messages();
    let roots = roots(state);
    let root_id = |i: usize| messages[roots[i]].id.as_str();
    if let Some(i) = messages.iter().position(|m| m.id == prefix) {
        return Ok(root_id(i));
    }
    let matching: Vec<usize> = (0..messages.len())
        .filter(|&i| messages[i].id.starts_with(prefix))
        .collect();
    // Roots first: a prefix of a listed id means that conversation.
    let mut candidates: Vec<&str> = matching
        .iter()
        .filter(|&&i| roots[i] == i)
        .map(|&i| messages[i].id.as_str())
        .collect();
    if candidates.is_empty() {
        candidates = matching.iter().map(|&i| root_id(i)).collect();
        candidates.sort_unstable();
        candidates.dedup();
    }
    match candidates.as_slice() {
        [one] => Ok(one),
        [] => Err(format!(
            "no conversation or message has an id starting with {prefix:?}"
        )),
        many => Err(format!(
            "{prefix:?} is ambiguous: it matches {} conversations ({}…)",
            many.len(),
            many.iter().take(3).copied().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Where a new question follows when the user names nothing (no
/// `--parent`, no conversation, no new conversation): the newest message of
/// `current` — the conversation this device last asked in, which a face
/// keeps outside the file — when that conversation is still in the file;
/// otherwise the newest message of the whole file (a device that never
/// asked here yet, or whose conversation was removed). Messages merged in
/// from another device therefore extend their own conversations without
/// moving this device's questions there. `None` on an empty file.
pub fn continue_from<'a>(state: &'a State, current: Option<&str>) -> Option<&'a Message> {
    current
        .and_then(|root| latest_of(state, root))
        .or_else(|| state.messages().last())
}

/// The importers' record on a message (`x_import`, written by `wo import`):
/// an imported conversation's root keeps the source's own title there.
pub const X_IMPORT_KEY: &str = "x_import";

/// A conversation's title, from its root: the imported conversation's title
/// (kept under `x_import`), else the root's own, else "Untitled". The one
/// rule for every list of conversations (`wo log --conversations`, the
/// exporters, the server's `GET /api/conversations`).
pub fn title(root: &Message) -> String {
    root.extra
        .get(X_IMPORT_KEY)
        .and_then(|x| {
            x.to_value()
                .get("title")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        })
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| {
            if root.title.trim().is_empty() {
                "Untitled".to_owned()
            } else {
                root.title.clone()
            }
        })
}

/// One conversation as a person's list shows it ([`listed`]).
#[derive(Clone, Debug)]
pub struct Listed<'a> {
    /// The conversation.
    pub conversation: Conversation<'a>,
    /// Its [`title`].
    pub title: String,
    /// When a filter matched a message rather than the title: a little of
    /// the first matching message's text around the match ([`snippet`]).
    pub snippet: Option<String>,
}

/// Characters a snippet shows before and after the match.
const SNIPPET_BEFORE: usize = 30;
const SNIPPET_AFTER: usize = 60;

/// The conversations a person's list shows, **newest first** (by their
/// latest message; the reverse of [`list`]), each with its [`title`]. With
/// a non-blank `filter`, only those whose title contains it, or one of
/// whose messages' text does (case-insensitively; runs of whitespace match
/// any whitespace), the latter with a [`snippet`] of the first such
/// message (oldest first).
///
/// Linear in the transcript. A message's text (`to_plain_text`, an
/// html5ever pass) is computed only for messages whose stored XHTML, tags
/// left out, holds every word of the filter (a pre-check that never
/// refuses a match: [`without_tags`]), so a filter costs a substring scan
/// of the file plus the few parses of likely matches.
///
/// Archived conversations ([`Message::archived`] roots) are left out; they
/// are listed by [`listed_archived`].
pub fn listed<'a>(state: &'a State, filter: &str) -> Vec<Listed<'a>> {
    let mut out = listed_all(state, filter);
    out.retain(|l| !l.conversation.root.archived());
    out
}

/// [`listed`], of the archived conversations only (hidden from the usual
/// list, still in the file; restoring one lists it again).
pub fn listed_archived<'a>(state: &'a State, filter: &str) -> Vec<Listed<'a>> {
    let mut out = listed_all(state, filter);
    out.retain(|l| l.conversation.root.archived());
    out
}

fn listed_all<'a>(state: &'a State, filter: &str) -> Vec<Listed<'a>> {
    let needle = collapse_whitespace(filter).to_lowercase();
    let messages = state.messages();
    let roots = roots(state);
    let groups = grouped(&roots);
    let mut out: Vec<Listed<'a>> = groups
        .iter()
        .rev()
        .map(|g| {
            let conversation = g.conversation(messages);
            Listed {
                title: title(conversation.root),
                conversation,
                snippet: None,
            }
        })
        .collect();
    if needle.is_empty() {
        return out;
    }
    let words: Vec<&str> = needle
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    // Root index → position in `out`, for the conversations whose title
    // does not match: they are kept only if a message does.
    let mut keep = vec![false; out.len()];
    let mut pending: HashMap<usize, usize> = HashMap::new();
    for (pos, (l, g)) in out.iter().zip(groups.iter().rev()).enumerate() {
        if l.title.to_lowercase().contains(&needle) {
            keep[pos] = true;
        } else {
            pending.insert(g.root, pos);
        }
    }
    for (i, m) in messages.iter().enumerate() {
        if pending.is_empty() {
            break;
        }
        let Some(&pos) = pending.get(&roots[i]) else {
            continue;
        };
        if !words.is_empty() {
            let raw = without_tags(&m.content).to_lowercase();
            if !words.iter().all(|w| raw.contains(w)) {
                continue;
            }
        }
        if let Some(s) = snippet(&crate::xhtml::to_plain_text(&m.content), &needle) {
            out[pos].snippet = Some(s);
            keep[pos] = true;
            pending.remove(&roots[i]);
        }
    }
    let mut keep = keep.into_iter();
    out.retain(|_| keep.next().unwrap_or(false));
    out
}

/// Stored XHTML with every `<…>` left out: a cheap superset of the words
/// of its text, for [`listed`]'s pre-check. In stored (sanitised) XHTML a
/// `<` in text is always escaped, so no text is left out; a word split by
/// an inline element (`fo<b>o</b>`) is whole again; what is joined across
/// a block boundary or kept from an odd attribute only lets through a
/// message the real text then refuses.
fn without_tags(xhtml: &str) -> String {
    let mut out = String::with_capacity(xhtml.len());
    let mut rest = xhtml;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        match rest[open..].find('>') {
            Some(close) => rest = &rest[open + close + 1..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` with every run of whitespace made one space, trimmed.
fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Up to [`SNIPPET_BEFORE`] characters before the first case-insensitive
/// match of `needle` (already lowercase, whitespace collapsed) in `text`,
/// the match, and up to [`SNIPPET_AFTER`] after it, with "…" where `text`
/// goes on; whitespace collapsed. `None` when `text` does not contain it.
pub fn snippet(text: &str, needle: &str) -> Option<String> {
    let text = collapse_whitespace(text);
    // Lowercase char by char, remembering where each lowered char came
    // from: lowercasing may change a character's length.
    let mut lower = String::with_capacity(text.len());
    let mut origin: Vec<usize> = Vec::with_capacity(text.len() + 1);
    for (i, ch) in text.char_indices() {
        for l in ch.to_lowercase() {
            for _ in 0..l.len_utf8() {
                origin.push(i);
            }
            lower.push(l);
        }
    }
    origin.push(text.len());
    let at = lower.find(needle)?;
    let start = origin[at];
    let end = origin[at + needle.len()].max(start);
    let before: String = {
        let mut chars: Vec<char> = text[..start].chars().rev().take(SNIPPET_BEFORE).collect();
        chars.reverse();
        chars.into_iter().collect()
    };
    let after: String = text[end..].chars().take(SNIPPET_AFTER).collect();
    let mut out = String::new();
    if before.len() < start {
        out.push('…');
    }
    out.push_str(&before);
    out.push_str(&text[start..end]);
    out.push_str(&after);
    if end + after.len() < text.len() {
        out.push('…');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(user: &str, secs: i64, text: &str, parent: Option<&Message>) -> Message {
        let mut m = Message::new(
            user,
            Timestamp::from_unix(1_800_000_000 + secs),
            text,
            format!("<p>{text}</p>"),
        );
        m.parent = parent.map(|p| p.id.clone());
        m
    }

    fn root(user: &str, secs: i64, text: &str) -> Message {
        let mut m = msg(user, secs, text, None);
        m.mark_new_conversation();
        m
    }

    #[test]
    fn conversations_follow_the_links_branch_follows() {
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        // A legacy transcript: parentless messages chain into one conversation.
        let l1 = msg("ann", 0, "legacy one", None);
        let l2 = msg("ann", 1, "legacy two", None);
        let a = root("ann", 10, "kilns");
        let a1 = msg("m", 11, "about kilns", Some(&a));
        let b = root("ann", 20, "glazes");
        let b1 = msg("m", 21, "about glazes", Some(&b));
        let a2 = msg("ann", 30, "more kilns", Some(&a1));
        for m in [&l1, &l2, &a, &a1, &b, &b1, &a2] {
            s.push_message(m.clone());
        }
        let convs = list(&s);
        let got: Vec<(&str, &str, usize)> = convs
            .iter()
            .map(|c| (c.root.title.as_str(), c.latest.title.as_str(), c.count))
            .collect();
        assert_eq!(
            got,
            [
                ("legacy one", "legacy two", 2),
                ("glazes", "about glazes", 2),
                ("kilns", "more kilns", 3)
            ]
        );
        // Every message's conversation agrees with State::branch.
        let roots = roots(&s);
        for (i, m) in s.messages().iter().enumerate() {
            assert_eq!(
                s.branch(&m.id)[0].id,
                s.messages()[roots[i]].id,
                "{}",
                m.title
            );
        }
        assert_eq!(root_of(&s, &a2.id), Some(a.id.as_str()));
        assert_eq!(latest_of(&s, &b.id).unwrap().id, b1.id);
        assert_eq!(latest_of(&s, "m_nope"), None);
        // Finding: a root's prefix, any member's id, or a clear error.
        assert_eq!(find(&s, &a.id[..12]), Ok(a.id.as_str()));
        assert_eq!(find(&s, &b1.id), Ok(b.id.as_str()));
        assert_eq!(find(&s, &a2.id[..12]), Ok(a.id.as_str()));
        assert!(find(&s, "m_zzzz").unwrap_err().contains("no conversation"));
        assert!(find(&s, "m_").unwrap_err().contains("ambiguous"));
    }

    #[test]
    fn the_device_conversation_wins_over_newer_merged_messages() {
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        let mine = root("ann", 0, "mine");
        let mine1 = msg("m", 1, "answer", Some(&mine));
        // Another device's conversation, merged in, all newer.
        let theirs = root("bob", 50, "theirs");
        let theirs1 = msg("m", 51, "their answer", Some(&theirs));
        for m in [&mine, &mine1, &theirs, &theirs1] {
            s.push_message(m.clone());
        }
        assert_eq!(continue_from(&s, Some(&mine.id)).unwrap().id, mine1.id);
        // No record, or a record of a conversation no longer there: the newest.
        assert_eq!(continue_from(&s, None).unwrap().id, theirs1.id);
        assert_eq!(continue_from(&s, Some("m_gone")).unwrap().id, theirs1.id);
        assert!(continue_from(&State::new(Timestamp::from_unix(0)), None).is_none());
    }

    #[test]
    fn parent_cycles_end() {
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        let mut a = msg("ann", 0, "a", None);
        let mut b = msg("ann", 1, "b", None);
        a.parent = Some(b.id.clone());
        b.parent = Some(a.id.clone());
        s.push_message(a);
        s.push_message(b);
        let convs = list(&s);
        assert_eq!(convs.iter().map(|c| c.count).sum::<usize>(), 2);
    }

    #[test]
    fn listed_is_newest_first_titled_and_filtered_with_snippets() {
        let mut s = State::new(Timestamp::from_unix(1_800_000_000));
        let a = root("ann", 0, "Kilns and firing");
        let a1 = msg(
            "m",
            1,
            "A long answer about cones. The VOLCANO glaze needs a slow cool, and more words after it, so many more words that the snippet has to cut them off somewhere.",
            Some(&a),
        );
        let b = root("ann", 20, "Glazes");
        let b1 = msg("m", 21, "about glazes", Some(&b));
        let mut c = root("ann", 30, "imported root");
        c.extra.insert(
            X_IMPORT_KEY.into(),
            crate::RawJson::from(serde_json::json!({"title": "From ChatGPT"})),
        );
        for m in [&a, &a1, &b, &b1, &c] {
            s.push_message(m.clone());
        }
        let all = listed(&s, "  ");
        let titles: Vec<&str> = all.iter().map(|l| l.title.as_str()).collect();
        assert_eq!(titles, ["From ChatGPT", "Glazes", "Kilns and firing"]);
        assert!(all.iter().all(|l| l.snippet.is_none()));
        assert_eq!(all[2].conversation.count, 2);
        assert_eq!(all[2].conversation.latest.id, a1.id);

        // A title match needs no snippet; a message match carries one, cut
        // with "…" on both sides, the match in its own case.
        let by_title = listed(&s, "GLAZES");
        assert_eq!(by_title.len(), 1);
        assert_eq!(by_title[0].title, "Glazes");
        assert_eq!(by_title[0].snippet, None);
        let by_text = listed(&s, "volcano   glaze");
        assert_eq!(by_text.len(), 1);
        assert_eq!(by_text[0].title, "Kilns and firing");
        let snip = by_text[0].snippet.as_deref().unwrap();
        assert!(snip.starts_with('…') && snip.ends_with('…'), "{snip}");
        assert!(snip.contains("VOLCANO glaze"), "{snip}");
        assert!(listed(&s, "nothing like this").is_empty());
        // Markup is not text: a tag name does not match; a word split by
        // inline markup is one word of the text.
        assert!(listed(&s, "<p>").is_empty());
        let mut split = root("ann", 40, "split");
        split.content = "<p>An <strong>ob</strong>sidian stone</p>".into();
        s.push_message(split);
        let found = listed(&s, "OBSIDIAN");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].snippet.as_deref(), Some("An obsidian stone"));
    }

    #[test]
    fn snippets_keep_character_boundaries() {
        assert_eq!(
            snippet("short Ünïcode text", "ünï").as_deref(),
            Some("short Ünïcode text")
        );
        let long = format!("{}İstanbul{}", "é".repeat(40), "ß".repeat(80));
        let s = snippet(&long, "stanbul").unwrap();
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("stanbul"));
        assert_eq!(snippet("abc", "x"), None);
        assert_eq!(snippet("a\n\n  b", "a b").as_deref(), Some("a b"));
    }
}

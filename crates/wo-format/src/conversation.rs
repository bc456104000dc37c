//! Conversations: a root message and its descendants, by the same links
//! [`State::branch`] follows (`llm_state_v1.md`, Message `parent` and
//! `new_conversation`), so a conversation listed here is exactly what a
//! turn continuing it sends as its recent window.
//!
//! Each message belongs to one conversation:
//! - a message with a `parent` in the file belongs to its parent's;
//! - a message marked `new_conversation` (no `parent`) is a root;
//! - any other message (no `parent`, or a `parent` not in the file) follows
//!   the latest earlier message without a parent — a legacy or imported
//!   transcript is one conversation — or is a root when there is none.
//!
//! Which conversation a new question continues is [`continue_from`]'s rule
//! (documented there): the conversation this device last used, never simply
//! the newest message, so messages merged in from another device do not
//! take the conversation over.

use std::collections::HashMap;

use crate::model::{Message, State};
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
    // The latest earlier message without a parent, for each message.
    let mut previous_parentless = Vec::with_capacity(messages.len());
    let mut last = None;
    for (i, m) in messages.iter().enumerate() {
        previous_parentless.push(last);
        if m.parent.is_none() {
            last = Some(i);
        }
    }
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
    let roots = roots(state);
    // root index → (latest index, count); messages are in (timestamp, id)
    // order, so the last one seen is the latest.
    let mut by_root: HashMap<usize, (usize, usize)> = HashMap::new();
    for (i, &r) in roots.iter().enumerate() {
        let e = by_root.entry(r).or_insert((i, 0));
        e.0 = i;
        e.1 += 1;
    }
    let mut out: Vec<(usize, Conversation<'_>)> = by_root
        .into_iter()
        .map(|(r, (latest, count))| {
            (
                latest,
                Conversation {
                    root: &messages[r],
                    latest: &messages[latest],
                    count,
                },
            )
        })
        .collect();
    out.sort_unstable_by_key(|(latest, _)| *latest);
    out.into_iter().map(|(_, c)| c).collect()
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
}

//! The one way the chat-app importers (ChatGPT, Claude, Open WebUI,
//! LibreChat, Jan, aichat, llm) turn conversations into `llm.json` messages.
//!
//! Each importer reads its format into [`Conversation`]s of [`Node`]s (the
//! source's ids, parent links, roles, names, times and text, plus whatever
//! else the source holds in `fields`); [`build`] does the rest the same way
//! for all of them:
//!
//! - **parents**: a node's `parent` is the source id of the node it answers;
//!   branches stay branches. A parent that is not in the conversation, or a
//!   cycle, makes the node a start of its own (with a warning).
//! - **times** are the source's; a node without one sits 1 µs after its
//!   parent (else at the conversation's time, else `fallback`), so times and
//!   hence ids are the same on every import of the same file.
//! - **content**: user text is escaped ([`text_to_xhtml`]); assistant text
//!   is Markdown ([`markdown_to_xhtml`], as `wo ask` stores answers) —
//!   wo-format's converters, the only ones.
//! - **titles**: a conversation's first message carries the conversation's
//!   title; the others their first line.
//! - **ids** are content-addressed (`username|timestamp|content`). Two nodes
//!   that come out with the same id are the same message (ChatGPT copies the
//!   history into a chat branched off another): it is kept once.
//! - **`x_import`** ([`X_IMPORT_KEY`]) on every message: `from` (the tool),
//!   `conversation` (its id), `id` (the node's), `fields` (what the message
//!   model has no field for), `time_derived` when the time was not in the
//!   file; on a conversation's first message also `title`,
//!   `conversation_fields` and `current` (the source's selected leaf).
//!
//! Conversations are converted in parallel (rayon); the result does not
//! depend on the order they finish in.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde_json::{Map, Value};
use wo_format::xhtml::{markdown_to_xhtml, text_to_xhtml};
use wo_format::{Message, Role, State, Timestamp, Usage};

use crate::human_time::{from_nanos, nanos_of, to_timestamp};
use crate::{
    ImportOptions, Imported, InteropError, Step, Warning, X_IMPORT_KEY, strip_secrets_map,
};
use wo_format::title::title_for as title_from_text;

/// Nanoseconds in a microsecond: the step between a parent and a child
/// whose time was not recorded.
const MICRO: i128 = 1_000;

/// How a node's text is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TextKind {
    /// Plain text, escaped as it is (what people type).
    Plain,
    /// Markdown (what models answer).
    Markdown,
}

/// One message as the source holds it.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// The source's id (unique within the conversation).
    pub id: String,
    /// The source id of the node this one answers.
    pub parent: Option<String>,
    pub role: Role,
    pub username: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Nanoseconds since the epoch; `None`: derived from the parent.
    pub time: Option<i128>,
    /// True when `time` was computed by the importer, not read.
    pub time_derived: bool,
    pub text: String,
    pub kind: TextKind,
    pub usage: Option<Usage>,
    /// Everything else the source holds about the message.
    pub fields: Map<String, Value>,
    /// A message restored whole (one this crate exported): used as it is.
    pub exact: Option<Message>,
}

impl Node {
    /// A node with no parent, time or text; its text is Markdown for an
    /// assistant (what models answer), plain for anyone else (what people
    /// type).
    pub(crate) fn new(id: impl Into<String>, role: Role, username: impl Into<String>) -> Self {
        Node {
            id: id.into(),
            parent: None,
            role,
            username: username.into(),
            provider: None,
            model: None,
            time: None,
            time_derived: false,
            text: String::new(),
            kind: if role == Role::Assistant {
                TextKind::Markdown
            } else {
                TextKind::Plain
            },
            usage: None,
            fields: Map::new(),
            exact: None,
        }
    }
}

/// One conversation as the source holds it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Conversation {
    pub id: String,
    pub title: Option<String>,
    /// When it started (nanoseconds), for nodes with no time of their own.
    pub time: Option<i128>,
    /// The source's selected leaf (ChatGPT's `current_node`, Open WebUI's
    /// `currentId`).
    pub current: Option<String>,
    pub fields: Map<String, Value>,
    pub nodes: Vec<Node>,
    /// Where it is in the file (a JSON pointer or a path), for warnings.
    pub location: String,
}

/// Nanoseconds of a Unix time in seconds (fractions kept to the
/// microsecond: what the sources record, and a float's digits beyond it are
/// noise that would make ugly timestamps).
pub(crate) fn nanos_from_secs(secs: f64) -> Option<i128> {
    if !secs.is_finite() {
        return None;
    }
    let micros = (secs * 1e6).round();
    // Years 0000–9999 only (what a timestamp can hold).
    (-62_167_219_200e6..=253_402_300_799e6)
        .contains(&micros)
        .then(|| micros as i128 * MICRO)
}

/// Nanoseconds of a Unix time whose unit the source does not say: seconds,
/// milliseconds, microseconds or nanoseconds, told apart by magnitude (a
/// date after 1973 in seconds is below 1e11; in milliseconds below 1e14; …).
pub(crate) fn nanos_from_epoch(n: f64) -> Option<i128> {
    let a = n.abs();
    let secs = if a < 1e11 {
        n
    } else if a < 1e14 {
        n / 1e3
    } else if a < 1e17 {
        n / 1e6
    } else {
        n / 1e9
    };
    nanos_from_secs(secs)
}

/// Nanoseconds of an ISO-8601 text (`Z` or an offset; zone-less is UTC).
pub(crate) fn nanos_from_iso(text: &str) -> Option<i128> {
    crate::human_time::parse_iso(text).map(|(t, _)| nanos_of(t))
}

/// The timestamp of an instant in nanoseconds.
pub(crate) fn timestamp(nanos: i128) -> Timestamp {
    to_timestamp(from_nanos(nanos))
}

/// Reads the items of an export in file order with `read` (the item, its
/// index, the warnings so far); the first error stops the import.
pub(crate) fn read_each<T>(
    items: Vec<serde_json::Value>,
    mut read: impl FnMut(serde_json::Value, usize, &mut Vec<Warning>) -> Result<T, InteropError>,
) -> Result<(Vec<T>, Vec<Warning>), InteropError> {
    let mut warnings = Vec::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        out.push(read(item, i, &mut warnings)?);
    }
    Ok((out, warnings))
}

/// Turns conversations into an [`Imported`] state (see the module docs).
/// `read_warnings` (what reading the input recovered from) come first in
/// the result, then the builder's; [`fallback_nanos`] of `path` dates what
/// nothing in the file dates.
pub(crate) fn build(
    from: &'static str,
    path: &Path,
    conversations: Vec<Conversation>,
    read_warnings: Vec<Warning>,
    opts: &ImportOptions,
) -> Imported {
    let fallback = fallback_nanos(opts, path);
    let total = conversations.len() as u64;
    let done = AtomicU64::new(0);
    let progress = &opts.progress;
    progress.report(Step::Converting { done: 0, total });
    let built: Vec<(Vec<Message>, Vec<Warning>)> = conversations
        .into_par_iter()
        .map(|c| {
            let out = build_one(from, path, c, fallback);
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            progress.report(Step::Converting { done: n, total });
            out
        })
        .collect();
    let mut seen: HashSet<String> = HashSet::new();
    let mut messages = Vec::new();
    let mut warnings = read_warnings;
    let mut repeated = 0usize;
    for (ms, ws) in built {
        warnings.extend(ws);
        for m in ms {
            if seen.insert(m.id.clone()) {
                messages.push(m);
            } else {
                repeated += 1;
            }
        }
    }
    if repeated > 0 {
        warnings.push(Warning::new(
            path,
            format!(
                "{repeated} message(s) appear in more than one conversation with the same \
                 author, time and text (a chat branched off another): each is kept once"
            ),
        ));
    }
    let newest = messages
        .iter()
        .map(|m| m.timestamp.clone())
        .max()
        .unwrap_or_else(|| timestamp(fallback));
    let mut state = State::new(newest);
    *state.messages_mut() = messages;
    state.normalize();
    Imported {
        state,
        warnings,
        suggested_context: None,
    }
}

fn build_one(
    from: &'static str,
    path: &Path,
    conv: Conversation,
    fallback: i128,
) -> (Vec<Message>, Vec<Warning>) {
    let mut warnings = Vec::new();
    let Conversation {
        id: conv_id,
        title,
        time: conv_time,
        current,
        fields: conv_fields,
        nodes,
        location,
    } = conv;
    let warn = |warnings: &mut Vec<Warning>, msg: String| {
        warnings.push(Warning::new(path, msg).at_pointer(location.clone()));
    };

    // Index by source id; a repeated id keeps the first node.
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(nodes.len());
    let mut dropped = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if index.insert(n.id.as_str(), i).is_some() {
            // Re-insert the first one: the later node is the duplicate.
            let first = nodes.iter().position(|m| m.id == n.id).unwrap_or(i);
            index.insert(n.id.as_str(), first);
            dropped[i] = true;
            warn(
                &mut warnings,
                format!("message id {:?} appears twice; the second is skipped", n.id),
            );
        }
    }
    // Parent index of each node (None: a start), cycles broken.
    let mut parent: Vec<Option<usize>> = nodes
        .iter()
        .map(|n| n.parent.as_deref().and_then(|p| index.get(p).copied()))
        .collect();
    for (i, n) in nodes.iter().enumerate() {
        if !dropped[i]
            && let Some(p) = n.parent.as_deref()
            && parent[i].is_none()
        {
            warn(
                &mut warnings,
                format!(
                    "message {:?} answers {p:?}, which is not in the conversation; it is imported as a start",
                    n.id
                ),
            );
        }
    }
    // Children lists, then a walk from the starts: parents before children.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for i in 0..nodes.len() {
        if dropped[i] {
            continue;
        }
        if let Some(p) = parent[i] {
            children[p].push(i);
        }
    }
    let mut order = Vec::with_capacity(nodes.len());
    let mut visited = vec![false; nodes.len()];
    let mut stack: Vec<usize> = (0..nodes.len())
        .rev()
        .filter(|&i| !dropped[i] && parent[i].is_none())
        .collect();
    loop {
        while let Some(i) = stack.pop() {
            if visited[i] {
                continue;
            }
            visited[i] = true;
            order.push(i);
            stack.extend(children[i].iter().rev().copied());
        }
        // What is left unvisited hangs off a cycle: cut it at the first node.
        match (0..nodes.len()).find(|&i| !dropped[i] && !visited[i]) {
            Some(i) => {
                warn(
                    &mut warnings,
                    format!(
                        "the parent links of message {:?} form a cycle; it is imported as a start",
                        nodes[i].id
                    ),
                );
                parent[i] = None;
                stack.push(i);
            }
            None => break,
        }
    }

    let mut ids: Vec<Option<String>> = vec![None; nodes.len()];
    let mut times: Vec<i128> = vec![0; nodes.len()];
    let mut out = Vec::with_capacity(order.len());
    // The conversation's first message (it carries the title): the start
    // dated earliest, ties and undated ones in file order.
    let root_first = (0..nodes.len())
        .filter(|&i| !dropped[i] && parent[i].is_none())
        .min_by_key(|&i| (nodes[i].time.unwrap_or(i128::MAX), i));
    let mut nodes: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    for (k, &i) in order.iter().enumerate() {
        let Some(node) = nodes[i].take() else {
            continue;
        };
        let parent_id = parent[i].and_then(|p| ids[p].clone());
        if let Some(mut exact) = node.exact {
            // Restored whole: its own id, parent and time.
            if exact.id.is_empty() {
                exact.id = wo_format::ids::message_id(
                    &exact.username,
                    exact.timestamp.as_str(),
                    &exact.content,
                );
            }
            times[i] = nanos_of(crate::human_time::from_timestamp(&exact.timestamp));
            ids[i] = Some(exact.id.clone());
            out.push(exact);
            continue;
        }
        let (t, derived) = match node.time {
            Some(t) => (t, node.time_derived),
            None => match parent[i] {
                Some(p) => (times[p] + MICRO, true),
                None => (conv_time.unwrap_or(fallback) + k as i128 * MICRO, true),
            },
        };
        times[i] = t;
        let content = match node.kind {
            TextKind::Plain => text_to_xhtml(&node.text),
            TextKind::Markdown => markdown_to_xhtml(&node.text),
        };
        let is_start = parent[i].is_none();
        let conv_title = title.as_deref().map(str::trim).filter(|t| !t.is_empty());
        let msg_title = match conv_title {
            Some(t) if is_start && Some(i) == root_first => one_line(t),
            _ if node.kind == TextKind::Markdown => title_from_text(&markdown_words(&node.text)),
            _ => title_from_text(&node.text),
        };
        let mut m = Message::new(&node.username, timestamp(t), msg_title, content);
        m.role = Some(node.role);
        m.parent = parent_id;
        m.provider = node.provider;
        m.model = node.model;
        m.usage = node.usage;
        if is_start {
            // Each imported conversation stays its own (spec/llm_state_v1.md:
            // an unmarked parentless message would continue the one before).
            m.mark_new_conversation();
        }

        let mut x = Map::new();
        x.insert("from".into(), from.into());
        if !conv_id.is_empty() {
            x.insert("conversation".into(), conv_id.clone().into());
        }
        let node_id = node.id.clone();
        if !node.id.is_empty() {
            x.insert("id".into(), node.id.into());
        }
        if derived {
            x.insert("time_derived".into(), true.into());
        }
        let mut fields = node.fields;
        let mut removed = Vec::new();
        strip_secrets_map(&mut fields, "", &mut removed);
        for r in removed {
            warn(
                &mut warnings,
                format!(
                    "a credential at {r} of a message was removed: secrets are never stored in llm.json (product §2)"
                ),
            );
        }
        let dropped_bytes = drop_data_urls(&mut fields);
        if dropped_bytes > 0 {
            warn(
                &mut warnings,
                format!(
                    "message {:?}: {dropped_bytes} bytes of inline files (data: URLs) not kept; llm.json holds text",
                    node_id
                ),
            );
        }
        if !fields.is_empty() {
            x.insert("fields".into(), Value::Object(fields));
        }
        if Some(i) == root_first {
            if let Some(t) = &title {
                x.insert("title".into(), t.clone().into());
            }
            if let Some(c) = &current {
                x.insert("current".into(), c.clone().into());
            }
            let mut cf = conv_fields.clone();
            let mut removed = Vec::new();
            strip_secrets_map(&mut cf, "", &mut removed);
            for r in removed {
                warn(
                    &mut warnings,
                    format!(
                        "a credential at {r} of the conversation was removed: secrets are never stored in llm.json (product §2)"
                    ),
                );
            }
            if !cf.is_empty() {
                x.insert("conversation_fields".into(), Value::Object(cf));
            }
        }
        m.extra
            .insert(X_IMPORT_KEY.to_owned(), Value::Object(x).into());
        ids[i] = Some(m.id.clone());
        out.push(m);
    }
    (out, warnings)
}

/// Replaces inline files (`data:` URLs longer than 1 KB) in `fields` by a
/// note of their size; returns the bytes dropped. Images pasted into a chat
/// are megabytes of base64 that no prompt can use.
fn drop_data_urls(fields: &mut Map<String, Value>) -> usize {
    fn walk(v: &mut Value, dropped: &mut usize) {
        match v {
            Value::String(s) if s.len() > 1024 && s.starts_with("data:") => {
                let kind = s[5..].split([';', ',']).next().unwrap_or("").to_owned();
                *dropped += s.len();
                *v = Value::String(format!(
                    "[data URL ({kind}) of {} bytes, not kept]",
                    s.len()
                ));
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, dropped)),
            Value::Object(o) => o.values_mut().for_each(|x| walk(x, dropped)),
            _ => {}
        }
    }
    let mut dropped = 0;
    for v in fields.values_mut() {
        walk(v, &mut dropped);
    }
    dropped
}

/// A title on one line, without control characters.
fn one_line(t: &str) -> String {
    let line: String = t
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    line.chars().filter(|c| !c.is_control()).collect()
}

/// The first line of Markdown that holds words, without its markup
/// (a fence line, heading and quote markers, emphasis and code marks), so
/// a title reads as words. Cheap: titles are made for every message.
fn markdown_words(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("```") && !l.starts_with("~~~"))
        .unwrap_or("");
    let line = line.trim_start_matches(['#', '>', ' ']);
    let line = line
        .strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .unwrap_or(line);
    line.chars().filter(|c| !matches!(c, '*' | '`')).collect()
}

/// The instant to use when nothing in a file dates a message.
fn fallback_nanos(opts: &ImportOptions, path: &Path) -> i128 {
    let ts = opts
        .fallback_time
        .clone()
        .unwrap_or_else(|| crate::mtime_or_now(path));
    nanos_of(crate::human_time::from_timestamp(&ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, parent: Option<&str>, role: Role, text: &str) -> Node {
        let mut n = Node::new(id, role, if role == Role::User { "alec" } else { "gpt-4o" });
        n.parent = parent.map(str::to_owned);
        n.text = text.to_owned();
        n.kind = if role == Role::User {
            TextKind::Plain
        } else {
            TextKind::Markdown
        };
        n
    }

    /// Options whose fallback time is the epoch, so that what the tests
    /// leave undated is dated alike on every run.
    fn opts() -> ImportOptions {
        ImportOptions {
            fallback_time: Some(Timestamp::parse("1970-01-01T00:00:00Z").unwrap()),
            ..ImportOptions::default()
        }
    }

    #[test]
    fn branches_become_parents_and_missing_times_follow_the_parent() {
        let mut a = node("a", None, Role::User, "Hi *there*");
        a.time = Some(1_000 * 1_000_000_000);
        let b = node("b", Some("a"), Role::Assistant, "**Hello**");
        let mut c = node("c", Some("a"), Role::Assistant, "Other branch");
        c.time = Some(1_005 * 1_000_000_000);
        let conv = Conversation {
            id: "conv".into(),
            title: Some("Greetings".into()),
            nodes: vec![c, b, a],
            ..Default::default()
        };
        let imported = build("test", Path::new("f.json"), vec![conv], Vec::new(), &opts());
        let ms = imported.state.messages();
        assert_eq!(ms.len(), 3);
        let a = ms
            .iter()
            .find(|m| m.content == "<p>Hi *there*</p>")
            .unwrap();
        assert_eq!(a.title, "Greetings");
        let b = ms
            .iter()
            .find(|m| m.content.contains("<strong>Hello</strong>"))
            .unwrap();
        assert_eq!(b.parent.as_deref(), Some(a.id.as_str()));
        assert_eq!(b.timestamp.as_str(), "1970-01-01T00:16:40.000001Z");
        let x = b.extra[X_IMPORT_KEY].to_value();
        assert_eq!(x["time_derived"], true);
        assert_eq!(x["id"], "b");
        let c = ms.iter().find(|m| m.content.contains("Other")).unwrap();
        assert_eq!(c.parent.as_deref(), Some(a.id.as_str()));
        assert_eq!(c.title, "Other branch");
    }

    #[test]
    fn a_missing_parent_and_a_cycle_make_starts_with_warnings() {
        let conv = Conversation {
            id: "c".into(),
            nodes: vec![
                node("x", Some("nowhere"), Role::User, "one"),
                node("p", Some("q"), Role::User, "two"),
                node("q", Some("p"), Role::User, "three"),
            ],
            ..Default::default()
        };
        let imported = build("test", Path::new("f.json"), vec![conv], Vec::new(), &opts());
        assert_eq!(imported.state.messages().len(), 3);
        let text: Vec<String> = imported.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            text.iter().any(|w| w.contains("not in the conversation")),
            "{text:?}"
        );
        assert!(text.iter().any(|w| w.contains("cycle")), "{text:?}");
    }

    #[test]
    fn identical_messages_in_two_conversations_are_kept_once() {
        let mut a = node("a", None, Role::User, "same");
        a.time = Some(5_000_000_000);
        let mut b = a.clone();
        b.id = "other".into();
        let c1 = Conversation {
            id: "1".into(),
            nodes: vec![a],
            ..Default::default()
        };
        let c2 = Conversation {
            id: "2".into(),
            nodes: vec![b],
            ..Default::default()
        };
        let imported = build(
            "test",
            Path::new("f.json"),
            vec![c1, c2],
            Vec::new(),
            &opts(),
        );
        assert_eq!(imported.state.messages().len(), 1);
        assert!(imported.warnings[0].message.contains("kept once"));
    }

    #[test]
    fn markdown_titles_read_as_words() {
        assert_eq!(markdown_words("```rust\nfn main() {}\n```"), "fn main() {}");
        assert_eq!(markdown_words("## The **plan**\n\nbody"), "The plan");
        assert_eq!(markdown_words("- use `x`"), "use x");
    }

    #[test]
    fn times_from_seconds_keep_microseconds() {
        assert_eq!(
            timestamp(nanos_from_secs(1_756_000_001.123_456).unwrap()).as_str(),
            "2025-08-24T01:46:41.123456Z"
        );
        assert_eq!(
            timestamp(nanos_from_secs(1_756_000_001.0).unwrap()).as_str(),
            "2025-08-24T01:46:41Z"
        );
        assert_eq!(nanos_from_secs(f64::NAN), None);
        assert_eq!(nanos_from_secs(1e300), None);
    }
}

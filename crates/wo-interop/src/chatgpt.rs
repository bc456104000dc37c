//! ChatGPT's data export: the `.zip` it mails, or the `conversations.json`
//! in it — an array of conversations, each a `mapping` of nodes
//! `{id, message, parent, children}` (a tree: an edited question or a
//! regenerated answer is a sibling branch) with `current_node` the leaf the
//! app showed last.
//!
//! Import ([`import`]): every node with a message becomes a message whose
//! `parent` is its node's parent (nodes without a message, and messages with
//! nothing in them, such as empty hidden system prompts, are skipped and
//! their children hang from the nearest message above). Roles: `user` →
//! [`ImportOptions::username`]; `assistant` → the message's `model_slug`
//! (else the conversation's `default_model_slug`, else
//! [`ImportOptions::assistant_name`]) as username and `model`, provider
//! `openai`; `system` → `system`; `tool` → a system message named after the
//! tool (`python`, `browser`, …). `create_time` (Unix seconds) → the
//! timestamp; a message without one sits 1 µs after its parent. Content:
//! text parts are kept (user text escaped, answers read as Markdown); code
//! and execution output become fenced blocks; quotes, browsing results and
//! reasoning summaries keep their text; images, audio and files are noted
//! by name (`[image: photo.png]`). The rest of each message (author name,
//! metadata, status, non-text parts, …) and of each conversation is kept
//! under `x_import` (see the crate README).
//!
//! Export ([`export`]): each conversation (a root message and its
//! descendants) as one element of that array, so this importer and other
//! tools read it back; every message also carries its whole `llm.json`
//! record in `metadata.x_wikioracle`, so a round trip through the shape
//! gives back the same messages, ids included.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rayon::prelude::*;
use serde_json::{Map, Value, json};
use wo_format::{Message, Role, State};

use crate::conv::{self, Conversation, Node, TextKind, nanos_from_secs};
use crate::markdown::fence;
use crate::source::{self, compact, kind, opt_f64, opt_str, shape};
use crate::{ImportOptions, Imported, InteropError, Warning};

/// Where our own exporter puts a message's whole `llm.json` record.
pub const EMBED_FIELD: &str = "x_wikioracle";

const HINT: &str = "ChatGPT → Settings → Data controls → Export data mails a .zip; pass the .zip or the conversations.json inside it";

/// Imports a ChatGPT export: the `.zip` or its `conversations.json`.
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    source::import_json(path, Some("conversations.json"), HINT, opts, import_value)
}

/// True when `v` looks like a ChatGPT `conversations.json`.
pub fn looks_like(v: &Value) -> bool {
    source::first_item(v).is_some_and(|c| c.contains_key("mapping"))
}

/// Imports an already parsed `conversations.json` (`shown` names it in
/// messages). A single conversation object is accepted too.
pub fn import_value(
    value: Value,
    shown: &Path,
    opts: &ImportOptions,
) -> Result<Imported, InteropError> {
    let is_one = |o: &Map<String, Value>| o.contains_key("mapping");
    let items = source::items(value, is_one, "conversations", shown, HINT)?;
    // Conversations are read in parallel; the first error in file order is
    // the one reported, whichever thread met it.
    type Read = Result<(Conversation, usize, Vec<Warning>), InteropError>;
    let read: Vec<Read> = items
        .into_par_iter()
        .enumerate()
        .map(|(i, item)| {
            let mut w = Vec::new();
            read_conversation(item, i, shown, opts, &mut w).map(|(c, n)| (c, n, w))
        })
        .collect();
    let mut warnings = Vec::new();
    let mut conversations = Vec::with_capacity(read.len());
    let mut skipped_empty = 0usize;
    for r in read {
        let (c, n, w) = r?;
        warnings.extend(w);
        skipped_empty += n;
        conversations.push(c);
    }
    // One line for the whole file, not one per conversation.
    if skipped_empty > 0 {
        warnings.push(Warning::new(
            shown,
            format!(
                "{skipped_empty} empty message(s) (hidden system prompts and the like) skipped"
            ),
        ));
    }
    Ok(conv::build("chatgpt", shown, conversations, warnings, opts))
}

fn read_conversation(
    item: Value,
    i: usize,
    shown: &Path,
    opts: &ImportOptions,
    warnings: &mut Vec<Warning>,
) -> Result<(Conversation, usize), InteropError> {
    let at = format!("/{i}");
    let mut obj = source::object(item, "a conversation", shown, &at, HINT)?;
    let title = opt_str(&obj, "title", shown, &at, HINT)?.map(str::to_owned);
    let time = opt_f64(&obj, "create_time", shown, &at, HINT)?.and_then(nanos_from_secs);
    let current = opt_str(&obj, "current_node", shown, &at, HINT)?.map(str::to_owned);
    let id = opt_str(&obj, "conversation_id", shown, &at, HINT)?
        .or(opt_str(&obj, "id", shown, &at, HINT)?)
        .unwrap_or_default()
        .to_owned();
    let default_model = opt_str(&obj, "default_model_slug", shown, &at, HINT)?.map(str::to_owned);
    let mapping = source::take_required(
        &mut obj,
        "mapping",
        source::map,
        "an object of nodes",
        "a conversation without `mapping` (its messages): the file is cut short or not a ChatGPT export",
        shown,
        &at,
        HINT,
    )?;
    for k in [
        "title",
        "create_time",
        "current_node",
        "conversation_id",
        "id",
    ] {
        obj.remove(k);
    }
    compact(&mut obj);

    // First pass: each node's parent, and which nodes hold a message.
    let mut raw_nodes = Vec::with_capacity(mapping.len());
    let mut parent_of: HashMap<String, Option<String>> = HashMap::with_capacity(mapping.len());
    for (key, node) in mapping {
        let nat = format!("{at}/mapping/{}", crate::ptr(&key));
        let mut node = source::object(node, "a node", shown, &nat, HINT)?;
        let parent = opt_str(&node, "parent", shown, &nat, HINT)?.map(str::to_owned);
        parent_of.insert(key.clone(), parent.clone());
        let message = node.remove("message").unwrap_or(Value::Null);
        raw_nodes.push((key, parent, message, nat));
    }
    let mut nodes = Vec::with_capacity(raw_nodes.len());
    let mut kept: HashSet<String> = HashSet::new();
    let mut pending = Vec::with_capacity(raw_nodes.len());
    let mut skipped_empty = 0usize;
    for (key, parent, message, nat) in raw_nodes {
        match message {
            Value::Null => {}
            Value::Object(m) => {
                let node = read_message(
                    m,
                    &key,
                    &format!("{nat}/message"),
                    shown,
                    opts,
                    default_model.as_deref(),
                    warnings,
                )?;
                match node {
                    Some(node) => {
                        kept.insert(key.clone());
                        pending.push((node, parent));
                    }
                    None => skipped_empty += 1,
                }
            }
            other => {
                return Err(shape(
                    shown,
                    format!("{nat}/message"),
                    format!(
                        "`message` should be an object or null, found {}",
                        kind(&other)
                    ),
                    HINT,
                ));
            }
        }
    }
    // Parents: the nearest ancestor that became a message. Each node left
    // out is resolved once and remembered, so a long chain of empty nodes
    // above many messages costs one walk, not one per message.
    let mut nearest: HashMap<String, Option<String>> = HashMap::new();
    for (mut node, parent) in pending {
        let mut walked = Vec::new();
        let mut p = parent;
        let found = loop {
            let Some(id) = p else { break None };
            if kept.contains(&id) {
                break Some(id);
            }
            if let Some(known) = nearest.get(&id) {
                break known.clone();
            }
            // A cycle of empty nodes: no message above.
            if walked.len() > parent_of.len() {
                break None;
            }
            p = parent_of.get(&id).cloned().flatten();
            walked.push(id);
        };
        for id in walked {
            nearest.insert(id, found.clone());
        }
        node.parent = found;
        nodes.push(node);
    }
    Ok((
        Conversation {
            id,
            title,
            time,
            current,
            fields: obj,
            nodes,
            location: at,
        },
        skipped_empty,
    ))
}

/// One message; `None` when it holds nothing to keep.
fn read_message(
    mut m: Map<String, Value>,
    key: &str,
    at: &str,
    shown: &Path,
    opts: &ImportOptions,
    default_model: Option<&str>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<Node>, InteropError> {
    // A message this crate exported carries its whole record; it is used
    // unless the text beside it was edited since (then the text wins).
    if let Some(Value::Object(meta)) = m.get("metadata")
        && let Some(embedded) = meta.get(EMBED_FIELD)
        && let Ok(exact) = serde_json::from_value::<Message>(embedded.clone())
        && m.get("content")
            .and_then(|c| c.get("parts"))
            .and_then(|p| p.get(0))
            .and_then(Value::as_str)
            == Some(crate::markdown::message_markdown(&exact.content).as_str())
    {
        let mut node = Node::new(key, exact.effective_role(), exact.username.clone());
        node.exact = Some(exact);
        return Ok(Some(node));
    }
    let author = match m.get_mut("author") {
        Some(Value::Object(a)) => a,
        Some(other) => {
            return Err(shape(
                shown,
                format!("{at}/author"),
                format!("`author` should be an object, found {}", kind(other)),
                HINT,
            ));
        }
        None => {
            return Err(shape(shown, at, "a message without `author`", HINT));
        }
    };
    let role_name = match author.remove("role") {
        Some(Value::String(r)) => r,
        other => {
            return Err(shape(
                shown,
                format!("{at}/author/role"),
                format!(
                    "`author.role` should be a string, found {}",
                    other.as_ref().map_or("nothing", kind)
                ),
                HINT,
            ));
        }
    };
    let author_name = author
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    compact(author);
    if author.is_empty() {
        m.remove("author");
    }
    let time = opt_f64(&m, "create_time", shown, at, HINT)?.and_then(nanos_from_secs);
    let model_slug = m
        .get("metadata")
        .and_then(|v| v.get("model_slug"))
        .and_then(Value::as_str)
        .map(str::to_owned);

    let content = m.remove("content").unwrap_or(Value::Null);
    let attachments = attachment_names(m.get("metadata"));
    let (mut text, code_like, keep_content) =
        content_text(&content, &attachments, at, shown, warnings);
    // Files attached to the message but not shown in its parts.
    let mut noted: Vec<&str> = Vec::new();
    for (id, name) in &attachments {
        if !text.contains(name.as_str()) && !noted.contains(&id.as_str()) {
            noted.push(id);
            push_para(&mut text, &format!("[file: {name}]"));
        }
    }
    let is_context = content
        .get("content_type")
        .and_then(Value::as_str)
        .is_some_and(|t| t == "user_editable_context");
    if keep_content {
        m.insert("content".into(), content);
    }
    if text.trim().is_empty() {
        return Ok(None);
    }

    let (role, username, provider, model) = match role_name.as_str() {
        // Custom instructions: the user wrote them, but as a system prompt.
        "user" if is_context => (Role::System, "system".to_owned(), None, None),
        "user" => (Role::User, opts.username.clone(), None, None),
        "assistant" => {
            let slug = model_slug.or_else(|| default_model.map(str::to_owned));
            let name = slug.clone().unwrap_or_else(|| opts.assistant_name.clone());
            (Role::Assistant, name, Some("openai".to_owned()), slug)
        }
        "system" => (Role::System, "system".to_owned(), None, None),
        other => {
            // `tool` (python, browser, dalle…) and roles this version does
            // not know: a system message named after who wrote it.
            let name = author_name
                .clone()
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| other.to_owned());
            if other != "tool" {
                warnings.push(
                    Warning::new(
                        shown,
                        format!("unknown role {other:?}: imported as a system message"),
                    )
                    .at_pointer(format!("{at}/author/role")),
                );
            }
            (Role::System, name, None, None)
        }
    };
    m.remove("id");
    m.remove("create_time");
    if let Some(Value::Object(meta)) = m.get_mut("metadata") {
        meta.remove("model_slug");
        compact(meta);
    }
    compact(&mut m);
    if is_context || !matches!(role_name.as_str(), "user" | "assistant" | "system") {
        m.insert("role".into(), role_name.into());
    }

    let mut node = Node::new(key, role, username);
    node.provider = provider;
    node.model = model;
    node.time = time;
    node.kind = if code_like || role == Role::Assistant {
        TextKind::Markdown
    } else {
        TextKind::Plain
    };
    node.text = text;
    node.fields = m;
    Ok(Some(node))
}

/// `(id, name)` of the files in `metadata.attachments`.
fn attachment_names(metadata: Option<&Value>) -> Vec<(String, String)> {
    metadata
        .and_then(|m| m.get("attachments"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| {
                    let name = f.get("name")?.as_str()?.to_owned();
                    let id = f.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
                    Some((id, name))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn push_para(text: &mut String, para: &str) {
    if !text.trim().is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(para);
}

/// The text of a `content` object: `(text, is Markdown by construction,
/// whether the object must be kept because the text does not hold all of it)`.
fn content_text(
    content: &Value,
    attachments: &[(String, String)],
    at: &str,
    shown: &Path,
    warnings: &mut Vec<Warning>,
) -> (String, bool, bool) {
    let Value::Object(c) = content else {
        return (String::new(), false, !content.is_null());
    };
    let ctype = c.get("content_type").and_then(Value::as_str).unwrap_or("");
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match ctype {
        "text" | "multimodal_text" => {
            let mut text = String::new();
            let mut only_strings = true;
            for part in c
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match part {
                    Value::String(p) => {
                        if !p.is_empty() {
                            push_para(&mut text, p);
                        }
                    }
                    Value::Object(o) => {
                        only_strings = false;
                        if let Some(t) = o.get("text").and_then(Value::as_str) {
                            push_para(&mut text, t);
                        } else {
                            push_para(&mut text, &part_note(o, attachments));
                        }
                    }
                    _ => only_strings = false,
                }
            }
            let plain = ctype == "text" && only_strings && c.len() <= 2;
            (text, false, !plain)
        }
        "code" => {
            let lang = s("language");
            let lang = if lang == "unknown" {
                String::new()
            } else {
                lang
            };
            (fence(&s("text"), &lang), true, true)
        }
        "execution_output" => (fence(&s("text"), ""), true, true),
        "tether_quote" => {
            let mut t = s("text")
                .lines()
                .map(|l| format!("> {l}"))
                .collect::<Vec<_>>()
                .join("\n");
            let (title, url) = (s("title"), s("url"));
            if !url.is_empty() {
                push_para(
                    &mut t,
                    &format!(
                        "— [{}]({url})",
                        if title.is_empty() { &url } else { &title }
                    ),
                );
            }
            (t, true, true)
        }
        "tether_browsing_display" => {
            let mut t = s("result");
            if t.is_empty() {
                t = s("summary");
            }
            (t, false, true)
        }
        "user_editable_context" => {
            let mut t = String::new();
            for k in ["user_profile", "user_instructions"] {
                let v = s(k);
                if !v.trim().is_empty() {
                    push_para(&mut t, &v);
                }
            }
            (t, false, true)
        }
        "thoughts" => {
            let mut t = String::new();
            for th in c
                .get("thoughts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for k in ["summary", "content"] {
                    if let Some(v) = th.get(k).and_then(Value::as_str)
                        && !v.trim().is_empty()
                    {
                        push_para(&mut t, v);
                    }
                }
            }
            (t, true, true)
        }
        "reasoning_recap" => (s("content"), true, true),
        "system_error" => (format!("{}: {}", s("name"), s("text")), false, true),
        other => {
            let mut t = s("text");
            if t.is_empty() {
                t = s("result");
            }
            warnings.push(
                Warning::new(
                    shown,
                    format!(
                        "content type {other:?} is not known to this version: its text (if any) is imported, the whole object kept under x_import"
                    ),
                )
                .at_pointer(format!("{at}/content")),
            );
            (t, false, true)
        }
    }
}

/// `[image: name]` for an image, audio or file part.
fn part_note(part: &Map<String, Value>, attachments: &[(String, String)]) -> String {
    let ptype = part
        .get("content_type")
        .and_then(Value::as_str)
        .unwrap_or("attachment");
    let pointer = part
        .get("asset_pointer")
        .and_then(Value::as_str)
        .unwrap_or("");
    let file_id = pointer.rsplit("://").next().unwrap_or(pointer);
    let name = attachments
        .iter()
        .find(|(id, _)| !id.is_empty() && (id == file_id || pointer.ends_with(id.as_str())))
        .map(|(_, n)| n.clone())
        .or_else(|| {
            part.get("metadata")
                .and_then(|m| m.get("dalle"))
                .and_then(|d| d.get("prompt"))
                .and_then(Value::as_str)
                .map(|p| format!("generated from the prompt {p:?}"))
        })
        .unwrap_or_else(|| file_id.to_owned());
    let what = if ptype.starts_with("image") {
        "image"
    } else if ptype.contains("audio") {
        "audio"
    } else if ptype.contains("video") {
        "video"
    } else {
        "file"
    };
    if name.is_empty() {
        format!("[{what}]")
    } else {
        format!("[{what}: {name}]")
    }
}

/// The state's conversations in ChatGPT's `conversations.json` shape (an
/// array; see the module docs).
pub fn export(state: &State) -> Value {
    let convs = crate::export::conversations(state);
    let mut out = Vec::with_capacity(convs.len());
    for c in convs {
        let root = c.messages[0];
        let conv_id = root.id.clone();
        let root_node = format!("{conv_id}-root");
        let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
        for m in &c.messages[1..] {
            if let Some(p) = m.parent.as_deref() {
                children.entry(p).or_default().push(m.id.as_str());
            }
        }
        let mut mapping = Map::new();
        mapping.insert(
            root_node.clone(),
            json!({"id": root_node, "message": null, "parent": null, "children": [root.id]}),
        );
        for m in &c.messages {
            let parent = if m.id == root.id {
                root_node.clone()
            } else {
                m.parent.clone().unwrap_or_else(|| root_node.clone())
            };
            let role = m.effective_role();
            let mut metadata = Map::new();
            if role == Role::Assistant {
                metadata.insert(
                    "model_slug".into(),
                    m.model.clone().unwrap_or_else(|| m.username.clone()).into(),
                );
            }
            metadata.insert(
                EMBED_FIELD.into(),
                serde_json::to_value(m).unwrap_or(Value::Null),
            );
            let message = json!({
                "id": m.id,
                "author": {"role": role.as_str(), "name": null, "metadata": {}},
                "create_time": secs(m),
                "update_time": null,
                "content": {"content_type": "text", "parts": [crate::markdown::message_markdown(&m.content)]},
                "status": "finished_successfully",
                "end_turn": if role == Role::Assistant { Value::Bool(true) } else { Value::Null },
                "weight": 1.0,
                "metadata": metadata,
                "recipient": "all",
            });
            mapping.insert(
                m.id.clone(),
                json!({
                    "id": m.id,
                    "message": message,
                    "parent": parent,
                    "children": children.get(m.id.as_str()).cloned().unwrap_or_default(),
                }),
            );
        }
        let newest = c
            .messages
            .iter()
            .filter(|m| !children.contains_key(m.id.as_str()))
            .max_by(|a, b| a.order_key().cmp(&b.order_key()))
            .unwrap_or(&root);
        let last = c.messages.iter().map(|m| secs(m)).fold(f64::MIN, f64::max);
        out.push(json!({
            "title": c.title,
            "create_time": secs(root),
            "update_time": last,
            "mapping": mapping,
            "moderation_results": [],
            "current_node": newest.id,
            "conversation_id": conv_id,
            "id": conv_id,
        }));
    }
    Value::Array(out)
}

/// A message's time as Unix seconds with its fraction.
fn secs(m: &Message) -> f64 {
    let (s, n) = m.timestamp.instant();
    s as f64 + f64::from(n) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_name_their_files() {
        let att = vec![("file-1".to_owned(), "cat.png".to_owned())];
        let part = json!({"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-1"});
        assert_eq!(
            part_note(part.as_object().unwrap(), &att),
            "[image: cat.png]"
        );
        let part = json!({"content_type": "audio_asset_pointer", "asset_pointer": "sediment://x9"});
        assert_eq!(part_note(part.as_object().unwrap(), &[]), "[audio: x9]");
    }
}

//! Open WebUI's chat export (a chat's menu → Download → Export chat (.json),
//! or Settings → Chats → Export chats): an array of
//! `{id, user_id, title, chat, created_at, updated_at, …}` where
//! `chat.history` is the message tree — `messages` by id, each
//! `{id, parentId, childrenIds, role, content, timestamp, model, files, …}`,
//! and `currentId` the leaf shown. Exports without `history` hold
//! `chat.messages` in order.
//!
//! Import: `user` → [`ImportOptions::username`]; `assistant` → the message's
//! `model` (else the chat's first model, else
//! [`ImportOptions::assistant_name`]) as username and `model`; `system` →
//! `system`. `timestamp` is Unix seconds (milliseconds are recognised too).
//! Content: the user's text escaped, answers read as Markdown (Open WebUI's
//! `<details>` blocks of reasoning and tool calls keep their text). Files are
//! noted by name; inline images (data URLs) are not kept (llm.json holds
//! text). The rest is kept under `x_import`.

use std::path::Path;

use serde_json::{Map, Value};
use wo_format::Role;

use crate::conv::{self, Conversation, Node, nanos_from_epoch};
use crate::source::{self, compact, kind, opt_f64, opt_str, shape};
use crate::{ImportOptions, Imported, InteropError, Warning};

const HINT: &str = "in Open WebUI, a chat's menu → Download → Export chat (.json), or Settings → Chats → Export chats, writes this file";

/// Imports an Open WebUI export file.
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    source::import_json(path, None, HINT, opts, import_value)
}

/// True when `v` looks like an Open WebUI export.
pub fn looks_like(v: &Value) -> bool {
    source::first_item(v)
        .and_then(|c| c.get("chat"))
        .and_then(Value::as_object)
        .is_some_and(|chat| chat.contains_key("history") || chat.contains_key("messages"))
}

/// Imports an already parsed export (an array of chats, or one chat).
pub fn import_value(
    value: Value,
    shown: &Path,
    opts: &ImportOptions,
) -> Result<Imported, InteropError> {
    let is_one = |o: &Map<String, Value>| o.contains_key("chat");
    let items = source::items(value, is_one, "chats", shown, HINT)?;
    let (conversations, warnings) =
        conv::read_each(items, |item, i, w| read_chat(item, i, shown, opts, w))?;
    Ok(conv::build(
        "openwebui",
        shown,
        conversations,
        warnings,
        opts,
    ))
}

fn read_chat(
    item: Value,
    i: usize,
    shown: &Path,
    opts: &ImportOptions,
    warnings: &mut Vec<Warning>,
) -> Result<Conversation, InteropError> {
    let at = format!("/{i}");
    let mut obj = source::object(item, "a chat", shown, &at, HINT)?;
    let mut chat = source::take_required(
        &mut obj,
        "chat",
        source::map,
        "an object",
        "a chat without `chat` (its messages)",
        shown,
        &at,
        HINT,
    )?;
    let id = opt_str(&obj, "id", shown, &at, HINT)?
        .or(opt_str(&chat, "id", shown, &format!("{at}/chat"), HINT)?)
        .unwrap_or_default()
        .to_owned();
    let title = opt_str(&obj, "title", shown, &at, HINT)?
        .or(opt_str(&chat, "title", shown, &format!("{at}/chat"), HINT)?)
        .map(str::to_owned);
    let time = opt_f64(&obj, "created_at", shown, &at, HINT)?.and_then(nanos_from_epoch);
    let default_model = chat
        .get("models")
        .and_then(Value::as_array)
        .and_then(|m| m.first())
        .and_then(Value::as_str)
        .map(str::to_owned);

    let mut current = None;
    let (messages, linear, mat): (Vec<(String, Value)>, bool, String) = match chat.remove("history")
    {
        Some(Value::Object(mut h)) => {
            current = h
                .get("currentId")
                .and_then(Value::as_str)
                .map(str::to_owned);
            match h.remove("messages") {
                Some(Value::Object(m)) => {
                    chat.remove("messages"); // the current branch again, in order
                    (
                        m.into_iter().collect(),
                        false,
                        format!("{at}/chat/history/messages"),
                    )
                }
                Some(other) => {
                    return Err(shape(
                        shown,
                        format!("{at}/chat/history/messages"),
                        format!(
                            "`messages` should be an object by id, found {}",
                            kind(&other)
                        ),
                        HINT,
                    ));
                }
                None => (Vec::new(), false, format!("{at}/chat/history/messages")),
            }
        }
        Some(other) => {
            return Err(shape(
                shown,
                format!("{at}/chat/history"),
                format!("`history` should be an object, found {}", kind(&other)),
                HINT,
            ));
        }
        None => match chat.remove("messages") {
            Some(Value::Array(a)) => (
                a.into_iter()
                    .enumerate()
                    .map(|(j, v)| (j.to_string(), v))
                    .collect(),
                true,
                format!("{at}/chat/messages"),
            ),
            _ => {
                return Err(shape(
                    shown,
                    format!("{at}/chat"),
                    "a chat with neither `history` nor `messages`",
                    HINT,
                ));
            }
        },
    };
    let mut nodes = Vec::with_capacity(messages.len());
    let mut previous: Option<String> = None;
    for (key, m) in messages {
        let nat = format!("{mat}/{}", crate::ptr(&key));
        let mut m = source::object(m, "a message", shown, &nat, HINT)?;
        let mid = opt_str(&m, "id", shown, &nat, HINT)?
            .map(str::to_owned)
            .unwrap_or(key);
        let parent = match m.get("parentId") {
            Some(Value::String(p)) => Some(p.clone()),
            Some(Value::Null) => None,
            _ if linear => previous.clone(),
            _ => None,
        };
        let role_name = opt_str(&m, "role", shown, &nat, HINT)?
            .unwrap_or("")
            .to_owned();
        let model = opt_str(&m, "model", shown, &nat, HINT)?.map(str::to_owned);
        let time = opt_f64(&m, "timestamp", shown, &nat, HINT)?.and_then(nanos_from_epoch);
        let mut text = match m.remove("content") {
            Some(Value::String(s)) => s,
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n"),
            Some(Value::Null) | None => String::new(),
            Some(other) => {
                return Err(shape(
                    shown,
                    format!("{nat}/content"),
                    format!("`content` should be a string, found {}", kind(&other)),
                    HINT,
                ));
            }
        };
        for f in m
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = f
                .get("name")
                .or_else(|| f.get("file").and_then(|x| x.get("filename")))
                .and_then(Value::as_str);
            let is_image = f.get("type").and_then(Value::as_str) == Some("image");
            let note = match (name, is_image) {
                (Some(n), true) => format!("[image: {n}]"),
                (Some(n), false) => format!("[file: {n}]"),
                (None, true) => "[image]".to_owned(),
                (None, false) => "[file]".to_owned(),
            };
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&note);
        }
        let (role, username, node_model) = match role_name.as_str() {
            "user" => (Role::User, opts.username.clone(), None),
            "assistant" => {
                let model = model.clone().or_else(|| default_model.clone());
                (
                    Role::Assistant,
                    model.clone().unwrap_or_else(|| opts.assistant_name.clone()),
                    model,
                )
            }
            "system" => (Role::System, "system".to_owned(), None),
            other => {
                warnings.push(
                    Warning::new(
                        shown,
                        format!("unknown role {other:?}: imported as a system message"),
                    )
                    .at_pointer(format!("{nat}/role")),
                );
                let name = if other.is_empty() { "system" } else { other };
                (Role::System, name.to_owned(), None)
            }
        };
        for k in ["id", "parentId", "childrenIds", "role", "timestamp"] {
            m.remove(k);
        }
        if node_model.is_some() && m.get("model").and_then(Value::as_str) == node_model.as_deref() {
            m.remove("model");
        }
        compact(&mut m);
        let mut node = Node::new(mid.clone(), role, username);
        node.parent = parent;
        node.model = node_model;
        node.time = time;
        node.text = text;
        node.fields = m;
        nodes.push(node);
        previous = Some(mid);
    }
    let mut fields: Map<String, Value> = obj;
    for k in ["id", "title", "created_at"] {
        fields.remove(k);
    }
    chat.remove("title");
    chat.remove("id");
    compact(&mut chat);
    if !chat.is_empty() {
        fields.insert("chat".into(), Value::Object(chat));
    }
    compact(&mut fields);
    Ok(Conversation {
        id,
        title,
        time,
        current,
        fields,
        nodes,
        location: at,
    })
}

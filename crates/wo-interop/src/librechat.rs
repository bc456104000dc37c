//! LibreChat's conversation export (a chat's menu → Export → JSON):
//! `{conversationId, title, endpoint, options, exportAt, branches,
//! recursive, messages | messagesTree}` — the messages either nested
//! (`children`, when `recursive`) or flat, each `{messageId,
//! parentMessageId, sender, text, content, isCreatedByUser, model,
//! endpoint, createdAt, tokenCount, …}`; a first message's parent is the
//! zero UUID. An array of such exports is read too.
//!
//! Import: `isCreatedByUser` → [`ImportOptions::username`]; otherwise an
//! assistant named after its `model` (else the conversation's
//! `options.model`, else its `sender` label) with `provider` = the endpoint.
//! `text` (else the `text` parts of `content`); the user's escaped, answers
//! read as Markdown. `createdAt` (ISO-8601); messages without one sit 1 µs
//! after their parent. An assistant's `tokenCount`/`promptTokens` fill
//! `usage`. The rest is kept under `x_import`.

use std::path::Path;

use serde_json::{Map, Value};
use wo_format::{Role, Usage};

use crate::conv::{self, Conversation, Node, nanos_from_iso};
use crate::source::{self, compact, kind, opt_str, shape};
use crate::{ImportOptions, Imported, InteropError};

const HINT: &str = "in LibreChat, a conversation's menu → Export → JSON writes this file";
const ROOT_PARENT: &str = "00000000-0000-0000-0000-000000000000";

/// Imports a LibreChat export file.
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    source::import_json(path, None, HINT, opts, import_value)
}

/// True when `v` looks like a LibreChat export.
pub fn looks_like(v: &Value) -> bool {
    source::first_item(v).is_some_and(|o| {
        o.contains_key("conversationId")
            && (o.contains_key("messages") || o.contains_key("messagesTree"))
    })
}

/// Imports an already parsed export (one conversation or an array of them).
pub fn import_value(
    value: Value,
    shown: &Path,
    opts: &ImportOptions,
) -> Result<Imported, InteropError> {
    let (items, prefix) = match value {
        Value::Array(items) => (items, true),
        Value::Object(o) => (vec![Value::Object(o)], false),
        other => {
            return Err(shape(
                shown,
                "",
                format!("expected a conversation object, found {}", kind(&other)),
                HINT,
            ));
        }
    };
    let mut conversations = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = if prefix {
            format!("/{i}")
        } else {
            String::new()
        };
        conversations.push(read_conversation(item, at, shown, opts)?);
    }
    Ok(conv::build(
        "librechat",
        shown,
        conversations,
        Vec::new(),
        opts,
    ))
}

fn read_conversation(
    item: Value,
    at: String,
    shown: &Path,
    opts: &ImportOptions,
) -> Result<Conversation, InteropError> {
    let mut obj = source::object(item, "a conversation", shown, &at, HINT)?;
    let id = opt_str(&obj, "conversationId", shown, &at, HINT)?
        .unwrap_or_default()
        .to_owned();
    let title = opt_str(&obj, "title", shown, &at, HINT)?.map(str::to_owned);
    let endpoint = opt_str(&obj, "endpoint", shown, &at, HINT)?.map(str::to_owned);
    let default_model = obj
        .get("options")
        .and_then(|o| o.get("model"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (key, list) = match (obj.remove("messagesTree"), obj.remove("messages")) {
        (Some(Value::Array(t)), _) => ("messagesTree", t),
        (_, Some(Value::Array(m))) => ("messages", m),
        (Some(other), _) | (_, Some(other)) => {
            return Err(shape(
                shown,
                format!("{at}/messages"),
                format!("the messages should be an array, found {}", kind(&other)),
                HINT,
            ));
        }
        (None, None) => {
            return Err(shape(
                shown,
                at,
                "an export without `messages` or `messagesTree`",
                HINT,
            ));
        }
    };
    // Flatten the tree (iteratively: a long chat nests deeply).
    let mut flat: Vec<(Map<String, Value>, String)> = Vec::new();
    let mut stack: Vec<(Value, String)> = list
        .into_iter()
        .enumerate()
        .rev()
        .map(|(j, v)| (v, format!("{at}/{key}/{j}")))
        .collect();
    while let Some((v, vat)) = stack.pop() {
        let mut m = source::object(v, "a message", shown, &vat, HINT)?;
        if let Some(children) = m.remove("children") {
            let Value::Array(children) = children else {
                return Err(shape(
                    shown,
                    format!("{vat}/children"),
                    format!("`children` should be an array, found {}", kind(&children)),
                    HINT,
                ));
            };
            for (j, c) in children.into_iter().enumerate().rev() {
                stack.push((c, format!("{vat}/children/{j}")));
            }
        }
        flat.push((m, vat));
    }
    let mut nodes = Vec::with_capacity(flat.len());
    for (mut m, mat) in flat {
        let mid = opt_str(&m, "messageId", shown, &mat, HINT)?
            .ok_or_else(|| shape(shown, mat.clone(), "a message without `messageId`", HINT))?
            .to_owned();
        let parent = opt_str(&m, "parentMessageId", shown, &mat, HINT)?
            .filter(|p| *p != ROOT_PARENT)
            .map(str::to_owned);
        let time = opt_str(&m, "createdAt", shown, &mat, HINT)?.and_then(nanos_from_iso);
        let by_user = m
            .get("isCreatedByUser")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut text = opt_str(&m, "text", shown, &mat, HINT)?
            .unwrap_or("")
            .to_owned();
        let mut keep_content = false;
        if let Some(Value::Array(parts)) = m.get("content") {
            keep_content = true;
            if text.trim().is_empty() {
                text = parts
                    .iter()
                    .filter_map(|p| match p.get("text") {
                        Some(Value::String(s)) => Some(s.as_str()),
                        Some(Value::Object(o)) => o.get("value").and_then(Value::as_str),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n\n");
            }
        }
        let model = opt_str(&m, "model", shown, &mat, HINT)?.map(str::to_owned);
        let sender = opt_str(&m, "sender", shown, &mat, HINT)?.map(str::to_owned);
        let msg_endpoint = opt_str(&m, "endpoint", shown, &mat, HINT)?
            .map(str::to_owned)
            .or_else(|| endpoint.clone());
        let mut node = if by_user {
            Node::new(mid.clone(), Role::User, opts.username.clone())
        } else {
            let model = model.clone().or_else(|| default_model.clone());
            let name = model
                .clone()
                .or_else(|| sender.clone())
                .unwrap_or_else(|| opts.assistant_name.clone());
            let mut n = Node::new(mid.clone(), Role::Assistant, name);
            n.model = model;
            n.provider = msg_endpoint;
            let completion = m.get("tokenCount").and_then(Value::as_u64);
            let prompt = m.get("promptTokens").and_then(Value::as_u64);
            if completion.is_some() || prompt.is_some() {
                n.usage = Some(Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    extra: Default::default(),
                });
            }
            n
        };
        for k in [
            "messageId",
            "parentMessageId",
            "createdAt",
            "text",
            "conversationId",
        ] {
            m.remove(k);
        }
        if !keep_content {
            m.remove("content");
        }
        compact(&mut m);
        node.parent = parent;
        node.time = time;
        node.text = text;
        node.fields = m;
        nodes.push(node);
    }
    for k in ["conversationId", "title"] {
        obj.remove(k);
    }
    compact(&mut obj);
    Ok(Conversation {
        id,
        title,
        time: None,
        current: None,
        fields: obj,
        nodes,
        location: at,
    })
}

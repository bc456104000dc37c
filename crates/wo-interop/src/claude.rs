//! Claude's data export (claude.ai → Settings → Privacy → Export data): a
//! `.zip` whose `conversations.json` is an array of conversations
//! `{uuid, name, created_at, updated_at, account, chat_messages[]}`; each
//! message `{uuid, text, content[], sender, created_at, updated_at,
//! attachments[], files[]}` and, in newer exports, `parent_message_uuid`
//! (a tree) — older ones are one line of messages in order.
//!
//! Import: `sender` `human` → [`ImportOptions::username`], `assistant` →
//! [`ImportOptions::assistant_name`] (the export does not name the model;
//! `--assistant-name` lets the user say which it was), provider
//! `anthropic`. Text: the `text` blocks of `content` (else `text`); the
//! user's text escaped, answers read as Markdown; `thinking` blocks are kept
//! under `x_import` only; tool use is noted by name. Attachments: their
//! `extracted_content` (the text Claude saw) is appended to the message in a
//! fenced block headed by the file name; `files` (images, PDFs) are noted by
//! name. Times: `created_at` (ISO-8601). The rest is kept under `x_import`.

use std::path::Path;

use serde_json::{Map, Value};
use wo_format::Role;

use crate::conv::{self, Conversation, Node, TextKind, nanos_from_iso};
use crate::markdown::fence;
use crate::source::{self, compact, opt_str};
use crate::{ImportOptions, Imported, InteropError, Warning};

const HINT: &str = "claude.ai → Settings → Privacy → Export data mails a .zip; pass the .zip or the conversations.json inside it";
/// The parent of a conversation's first message in newer exports.
const ROOT_PARENT: &str = "00000000-0000-4000-8000-000000000000";

/// Imports a Claude export: the `.zip` or its `conversations.json`.
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    source::import_json(path, Some("conversations.json"), HINT, opts, import_value)
}

/// True when `v` looks like a Claude `conversations.json`.
pub fn looks_like(v: &Value) -> bool {
    source::first_item(v).is_some_and(|c| c.contains_key("chat_messages"))
}

/// Imports an already parsed `conversations.json`.
pub fn import_value(
    value: Value,
    shown: &Path,
    opts: &ImportOptions,
) -> Result<Imported, InteropError> {
    let is_one = |o: &Map<String, Value>| o.contains_key("chat_messages");
    let items = source::items(value, is_one, "conversations", shown, HINT)?;
    let (conversations, warnings) = conv::read_each(items, |item, i, w| {
        read_conversation(item, i, shown, opts, w)
    })?;
    Ok(conv::build("claude", shown, conversations, warnings, opts))
}

fn read_conversation(
    item: Value,
    i: usize,
    shown: &Path,
    opts: &ImportOptions,
    warnings: &mut Vec<Warning>,
) -> Result<Conversation, InteropError> {
    let at = format!("/{i}");
    let mut obj = source::object(item, "a conversation", shown, &at, HINT)?;
    let id = opt_str(&obj, "uuid", shown, &at, HINT)?
        .unwrap_or_default()
        .to_owned();
    let title = opt_str(&obj, "name", shown, &at, HINT)?.map(str::to_owned);
    let time = opt_str(&obj, "created_at", shown, &at, HINT)?.and_then(nanos_from_iso);
    let messages = source::take_required(
        &mut obj,
        "chat_messages",
        source::array,
        "an array",
        "a conversation without `chat_messages`: the file is cut short or not a Claude export",
        shown,
        &at,
        HINT,
    )?;
    for k in ["uuid", "name", "created_at"] {
        obj.remove(k);
    }
    compact(&mut obj);
    let mut nodes: Vec<Node> = Vec::with_capacity(messages.len());
    let mut previous: Option<String> = None;
    for (j, m) in messages.into_iter().enumerate() {
        let mat = format!("{at}/chat_messages/{j}");
        let mut m = source::object(m, "a message", shown, &mat, HINT)?;
        let uuid = opt_str(&m, "uuid", shown, &mat, HINT)?
            .map(str::to_owned)
            .unwrap_or_else(|| format!("#{j}"));
        let sender = opt_str(&m, "sender", shown, &mat, HINT)?
            .unwrap_or("")
            .to_owned();
        let time = opt_str(&m, "created_at", shown, &mat, HINT)?.and_then(nanos_from_iso);
        // Newer exports link each message to the one it follows; older ones
        // are in order.
        let parent = match m.get("parent_message_uuid") {
            Some(Value::String(p)) if p == ROOT_PARENT => None,
            Some(Value::String(p)) => Some(p.clone()),
            _ => previous.clone(),
        };
        let (role, username, provider) = match sender.as_str() {
            "human" | "user" => (Role::User, opts.username.clone(), None),
            "assistant" => (
                Role::Assistant,
                opts.assistant_name.clone(),
                Some("anthropic".to_owned()),
            ),
            other => {
                warnings.push(
                    Warning::new(
                        shown,
                        format!("unknown sender {other:?}: imported as a system message"),
                    )
                    .at_pointer(format!("{mat}/sender")),
                );
                (
                    Role::System,
                    if other.is_empty() {
                        "system".to_owned()
                    } else {
                        other.to_owned()
                    },
                    None,
                )
            }
        };
        let mut text = message_text(&m);
        let mut keep_content = false;
        if let Some(Value::Array(blocks)) = m.get("content") {
            keep_content = blocks
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) != Some("text"));
        }
        for a in m
            .get("attachments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = a
                .get("file_name")
                .and_then(Value::as_str)
                .unwrap_or("attachment");
            match a.get("extracted_content").and_then(Value::as_str) {
                Some(body) if !body.trim().is_empty() => {
                    push_para(&mut text, &format!("[file: {name}]\n{}", fence(body, "")));
                }
                _ => push_para(&mut text, &format!("[file: {name}]")),
            }
        }
        for f in m
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = f.get("file_name").and_then(Value::as_str)
                && !text.contains(name)
            {
                push_para(&mut text, &format!("[file: {name}]"));
            }
        }
        for k in [
            "uuid",
            "sender",
            "created_at",
            "parent_message_uuid",
            "text",
        ] {
            m.remove(k);
        }
        if !keep_content {
            m.remove("content");
        }
        // Attachments' text is in the message now; their other fields stay.
        if let Some(Value::Array(atts)) = m.get_mut("attachments") {
            for a in atts.iter_mut() {
                if let Value::Object(a) = a {
                    a.remove("extracted_content");
                }
            }
        }
        compact(&mut m);
        let mut node = Node::new(uuid.clone(), role, username);
        node.parent = parent;
        node.provider = provider;
        node.time = time;
        node.text = text;
        // What people type is kept as typed (an attachment's fence
        // included); answers, and messages of unknown senders, are Markdown.
        if role == Role::System {
            node.kind = TextKind::Markdown;
        }
        node.fields = m;
        nodes.push(node);
        previous = Some(uuid);
    }
    Ok(Conversation {
        id,
        title,
        time,
        current: None,
        fields: obj,
        nodes,
        location: at,
    })
}

/// The text blocks of `content` (tool use noted), else `text`.
fn message_text(m: &Map<String, Value>) -> String {
    let mut out = String::new();
    if let Some(Value::Array(blocks)) = m.get("content") {
        for b in blocks {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(t) = b.get("text").and_then(Value::as_str)
                        && !t.is_empty()
                    {
                        push_para(&mut out, t);
                    }
                }
                Some("tool_use") => {
                    let name = b.get("name").and_then(Value::as_str).unwrap_or("a tool");
                    push_para(&mut out, &format!("[used {name}]"));
                }
                _ => {}
            }
        }
        if !out.trim().is_empty() {
            return out;
        }
    }
    m.get("text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn push_para(text: &mut String, para: &str) {
    if !text.trim().is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(para);
}

//! aichat's sessions: `<config>/aichat/sessions/<name>.yaml` (or inside an
//! agent's folder), `{model: "provider:model", temperature, …,
//! compressed_messages: [...], messages: [{role, content}]}`; `content` is
//! a string, a list of parts (`{type: text, text}`, `{type: image_url,
//! image_url: {url}}`) or a tool round (`{text, tool_results}`).
//!
//! [`import`] takes one session file or a folder of them (one conversation
//! each, named after the file). Messages answer the one before;
//! `compressed_messages` (turns aichat summarised away) come first.
//! `user` → [`ImportOptions::username`]; `assistant` → the model part of
//! `model`, with `provider` the part before the colon; `system` →
//! `system`. Sessions hold no times: the last message is dated at the
//! file's modification time (or [`ImportOptions::fallback_time`]) and
//! each earlier one a second before the next, marked `time_derived`, so a
//! session that grew and is imported again adds only its new turns (see
//! [`crate::Imported::merge_into`]).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use wo_format::Role;

use crate::conv::{self, Conversation, Node};
use crate::source::{self, compact, kind, shape};
use crate::{ImportOptions, Imported, InteropError, Step};

const HINT: &str = "aichat keeps sessions as YAML files in its config folder's sessions/ (`aichat --info` shows the folder); pass a file or the folder";
const SEC: i128 = 1_000_000_000;

/// True when `path` is a `.yaml`/`.yml` file.
pub fn is_session_file(path: &Path) -> bool {
    path.is_file()
        && path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

/// The session files at `path` (itself, or the YAML files in it).
pub fn session_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_owned()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_session_file(p))
        .collect();
    files.sort();
    files
}

/// Imports the sessions at `path` (see the module docs).
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    opts.progress.report(Step::Reading);
    let files = session_files(path);
    if files.is_empty() {
        return Err(InteropError::UnknownFormat {
            path: path.to_owned(),
            message: "no aichat session (a .yaml file) here".into(),
            hint: HINT.into(),
        });
    }
    opts.progress.report(Step::Parsing);
    let mut conversations = Vec::with_capacity(files.len());
    for f in &files {
        conversations.push(read_session(f, opts)?);
    }
    Ok(conv::build("aichat", path, conversations, Vec::new(), opts))
}

fn read_session(file: &Path, opts: &ImportOptions) -> Result<Conversation, InteropError> {
    let bytes = source::read_file(file, HINT)?;
    let value: Value = serde_norway::from_slice(&bytes).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        InteropError::Json {
            path: file.to_owned(),
            line,
            column,
            message: format!(
                "invalid YAML: {}",
                crate::error::strip_position(&e.to_string())
            ),
            hint: HINT.into(),
        }
    })?;
    let Value::Object(mut obj) = value else {
        return Err(shape(
            file,
            "",
            format!("a session should be a mapping, found {}", kind(&value)),
            HINT,
        ));
    };
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let model_full = obj
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let (provider, model) = match model_full.split_once(':') {
        Some((p, m)) => (Some(p.to_owned()), Some(m.to_owned())),
        None if model_full.is_empty() => (None, None),
        None => (None, Some(model_full.clone())),
    };
    let mut entries: Vec<(Value, String)> = Vec::new();
    for key in ["compressed_messages", "messages"] {
        match obj.remove(key) {
            Some(Value::Array(a)) => entries.extend(
                a.into_iter()
                    .enumerate()
                    .map(|(i, v)| (v, format!("/{key}/{i}"))),
            ),
            None | Some(Value::Null) => {}
            Some(other) => {
                return Err(shape(
                    file,
                    format!("/{key}"),
                    format!("`{key}` should be a list, found {}", kind(&other)),
                    HINT,
                ));
            }
        }
    }
    let last = opts
        .fallback_time
        .clone()
        .unwrap_or_else(|| crate::mtime_or_now(file));
    let last = crate::human_time::nanos_of(crate::human_time::from_timestamp(&last));
    let count = entries.len() as i128;
    let mut nodes = Vec::with_capacity(entries.len());
    let mut previous: Option<String> = None;
    for (i, (entry, at)) in entries.into_iter().enumerate() {
        let Value::Object(mut m) = entry else {
            return Err(shape(
                file,
                at,
                format!("a message should be a mapping, found {}", kind(&entry)),
                HINT,
            ));
        };
        let role_name = m
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let content = m.remove("content").unwrap_or(Value::Null);
        let (text, keep) = content_text(&content);
        if keep {
            m.insert("content".into(), content);
        }
        let (role, username, p, md) = match role_name.as_str() {
            "user" => (Role::User, opts.username.clone(), None, None),
            "assistant" => (
                Role::Assistant,
                model.clone().unwrap_or_else(|| opts.assistant_name.clone()),
                provider.clone(),
                model.clone(),
            ),
            "system" => (Role::System, "system".to_owned(), None, None),
            other => (
                Role::System,
                if other.is_empty() { "system" } else { other }.to_owned(),
                None,
                None,
            ),
        };
        if matches!(role_name.as_str(), "user" | "assistant" | "system") {
            m.remove("role");
        }
        // Where the entry was, so the position names the message.
        m.insert("at".into(), at.into());
        let id = i.to_string();
        let mut node = Node::new(id.clone(), role, username);
        node.parent = previous.replace(id);
        node.provider = p;
        node.model = md;
        node.time = Some(last - (count - 1 - i as i128) * SEC);
        node.time_derived = true;
        node.text = text;
        node.fields = m;
        nodes.push(node);
    }
    let mut fields: Map<String, Value> = obj;
    fields.insert("file".into(), file.display().to_string().into());
    compact(&mut fields);
    Ok(Conversation {
        id: name.clone(),
        title: Some(name),
        time: None,
        current: None,
        fields,
        nodes,
        location: file.display().to_string(),
    })
}

/// The text of a message's `content`, and whether the value must be kept
/// because the text does not hold all of it.
fn content_text(content: &Value) -> (String, bool) {
    match content {
        Value::String(s) => (s.clone(), false),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            out.push(t.to_owned());
                        }
                    }
                    Some("image_url") => {
                        let url = p
                            .get("image_url")
                            .and_then(|u| u.get("url"))
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        out.push(if url.starts_with("data:") || url.is_empty() {
                            "[image]".to_owned()
                        } else {
                            format!("[image: {url}]")
                        });
                    }
                    _ => {}
                }
            }
            (out.join("\n\n"), true)
        }
        Value::Object(o) => {
            let text = o
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            (text, true)
        }
        Value::Null => (String::new(), false),
        other => (other.to_string(), true),
    }
}

//! Jan's threads: Jan's data folder holds `threads/<id>/thread.json`
//! (`{id, object: "thread", title, assistants: [{assistant_name, model:
//! {id, …}}], created, updated, metadata}`) and `messages.jsonl`, one
//! message a line (`{id, thread_id, role, content: [{type: "text", text:
//! {value, annotations}}], status, created_at, completed_at, metadata, …}`).
//!
//! [`import`] takes one thread folder, the `threads` folder, or Jan's data
//! folder (which holds `threads/`). A thread is one line of messages, each
//! answering the line before. `user` → [`ImportOptions::username`];
//! `assistant` → the thread's assistant model id (else
//! [`ImportOptions::assistant_name`]). `created_at` is Unix milliseconds
//! (seconds are recognised too). Text parts are kept (the user's escaped,
//! answers read as Markdown); image parts are noted. The rest is kept under
//! `x_import`. A line that is not JSON is an error naming the file and line.

use std::path::{Path, PathBuf};

use serde_json::Value;
use wo_format::Role;

use crate::conv::{self, Conversation, Node, nanos_from_epoch};
use crate::source::{self, compact, kind, shape};
use crate::{ImportOptions, Imported, InteropError, Step};

const HINT: &str = "Jan keeps threads in its data folder (Settings → Advanced → Jan data folder): pass that folder, its threads/ folder, or one thread's folder";

/// True when `dir` is a thread folder.
pub fn is_thread(dir: &Path) -> bool {
    dir.join("messages.jsonl").is_file() || dir.join("thread.json").is_file()
}

/// The thread folders under `path` (itself, its children, or `threads/`'s).
pub fn thread_dirs(path: &Path) -> Vec<PathBuf> {
    if is_thread(path) {
        return vec![path.to_owned()];
    }
    let base = if path.join("threads").is_dir() {
        path.join("threads")
    } else {
        path.to_owned()
    };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&base)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && is_thread(p))
        .collect();
    dirs.sort();
    dirs
}

/// Imports the threads at `path` (see the module docs).
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    opts.progress.report(Step::Reading);
    // A thread's own file names its folder.
    let path = match path.parent() {
        Some(dir) if path.is_file() => dir,
        _ => path,
    };
    let dirs = thread_dirs(path);
    if dirs.is_empty() {
        return Err(InteropError::UnknownFormat {
            path: path.to_owned(),
            message: "no Jan thread here (a folder with thread.json and messages.jsonl)".into(),
            hint: HINT.into(),
        });
    }
    opts.progress.report(Step::Parsing);
    let mut conversations = Vec::with_capacity(dirs.len());
    for d in &dirs {
        conversations.push(read_thread(d, opts)?);
    }
    Ok(conv::build("jan", path, conversations, Vec::new(), opts))
}

fn read_thread(dir: &Path, opts: &ImportOptions) -> Result<Conversation, InteropError> {
    let thread_path = dir.join("thread.json");
    let mut thread = serde_json::Map::new();
    if thread_path.is_file() {
        let bytes = source::read_file(&thread_path, HINT)?;
        match source::parse_json(&bytes, &thread_path, HINT)? {
            Value::Object(o) => thread = o,
            other => {
                return Err(shape(
                    &thread_path,
                    "",
                    format!("thread.json should be an object, found {}", kind(&other)),
                    HINT,
                ));
            }
        }
    }
    let id = thread
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let title = thread
        .get("title")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let time = thread
        .get("created")
        .and_then(Value::as_f64)
        .and_then(nanos_from_epoch);
    let model = thread
        .get("assistants")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|a| a.get("model"))
        .and_then(|m| m.get("id"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty() && *m != "*")
        .map(str::to_owned);

    let messages_path = dir.join("messages.jsonl");
    let mut nodes = Vec::new();
    if messages_path.is_file() {
        let bytes = source::read_file(&messages_path, HINT)?;
        let mut previous: Option<String> = None;
        for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
            let line_no = n + 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let shown = PathBuf::from(format!("{}:{line_no}", messages_path.display()));
            let v: Value = source::parse_json(line, &shown, HINT)?;
            let Value::Object(mut m) = v else {
                return Err(shape(
                    &shown,
                    "",
                    format!("a message should be an object, found {}", kind(&v)),
                    HINT,
                ));
            };
            let mid = m
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("line {line_no}"));
            let role_name = m
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let time = m
                .get("created_at")
                .and_then(Value::as_f64)
                .and_then(nanos_from_epoch);
            let mut text = String::new();
            let mut keep = false;
            match m.get("content") {
                Some(Value::String(s)) => text = s.clone(),
                Some(Value::Array(parts)) => {
                    for p in parts {
                        let t = match p.get("type").and_then(Value::as_str) {
                            Some("text") => p
                                .get("text")
                                .and_then(|t| t.get("value").or(Some(t)))
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                            Some("image_url" | "image_file") => {
                                keep = true;
                                Some("[image]".to_owned())
                            }
                            _ => {
                                keep = true;
                                None
                            }
                        };
                        if let Some(t) = t.filter(|t| !t.is_empty()) {
                            if !text.is_empty() {
                                text.push_str("\n\n");
                            }
                            text.push_str(&t);
                        }
                        if p.get("text")
                            .and_then(|t| t.get("annotations"))
                            .and_then(Value::as_array)
                            .is_some_and(|a| !a.is_empty())
                        {
                            keep = true;
                        }
                    }
                }
                Some(Value::Null) | None => {}
                Some(other) => {
                    return Err(shape(
                        &shown,
                        "/content",
                        format!(
                            "`content` should be an array of parts, found {}",
                            kind(other)
                        ),
                        HINT,
                    ));
                }
            }
            let (role, username, node_model) = match role_name.as_str() {
                "user" => (Role::User, opts.username.clone(), None),
                "assistant" => (
                    Role::Assistant,
                    model.clone().unwrap_or_else(|| opts.assistant_name.clone()),
                    model.clone(),
                ),
                "system" => (Role::System, "system".to_owned(), None),
                other => (
                    Role::System,
                    if other.is_empty() { "system" } else { other }.to_owned(),
                    None,
                ),
            };
            for k in ["id", "object", "thread_id", "role", "created_at"] {
                m.remove(k);
            }
            if !keep {
                m.remove("content");
            }
            compact(&mut m);
            let mut node = Node::new(mid.clone(), role, username);
            node.parent = previous.replace(mid);
            node.model = node_model;
            node.time = time;
            node.text = text;
            node.fields = m;
            nodes.push(node);
        }
    }
    for k in ["id", "object", "title", "created"] {
        thread.remove(k);
    }
    compact(&mut thread);
    Ok(Conversation {
        id,
        title,
        time,
        current: None,
        fields: thread,
        nodes,
        location: dir.display().to_string(),
    })
}

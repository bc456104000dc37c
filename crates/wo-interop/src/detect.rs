//! Which format a path holds, and one entry point that imports any of them.
//!
//! Told from the shape, never from the name alone: a directory by what it
//! holds (a profiles tree, a project with `.ai/openai.json`, Jan threads,
//! aichat sessions); a file by its first bytes (zip, SQLite) and, for JSON
//! and YAML, by the keys of its value. A JSON file is parsed once: the value
//! [`detect`] read is handed to the importer.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{
    ImportOptions, Imported, InteropError, Step, aichat, chatgpt, claude, jan, librechat, llm_db,
    openai_cli, openwebui, profiles, source,
};

/// The formats `wo import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Another `llm.json` or an export of one (merged by the store).
    Llm,
    /// The CLI chat format's `.ai/openai.json` (product §9).
    OpenaiCli,
    /// The profiles layout (product §9).
    Profiles,
    /// ChatGPT's data export (`.zip` or `conversations.json`).
    Chatgpt,
    /// Claude's data export (`.zip` or `conversations.json`).
    Claude,
    /// Open WebUI's chat export JSON.
    OpenWebui,
    /// LibreChat's conversation export JSON.
    Librechat,
    /// Jan's thread folders.
    Jan,
    /// aichat's session YAML files.
    Aichat,
    /// simonw/llm's `logs.db`.
    LlmDb,
}

impl Format {
    /// Every format, in the order `--format` lists them.
    pub const ALL: [Format; 10] = [
        Format::Llm,
        Format::OpenaiCli,
        Format::Profiles,
        Format::Chatgpt,
        Format::Claude,
        Format::OpenWebui,
        Format::Librechat,
        Format::Jan,
        Format::Aichat,
        Format::LlmDb,
    ];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Llm => "llm",
            Format::OpenaiCli => "openai-cli",
            Format::Profiles => "profiles",
            Format::Chatgpt => "chatgpt",
            Format::Claude => "claude",
            Format::OpenWebui => "open-webui",
            Format::Librechat => "librechat",
            Format::Jan => "jan",
            Format::Aichat => "aichat",
            Format::LlmDb => "llm-db",
        }
    }

    /// What a person calls it.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Llm => "an llm.json",
            Format::OpenaiCli => "a CLI chat state file (.ai/openai.json)",
            Format::Profiles => "a profiles/ tree",
            Format::Chatgpt => "a ChatGPT export",
            Format::Claude => "a Claude export",
            Format::OpenWebui => "an Open WebUI export",
            Format::Librechat => "a LibreChat export",
            Format::Jan => "Jan threads",
            Format::Aichat => "aichat sessions",
            Format::LlmDb => "llm's logs.db",
        }
    }
}

/// What [`detect`] found: the format, and the JSON value when it had to
/// parse the file to tell (so it is not parsed twice).
#[derive(Debug)]
pub struct Detected {
    /// The format told from the path's shape.
    pub format: Format,
    /// For a JSON file: its value, and the path messages name it by.
    pub value: Option<(Value, PathBuf)>,
}

const HINT: &str = "name the format with --format (see `wo import --help` for the list)";

/// Tells the format of `path`.
pub fn detect(path: &Path, opts: &ImportOptions) -> Result<Detected, InteropError> {
    let plain = |format| Detected {
        format,
        value: None,
    };
    if !path.exists() {
        return Err(InteropError::NotFound {
            path: path.to_owned(),
            hint: "check the path".into(),
        });
    }
    if path.is_dir() {
        let has_tree = path.join("profiles").is_dir()
            || std::fs::read_dir(path)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.path().join("chats").is_dir());
        if has_tree {
            return Ok(plain(Format::Profiles));
        }
        if path.join(".ai/openai.json").is_file() {
            return Ok(plain(Format::OpenaiCli));
        }
        if !jan::thread_dirs(path).is_empty() {
            return Ok(plain(Format::Jan));
        }
        if !aichat::session_files(path).is_empty() {
            return Ok(plain(Format::Aichat));
        }
        if path.join("conversations.json").is_file() {
            return detect(&path.join("conversations.json"), opts);
        }
        return Err(InteropError::UnknownFormat {
            path: path.to_owned(),
            message: "a directory holding none of the formats wo import reads (a profiles/ tree, .ai/openai.json, Jan threads, aichat sessions, conversations.json)".into(),
            hint: HINT.into(),
        });
    }
    if llm_db::is_sqlite(path) {
        return Ok(plain(Format::LlmDb));
    }
    if source::is_zip(path) {
        opts.progress.report(Step::Reading);
        let (shown, bytes) = source::read_zip_entry(
            path,
            "conversations.json",
            "a ChatGPT or Claude export .zip holds conversations.json",
        )?;
        opts.progress.report(Step::Parsing);
        let value = source::parse_json(&bytes, &shown, HINT)?;
        drop(bytes);
        let format = json_format(&value).ok_or_else(|| InteropError::UnknownFormat {
            path: shown.clone(),
            message: "conversations.json is neither ChatGPT's (conversations with a mapping) nor Claude's (with chat_messages)".into(),
            hint: HINT.into(),
        })?;
        return Ok(Detected {
            format,
            value: Some((value, shown)),
        });
    }
    if aichat::is_session_file(path) {
        return Ok(plain(Format::Aichat));
    }
    if path
        .file_name()
        .is_some_and(|n| n == "messages.jsonl" || n == "thread.json")
        && let Some(dir) = path.parent()
        && jan::is_thread(dir)
    {
        return Ok(plain(Format::Jan));
    }
    opts.progress.report(Step::Reading);
    let bytes = source::read_file(path, HINT)?;
    // A state file names its schema near the top: the store reads it (and
    // reports its problems by pointer), so it is not parsed here.
    let head = &bytes[..bytes.len().min(4096)];
    if head.windows(9).any(|w| w == b"llm_state") {
        return Ok(plain(Format::Llm));
    }
    opts.progress.report(Step::Parsing);
    let value = source::parse_json(&bytes, path, HINT)?;
    drop(bytes);
    let format = json_format(&value).ok_or_else(|| InteropError::UnknownFormat {
        path: path.to_owned(),
        message: "JSON of a shape no importer knows (not an llm.json, a ChatGPT, Claude, Open WebUI or LibreChat export, nor .ai/openai.json)".into(),
        hint: HINT.into(),
    })?;
    Ok(Detected {
        format,
        value: (format != Format::Llm).then(|| (value, path.to_owned())),
    })
}

/// The format of a parsed JSON document, by its keys.
pub fn json_format(v: &Value) -> Option<Format> {
    if let Value::Object(o) = v {
        if o.contains_key("messages") && (o.contains_key("schema") || o.contains_key("version")) {
            return Some(Format::Llm);
        }
        if o.contains_key("conversation") && !o.contains_key("messages") {
            return Some(Format::OpenaiCli);
        }
    }
    if chatgpt::looks_like(v) {
        Some(Format::Chatgpt)
    } else if claude::looks_like(v) {
        Some(Format::Claude)
    } else if librechat::looks_like(v) {
        Some(Format::Librechat)
    } else if openwebui::looks_like(v) {
        Some(Format::OpenWebui)
    } else {
        None
    }
}

/// Imports `path` as `format` (`None`: detected). [`Format::Llm`] is not
/// read here (the store merges state files itself): it is an error to ask.
pub fn import(
    path: &Path,
    format: Option<Format>,
    opts: &ImportOptions,
) -> Result<(Format, Imported), InteropError> {
    let detected = match format {
        Some(f) => Detected {
            format: f,
            value: None,
        },
        None => detect(path, opts)?,
    };
    let format = detected.format;
    let imported = match (format, detected.value) {
        (Format::Chatgpt, Some((v, shown))) => chatgpt::import_value(v, &shown, opts)?,
        (Format::Claude, Some((v, shown))) => claude::import_value(v, &shown, opts)?,
        (Format::OpenWebui, Some((v, shown))) => openwebui::import_value(v, &shown, opts)?,
        (Format::Librechat, Some((v, shown))) => librechat::import_value(v, &shown, opts)?,
        (Format::Chatgpt, None) => chatgpt::import(path, opts)?,
        (Format::Claude, None) => claude::import(path, opts)?,
        (Format::OpenWebui, None) => openwebui::import(path, opts)?,
        (Format::Librechat, None) => librechat::import(path, opts)?,
        (Format::Jan, _) => jan::import(path, opts)?,
        (Format::Aichat, _) => aichat::import(path, opts)?,
        (Format::LlmDb, _) => llm_db::import(path, opts)?,
        (Format::OpenaiCli, _) => openai_cli::import_with(path, opts)?,
        (Format::Profiles, _) => profiles::import_with(path, opts)?,
        (Format::Llm, _) => {
            return Err(InteropError::UnknownFormat {
                path: path.to_owned(),
                message: "an llm.json is merged by the state store, not converted".into(),
                hint: "use `wo import FILE` or `wo merge FILE`".into(),
            });
        }
    };
    Ok((format, imported))
}

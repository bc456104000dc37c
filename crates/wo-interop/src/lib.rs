//! Readers and writers for the storage formats of WikiOracle's neighbours
//! (product §9), as pure functions over the paths they are given:
//!
//! - [`openai_cli`]: the CLI chat format's (product §9) `.ai/openai.json` (a CLI's settings plus one
//!   `conversation[]`), imported losslessly.
//! - [`profiles`]: the profiles layout's (product §9) `profiles/<P>/chats/<C>/messages.jsonl` tree,
//!   imported and exported both ways.
//! - The chat apps people arrive from, one module each: [`chatgpt`] (the data
//!   export's `.zip` or `conversations.json`; also exported), [`claude`],
//!   [`openwebui`], [`librechat`], [`jan`] (thread folders), [`aichat`]
//!   (session YAML) and [`llm_db`] (simonw/llm's `logs.db`, read-only). They
//!   share one builder (`conv`) and keep what the message model has no field
//!   for under [`X_IMPORT_KEY`].
//! - [`detect`]: which of these a path is, and [`detect::import`] to read any.
//! - [`export`]: Markdown (one document or one file per conversation),
//!   JSON Lines and the ChatGPT shape; [`markdown`]: stored XHTML back to
//!   Markdown (also what `wo log` prints).
//!
//! Importers return an [`Imported`]: a fresh, normalised [`State`] plus the
//! warnings met on the way (recovered lines, derived timestamps, …). They
//! never lock, never write `llm.json` and never touch the network; merging
//! the result into a state file is the store's job ([`Imported::merge_into`]
//! does the in-memory part). Everything a neighbour's file holds that the
//! `llm.json` model has no field for is kept in `extra` under the keys
//! [`OPENAI_CLI_KEY`] and [`PROFILES_KEY`], so exports can restore it (see
//! the crate README for their layout).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use wo_format::merge::MergeReport;
use wo_format::{Message, State, Timestamp};

pub mod aichat;
mod alpha;
pub mod chatgpt;
pub mod claude;
mod conv;
pub mod detect;
mod error;
pub mod export;
mod human_time;
pub mod jan;
mod json_style;
pub mod librechat;
pub mod llm_db;
pub mod markdown;
pub mod openai_cli;
pub mod openwebui;
pub mod profiles;
mod source;
mod text;

pub use alpha::{alpha_name, next_alpha};
pub use error::InteropError;
pub use human_time::{LocalOffset, format_human, parse_human};
pub use json_style::LineStyle;
pub use text::recover_text;

/// `extra` key (state and messages) holding what the CLI chat format's (product §9) file carries
/// beyond the `llm.json` model.
pub const OPENAI_CLI_KEY: &str = "import_openai_cli";
/// `extra` key (state and messages) holding the profiles layout's (product §9) folder names, meta
/// files and original line details.
pub const PROFILES_KEY: &str = "import_profiles";
/// `extra` key (messages) of the chat-app importers: `{from, conversation,
/// id, fields, time_derived}`, and on a conversation's first message also
/// `title`, `current` and `conversation_fields` (see the crate README).
pub const X_IMPORT_KEY: &str = wo_format::conversation::X_IMPORT_KEY;
/// Field of a seed-004 message line in which the exporter embeds the full
/// `llm.json` message of a message that did not come from a profiles tree,
/// so a later import restores it exactly.
pub const EMBED_KEY: &str = "wikioracle";

/// The result of an import.
#[derive(Clone, Debug)]
pub struct Imported {
    /// A normalised state: messages sorted, ids derived, dated by its newest
    /// message. Its `context` is left empty; see `suggested_context`.
    pub state: State,
    /// Problems that were recovered from (never fatal), in file order.
    pub warnings: Vec<Warning>,
    /// XHTML for the state's `context` when the source had a system prompt.
    /// product §3 keeps `context` from the base on merge, so applying it is the
    /// caller's explicit decision.
    pub suggested_context: Option<String>,
}

impl Imported {
    /// Merges the imported state into `base` (product §3 message and truth
    /// union) and deep-merges this crate's `extra` keys, which the generic
    /// merge would keep from `base` only: a second import of the same tree
    /// must update the folder and meta records that a later export relies
    /// on. Values from the import win where both have a leaf.
    ///
    /// The CLI chat format's (product §9) CLI appends entries without timestamps and moves
    /// `meta.last_updated`, so re-importing a file that grew derives new
    /// times, hence new ids, for entries imported before (aichat sessions
    /// likewise: they hold no times at all). An incoming
    /// message whose time was derived and that matches a `base` message
    /// imported the same way (same conversation index, username and
    /// content; for [`X_IMPORT_KEY`] messages the same format, conversation
    /// and source id) is taken to be that message: it is not added again, and its
    /// children point at the `base` one.
    pub fn merge_into(&self, base: &mut State) -> MergeReport {
        let rebased = rebase_rederived(&self.state, base);
        let report = wo_format::merge::merge_into(base, rebased.as_ref().unwrap_or(&self.state));
        for key in [OPENAI_CLI_KEY, PROFILES_KEY] {
            if let Some(incoming) = self.state.extra.get(key) {
                match base.extra.get_mut(key) {
                    Some(existing) => {
                        let mut merged = existing.to_value();
                        deep_merge(&mut merged, &incoming.to_value());
                        *existing = merged.into();
                    }
                    None => {
                        base.extra.insert(key.to_owned(), incoming.clone());
                    }
                }
            }
        }
        report
    }
}

/// An [`Imported`] that passed [`wo_format::admit`], ready to merge.
#[derive(Clone, Debug)]
pub struct AdmittedImport {
    /// The import, unchanged except where `sanitised` says.
    pub imported: Imported,
    /// JSON pointers (in the imported state) of content that broke the
    /// XHTML rules and was sanitised.
    pub sanitised: Vec<String>,
}

impl Imported {
    /// Holds the imported state to what `wo validate` checks (structure,
    /// nesting any reader accepts, XHTML content: sanitised where it can be),
    /// so merging it cannot leave a file that no longer opens or validates.
    /// A neighbour's format nests its own fields below ours, so a value it
    /// held legally can be too deep here: that refuses the import, with the
    /// pointer of each problem.
    pub fn admit(self) -> Result<AdmittedImport, Vec<wo_format::Issue>> {
        let Imported {
            state,
            warnings,
            suggested_context,
        } = self;
        let admitted = wo_format::admit::admit_state(state)?;
        let suggested_context = suggested_context.map(|c| {
            if wo_format::xhtml::check_fragment(&c).is_ok() {
                c
            } else {
                wo_format::xhtml::sanitize_html(&c)
            }
        });
        Ok(AdmittedImport {
            imported: Imported {
                state: admitted.state,
                warnings,
                suggested_context,
            },
            sanitised: admitted.sanitised,
        })
    }
}

/// See [`Imported::merge_into`]. `None` when nothing needs remapping.
fn rebase_rederived(incoming: &State, base: &State) -> Option<State> {
    // Who a message is in its source: (format, conversation, position or
    // id) plus author and content, for messages whose time was derived.
    let key = |m: &Message| -> Option<(String, String, String, String)> {
        if let Some(raw) = m.extra.get(X_IMPORT_KEY) {
            // Most imported messages carry their own time: skip parsing
            // their record (this runs over the whole state on every import).
            if !raw.as_str().contains("\"time_derived\"") {
                return None;
            }
            let r = raw.to_value();
            r.get("time_derived")?.as_bool()?.then_some(())?;
            return Some((
                r.get("from")?.as_str()?.to_owned(),
                format!(
                    "{}\u{0}{}",
                    r.get("conversation").and_then(Value::as_str).unwrap_or(""),
                    r.get("id").and_then(Value::as_str).unwrap_or("")
                ),
                m.username.clone(),
                m.content.clone(),
            ));
        }
        let r = m.extra.get(OPENAI_CLI_KEY)?.to_value();
        let derived = r
            .get("absent")?
            .as_array()?
            .iter()
            .any(|v| v == "timestamp");
        derived.then_some(())?;
        Some((
            OPENAI_CLI_KEY.to_owned(),
            r.get("index")?.as_u64()?.to_string(),
            m.username.clone(),
            m.content.clone(),
        ))
    };
    let known: HashMap<(String, String, String, String), &str> = base
        .messages()
        .iter()
        .filter_map(|m| key(m).map(|k| (k, m.id.as_str())))
        .collect();
    if known.is_empty() {
        return None;
    }
    let remap: HashMap<String, String> = incoming
        .messages()
        .iter()
        .filter_map(|m| {
            let id = known.get(&key(m)?)?;
            (*id != m.id).then(|| (m.id.clone(), (*id).to_owned()))
        })
        .collect();
    if remap.is_empty() {
        return None;
    }
    let mut out = incoming.clone();
    let messages = out.messages_mut();
    messages.retain(|m| !remap.contains_key(&m.id));
    for m in messages.iter_mut() {
        if let Some(new) = m.parent.as_ref().and_then(|p| remap.get(p)) {
            m.parent = Some(new.clone());
        }
    }
    out.normalize();
    Some(out)
}

fn deep_merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) => deep_merge(existing, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// A recovered problem: where it was found and what was done about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The file the problem was found in.
    pub path: PathBuf,
    /// 1-based line, for line-oriented files.
    pub line: Option<usize>,
    /// RFC 6901 pointer inside the JSON value (of the file, or of the line).
    pub pointer: Option<String>,
    /// What was wrong and what was done (skipped, defaulted, kept verbatim).
    pub message: String,
}

impl Warning {
    pub(crate) fn new(path: &Path, message: impl Into<String>) -> Self {
        Warning {
            path: path.to_owned(),
            line: None,
            pointer: None,
            message: message.into(),
        }
    }

    pub(crate) fn at_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    pub(crate) fn at_pointer(mut self, pointer: impl Into<String>) -> Self {
        self.pointer = Some(pointer.into());
        self
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(p) = &self.pointer {
            let p = if p.is_empty() { "(root)" } else { p };
            write!(f, " at {p}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Options shared by the importers.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// `username` of user messages (neither format names the person).
    /// Default: [`default_username`].
    pub username: String,
    /// `username` of assistant messages when the source names no model
    /// (the profiles layout (product §9) without `model_override`, the CLI chat format (product §9) without `model`).
    pub assistant_name: String,
    /// How the profiles layout's (product §9) zone-less local timestamps map to UTC.
    pub offset: LocalOffset,
    /// The instant used when nothing in a file dates a message. `None`: the
    /// file's modification time (deterministic for a given file, unlike now).
    pub fallback_time: Option<Timestamp>,
    /// Told how a long import is getting on (the CLI draws a bar).
    pub progress: Progress,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            username: default_username(),
            assistant_name: "assistant".to_owned(),
            offset: LocalOffset::System,
            fallback_time: None,
            progress: Progress::default(),
        }
    }
}

/// A stage of an import, for progress display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reading (and, for an archive, inflating) the input.
    Reading,
    /// Parsing it (JSON, YAML, SQL rows).
    Parsing,
    /// Converting conversations to messages: `done` of `total`.
    Converting {
        /// Conversations converted so far.
        done: u64,
        /// Conversations in the input.
        total: u64,
    },
}

/// Where an importer reports its [`Step`]s; by default nowhere. The
/// callback may be called from several threads at once.
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<ProgressFn>>);

/// The callback a [`Progress`] holds.
pub type ProgressFn = dyn Fn(&Step) + Send + Sync;

impl Progress {
    /// A progress that calls `f` with each step (from any thread).
    pub fn new(f: impl Fn(&Step) + Send + Sync + 'static) -> Self {
        Progress(Some(Arc::new(f)))
    }

    pub(crate) fn report(&self, step: Step) {
        if let Some(f) = &self.0 {
            f(&step);
        }
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(callback)"
        } else {
            "Progress(none)"
        })
    }
}

/// The OS user's login name (`USER`, `LOGNAME`, `USERNAME`), else `"user"`.
pub fn default_username() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .map(|v| v.trim().to_owned())
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| "user".to_owned())
}

/// Reads a file's modification time as a fallback instant.
pub(crate) fn mtime_or_now(path: &Path) -> Timestamp {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_secs()).ok())
        .map(Timestamp::from_unix)
        .unwrap_or_else(Timestamp::now)
}

/// Escapes one JSON-pointer reference token.
pub(crate) fn ptr(token: &str) -> String {
    wo_format::validate::pointer_token(token)
}

/// Removes values of secret-looking keys (API keys, tokens, passwords) from
/// `value`, recording their pointers: product §2 forbids secrets in `llm.json`,
/// and that outranks losslessness.
pub(crate) fn strip_secrets(value: &mut Value, at: &str, removed: &mut Vec<String>) {
    let mut path = Vec::new();
    strip_value(value, at, &mut path, removed);
}

pub(crate) fn strip_secrets_map(map: &mut Map<String, Value>, at: &str, removed: &mut Vec<String>) {
    let mut path = Vec::new();
    strip_map(map, at, &mut path, removed);
}

// The path is kept as tokens and joined only when something is removed:
// imports walk every field of every message, and nearly none hold a secret.
fn strip_value(value: &mut Value, at: &str, path: &mut Vec<String>, removed: &mut Vec<String>) {
    match value {
        Value::Object(map) => strip_map(map, at, path, removed),
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                if v.is_object() || v.is_array() {
                    path.push(i.to_string());
                    strip_value(v, at, path, removed);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

fn strip_map(
    map: &mut Map<String, Value>,
    at: &str,
    path: &mut Vec<String>,
    removed: &mut Vec<String>,
) {
    let secret: Vec<String> = map
        .iter()
        .filter(|(k, v)| text::is_secret_key(k) && text::holds_secret(v))
        .map(|(k, _)| k.clone())
        .collect();
    for k in secret {
        map.remove(&k);
        let mut p = at.to_owned();
        for t in path.iter().chain(std::iter::once(&k)) {
            p.push('/');
            p.push_str(&ptr(t));
        }
        removed.push(p);
    }
    for (k, v) in map.iter_mut() {
        if v.is_object() || v.is_array() {
            path.push(k.clone());
            strip_value(v, at, path, removed);
            path.pop();
        }
    }
}

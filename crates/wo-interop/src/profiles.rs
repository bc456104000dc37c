//! The profiles layout's (product §9) chat tree, both ways:
//!
//! ```text
//! profiles/
//!   A/meta.json                      {"id", "display_name", "created_at", "model_override"}
//!   A/chats/B/meta.json              same shape
//!   A/chats/B/messages.jsonl         {"role", "text", "ts": "Dec 06, 2025 05:14 PM", "image"?}
//!   A/chats/B/images/KJ221_thumb.jpg
//! ```
//!
//! [`import`] turns every line into a [`Message`] and records, under
//! [`PROFILES_KEY`], the folder names, the meta files and each line's keys
//! and leftover fields, so [`export`] writes the tree back byte for byte
//! (lines no known JSON style reproduces are kept verbatim). Messages that
//! did not come from a tree are exported with their full `llm.json` form
//! embedded under [`EMBED_KEY`], so importing the export restores them
//! exactly.
//!
//! Times: the lines hold local wall-clock minutes without a zone. They are
//! mapped to UTC with [`ImportOptions::offset`], and the `k`-th line (from
//! 0) of a file stamped with a given minute gets `k` seconds added (past 59,
//! microseconds after second 59), so messages of one minute keep their file
//! order in the state's (timestamp, id) order, and appending lines never
//! moves earlier ones.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use wo_format::validate::json_kind as kind;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::{OffsetDateTime, PrimitiveDateTime};
use wo_format::title::title_for;
use wo_format::xhtml::text_to_xhtml;
use wo_format::{Message, Role, State, Timestamp};

use crate::alpha::{alpha_cmp, is_alpha_name, next_after};
use crate::human_time::{
    format_created_at, format_human, from_nanos, from_timestamp, nanos_of, parse_created_at,
    parse_human, parse_iso, to_timestamp,
};
use crate::json_style::{LineStyle, OValue};
use crate::text::{is_recoverable, plain_text};
use crate::{
    EMBED_KEY, ImportOptions, Imported, InteropError, LocalOffset, PROFILES_KEY, Warning,
    mtime_or_now, ptr, strip_secrets_map,
};

const SEC: i128 = 1_000_000_000;
const META: &str = "meta.json";
const CHATS: &str = "chats";
const MESSAGES: &str = "messages.jsonl";
const HINT_ROOT: &str = "the profiles layout keeps chats in data/profiles/<P>/chats/<C>/messages.jsonl; pass the profiles folder (or its parent)";

/// The state-level record under [`PROFILES_KEY`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct TreeRecord {
    #[serde(default)]
    profiles: BTreeMap<String, ProfileRecord>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct ProfileRecord {
    /// Parsed `meta.json`; absent when the file was missing or unparseable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    meta: Option<Value>,
    /// `meta.json`'s exact text (written back when `meta` still matches it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    meta_raw: Option<String>,
    #[serde(default = "yes")]
    chats_dir: bool,
    #[serde(default)]
    chats: BTreeMap<String, ChatRecord>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct ChatRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    meta_raw: Option<String>,
    #[serde(default = "yes")]
    messages_file: bool,
    /// [`LineStyle::name`] of the file's lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    style: Option<String>,
    #[serde(default = "yes")]
    final_newline: bool,
}

fn yes() -> bool {
    true
}

// Manual defaults: a record made on export (not read from a tree) describes
// a folder that has everything and ends its file with a newline.
impl Default for ProfileRecord {
    fn default() -> Self {
        ProfileRecord {
            meta: None,
            meta_raw: None,
            chats_dir: true,
            chats: BTreeMap::new(),
        }
    }
}

impl Default for ChatRecord {
    fn default() -> Self {
        ChatRecord {
            meta: None,
            meta_raw: None,
            messages_file: true,
            style: None,
            final_newline: true,
        }
    }
}

/// The message-level record under [`PROFILES_KEY`]: where the line was and
/// what of it the message does not reproduce.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Origin {
    profile: String,
    chat: String,
    /// 1-based line number in `messages.jsonl`.
    line: u64,
    /// The line's keys in order.
    keys: Vec<String>,
    /// Values of keys the message does not reproduce exactly: always `ts`,
    /// and `id`, `image` and unknown fields; `role`/`text` when odd or lossy.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    fields: Map<String, Value>,
    /// The exact line, when re-rendering does not reproduce it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw: Option<String>,
}

/// Imports with [`ImportOptions::default`].
pub fn import(root: &Path) -> Result<Imported, InteropError> {
    import_with(root, &ImportOptions::default())
}

/// Imports the tree at `root` (the `profiles` folder, or a folder holding
/// one). Profiles and chats are read in alphabetic-sequence order
/// (`A … Z, AA …`), lines in file order; each message's `parent` is the line
/// before it in its chat. Users are `opts.username`; assistants are named by
/// the chat's `model_override`, else the profile's, else
/// `opts.assistant_name`.
///
/// Never fatal for bad content: a truncated last line (an interrupted
/// append), a line that is not UTF-8 or not JSON, a line without `text`, a
/// missing or corrupt `meta.json` each produce a [`Warning`] naming the file
/// and line, and the rest is imported. Only an unreadable root or folder is
/// an error.
pub fn import_with(root: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    let root = resolve_root(root)?;
    let mut cx = ImportCx {
        opts,
        warnings: Vec::new(),
        used_ids: HashSet::new(),
        messages: Vec::new(),
        offset_warned: false,
    };
    let mut tree = TreeRecord::default();
    for name in subdirs(&root, &mut cx.warnings)? {
        let dir = root.join(&name);
        let (meta, meta_raw) = read_meta(&dir, "profile", &mut cx.warnings);
        let profile_model = model_override(meta.as_ref());
        let profile_created = created(meta.as_ref());
        let chats_path = dir.join(CHATS);
        let chats_dir = chats_path.is_dir();
        let mut chats = BTreeMap::new();
        if chats_dir {
            for chat in subdirs(&chats_path, &mut cx.warnings)? {
                let record = cx.import_chat(
                    &name,
                    &chat,
                    &chats_path.join(&chat),
                    profile_model.as_deref(),
                    profile_created,
                )?;
                chats.insert(chat, record);
            }
        }
        tree.profiles.insert(
            name,
            ProfileRecord {
                meta,
                meta_raw,
                chats_dir,
                chats,
            },
        );
    }

    let fallback = opts
        .fallback_time
        .clone()
        .unwrap_or_else(|| mtime_or_now(&root));
    let newest = cx
        .messages
        .iter()
        .map(|m| m.timestamp.clone())
        .max()
        .unwrap_or(fallback);
    let mut state = State::new(newest);
    // Ids are unique by construction, so one sort replaces push_message's
    // per-message duplicate scan (quadratic on a 100k-message import).
    state.messages_mut().extend(cx.messages);
    state.normalize();
    state.extra.insert(
        PROFILES_KEY.into(),
        serde_json::to_value(&tree).unwrap_or(Value::Null).into(),
    );
    Ok(Imported {
        state,
        warnings: cx.warnings,
        suggested_context: None,
    })
}

struct ImportCx<'a> {
    opts: &'a ImportOptions,
    warnings: Vec<Warning>,
    used_ids: HashSet<String>,
    messages: Vec<Message>,
    offset_warned: bool,
}

/// One parsed line of `messages.jsonl`.
struct Parsed {
    line: usize,
    raw: String,
    keys: Vec<String>,
    ovalue: OValue,
    map: Map<String, Value>,
}

impl ImportCx<'_> {
    fn import_chat(
        &mut self,
        profile: &str,
        chat: &str,
        dir: &Path,
        profile_model: Option<&str>,
        profile_created: Option<PrimitiveDateTime>,
    ) -> Result<ChatRecord, InteropError> {
        let (meta, meta_raw) = read_meta(dir, "chat", &mut self.warnings);
        let model = model_override(meta.as_ref()).or_else(|| profile_model.map(str::to_owned));
        let chat_created = created(meta.as_ref()).or(profile_created);
        let file = dir.join(MESSAGES);
        let bytes = match std::fs::read(&file) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(InteropError::io(&file, e, "check the file's permissions"));
            }
        };
        let mut record = ChatRecord {
            meta,
            meta_raw,
            messages_file: bytes.is_some(),
            style: None,
            final_newline: true,
        };
        let Some(bytes) = bytes else {
            return Ok(record);
        };
        let (parsed, final_newline) = self.parse_lines(&file, &bytes);
        record.final_newline = final_newline;

        // The style most lines are written in; ties prefer Python's default.
        let style = LineStyle::ALL
            .into_iter()
            .map(|s| {
                (
                    s,
                    parsed
                        .iter()
                        .filter(|p| s.render(&p.ovalue) == p.raw)
                        .count(),
                )
            })
            .filter(|(_, n)| *n > 0)
            .max_by(|a, b| {
                a.1.cmp(&b.1)
                    .then_with(|| position(b.0).cmp(&position(a.0)))
            })
            .map(|(s, _)| s);
        record.style = style.map(|s| s.name().to_owned());
        let style = style.unwrap_or(LineStyle::Python);

        // Local minutes of the lines, and how many lines of each minute came
        // before: the k-th line of a minute is placed k seconds into it.
        let minutes: Vec<Option<PrimitiveDateTime>> = parsed
            .iter()
            .map(|p| {
                p.map
                    .get("ts")
                    .and_then(Value::as_str)
                    .and_then(parse_human)
            })
            .collect();
        let mut seen_in_minute: HashMap<PrimitiveDateTime, usize> = HashMap::new();

        // For a first line without a time: the chat's (else the profile's)
        // creation time, which appending never changes, before the options'
        // fallback and the file's modification time.
        let fallback = match chat_created {
            Some(local) => nanos_of(self.local_to_utc(local, &file)),
            None => nanos_of(from_timestamp(
                &self
                    .opts
                    .fallback_time
                    .clone()
                    .unwrap_or_else(|| mtime_or_now(&file)),
            )),
        };
        let mut prev_id: Option<String> = None;
        let mut prev_time: Option<i128> = None;
        for (p, minute) in parsed.into_iter().zip(minutes) {
            let at_line = |w: Warning| w.at_line(p.line);
            // A line this crate exported for a message from elsewhere.
            if let Some(m) = self.embedded(&p, &file) {
                if !self.used_ids.insert(m.id.clone()) {
                    self.warnings.push(at_line(Warning::new(
                        &file,
                        format!("repeats message {} of an earlier line; skipped", m.id),
                    )));
                    continue;
                }
                prev_id = Some(m.id.clone());
                prev_time = Some(nanos_of(from_timestamp(&m.timestamp)));
                let mut fields = p.map.clone();
                for k in ["role", "text", EMBED_KEY] {
                    fields.remove(k);
                }
                let mut m = m;
                self.attach_origin(&mut m, profile, chat, &p, fields, style, false);
                self.messages.push(m);
                continue;
            }
            let Some(text) = p.map.get("text").and_then(Value::as_str).map(str::to_owned) else {
                let what = match p.map.get("text") {
                    None => "has no \"text\"".to_owned(),
                    Some(v) => format!("has a \"text\" that is {}", kind(v)),
                };
                self.warnings.push(at_line(
                    Warning::new(&file, format!("line {what}; skipped")).at_pointer("/text"),
                ));
                continue;
            };
            let mut fields = p.map.clone();
            let (role, username) = match p.map.get("role") {
                Some(Value::String(r)) => match r.as_str() {
                    "user" => (Some(Role::User), self.opts.username.clone()),
                    "assistant" => (
                        Some(Role::Assistant),
                        model
                            .clone()
                            .unwrap_or_else(|| self.opts.assistant_name.clone()),
                    ),
                    "system" => (Some(Role::System), "system".to_owned()),
                    other => {
                        self.warnings.push(at_line(
                            Warning::new(
                                &file,
                                format!("unknown role {other:?}; imported without a role"),
                            )
                            .at_pointer("/role"),
                        ));
                        let name = if other.trim().is_empty() {
                            self.opts.username.clone()
                        } else {
                            other.to_owned()
                        };
                        (None, name)
                    }
                },
                other => {
                    let what = other.map_or("no role".to_owned(), |v| {
                        format!("a role that is {}", kind(v))
                    });
                    self.warnings.push(at_line(
                        Warning::new(&file, format!("line has {what}; imported as the user's"))
                            .at_pointer("/role"),
                    ));
                    (None, self.opts.username.clone())
                }
            };
            if role.is_some() {
                fields.remove("role");
            }
            if is_recoverable(&text) {
                fields.remove("text");
            }

            let time = match (&minute, p.map.get("ts")) {
                (Some(local), _) => {
                    let k = seen_in_minute.entry(*local).or_default();
                    let within = offset_in_minute(*k);
                    *k += 1;
                    Some(nanos_of(self.local_to_utc(*local, &file)) + within)
                }
                (None, Some(Value::String(s))) => match parse_iso(s) {
                    Some((t, _)) => Some(nanos_of(t)),
                    None => {
                        self.warnings.push(at_line(
                            Warning::new(
                                &file,
                                format!("ts {s:?} is not a time; derived from the line before"),
                            )
                            .at_pointer("/ts"),
                        ));
                        None
                    }
                },
                (None, other) => {
                    let what =
                        other.map_or("no ts".to_owned(), |v| format!("a ts that is {}", kind(v)));
                    self.warnings.push(at_line(
                        Warning::new(
                            &file,
                            format!("line has {what}; time derived from the line before"),
                        )
                        .at_pointer("/ts"),
                    ));
                    None
                }
            };
            let mut t = time.unwrap_or_else(|| match prev_time {
                Some(prev) => prev + SEC,
                None => fallback,
            });

            let content = text_to_xhtml(&text);
            let title = title_for(&text);
            let mut msg = Message::new(&username, to_timestamp(from_nanos(t)), &title, &content);
            // The same words at the same instant in two chats would share an
            // id; nudge so neither is lost.
            while !self.used_ids.insert(msg.id.clone()) {
                t += 1;
                msg = Message::new(&username, to_timestamp(from_nanos(t)), &title, &content);
            }
            msg.role = role;
            if role == Some(Role::Assistant) {
                msg.model = model.clone();
            }
            msg.parent = prev_id.take();
            if let Some(Value::String(image)) = p.map.get("image")
                && !dir.join("images").join(image).is_file()
            {
                self.warnings.push(at_line(
                    Warning::new(
                        &file,
                        format!("image {image:?} is not in images/; the reference is kept"),
                    )
                    .at_pointer("/image"),
                ));
            }
            let mut removed = Vec::new();
            strip_secrets_map(&mut fields, "", &mut removed);
            for r in &removed {
                self.warnings.push(at_line(
                    Warning::new(
                        &file,
                        "credential removed: secrets are never stored in llm.json (product §2)",
                    )
                    .at_pointer(r.clone()),
                ));
            }
            self.attach_origin(
                &mut msg,
                profile,
                chat,
                &p,
                fields,
                style,
                !removed.is_empty(),
            );
            prev_id = Some(msg.id.clone());
            prev_time = Some(t);
            self.messages.push(msg);
        }
        Ok(record)
    }

    /// Splits the file into lines and parses each, warning about and
    /// skipping the bad ones. Returns the lines and whether the file ended
    /// with a newline after a good line.
    fn parse_lines(&mut self, file: &Path, bytes: &[u8]) -> (Vec<Parsed>, bool) {
        let segments: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let last = segments.len() - 1; // the part after the final newline
        let mut parsed = Vec::new();
        let mut final_newline = true;
        for (i, seg) in segments.iter().enumerate() {
            let line = i + 1;
            let unterminated = i == last;
            if seg.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Ok(raw) = std::str::from_utf8(seg) else {
                let e = std::str::from_utf8(seg)
                    .err()
                    .map(|e| e.valid_up_to())
                    .unwrap_or(0);
                self.warnings.push(
                    Warning::new(
                        file,
                        format!(
                            "not valid UTF-8 (at byte {} of the line); line skipped",
                            e + 1
                        ),
                    )
                    .at_line(line),
                );
                continue;
            };
            let ovalue: OValue = match serde_json::from_str(raw) {
                Ok(v) => v,
                Err(e) => {
                    let msg = if unterminated {
                        format!(
                            "truncated last line (an interrupted append: {}); skipped, as the profiles layout's recovery rule says",
                            crate::error::strip_position(&e.to_string())
                        )
                    } else {
                        format!(
                            "not JSON ({} at column {}); line skipped",
                            crate::error::strip_position(&e.to_string()),
                            e.column()
                        )
                    };
                    self.warnings.push(Warning::new(file, msg).at_line(line));
                    continue;
                }
            };
            let OValue::Object(entries) = &ovalue else {
                self.warnings.push(
                    Warning::new(file, "line is JSON but not an object; skipped")
                        .at_line(line)
                        .at_pointer(""),
                );
                continue;
            };
            let keys = entries.iter().map(|(k, _)| k.clone()).collect();
            let Value::Object(map) = ovalue.to_value() else {
                continue;
            };
            if unterminated {
                final_newline = false;
            }
            parsed.push(Parsed {
                line,
                raw: raw.to_owned(),
                keys,
                ovalue,
                map,
            });
        }
        (parsed, final_newline)
    }

    /// The message embedded by [`export`], if the line carries one that
    /// still agrees with the line's `text` (an edit elsewhere makes the line
    /// authoritative again).
    fn embedded(&mut self, p: &Parsed, file: &Path) -> Option<Message> {
        let embedded = p.map.get(EMBED_KEY)?;
        let mut m: Message = match serde_json::from_value(embedded.clone()) {
            Ok(m) => m,
            Err(e) => {
                self.warnings.push(
                    Warning::new(
                        file,
                        format!(
                            "embedded message is not valid ({e}); the line is imported as written"
                        ),
                    )
                    .at_line(p.line)
                    .at_pointer(format!("/{}", ptr(EMBED_KEY))),
                );
                return None;
            }
        };
        if p.map.get("text").and_then(Value::as_str) != Some(plain_text(&m.content).as_str()) {
            self.warnings.push(
                Warning::new(file, "text differs from the embedded message (edited elsewhere?); the line's text is imported")
                    .at_line(p.line)
                    .at_pointer("/text"),
            );
            return None;
        }
        m.extra.remove(PROFILES_KEY);
        if m.id.is_empty() {
            m.id = wo_format::ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
        }
        Some(m)
    }

    #[allow(clippy::too_many_arguments)]
    fn attach_origin(
        &self,
        msg: &mut Message,
        profile: &str,
        chat: &str,
        p: &Parsed,
        fields: Map<String, Value>,
        style: LineStyle,
        redacted: bool,
    ) {
        let mut origin = Origin {
            profile: profile.to_owned(),
            chat: chat.to_owned(),
            line: p.line as u64,
            keys: p.keys.clone(),
            fields,
            raw: None,
        };
        // Keep the exact bytes only where re-rendering cannot produce them,
        // and never when they hold a removed credential.
        if !redacted && render_line(msg, &origin, style) != p.raw {
            origin.raw = Some(p.raw.clone());
        }
        msg.extra.insert(
            PROFILES_KEY.into(),
            serde_json::to_value(&origin).unwrap_or(Value::Null).into(),
        );
    }

    fn local_to_utc(&mut self, local: PrimitiveDateTime, file: &Path) -> OffsetDateTime {
        if let Some(t) = self.opts.offset.to_utc(local) {
            return t;
        }
        if !self.offset_warned {
            self.offset_warned = true;
            self.warnings.push(Warning::new(
                file,
                "the machine's UTC offset could not be read (the time crate refuses while other threads run); local times are read as UTC — pass an explicit offset",
            ));
        }
        local.assume_utc()
    }
}

/// Where the `k`-th line (0-based) of one local minute goes inside it:
/// `k` seconds for the first 60; beyond that, microseconds after second 59,
/// so the order holds for a million lines. It depends on `k` alone, so
/// appending to a file never moves the lines already imported (their ids
/// stay the same and a re-import merges cleanly).
fn offset_in_minute(k: usize) -> i128 {
    let k = k as i128;
    if k < 60 {
        k * SEC
    } else {
        59 * SEC + (k - 59) * 1_000
    }
}

fn position(s: LineStyle) -> usize {
    LineStyle::ALL
        .iter()
        .position(|x| *x == s)
        .unwrap_or(usize::MAX)
}

/// The line for a message with an origin: its keys in their order, values
/// from the kept fields or from the message.
fn render_line(msg: &Message, origin: &Origin, style: LineStyle) -> String {
    let mut entries = Vec::with_capacity(origin.keys.len() + 1);
    let value_of = |k: &str| -> Option<OValue> {
        if let Some(v) = origin.fields.get(k) {
            return Some(OValue::from_value(v));
        }
        match k {
            "role" => Some(OValue::String(msg.effective_role().as_str().to_owned())),
            "text" => Some(OValue::String(plain_text(&msg.content))),
            EMBED_KEY => Some(embed_value(msg)),
            _ => None, // a removed credential
        }
    };
    for k in &origin.keys {
        if let Some(v) = value_of(k) {
            entries.push((k.clone(), v));
        }
    }
    for (k, v) in &origin.fields {
        if !origin.keys.contains(k) {
            entries.push((k.clone(), OValue::from_value(v)));
        }
    }
    style.render(&OValue::Object(entries))
}

/// A message's `llm.json` form, as embedded in exported lines.
fn embed_value(msg: &Message) -> OValue {
    let mut v = serde_json::to_value(msg).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.remove(PROFILES_KEY);
    }
    OValue::from_value(&v)
}

fn created(meta: Option<&Value>) -> Option<PrimitiveDateTime> {
    meta?.get("created_at")?.as_str().and_then(parse_created_at)
}

fn model_override(meta: Option<&Value>) -> Option<String> {
    meta?
        .get("model_override")?
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn resolve_root(root: &Path) -> Result<PathBuf, InteropError> {
    let meta = std::fs::metadata(root).map_err(|e| InteropError::io(root, e, HINT_ROOT))?;
    if !meta.is_dir() {
        return Err(InteropError::NotADirectory {
            path: root.to_owned(),
            hint: HINT_ROOT.into(),
        });
    }
    let nested = root.join("profiles");
    let looks_like_profiles = std::fs::read_dir(root)
        .map_err(|e| InteropError::io(root, e, HINT_ROOT))?
        .flatten()
        .any(|e| e.path().join(META).is_file() || e.path().join(CHATS).is_dir());
    if !looks_like_profiles && nested.is_dir() {
        return Ok(nested);
    }
    Ok(root.to_owned())
}

/// Visible subfolders in alphabetic-sequence order.
fn subdirs(dir: &Path, warnings: &mut Vec<Warning>) -> Result<Vec<String>, InteropError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| InteropError::io(dir, e, "check the folder's permissions"))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| InteropError::io(dir, e, "check the folder's permissions"))?;
        if !entry.path().is_dir() {
            continue;
        }
        let Ok(name) = entry.file_name().into_string() else {
            warnings.push(Warning::new(
                &entry.path(),
                "folder name is not UTF-8; skipped",
            ));
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        if !is_alpha_name(&name) {
            warnings.push(Warning::new(
                &entry.path(),
                "folder name is not in the profiles layout's A…Z, AA… sequence; imported anyway",
            ));
        }
        names.push(name);
    }
    names.sort_by(|a, b| alpha_cmp(a, b));
    Ok(names)
}

/// Reads `dir/meta.json`: (parsed object, exact text). A missing or
/// unreadable file is a warning.
fn read_meta(
    dir: &Path,
    what: &str,
    warnings: &mut Vec<Warning>,
) -> (Option<Value>, Option<String>) {
    let path = dir.join(META);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            warnings.push(Warning::new(
                &path,
                format!("{what} has no meta.json; imported without one (the folder name stands for its id)"),
            ));
            return (None, None);
        }
        Err(e) => {
            warnings.push(Warning::new(
                &path,
                format!("unreadable ({e}); imported without it"),
            ));
            return (None, None);
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        warnings.push(Warning::new(&path, "not valid UTF-8; imported without it"));
        return (None, None);
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(mut v @ Value::Object(_)) => {
            let mut removed = Vec::new();
            strip_secrets(&mut v, &mut removed);
            for r in &removed {
                warnings.push(
                    Warning::new(
                        &path,
                        "credential removed: secrets are never stored in llm.json (product §2)",
                    )
                    .at_pointer(r.clone()),
                );
            }
            let raw = removed.is_empty().then_some(text);
            (Some(v), raw)
        }
        Ok(other) => {
            warnings.push(
                Warning::new(
                    &path,
                    format!(
                        "expected an object, found {}; kept as text only",
                        kind(&other)
                    ),
                )
                .at_pointer(""),
            );
            (None, Some(text))
        }
        Err(e) => {
            warnings.push(
                Warning::new(&path, format!("not JSON ({e}); kept as text only")).at_line(e.line()),
            );
            (None, Some(text))
        }
    }
}

fn strip_secrets(v: &mut Value, removed: &mut Vec<String>) {
    crate::strip_secrets(v, "", removed);
}

/// How [`export`] writes.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// Write into an existing, non-empty target, replacing the files the
    /// export produces (others are left alone; nothing is deleted).
    pub overwrite: bool,
    /// Local time for the `ts` of messages that did not come from a tree.
    pub offset: LocalOffset,
    /// The tree the state was imported from: copies what the export does
    /// not produce itself (`images/`, attachments, other files) of every
    /// imported profile and chat folder.
    pub copy_files_from: Option<PathBuf>,
    /// `display_name` of the profile created for messages from elsewhere.
    pub new_profile_display_name: String,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            overwrite: false,
            offset: LocalOffset::System,
            copy_files_from: None,
            new_profile_display_name: "WikiOracle".to_owned(),
        }
    }
}

/// What [`export`] wrote.
#[derive(Clone, Debug, Default)]
pub struct ExportReport {
    /// Profile folders written.
    pub profiles: usize,
    /// Chat folders written.
    pub chats: usize,
    /// Lines written to `messages.jsonl` files.
    pub messages: usize,
    /// `(profile, chat)` created for messages that belong to no imported
    /// chat, if any.
    pub new_chat: Option<(String, String)>,
    /// What the export worked around: records not understood (written anew),
    /// times written in UTC, side files not copied.
    pub warnings: Vec<Warning>,
}

enum Line<'a> {
    Origin(&'a Message, Origin),
    Foreign(&'a Message),
}

/// Writes `state` as a seed-004 tree at `root` (the `profiles` folder).
///
/// - Messages imported from a tree go back to their profile and chat, in
///   their original line order, rendered in the file's detected style (or
///   verbatim), so an unchanged import exports byte-identically.
/// - A message from elsewhere whose `parent` chain reaches such a message is
///   appended to that chat (a conversation continued in WikiOracle). The
///   others go to one new chat `A` in a new profile named after the last
///   profile (`next_alpha`). Their lines hold `role`, `text` (plain),
///   `ts` (local time, [`ExportOptions::offset`]) and the message itself
///   under [`EMBED_KEY`].
/// - `meta.json` files are written back as read; new ones follow the seed
///   (`id`, `display_name`, `created_at`, `model_override`).
///
/// Refuses a non-empty existing `root` unless `opts.overwrite`.
pub fn export(
    state: &State,
    root: &Path,
    opts: &ExportOptions,
) -> Result<ExportReport, InteropError> {
    check_target(root, opts.overwrite)?;
    let mut report = ExportReport::default();
    let mut tree: TreeRecord = match state.extra.get(PROFILES_KEY) {
        None => TreeRecord::default(),
        Some(v) => serde_json::from_value(v.to_value()).unwrap_or_else(|e| {
            report.warnings.push(
                Warning::new(root, format!("the state's {PROFILES_KEY} record is not understood ({e}); meta files are regenerated"))
                    .at_pointer(format!("/{PROFILES_KEY}")),
            );
            TreeRecord::default()
        }),
    };

    // Where each message goes.
    let by_id: HashMap<&str, &Message> = state
        .messages()
        .iter()
        .map(|m| (m.id.as_str(), m))
        .collect();
    let origin_of = |m: &Message| -> Option<Origin> {
        serde_json::from_value(m.extra.get(PROFILES_KEY)?.to_value()).ok()
    };
    let mut lines: BTreeMap<(String, String), Vec<Line>> = BTreeMap::new();
    let mut homeless: Vec<&Message> = Vec::new();
    for m in state.messages() {
        if let Some(origin) = origin_of(m) {
            lines
                .entry((origin.profile.clone(), origin.chat.clone()))
                .or_default()
                .push(Line::Origin(m, origin));
            continue;
        }
        if m.extra.contains_key(PROFILES_KEY) {
            report.warnings.push(Warning::new(
                root,
                format!("message {}: its {PROFILES_KEY} record is not understood; exported as a new message", m.id),
            ));
        }
        // Follow parents to the first message that came from a tree.
        let mut seen = HashSet::new();
        let mut cur = m.parent.as_deref().and_then(|p| by_id.get(p).copied());
        let mut home = None;
        while let Some(p) = cur {
            if !seen.insert(p.id.as_str()) {
                break;
            }
            if let Some(o) = origin_of(p) {
                home = Some((o.profile, o.chat));
                break;
            }
            cur = p.parent.as_deref().and_then(|q| by_id.get(q).copied());
        }
        match home {
            Some(key) => lines.entry(key).or_default().push(Line::Foreign(m)),
            None => homeless.push(m),
        }
    }
    if !homeless.is_empty() {
        let on_disk = std::fs::read_dir(root)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let profile = next_after(
            tree.profiles
                .keys()
                .map(String::as_str)
                .chain(lines.keys().map(|(p, _)| p.as_str()))
                .chain(on_disk.iter().map(String::as_str)),
        );
        let first = homeless[0];
        let created = created_at(&first.timestamp, opts.offset);
        tree.profiles.insert(
            profile.clone(),
            ProfileRecord {
                meta: Some(new_meta(&profile, &opts.new_profile_display_name, &created)),
                ..ProfileRecord::default()
            },
        );
        let key = (profile.clone(), "A".to_owned());
        lines
            .entry(key)
            .or_default()
            .extend(homeless.iter().map(|&m| Line::Foreign(m)));
        report.new_chat = Some((profile, "A".to_owned()));
    }
    // Chats that lines name but the record lacks get fresh meta files.
    for ((p, c), ls) in &lines {
        let first = match &ls[0] {
            Line::Origin(m, _) | Line::Foreign(m) => *m,
        };
        let created = created_at(&first.timestamp, opts.offset);
        let profile = tree
            .profiles
            .entry(p.clone())
            .or_insert_with(|| ProfileRecord {
                meta: Some(new_meta(p, p, &created)),
                ..ProfileRecord::default()
            });
        profile
            .chats
            .entry(c.clone())
            .or_insert_with(|| ChatRecord {
                meta: Some(new_meta(c, &first.title, &created)),
                ..ChatRecord::default()
            });
    }

    let write_hint = "check that the target is writable and the disk has room";
    let mut utc_fallbacks = 0usize;
    mkdir(root, write_hint)?;
    let mut profile_names: Vec<&String> = tree.profiles.keys().collect();
    profile_names.sort_by(|a, b| alpha_cmp(a, b));
    for p in profile_names {
        let record = &tree.profiles[p];
        let pdir = root.join(p);
        mkdir(&pdir, write_hint)?;
        report.profiles += 1;
        if let Some(bytes) = meta_bytes(record.meta.as_ref(), record.meta_raw.as_deref()) {
            write_file(&pdir.join(META), &bytes)?;
        }
        if !record.chats_dir && record.chats.is_empty() {
            continue;
        }
        let cdir_root = pdir.join(CHATS);
        mkdir(&cdir_root, write_hint)?;
        for (c, chat) in &record.chats {
            let cdir = cdir_root.join(c);
            mkdir(&cdir, write_hint)?;
            report.chats += 1;
            if let Some(bytes) = meta_bytes(chat.meta.as_ref(), chat.meta_raw.as_deref()) {
                write_file(&cdir.join(META), &bytes)?;
            }
            let mut ls = lines.remove(&(p.clone(), c.clone())).unwrap_or_default();
            if !chat.messages_file && ls.is_empty() {
                continue;
            }
            // Imported lines in file order, then the rest in state order
            // (the sort is stable).
            ls.sort_by_key(|l| match l {
                Line::Origin(_, o) => (0, o.line),
                Line::Foreign(_) => (1, 0),
            });
            let style = chat
                .style
                .as_deref()
                .and_then(LineStyle::from_name)
                .unwrap_or(LineStyle::Python);
            let any_new = ls.iter().any(|l| matches!(l, Line::Foreign(_)));
            let mut out = String::new();
            for (i, l) in ls.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str(&match l {
                    Line::Origin(m, o) => origin_line(m, o, style),
                    Line::Foreign(m) => foreign_line(m, style, opts.offset, &mut utc_fallbacks),
                });
            }
            if !ls.is_empty() && (chat.final_newline || any_new) {
                out.push('\n');
            }
            report.messages += ls.len();
            write_file(&cdir.join(MESSAGES), out.as_bytes())?;
        }
    }

    if utc_fallbacks > 0 {
        report.warnings.push(Warning::new(
            root,
            format!(
                "the machine's UTC offset could not be read (the time crate refuses while other threads run); {utc_fallbacks} message times were written in UTC — pass an explicit offset"
            ),
        ));
    }
    if let Some(src) = &opts.copy_files_from {
        copy_side_files(src, root, &tree, &mut report.warnings)?;
    }
    Ok(report)
}

fn origin_line(m: &Message, o: &Origin, style: LineStyle) -> String {
    let rendered = render_line(m, o, style);
    if let Some(raw) = &o.raw {
        // The verbatim line, unless the message changed since the import.
        let same = match (
            serde_json::from_str::<Value>(raw),
            serde_json::from_str::<Value>(&rendered),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            return raw.clone();
        }
    }
    rendered
}

fn foreign_line(
    m: &Message,
    style: LineStyle,
    offset: LocalOffset,
    utc_fallbacks: &mut usize,
) -> String {
    let utc = from_timestamp(&m.timestamp);
    let local = offset.to_local(utc).unwrap_or_else(|| {
        *utc_fallbacks += 1;
        PrimitiveDateTime::new(utc.date(), utc.time())
    });
    let entries = vec![
        (
            "role".to_owned(),
            OValue::String(m.effective_role().as_str().to_owned()),
        ),
        ("text".to_owned(), OValue::String(plain_text(&m.content))),
        ("ts".to_owned(), OValue::String(format_human(local))),
        (EMBED_KEY.to_owned(), embed_value(m)),
    ];
    style.render(&OValue::Object(entries))
}

fn created_at(ts: &Timestamp, offset: LocalOffset) -> String {
    let utc = from_timestamp(ts);
    let local = offset
        .to_local(utc)
        .unwrap_or_else(|| PrimitiveDateTime::new(utc.date(), utc.time()));
    format_created_at(local)
}

fn new_meta(id: &str, display_name: &str, created_at: &str) -> Value {
    // `Value` sorts keys; `meta_bytes` restores the seed's order on writing.
    serde_json::json!({
        "id": id,
        "display_name": display_name,
        "created_at": created_at,
        "model_override": null,
    })
}

/// The bytes of a meta file: the original text while it still says the same
/// as the record, else the record pretty-printed as Python's
/// `json.dump(indent=2)` does (seed key order first) plus a newline.
fn meta_bytes(meta: Option<&Value>, raw: Option<&str>) -> Option<Vec<u8>> {
    match (meta, raw) {
        (None, None) => None,
        (None, Some(raw)) => Some(raw.as_bytes().to_vec()),
        (Some(meta), raw) => {
            if let Some(raw) = raw
                && serde_json::from_str::<Value>(raw).ok().as_ref() == Some(meta)
            {
                return Some(raw.as_bytes().to_vec());
            }
            let mut entries = Vec::new();
            if let Value::Object(map) = meta {
                for k in ["id", "display_name", "created_at", "model_override"] {
                    if let Some(v) = map.get(k) {
                        entries.push((k.to_owned(), OValue::from_value(v)));
                    }
                }
                for (k, v) in map {
                    if !entries.iter().any(|(e, _)| e == k) {
                        entries.push((k.clone(), OValue::from_value(v)));
                    }
                }
            }
            let mut s = LineStyle::Python.render_pretty(&OValue::Object(entries));
            s.push('\n');
            Some(s.into_bytes())
        }
    }
}

fn check_target(root: &Path, overwrite: bool) -> Result<(), InteropError> {
    match std::fs::metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(InteropError::io(root, e, "check the target's permissions")),
        Ok(m) if !m.is_dir() => Err(InteropError::NotADirectory {
            path: root.to_owned(),
            hint: "the export target is a folder that will hold A/, B/, …".into(),
        }),
        Ok(_) => {
            let non_empty = std::fs::read_dir(root)
                .map_err(|e| InteropError::io(root, e, "check the target's permissions"))?
                .next()
                .is_some();
            if non_empty && !overwrite {
                return Err(InteropError::TargetNotEmpty {
                    path: root.to_owned(),
                });
            }
            Ok(())
        }
    }
}

fn mkdir(dir: &Path, hint: &str) -> Result<(), InteropError> {
    std::fs::create_dir_all(dir).map_err(|e| InteropError::io(dir, e, hint))
}

/// Replaces `path` atomically and durably (`wo_durable`), so an interrupted
/// export never leaves a half-written file where a good one was (with
/// overwrite). New files are as shareable as any the user makes (0666 less
/// the umask): the other tool reads them.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), InteropError> {
    let hint = "check that the target is writable and the disk has room";
    wo_durable::write_atomic_with(path, wo_durable::Mode::Keep { new: 0o666 }, |w| {
        w.write_all(bytes)
    })
    .map(drop)
    .map_err(|e| InteropError::io(path, e, hint))
}

/// Copies every file of imported profile and chat folders that the export
/// does not write itself.
fn copy_side_files(
    src_root: &Path,
    dst_root: &Path,
    tree: &TreeRecord,
    warnings: &mut Vec<Warning>,
) -> Result<(), InteropError> {
    let src_root = resolve_root(src_root)?;
    // Copying a tree onto itself would truncate the files it reads.
    if let (Ok(a), Ok(b)) = (src_root.canonicalize(), dst_root.canonicalize())
        && a == b
    {
        return Ok(());
    }
    for (p, record) in &tree.profiles {
        let (sp, dp) = (src_root.join(p), dst_root.join(p));
        if sp.is_dir() {
            copy_dir(&sp, &dp, &[META, CHATS], warnings)?;
        }
        for c in record.chats.keys() {
            let (sc, dc) = (sp.join(CHATS).join(c), dp.join(CHATS).join(c));
            if sc.is_dir() {
                copy_dir(&sc, &dc, &[META, MESSAGES], warnings)?;
            }
        }
    }
    Ok(())
}

fn copy_dir(
    src: &Path,
    dst: &Path,
    skip: &[&str],
    warnings: &mut Vec<Warning>,
) -> Result<(), InteropError> {
    let hint = "check the source's permissions and the target's room";
    let entries = std::fs::read_dir(src).map_err(|e| InteropError::io(src, e, hint))?;
    for entry in entries {
        let entry = entry.map_err(|e| InteropError::io(src, e, hint))?;
        let name = entry.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let (from, to) = (entry.path(), dst.join(&name));
        let ft = entry
            .file_type()
            .map_err(|e| InteropError::io(&from, e, hint))?;
        if ft.is_symlink() {
            warnings.push(Warning::new(&from, "symbolic link not copied"));
        } else if ft.is_dir() {
            mkdir(&to, hint)?;
            copy_dir(&from, &to, &[], warnings)?;
        } else {
            std::fs::copy(&from, &to).map_err(|e| InteropError::io(&to, e, hint))?;
        }
    }
    Ok(())
}

//! The CLI chat format's (product §9) `.ai/openai.json`: a CLI's connection settings, runtime
//! defaults, one `conversation[]` of `{role, content, timestamp}` and `meta`.
//!
//! Import is lossless: every conversation entry becomes a [`Message`] (one
//! branch, each `parent` the entry before it), and everything the message
//! model has no field for is kept under [`OPENAI_CLI_KEY`] — the settings in
//! the state's `extra`, per-entry leftovers in each message's `extra` — so
//! [`reconstruct`] can rebuild the file's JSON value. The one exception is
//! credentials: values of secret-looking keys (`api_key`, `token`, …) are
//! dropped, with a warning naming their pointers (product §2). `env_key` names a
//! variable and is kept.
//!
//! The seed's CLI appends `{role, content}` without a timestamp, so missing
//! timestamps are the normal case; they are derived deterministically (see
//! [`import_with`]) and a warning says how.

use std::path::{Path, PathBuf};
use wo_format::validate::json_kind as kind;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use wo_format::title::title_for;
use wo_format::xhtml::text_to_xhtml;
use wo_format::{Message, Role, State};

use crate::human_time::{from_nanos, nanos_of, parse_iso, to_timestamp};
use crate::text::{is_recoverable, plain_text};
use crate::{
    ImportOptions, Imported, InteropError, OPENAI_CLI_KEY, Warning, mtime_or_now, strip_secrets,
    strip_secrets_map,
};

const SEC: i128 = 1_000_000_000;
const HINT_LOCATION: &str = "a CLI chat state lives at .ai/openai.json in the project root; pass that file or the project directory";

/// Imports with [`ImportOptions::default`].
pub fn import(path: &Path) -> Result<Imported, InteropError> {
    import_with(path, &ImportOptions::default())
}

/// Imports `path` (the JSON file, or a project directory holding
/// `.ai/openai.json`).
///
/// - Roles `user`, `assistant`, `system` are kept; `developer`, `tool` and
///   `function` become `system` messages named after that role; anything else
///   is imported without a role, with a warning. User messages are named
///   `opts.username`, assistant messages after the file's `model` (else
///   `opts.assistant_name`) and carry `provider`/`model`.
/// - Content is plain text escaped into XHTML; when that loses something
///   (see [`crate::recover_text`]) or is not a string, the original value is
///   kept in the message's `extra`.
/// - Timestamps: ISO-8601 with or without zone (zone-less is read as UTC,
///   with a warning). A missing one is derived from its neighbours: the
///   last entry, if undated, is placed at `meta.last_updated`; an undated
///   entry before a dated one (or that anchor) sits whole seconds before it,
///   counted by position, unless that would not come after the previous dated
///   entry, in which case the gap is divided evenly; undated entries after
///   the last anchor follow it one second apart. With no anchor at all the
///   last entry is placed at `opts.fallback_time` (default: the file's
///   modification time).
/// - The `system` setting (else the last system entry) becomes
///   [`Imported::suggested_context`].
pub fn import_with(path: &Path, opts: &ImportOptions) -> Result<Imported, InteropError> {
    let file = resolve(path);
    let bytes = std::fs::read(&file).map_err(|e| InteropError::io(&file, e, HINT_LOCATION))?;
    let root: Value = serde_json::from_slice(&bytes).map_err(|e| {
        InteropError::json(
            &file,
            &e,
            "the CLI that writes it backs up files it cannot parse as openai.json.bak-<timestamp>; import a good backup or repair the file",
        )
    })?;
    let Value::Object(mut top) = root else {
        return Err(InteropError::Shape {
            path: file,
            pointer: String::new(),
            message: format!("expected an object, found {}", kind(&root)),
            hint: "an .ai/openai.json file is one object with provider, model, conversation[] and meta"
                .into(),
        });
    };

    let mut warnings = Vec::new();
    let mut absent_top = Vec::new();
    let conversation = match top.remove("conversation") {
        Some(Value::Array(items)) => items,
        None => {
            absent_top.push(json!("conversation"));
            warnings.push(Warning::new(
                &file,
                "no conversation[]; nothing to import but the settings",
            ));
            Vec::new()
        }
        Some(other) => {
            return Err(InteropError::Shape {
                path: file,
                pointer: "/conversation".into(),
                message: format!("expected an array, found {}", kind(&other)),
                hint: "conversation must be a list of {role, content, timestamp} objects".into(),
            });
        }
    };

    let mut redacted = Vec::new();
    strip_secrets_map(&mut top, "", &mut redacted);
    let setting = |k: &str| {
        top.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let model = setting("model");
    let provider = setting("provider");
    let system_setting = top.get("system").and_then(Value::as_str).map(str::to_owned);
    let last_updated = match top.get("meta").and_then(|m| m.get("last_updated")) {
        Some(Value::String(s)) => match parse_iso(s) {
            Some((t, _)) => Some(t),
            None => {
                warnings.push(
                    Warning::new(&file, format!("{s:?} is not an ISO-8601 time; ignored"))
                        .at_pointer("/meta/last_updated"),
                );
                None
            }
        },
        _ => None,
    };

    let assistant_name = model.clone().unwrap_or_else(|| opts.assistant_name.clone());
    let mut entries = Vec::new();
    let mut unparsed = Vec::new();
    for (i, v) in conversation.into_iter().enumerate() {
        let at = format!("/conversation/{i}");
        let Value::Object(mut fields) = v else {
            warnings.push(
                Warning::new(
                    &file,
                    format!(
                        "entry is {}, not an object; kept aside, not imported",
                        kind(&v)
                    ),
                )
                .at_pointer(&at),
            );
            let mut v = v;
            strip_secrets(&mut v, &at, &mut redacted);
            unparsed.push(json!({"index": i, "value": v}));
            continue;
        };
        strip_secrets_map(&mut fields, &at, &mut redacted);
        entries.push(parse_entry(
            i,
            fields,
            &at,
            &file,
            opts,
            &assistant_name,
            &mut warnings,
        ));
    }
    for r in &redacted {
        warnings.push(
            Warning::new(
                &file,
                "credential removed: secrets are never stored in llm.json (product §2)",
            )
            .at_pointer(r.clone()),
        );
    }

    // Dates: known, anchors, derived.
    let known: Vec<Option<i128>> = entries.iter().map(|e| e.known.map(nanos_of)).collect();
    let undated = known.iter().filter(|k| k.is_none()).count();
    let fallback = opts
        .fallback_time
        .clone()
        .unwrap_or_else(|| mtime_or_now(&file));
    let (times, anchor) = derive_times(
        &known,
        last_updated.map(nanos_of),
        nanos_of(crate::human_time::from_timestamp(&fallback)),
    );
    if undated > 0 {
        let how = match anchor {
            Anchor::Neighbours => "from the dated entries around them".to_owned(),
            Anchor::LastUpdated => format!(
                "from meta.last_updated ({}) and the dated entries, by conversation order",
                last_updated
                    .map(|t| to_timestamp(t).to_string())
                    .unwrap_or_default()
            ),
            Anchor::Fallback => format!(
                "from {} (no entry and no meta.last_updated dates the conversation), by conversation order",
                fallback
            ),
        };
        warnings.push(Warning::new(
            &file,
            format!(
                "{undated} of {} messages had no timestamp; derived {how}",
                entries.len()
            ),
        ));
    }

    let mut state_messages: Vec<Message> = Vec::with_capacity(entries.len());
    let mut used = std::collections::HashSet::new();
    let mut parent: Option<String> = None;
    for (entry, nanos) in entries.into_iter().zip(times) {
        let content = text_to_xhtml(&entry.text);
        let title = title_for(&entry.text);
        let mut t = nanos;
        let mut msg = Message::new(
            &entry.username,
            to_timestamp(from_nanos(t)),
            &title,
            &content,
        );
        // Identical entries at one instant would share an id and one would be
        // dropped by the state; nudge the later one so both survive.
        while !used.insert(msg.id.clone()) {
            t += 1;
            msg = Message::new(
                &entry.username,
                to_timestamp(from_nanos(t)),
                &title,
                &content,
            );
        }
        if t != nanos {
            warnings.push(
                Warning::new(&file, "identical to an earlier entry at the same instant; timestamp moved by a few nanoseconds to keep both")
                    .at_pointer(format!("/conversation/{}", entry.index)),
            );
        }
        let mut fields = entry.fields;
        let mut absent = entry.absent;
        // A timestamp reconstructible from the message need not be kept.
        if let Some(Value::String(s)) = fields.get("timestamp")
            && s == msg.timestamp.as_str()
        {
            fields.remove("timestamp");
        }
        if entry.known.is_none() && !fields.contains_key("timestamp") {
            absent.push(json!("timestamp"));
        }
        msg.role = entry.role;
        // Token counts are model metadata the message model has a field for
        // (the entry keeps them too, for reconstruction).
        msg.usage = fields
            .get("usage")
            .and_then(|u| serde_json::from_value(u.clone()).ok());
        if entry.role == Some(Role::Assistant) {
            msg.provider = provider.clone();
            msg.model = model.clone();
        }
        msg.parent = parent.take();
        let mut record = Map::new();
        record.insert("index".into(), json!(entry.index));
        if !fields.is_empty() {
            record.insert("fields".into(), Value::Object(fields));
        }
        if !absent.is_empty() {
            record.insert("absent".into(), Value::Array(absent));
        }
        msg.extra
            .insert(OPENAI_CLI_KEY.into(), Value::Object(record).into());
        parent = Some(msg.id.clone());
        state_messages.push(msg);
    }

    let suggested_context = system_setting
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            state_messages
                .iter()
                .rev()
                .find(|m| m.role == Some(Role::System) && m.username == "system")
                .map(|m| plain_text(&m.content))
        })
        .map(|s| text_to_xhtml(&s));

    let newest = state_messages
        .iter()
        .map(|m| m.timestamp.clone())
        .chain(last_updated.map(to_timestamp))
        .max()
        .unwrap_or(fallback);
    let mut state = State::new(newest);
    // Ids are unique by construction, so one sort replaces push_message's
    // per-message duplicate scan (quadratic on a 100k-message import).
    state.messages_mut().extend(state_messages);
    state.normalize();
    let mut record = Map::new();
    record.insert("fields".into(), Value::Object(top));
    if !absent_top.is_empty() {
        record.insert("absent".into(), Value::Array(absent_top));
    }
    if !unparsed.is_empty() {
        record.insert("unparsed_conversation".into(), Value::Array(unparsed));
    }
    if !redacted.is_empty() {
        record.insert("redacted".into(), json!(redacted));
    }
    state
        .extra
        .insert(OPENAI_CLI_KEY.into(), Value::Object(record).into());
    Ok(Imported {
        state,
        warnings,
        suggested_context,
    })
}

/// Rebuilds the JSON value of the imported `.ai/openai.json` from a state
/// that holds an import (credentials excepted: they were never stored).
/// `None` when the state holds no seed-001 import. Key order is not kept
/// (JSON objects are unordered); everything else is.
pub fn reconstruct(state: &State) -> Option<Value> {
    let record = state.extra.get(OPENAI_CLI_KEY)?.to_value();
    let record = record.as_object()?;
    let mut top = record.get("fields")?.as_object()?.clone();
    let absent_top = strings(record.get("absent"));
    let mut indexed: Vec<(u64, Value)> = Vec::new();
    for m in state.messages() {
        let Some(r) = m.extra.get(OPENAI_CLI_KEY).map(|r| r.to_value()) else {
            continue;
        };
        let Some(r) = r.as_object() else {
            continue;
        };
        let Some(index) = r.get("index").and_then(Value::as_u64) else {
            continue;
        };
        let mut entry = r
            .get("fields")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let absent = strings(r.get("absent"));
        let missing =
            |k: &str, e: &Map<String, Value>| !e.contains_key(k) && !absent.contains(&k.to_owned());
        if missing("role", &entry) {
            entry.insert("role".into(), json!(m.effective_role().as_str()));
        }
        if missing("content", &entry) {
            entry.insert("content".into(), json!(plain_text(&m.content)));
        }
        if missing("timestamp", &entry) {
            entry.insert("timestamp".into(), json!(m.timestamp.as_str()));
        }
        indexed.push((index, Value::Object(entry)));
    }
    if let Some(Value::Array(items)) = record.get("unparsed_conversation") {
        for item in items {
            if let (Some(i), Some(v)) =
                (item.get("index").and_then(Value::as_u64), item.get("value"))
            {
                indexed.push((i, v.clone()));
            }
        }
    }
    indexed.sort_by_key(|(i, _)| *i);
    if !absent_top.contains(&"conversation".to_owned()) {
        top.insert(
            "conversation".into(),
            Value::Array(indexed.into_iter().map(|(_, v)| v).collect()),
        );
    }
    Some(Value::Object(top))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A directory means the project root holding `.ai/openai.json`.
fn resolve(path: &Path) -> PathBuf {
    if path.is_dir() {
        let nested = path.join(".ai").join("openai.json");
        if nested.exists() {
            return nested;
        }
        return path.join("openai.json");
    }
    path.to_owned()
}

struct Entry {
    index: usize,
    role: Option<Role>,
    username: String,
    text: String,
    known: Option<OffsetDateTime>,
    /// Entry keys the message does not reproduce exactly.
    fields: Map<String, Value>,
    /// Keys among role/content/timestamp the entry did not have.
    absent: Vec<Value>,
}

fn parse_entry(
    index: usize,
    mut fields: Map<String, Value>,
    at: &str,
    file: &Path,
    opts: &ImportOptions,
    assistant_name: &str,
    warnings: &mut Vec<Warning>,
) -> Entry {
    let mut absent = Vec::new();
    let (role, username) = match fields.get("role") {
        Some(Value::String(r)) => match r.as_str() {
            "user" => (Some(Role::User), opts.username.clone()),
            "assistant" => (Some(Role::Assistant), assistant_name.to_owned()),
            "system" => (Some(Role::System), "system".to_owned()),
            // Instructions and tool output are not the user speaking.
            "developer" | "tool" | "function" => (Some(Role::System), r.clone()),
            other => {
                warnings.push(
                    Warning::new(
                        file,
                        format!("unknown role {other:?}; imported without a role"),
                    )
                    .at_pointer(format!("{at}/role")),
                );
                let name = if other.trim().is_empty() {
                    opts.username.clone()
                } else {
                    other.to_owned()
                };
                (None, name)
            }
        },
        None => {
            absent.push(json!("role"));
            warnings.push(
                Warning::new(file, "no role; imported as the user's")
                    .at_pointer(format!("{at}/role")),
            );
            (None, opts.username.clone())
        }
        Some(other) => {
            warnings.push(
                Warning::new(
                    file,
                    format!(
                        "role is {}, not a string; imported as the user's",
                        kind(other)
                    ),
                )
                .at_pointer(format!("{at}/role")),
            );
            (None, opts.username.clone())
        }
    };
    if matches!(fields.get("role"), Some(Value::String(r)) if matches!(r.as_str(), "user" | "assistant" | "system"))
    {
        fields.remove("role");
    }

    let text = match fields.get("content") {
        Some(Value::String(s)) => {
            let s = s.clone();
            if is_recoverable(&s) {
                fields.remove("content");
            }
            s
        }
        None => {
            absent.push(json!("content"));
            String::new()
        }
        Some(Value::Null) => String::new(),
        // OpenAI's multi-part content: the text parts, in order.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => o.get("text").and_then(Value::as_str).map(str::to_owned),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
        Some(other) => other.to_string(),
    };

    let known = match fields.get("timestamp") {
        None => None,
        Some(Value::String(s)) => match parse_iso(s) {
            Some((t, zoned)) => {
                if !zoned {
                    warnings.push(
                        Warning::new(file, format!("timestamp {s:?} has no zone; read as UTC"))
                            .at_pointer(format!("{at}/timestamp")),
                    );
                }
                Some(t)
            }
            None => {
                warnings.push(
                    Warning::new(
                        file,
                        format!("timestamp {s:?} is not ISO-8601; derived instead (original kept)"),
                    )
                    .at_pointer(format!("{at}/timestamp")),
                );
                None
            }
        },
        Some(other) => {
            warnings.push(
                Warning::new(
                    file,
                    format!(
                        "timestamp is {}, not a string; derived instead (original kept)",
                        kind(other)
                    ),
                )
                .at_pointer(format!("{at}/timestamp")),
            );
            None
        }
    };

    Entry {
        index,
        role,
        username,
        text,
        known,
        fields,
        absent,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Anchor {
    Neighbours,
    LastUpdated,
    Fallback,
}

/// Fills undated positions; see [`import_with`] for the rule.
fn derive_times(
    known: &[Option<i128>],
    last_updated: Option<i128>,
    fallback: i128,
) -> (Vec<i128>, Anchor) {
    let n = known.len();
    let mut anchors = known.to_vec();
    let mut how = Anchor::Neighbours;
    if n > 0 && anchors[n - 1].is_none() {
        let newest_known = known.iter().flatten().max().copied();
        if let Some(lu) = last_updated
            && newest_known.is_none_or(|k| lu > k)
        {
            anchors[n - 1] = Some(lu);
            how = Anchor::LastUpdated;
        } else if newest_known.is_none() {
            anchors[n - 1] = Some(fallback);
            how = Anchor::Fallback;
        }
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if let Some(t) = anchors[i] {
            out.push(t);
            continue;
        }
        let prev = (0..i).rev().find_map(|j| anchors[j].map(|t| (j, t)));
        let next = (i + 1..n).find_map(|j| anchors[j].map(|t| (j, t)));
        let t = match (prev, next) {
            (Some((p, lo)), Some((a, hi))) => {
                let before = hi - (a - i) as i128 * SEC;
                if before > lo {
                    before
                } else if hi > lo {
                    lo + (hi - lo) * (i - p) as i128 / (a - p) as i128
                } else {
                    // Dated entries out of order: keep the position visible.
                    lo + (i - p) as i128
                }
            }
            (None, Some((a, hi))) => hi - (a - i) as i128 * SEC,
            (Some((p, lo)), None) => lo + (i - p) as i128 * SEC,
            (None, None) => fallback,
        };
        out.push(t);
    }
    (out, how)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undated_entries_sit_before_their_anchor() {
        let (t, how) = derive_times(&[None, None, None], Some(100 * SEC), 0);
        assert_eq!(t, [98 * SEC, 99 * SEC, 100 * SEC]);
        assert_eq!(how, Anchor::LastUpdated);
    }

    #[test]
    fn tight_gaps_are_divided_evenly() {
        let (t, _) = derive_times(&[Some(0), None, None, Some(SEC)], None, 0);
        assert_eq!(t, [0, SEC / 3, 2 * SEC / 3, SEC]);
        let (t, _) = derive_times(&[Some(0), None, Some(10 * SEC), None], None, 0);
        assert_eq!(t, [0, 9 * SEC, 10 * SEC, 11 * SEC]);
    }

    #[test]
    fn without_anchor_the_fallback_dates_the_last_entry() {
        let (t, how) = derive_times(&[None, None], None, 50 * SEC);
        assert_eq!(t, [49 * SEC, 50 * SEC]);
        assert_eq!(how, Anchor::Fallback);
        // A last_updated older than the dated entries is not an anchor.
        let (t, how) = derive_times(&[Some(10 * SEC), None], Some(5 * SEC), 0);
        assert_eq!(t, [10 * SEC, 11 * SEC]);
        assert_eq!(how, Anchor::Neighbours);
    }
}

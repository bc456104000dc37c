//! The wire protocol between a WikiOracle client (the `wikioracle` provider,
//! the browser) and a WikiOracle server in stateless mode (product §6).
//!
//! The server keeps nothing: each turn the client sends what the turn needs
//! — the new `message`, the `context`, the selected `truth` entries, a recent
//! `window` of messages and the `params` — and the server streams the answer
//! as Server-Sent Events:
//!
//! ```text
//! event: delta
//! data: {"text":"Par"}
//!
//! event: delta
//! data: {"text":"is."}
//!
//! event: done
//! data: {"user_message_id":"m_…","assistant_message_id":"m_…","sources":["t_…"],"state_patch":{…},…}
//!
//! ```
//!
//! or, on failure, a final `event: error` / `data: {"message":"…"}`. The
//! `state_patch` is an RFC 7396 JSON Merge Patch for the client's copy of
//! `llm.json` ([`apply_merge_patch`]). Request bodies are JSON
//! (`Content-Type: application/json`) sent to [`STATELESS_CHAT_PATH`].
//!
//! Every type here is `Serialize + Deserialize`, so the server uses the same
//! definitions; unknown fields are kept in `extra` maps so newer clients and
//! servers interoperate.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::types::{ChatRole, Usage};

/// Where a stateless server accepts a turn (`POST`, JSON body, SSE answer).
pub const STATELESS_CHAT_PATH: &str = "/api/stateless/chat";
/// A cheap `GET` that answers 200 when the server is up.
pub const HEALTH_PATH: &str = "/api/health";
/// SSE event name of [`ServerEvent::Delta`].
pub const EVENT_DELTA: &str = "delta";
/// SSE event name of [`ServerEvent::Done`].
pub const EVENT_DONE: &str = "done";
/// SSE event name of [`ServerEvent::Error`].
pub const EVENT_ERROR: &str = "error";
/// SSE event name of the optional first event: what the prompt included and
/// dropped (a JSON object; clients that do not show it skip it).
pub const EVENT_CONTEXT: &str = "context";

/// One turn, sent by the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StatelessChatRequest {
    /// The new user message (plain text or XHTML; the server sanitises).
    pub message: String,
    /// Who is asking (stored as the user message's `username`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The state's `context` (XHTML fragment), sent with every turn.
    #[serde(default)]
    pub context: String,
    /// Truth entries the client selected for this turn.
    #[serde(default)]
    pub truth: Vec<TruthEntry>,
    /// The most recent messages of the current branch, oldest first.
    #[serde(default)]
    pub window: Vec<WindowMessage>,
    /// Provider and sampling parameters.
    #[serde(default)]
    pub params: ChatParams,
    /// Fields from newer clients, kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A truth entry as in `llm.json` (`truth.trust[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TruthEntry {
    /// `t_…` id.
    pub id: String,
    /// Title.
    pub title: String,
    /// UTC timestamp `YYYY-MM-DDTHH:MM:SSZ`.
    pub timestamp: String,
    /// Certainty in [0, 1].
    pub certainty: f64,
    /// XHTML content.
    pub content: String,
    /// Other fields of the entry (`kind`, `status`, `tags`, …), kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message of the recent window, as in `llm.json` (`messages[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WindowMessage {
    /// `m_…` id (may be empty for messages the client has not stored yet).
    #[serde(default)]
    pub id: String,
    /// `user`, `assistant` or `system`; when absent, the server infers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<ChatRole>,
    /// A person's name, or the model's name and version.
    #[serde(default)]
    pub username: String,
    /// UTC timestamp.
    #[serde(default)]
    pub timestamp: String,
    /// XHTML content.
    pub content: String,
    /// Other fields (`title`, `parent`, `sources`, …), kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Which provider and parameters the server should use; `None` = the
/// server operator's default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ChatParams {
    /// A provider name configured on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Cap on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The `rag` tool: include truth entries and file chunks (default on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rag: Option<bool>,
    /// The `url_fetch` tool: fetch the links of the truth entries sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_fetch: Option<bool>,
    /// Overrides `truth.retrieval_prefs.max_entries` for this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<u64>,
    /// Overrides `truth.retrieval_prefs.min_certainty` for this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_certainty: Option<f64>,
    /// Other parameters, kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Payload of `event: delta`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaEvent {
    /// Answer text to append.
    pub text: String,
}

/// Payload of `event: done`, the last event of a successful turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DoneEvent {
    /// Id the server derived for the user message.
    pub user_message_id: String,
    /// Id of the assistant message.
    pub assistant_message_id: String,
    /// Ids of truth entries, messages and chunks that were sent as context.
    #[serde(default)]
    pub sources: Vec<String>,
    /// RFC 7396 merge patch to apply to the client's state (adds the two
    /// messages, updates `date`, …). Absent (null) from a local server,
    /// which saved the turn itself.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub state_patch: Value,
    /// Why generation stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Token usage, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Provider that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Other fields, kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Payload of `event: error`; the stream ends after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ErrorEvent {
    /// Human-readable, already free of secrets.
    pub message: String,
    /// Machine-readable kind (`rate_limited`, `server`, `bad_request`,
    /// `auth`, `timeout`, …), when the server knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// One event of the answer stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum ServerEvent {
    /// `event: delta`.
    Delta(DeltaEvent),
    /// `event: done`.
    Done(DoneEvent),
    /// `event: error`.
    Error(ErrorEvent),
}

impl ServerEvent {
    /// The SSE `event:` name.
    pub fn event_name(&self) -> &'static str {
        match self {
            ServerEvent::Delta(_) => EVENT_DELTA,
            ServerEvent::Done(_) => EVENT_DONE,
            ServerEvent::Error(_) => EVENT_ERROR,
        }
    }

    /// The JSON for the SSE `data:` line (always one line).
    pub fn data_json(&self) -> String {
        let r = match self {
            ServerEvent::Delta(d) => serde_json::to_string(d),
            ServerEvent::Done(d) => serde_json::to_string(d),
            ServerEvent::Error(d) => serde_json::to_string(d),
        };
        r.expect("protocol types always serialise")
    }

    /// A complete SSE frame: `event: NAME\ndata: JSON\n\n`.
    pub fn to_sse_frame(&self) -> String {
        format!(
            "event: {}\ndata: {}\n\n",
            self.event_name(),
            self.data_json()
        )
    }

    /// Parse an SSE event back (`event` name and `data` payload).
    pub fn from_sse(event: &str, data: &str) -> Result<Self, String> {
        let bad = |e: serde_json::Error| format!("bad `{event}` payload: {e}");
        match event {
            EVENT_DELTA => serde_json::from_str(data)
                .map(ServerEvent::Delta)
                .map_err(bad),
            EVENT_DONE => serde_json::from_str(data)
                .map(ServerEvent::Done)
                .map_err(bad),
            EVENT_ERROR => serde_json::from_str(data)
                .map(ServerEvent::Error)
                .map_err(bad),
            other => Err(format!("unknown event `{other}`")),
        }
    }
}

/// Apply an RFC 7396 JSON Merge Patch: objects merge recursively, `null`
/// deletes a member, anything else replaces the target.
pub fn apply_merge_patch(target: &mut Value, patch: &Value) {
    patch_value(target, patch, false);
}

/// Apply a [`DoneEvent::state_patch`] to a copy of `llm.json`: RFC 7396,
/// except that an array whose patch elements are all records with an `id`
/// (`messages`, `truth.trust`, `truth.deleted`) is merged record by record
/// — a known id is merge-patched in place, a new one appended — because a
/// plain merge patch would replace the whole transcript with the two new
/// messages (product §3's union by id, applied to a patch).
pub fn apply_state_patch(target: &mut Value, patch: &Value) {
    patch_value(target, patch, true);
}

fn patch_value(target: &mut Value, patch: &Value, records_by_id: bool) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        unreachable!("made an object above")
    };
    for (k, v) in patch_map {
        match v {
            Value::Null => {
                target_map.remove(k);
            }
            Value::Array(records) if records_by_id && is_record_list(records) => {
                let slot = target_map
                    .entry(k.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if !slot.is_array() {
                    *slot = Value::Array(Vec::new());
                }
                let Value::Array(existing) = slot else {
                    unreachable!("made an array above")
                };
                for record in records {
                    let id = &record["id"];
                    match existing.iter_mut().find(|r| &r["id"] == id) {
                        Some(r) => apply_merge_patch(r, record),
                        None => existing.push(record.clone()),
                    }
                }
            }
            _ => patch_value(
                target_map.entry(k.clone()).or_insert(Value::Null),
                v,
                records_by_id,
            ),
        }
    }
}

fn is_record_list(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|r| r.get("id").is_some_and(Value::is_string))
}

/// Escape plain text into an XHTML fragment: paragraphs split on blank
/// lines, `<br/>` for single newlines, `& < > "` escaped.
pub fn text_to_xhtml(text: &str) -> String {
    let mut out = String::new();
    for para in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
        out.push_str("<p>");
        for (i, line) in para.trim_matches('\n').split('\n').enumerate() {
            if i > 0 {
                out.push_str("<br/>");
            }
            for c in line.chars() {
                match c {
                    '&' => out.push_str("&amp;"),
                    '<' => out.push_str("&lt;"),
                    '>' => out.push_str("&gt;"),
                    '"' => out.push_str("&quot;"),
                    c => out.push(c),
                }
            }
        }
        out.push_str("</p>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7396_examples() {
        // The examples from RFC 7396 appendix A.
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (mut target, patch, want) in cases {
            apply_merge_patch(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }

    #[test]
    fn events_round_trip_through_sse_frames() {
        let done = ServerEvent::Done(DoneEvent {
            user_message_id: "m_1".into(),
            assistant_message_id: "m_2".into(),
            sources: vec!["t_a".into()],
            state_patch: json!({"date":"2026-01-01T00:00:00Z"}),
            finish_reason: Some("stop".into()),
            usage: Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 4,
            }),
            ..DoneEvent::default()
        });
        let frame = done.to_sse_frame();
        assert!(frame.starts_with("event: done\ndata: {"));
        assert!(frame.ends_with("}\n\n"));
        let data = frame
            .lines()
            .nth(1)
            .unwrap()
            .strip_prefix("data: ")
            .unwrap();
        assert_eq!(ServerEvent::from_sse("done", data).unwrap(), done);
        let d = ServerEvent::Delta(DeltaEvent {
            text: "a\nb".into(),
        });
        assert_eq!(
            d.to_sse_frame().matches('\n').count(),
            3,
            "newlines inside the text are escaped in the JSON"
        );
        assert!(ServerEvent::from_sse("nope", "{}").is_err());
    }

    #[test]
    fn request_keeps_unknown_fields() {
        let raw = json!({
            "message": "hi", "context": "<p>c</p>",
            "truth": [{"id":"t_1","title":"T","timestamp":"2026-01-01T00:00:00Z","certainty":0.5,"content":"<p>x</p>","kind":"fact"}],
            "window": [{"id":"m_1","role":"user","username":"a","timestamp":"2026-01-01T00:00:00Z","content":"<p>q</p>","parent":"m_0"}],
            "params": {"provider":"local","temperature":0.2,"rag":true},
            "future": 1
        });
        let req: StatelessChatRequest = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(req.truth[0].extra["kind"], "fact");
        assert_eq!(req.params.rag, Some(true));
        // Through text, as on the wire (f32 values print as written).
        let back: Value = serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
        assert_eq!(back, raw);
    }

    #[test]
    fn state_patch_appends_records_by_id_and_merges_the_rest() {
        let mut state = json!({
            "date": "2026-01-01T00:00:00Z",
            "messages": [{"id": "m_1", "content": "a"}],
            "truth": {"trust": [{"id": "t_1", "refs": 1, "title": "T"}]},
            "context": "<p>c</p>"
        });
        let patch = json!({
            "date": "2026-01-02T00:00:00Z",
            "messages": [{"id": "m_2", "content": "b"}, {"id": "m_3", "content": "c"}],
            "truth": {"trust": [{"id": "t_1", "refs": 2}]},
            "tags": ["x"]
        });
        apply_state_patch(&mut state, &patch);
        assert_eq!(state["date"], "2026-01-02T00:00:00Z");
        let ids: Vec<&str> = state["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            ["m_1", "m_2", "m_3"],
            "the transcript is kept, not replaced"
        );
        assert_eq!(
            state["truth"]["trust"][0],
            json!({"id": "t_1", "refs": 2, "title": "T"})
        );
        assert_eq!(state["context"], "<p>c</p>");
        // Arrays of non-records follow RFC 7396: replaced.
        assert_eq!(state["tags"], json!(["x"]));
        // Applying the same patch twice changes nothing more.
        let once = state.clone();
        apply_state_patch(&mut state, &patch);
        assert_eq!(state, once);
    }

    #[test]
    fn xhtml_escape() {
        assert_eq!(
            text_to_xhtml("a < b & \"c\"\nd\n\ne"),
            "<p>a &lt; b &amp; &quot;c&quot;<br/>d</p><p>e</p>"
        );
    }
}

//! A turn on the wire (product §6): what a client sends — [`ChatRequest`] to
//! a local server, [`StatelessChatRequest`] to a stateless one — and the
//! Server-Sent Events the server answers with:
//!
//! ```text
//! event: context
//! data: {"tokens":812,"budget":4096,"sources":["t_…"],"included":[…],"dropped":[…]}
//!
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
//! `state_patch` (stateless servers only) is applied with
//! [`crate::apply_state_patch`]. The `context` event is optional for a
//! client: the `wikioracle` provider skips it.
//!
//! Every type is `Serialize + Deserialize`; unknown fields are kept in
//! `extra` maps so newer clients and servers interoperate.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// SSE event name of [`ServerEvent::Delta`].
pub const EVENT_DELTA: &str = "delta";
/// SSE event name of [`ServerEvent::Done`].
pub const EVENT_DONE: &str = "done";
/// SSE event name of [`ServerEvent::Error`].
pub const EVENT_ERROR: &str = "error";
/// SSE event name of [`MemoryEvent`], after `done` (clients that do not
/// show memory skip it).
pub const EVENT_MEMORY: &str = "memory";
/// SSE event name of the first event of a turn, [`ContextReport`]: what the
/// prompt included and dropped (clients that do not show it skip it).
pub const EVENT_CONTEXT: &str = "context";

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// Instructions and context; providers without a system role fold it into
    /// the first user turn.
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
}

impl ChatRole {
    /// The lowercase wire name shared by every API we speak (`system`, `user`, `assistant`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChatRole::System => "system",
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
        }
    }
}

impl fmt::Display for ChatRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token accounting reported by the provider (or counted in-process by `local`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Tokens in the prompt as the provider counted them.
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub completion_tokens: u32,
}

/// A turn on a local server's state (`POST /api/chat`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct ChatRequest {
    /// The new user message (plain text or Markdown).
    pub message: String,
    /// The message id to branch from; default: the latest message (unless
    /// `new_conversation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Start a new conversation: the message follows none (it is stored
    /// without a parent, marked `"new_conversation": true`) and no earlier
    /// turn is sent with it. Refused together with `parent`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub new_conversation: bool,
    /// Regenerate: answer this stored question again (its id, or one of its
    /// answers'; a unique prefix is enough). The new answer is a sibling of
    /// the earlier ones; `message`, `parent` and `new_conversation` are
    /// ignored (the question's own text and place are used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regenerate: Option<String>,
    /// Who is asking; default: the server's user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Provider and sampling parameters.
    #[serde(default)]
    pub params: ChatParams,
    /// File chunks the client retrieved from its own folder index (the
    /// ingestion page's, in the browser), sent as context beside the
    /// server's index chunks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<FileChunk>,
}

/// Payload of `event: context`: what the prompt included and dropped, and
/// why. The parts are the engine's `Included` / `Dropped` records.
// Generic so the server sends the engine's records borrowed
// (`ContextReport<&Included, &Dropped>`, no copy through `Value`) while a
// client reads them as JSON values (the defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct ContextReport<I = Value, D = Value> {
    /// Estimated prompt tokens.
    pub tokens: usize,
    /// The budget they had to fit.
    pub budget: usize,
    /// Ids recorded on the answer as its `sources`.
    pub sources: Vec<String>,
    /// Each part sent (kind, id, tokens).
    pub included: Vec<I>,
    /// Each candidate left out, with the reason.
    pub dropped: Vec<D>,
    /// The compact record the answer keeps in the file (`context_used`,
    /// spec §1): what a client shows live and after a reload alike.
    #[serde(default)]
    pub context_used: Value,
}

/// One turn, sent by the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
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
    /// Start a new conversation: the message follows none (stored without
    /// a parent, marked `"new_conversation": true`). The `window` must then
    /// be empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub new_conversation: bool,
    /// Regenerate: the `window`'s newest message is a question to answer
    /// again (the window is the branch up to it). The new answer is a
    /// sibling of the earlier ones and the patch holds only it; `message`
    /// and `new_conversation` are ignored (the question's own are used).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub regenerate: bool,
    /// File chunks the client retrieved from its own folder index (the
    /// ingestion page's, in the browser): the file context of this turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<FileChunk>,
    /// Provider and sampling parameters.
    #[serde(default)]
    pub params: ChatParams,
    /// The state's `truth.retrieval_prefs` (`max_entries`, `min_certainty`,
    /// `prefer_higher_certainty`, `certainty_weight`, `recency_weight`), so
    /// the memory sent is picked as a local server picks it from the same
    /// file; absent: the defaults. `params.max_entries`/`min_certainty`
    /// still override them for the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval_prefs: Option<Value>,
    /// Fields from newer clients, kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A file chunk a client retrieved from its own folder index
/// (`wo_index::Index::context_chunks` in the browser): what a server's
/// own index would have offered the turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
pub struct FileChunk {
    /// `chunk:<12 hex digits>` (the chunk's short id), recorded in `sources`.
    pub id: String,
    /// `path:start-end label`, shown to the model.
    pub label: String,
    /// The chunk's text.
    pub text: String,
}

/// A truth entry as in `llm.json` (`truth.trust[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct TruthEntry {
    /// `t_…` id.
    pub id: String,
    /// Title.
    pub title: String,
    /// UTC timestamp `YYYY-MM-DDTHH:MM:SSZ`.
    pub timestamp: String,
    /// Certainty in [0, 1].
    #[schemars(range(min = 0, max = 1))]
    pub certainty: f64,
    /// XHTML content.
    pub content: String,
    /// Other fields of the entry (`kind`, `status`, `tags`, …), kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message of the recent window, as in `llm.json` (`messages[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct ChatParams {
    /// A provider name configured on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature, in [0, 2].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2))]
    pub temperature: Option<f32>,
    /// Cap on generated tokens (at least 1; a stateless server caps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
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
    /// Overrides `truth.retrieval_prefs.min_certainty` for this turn, in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1))]
    pub min_certainty: Option<f64>,
    /// Other parameters, kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Payload of `event: delta`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeltaEvent {
    /// Answer text to append.
    pub text: String,
}

/// Payload of `event: done`, the last event of a successful turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
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
    /// A `memory` event follows on this stream (the interpreter runs on the
    /// exchange now); absent when none will.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory_follows: bool,
    /// Other fields, kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Payload of `event: memory`, after `done` when the memory interpreter
/// ran on the exchange (product §7): what it remembered, or why nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct MemoryEvent {
    /// The exchange: its answer's message id (what `wo memory show` and
    /// `POST /api/memory/undo` take).
    pub exchange: String,
    /// The journal record (an element of `memory_log`: `ops`, `created`,
    /// `resolved`, `touched`, `by`, `at`), when something was recorded.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub record: Value,
    /// Why nothing was remembered (a rejected or failed interpreter call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Stateless servers: the truth entries created or changed, to apply
    /// like `done`'s; the client appends `record` to its own `memory_log`.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub state_patch: Value,
    /// Other fields, kept as-is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Payload of `event: error`; the stream ends after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
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
        let mut buf = Vec::new();
        self.write_sse_frame(&mut buf);
        String::from_utf8(buf).expect("JSON and event names are UTF-8")
    }

    /// [`ServerEvent::to_sse_frame`], appended to `buf` (a server writes a
    /// stream's frames into one buffer: no allocation per frame).
    pub fn write_sse_frame(&self, buf: &mut Vec<u8>) {
        let r = match self {
            ServerEvent::Delta(d) => {
                write_delta_frame(buf, &d.text);
                return;
            }
            ServerEvent::Done(d) => frame(buf, EVENT_DONE, d),
            ServerEvent::Error(d) => frame(buf, EVENT_ERROR, d),
        };
        r.expect("protocol types always serialise");
    }
}

/// `event: NAME\ndata: JSON\n\n` into `buf`.
fn frame<T: Serialize>(buf: &mut Vec<u8>, name: &str, data: &T) -> serde_json::Result<()> {
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    serde_json::to_writer(&mut *buf, data)?;
    buf.extend_from_slice(b"\n\n");
    Ok(())
}

/// The `delta` frame of `text` appended to `buf`: the bytes of
/// `ServerEvent::Delta(DeltaEvent { text }).to_sse_frame()`, without
/// building the event (the text is escaped straight into `buf`).
pub fn write_delta_frame(buf: &mut Vec<u8>, text: &str) {
    /// [`DeltaEvent`] borrowing its text (the same JSON: one field).
    #[derive(Serialize)]
    struct Delta<'a> {
        text: &'a str,
    }
    frame(buf, EVENT_DELTA, &Delta { text }).expect("a string always serialises");
}

impl ServerEvent {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn frames_written_into_a_buffer_are_the_frames() {
        // The old definition (format! of the name and `data_json`) is the
        // reference the streamed bytes are held to.
        let reference =
            |e: &ServerEvent| format!("event: {}\ndata: {}\n\n", e.event_name(), e.data_json());
        let texts = [
            "",
            "tok ",
            "a\nb\r\t\"q\" \\ </script> \u{0}\u{1f}\u{7f} é ✓ 😀 \u{2028}",
        ];
        let mut buf = b"kept".to_vec();
        let mut expected = "kept".to_owned();
        for text in texts {
            let d = ServerEvent::Delta(DeltaEvent { text: text.into() });
            assert_eq!(d.to_sse_frame(), reference(&d));
            write_delta_frame(&mut buf, text);
            expected.push_str(&reference(&d));
        }
        assert_eq!(String::from_utf8(buf).unwrap(), expected);
        let e = ServerEvent::Error(ErrorEvent {
            message: "m\n".into(),
            kind: Some("server".into()),
        });
        assert_eq!(e.to_sse_frame(), reference(&e));
        let done = ServerEvent::Done(DoneEvent {
            user_message_id: "m_1".into(),
            sources: vec!["t_1".into()],
            ..Default::default()
        });
        assert_eq!(done.to_sse_frame(), reference(&done));
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
}

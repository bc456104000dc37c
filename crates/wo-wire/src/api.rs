//! The local API's bodies besides a turn: what a client sends to change the
//! state or ask for a draft, and what the server answers. Field names and
//! optionality are the contract; the server validates values (ranges,
//! emptiness) and answers a JSON pointer for a bad one.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::ChatParams;

/// `PATCH /api/state`: what to change; absent fields stay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct StatePatch {
    /// The new context, Markdown (plain text is Markdown); stored as
    /// sanitised XHTML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The new retrieval preferences (`truth.retrieval_prefs`), whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Value>")]
    pub retrieval_prefs: Option<wo_format::RetrievalPrefs>,
}

/// The answer to `PATCH /api/state`: the fields as saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatePatched {
    /// The state's new `date`.
    pub date: String,
    /// The context (XHTML).
    pub context: String,
    /// The retrieval preferences.
    #[schemars(with = "Value")]
    pub retrieval_prefs: wo_format::RetrievalPrefs,
}

/// `POST /api/truth`: a new entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NewTruth {
    /// The title (not empty).
    pub title: String,
    /// Markdown; stored as sanitised XHTML.
    pub content: String,
    /// In [0, 1].
    #[schemars(range(min = 0, max = 1))]
    pub certainty: f64,
    /// A `wo_format::TruthKind` name: `fact`, `effort`, `event` or `note`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub kind: Option<wo_format::TruthKind>,
}

/// `PATCH /api/truth/{id}`: what to change; absent fields stay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct TruthEdit {
    /// The new title (not empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The new content, Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The new certainty, in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1))]
    pub certainty: Option<f64>,
}

/// `PATCH /api/messages/{id}`: a person's title for a message (the web app
/// renames a conversation by its root), and/or archiving the conversation
/// the message belongs to. At least one of the two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MessageEdit {
    /// The new title. Plain text: whitespace runs become one space, control
    /// characters are dropped, and the result must be non-empty and at
    /// most 200 characters (`wo_engine::conversation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Archive (`true`: hidden from the conversation list, every message
    /// kept) or restore (`false`) the message's conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
}

/// The answer to `PATCH /api/messages/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MessageRenamed {
    /// The message edited (its id never changes).
    pub id: String,
    /// Its title as saved.
    pub title: String,
    /// Whether its conversation is archived, when the edit said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
}

/// `POST /api/markdown`: text someone typed (Markdown; plain text is
/// Markdown) to convert, e.g. the context before a stateless client keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MarkdownRequest {
    /// The Markdown.
    pub markdown: String,
}

/// The answer to `POST /api/markdown`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MarkdownConverted {
    /// The sanitised XHTML the server would store for it.
    pub xhtml: String,
}

/// The answer to `DELETE /api/truth/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TruthDeleted {
    /// The id deleted (a tombstone keeps it deleted in merges).
    pub deleted: String,
}

/// `POST /api/context/draft`: local servers read the messages from their
/// state; stateless ones take `context` and `messages` from here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct DraftRequest {
    /// Stateless: the current context (XHTML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Stateless: the messages since the last update, as in `llm.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<Value>>,
    /// Which provider drafts it.
    #[serde(default)]
    pub params: ChatParams,
}

/// `POST /api/context/apply`: a reviewed draft to save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyRequest {
    /// The new context (XHTML).
    pub draft: String,
    /// The context the draft was made from; 409 if it changed since.
    pub current: String,
}

/// The answer to `POST /api/context/apply`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContextApplied {
    /// The saved context (XHTML).
    pub context: String,
    /// The `context-update` truth entry recording the change.
    pub truth_id: String,
}

/// The answer to `POST /api/merge`: what the merge changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
pub struct MergeReport {
    /// Messages new to the state.
    pub messages_added: usize,
    /// Messages replaced by a newer version.
    pub messages_replaced: usize,
    /// Messages already present.
    pub messages_skipped: usize,
    /// Truth entries new to the state.
    pub truth_added: usize,
    /// Truth entries updated.
    pub truth_updated: usize,
    /// Truth entries already present.
    pub truth_skipped: usize,
    /// Truth entries deleted by the upload's tombstones.
    pub truth_deleted: usize,
    /// Tombstones new to the state.
    pub tombstones_added: usize,
    /// JSON pointers (into the upload) of content that broke the XHTML
    /// rules and was sanitised.
    pub sanitised: Vec<String>,
}

impl MergeReport {
    /// The wire form of wo-format's report: counts, and the pointers of
    /// what admission sanitised.
    pub fn of(report: &wo_format::merge::MergeReport, sanitised: Vec<String>) -> MergeReport {
        MergeReport {
            messages_added: report.messages_added.len(),
            messages_replaced: report.messages_replaced.len(),
            messages_skipped: report.messages_skipped,
            truth_added: report.truth_added.len(),
            truth_updated: report.truth_updated.len(),
            truth_skipped: report.truth_skipped,
            truth_deleted: report.truth_deleted.len(),
            tombstones_added: report.tombstones_added.len(),
            sanitised,
        }
    }
}

/// The answer to `GET /api/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
    /// `local` or `stateless`.
    pub mode: String,
    /// The server's version.
    pub version: String,
    /// Blocking jobs (sanitising, parsing, state file work) waiting or running.
    pub busy: usize,
}

/// The answer to `GET /api/info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Info {
    /// `local` or `stateless`.
    pub mode: String,
    /// The server's version.
    pub version: String,
    /// The name on the user's messages by default.
    pub username: String,
    /// Local: the state file's name (never its directory); stateless: null.
    pub state_file: Option<String>,
    /// The provider used when a turn names none.
    pub default_provider: String,
    /// The name of this server's preferences cookie (`wo_prefs_<port>`).
    pub prefs_cookie: String,
    /// Stateless: the largest `max_tokens` a turn may ask for; local: null.
    pub max_tokens: Option<u32>,
    /// Whether a directory index is searched.
    pub index: bool,
    /// What the server accepts.
    pub limits: InfoLimits,
}

/// The size caps a client must stay within.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InfoLimits {
    /// Most JSON bodies, in bytes.
    pub body_bytes: usize,
    /// `POST /api/merge`, in bytes.
    pub upload_bytes: usize,
    /// One new message, in characters.
    pub message_chars: usize,
    /// Stateless turns: messages in the window.
    pub window_messages: usize,
    /// Stateless turns: truth entries.
    pub truth_entries: usize,
}

/// The answer to `GET /api/providers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProviderList {
    /// The provider used when a turn names none.
    pub default: String,
    /// The providers a client may choose.
    pub providers: Vec<ProviderRow>,
}

/// What a client may know of a provider: never its key, URL or path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProviderRow {
    /// Its name in the server's config.
    pub name: String,
    /// `openai`, `anthropic`, `nanochat`, `wikioracle`, `local`.
    pub kind: String,
    /// The model used when a turn names none.
    pub default_model: String,
    /// The models a turn may name.
    pub models: Vec<String>,
    /// Context window in tokens.
    pub context_window: usize,
    /// With `?check=true`: whether it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reachable: Option<bool>,
    /// With `?check=true`, local mode only: why it is unreachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `GET /api/providers` query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
pub struct ProvidersQuery {
    /// Try each provider (costs a request each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<bool>,
}

/// `GET /api/state` query: a page of the transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
pub struct StateQuery {
    /// First message of the page; default: the latest `limit` messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// Messages in the page (1..=5000; default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only the messages of this conversation (its root's id, or the id or
    /// an unambiguous id prefix of any message in it); `offset` and
    /// `limit` then count within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
}

/// `GET /api/conversations` query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
pub struct ConversationsQuery {
    /// Only conversations whose title, or one of whose messages' text,
    /// contains this (case-insensitively).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    /// First conversation of the page (newest first; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// Conversations in the page (1..=1000; default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `true`: the archived conversations instead (hidden from the usual
    /// list; `PATCH /api/messages/{id}` with `archived`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<bool>,
}

/// The answer to `GET /api/conversations`: one page of the file's
/// conversations, newest first (by their latest message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConversationList {
    /// The page.
    pub conversations: Vec<ConversationSummary>,
    /// Conversations in the whole list (those matching `q`, if given).
    pub total: usize,
    /// Index of the page's first conversation.
    pub offset: usize,
}

/// One conversation: a root message and its descendants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConversationSummary {
    /// Its root's id (`GET /api/state?conversation=` takes it).
    pub root: String,
    /// Its title (an imported conversation's own, else the root's).
    pub title: String,
    /// When its root was written.
    pub created: String,
    /// When its latest message was written.
    pub updated: String,
    /// Its latest message's id.
    pub latest: String,
    /// How many messages it holds.
    pub messages: usize,
    /// With `q`, when a message (not the title) matched: a little of the
    /// first such message's plain text around the match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
}

/// `GET /api/search` query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
pub struct SearchQuery {
    /// The query text.
    pub q: String,
    /// Hits of each kind (1..=100; default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Chunks only under this path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Chunks of this kind only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// The answer to `GET /api/state`: everything but the transcript, and one
/// page of it. Borrowed on the server (a page is not copied to be sent),
/// owned on a client.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatePage<'a> {
    /// The schema URL.
    pub schema: Cow<'a, str>,
    /// The format version.
    pub version: u64,
    /// When the state last changed.
    #[schemars(with = "String")]
    pub date: wo_format::Timestamp,
    /// The context (XHTML).
    pub context: Cow<'a, str>,
    /// The truth table, whole (entries, tombstones, retrieval prefs).
    #[schemars(with = "Value")]
    pub truth: Cow<'a, wo_format::Truth>,
    /// The page of messages, oldest first.
    #[schemars(with = "Vec<Value>")]
    pub messages: Cow<'a, [wo_format::Message]>,
    /// Messages in the whole transcript (or the conversation asked for).
    pub total_messages: usize,
    /// Index of the page's first message.
    pub offset: usize,
    /// With `?conversation=`: that conversation's root id; `total_messages`
    /// and `offset` then count within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The memory journal (`memory_log`: what the interpreter recorded per
    /// exchange, product §7), when the file has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<Value>>")]
    pub memory_log: Option<Cow<'a, wo_format::RawJson>>,
}

/// The body of `POST /api/memory/undo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryUndo {
    /// The exchange whose operations to undo: its answer's message id.
    pub exchange: String,
}

/// The body of `POST /api/stateless/memory/undo`: the exchange, and the
/// client's journal and truth entries the undo works on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatelessMemoryUndo {
    /// The exchange whose operations to undo: its answer's message id.
    pub exchange: String,
    /// The client's `memory_log`, whole.
    pub memory_log: Vec<Value>,
    /// The client's truth entries (at least those the record names).
    pub truth: Vec<Value>,
}

/// The answer to `POST /api/stateless/memory/undo`: the changes for the
/// client to apply to its own state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatelessMemoryUndone {
    /// What the undo did (`removed` entries leave the client's `truth.trust`).
    pub undone: MemoryUndone,
    /// Entries changed (reopened, `refs` taken back), to replace by id.
    pub trust: Vec<Value>,
    /// Tombstones of the removed entries, for `truth.deleted`.
    pub deleted: Vec<Value>,
    /// The journal with the record marked undone: replaces `memory_log`.
    pub memory_log: Vec<Value>,
}

/// The body of `POST /api/stateless/stopped`: a stateless turn its reader
/// stopped (Stop, or the tab closed mid-answer), which the client keeps
/// itself — the server's commit never reached it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatelessStopped {
    /// The turn as a local chat sends it: the question (`message`), where
    /// it goes (`parent` — the message it followed, taken as it is —, or
    /// `new_conversation`), `username`, and the `params` naming the
    /// provider and model that answered.
    pub turn: crate::ChatRequest,
    /// The answer as far as it streamed (Markdown, as the model wrote it);
    /// empty when no word had come.
    #[serde(default)]
    pub answer: String,
    /// When the question was sent (UTC timestamp): the question's time.
    pub sent_at: String,
    /// The `sources` of the turn's `context` event, if it came.
    #[serde(default)]
    pub sources: Vec<String>,
    /// The `context_used` of the turn's `context` event, if it came: kept
    /// on the stopped answer as a finished one keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_used: Option<serde_json::Value>,
}

/// The answer to `POST /api/stateless/stopped`: the patch that adds the
/// question and the stopped answer to the client's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatelessKept {
    /// The id of the question.
    pub user_message_id: String,
    /// The id of the answer, marked `usage.truncated = {"reason": "stopped"}`.
    pub assistant_message_id: String,
    /// `{"date", "messages": [question, answer]}`, applied as a turn's
    /// `state_patch` is.
    pub state_patch: Value,
}

/// The answer to `POST /api/memory/undo`: what the undo changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryUndone {
    /// The exchange undone.
    pub exchange: String,
    /// Entries it had created, removed (with a tombstone).
    pub removed: Vec<String>,
    /// Efforts it had resolved, open again.
    pub reopened: Vec<String>,
    /// Entries whose `refs` went back down.
    pub untouched: Vec<String>,
    /// Entries left alone because they were changed since (never lose an edit).
    pub kept: Vec<String>,
}

/// The answer to `GET /api/search`: the best hits of each kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchResults {
    /// Messages, best first.
    pub messages: Vec<MessageHit>,
    /// Truth entries, best first.
    pub truth: Vec<TruthHit>,
    /// Chunks of the directory index, best first (`[]` without one).
    pub chunks: Vec<Value>,
}

/// A message that matched a search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageHit {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Who wrote it.
    pub username: String,
    /// When.
    pub timestamp: String,
    /// BM25 score (> 0).
    pub score: f64,
}

/// A truth entry that matched a search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TruthHit {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its certainty.
    pub certainty: f64,
    /// BM25 score (> 0).
    pub score: f64,
}

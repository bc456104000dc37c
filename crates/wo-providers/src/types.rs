//! The provider-neutral request and event types every provider speaks.
//!
//! Messages are plain text: XHTML from `llm.json` is converted to text by the
//! context assembler before it reaches a provider, because models answer
//! better to prose than to markup and because each wire format wants strings.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Who said a message, and token accounting: wire types (the
/// `wikioracle` provider sends and receives them), defined in `wo_wire`.
pub use wo_wire::{ChatRole, Usage};

/// One turn of an assembled prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who said it.
    pub role: ChatRole,
    /// Plain text.
    pub content: String,
}

impl ChatMessage {
    /// A message with any role.
    pub fn new(role: ChatRole, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(ChatRole::System, content)
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(ChatRole::User, content)
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(ChatRole::Assistant, content)
    }
}

/// An assembled prompt plus sampling parameters.
///
/// `None` means "the provider's default" (see each provider's docs); the
/// caller applies the user's `[defaults]` from the config before this point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Overrides the provider's configured model.
    pub model: Option<String>,
    /// The conversation, oldest first; normally ends with a user message.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature (0 = greedy where supported).
    pub temperature: Option<f32>,
    /// Cap on generated tokens.
    pub max_tokens: Option<u32>,
    /// Top-k sampling; sent only to providers that accept it.
    pub top_k: Option<u32>,
    /// Structured output: the answer must be JSON valid against this
    /// schema. Each provider uses its own mechanism (OpenAI-compatible:
    /// `response_format` with a JSON schema; Anthropic: a forced tool whose
    /// input is the answer; the local model: the schema compiled by
    /// llguidance into a mask over its tokens, so even a tiny model emits
    /// well-formed output). Providers
    /// without one (NanoChat) ignore it: the caller validates anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_schema: Option<JsonSchema>,
}

/// A named JSON Schema the answer must follow (see [`ChatRequest::json_schema`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSchema {
    /// A short name (`[A-Za-z0-9_-]`), as OpenAI's `json_schema.name` and
    /// Anthropic's tool name require.
    pub name: String,
    /// The schema (draft 2020-12 subset the providers accept).
    pub schema: serde_json::Value,
}

impl ChatRequest {
    /// A request with these messages and every parameter at its default.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
    /// Builder: set the model.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }
    /// Builder: set the temperature.
    pub fn with_temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }
    /// Builder: set the token cap.
    pub fn with_max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }
    /// Builder: set top-k.
    pub fn with_top_k(mut self, k: u32) -> Self {
        self.top_k = Some(k);
        self
    }
}

/// One item of an answer stream.
///
/// A successful stream is zero or more `Delta`s followed by exactly one
/// `Done`, after which it ends. A failed stream ends with one `Err` item
/// instead; nothing follows an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamEvent {
    /// A piece of answer text, to append as-is.
    Delta(String),
    /// The answer is complete.
    Done {
        /// Why generation stopped, in the provider's words (`stop`, `length`,
        /// `end_turn`, `max_tokens`, …); `None` when the provider does not say.
        finish_reason: Option<String>,
        /// Token counts, when the provider reports them.
        usage: Option<Usage>,
    },
}

/// Result of [`crate::Provider::check`]: can this provider answer right now?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Reachability {
    /// It answered (or, for `local`, the model file loads).
    Reachable {
        /// What was checked, e.g. `GET /v1/models → 200 (12 ms)`.
        detail: String,
    },
    /// It could not be reached or refused us.
    Unreachable {
        /// Why, in one line.
        reason: String,
    },
    /// Something it needs is missing locally (API key, model file); no
    /// request was made.
    NotConfigured {
        /// What is missing and how to fix it.
        reason: String,
    },
}

impl Reachability {
    /// True only for [`Reachability::Reachable`].
    pub fn is_reachable(&self) -> bool {
        matches!(self, Reachability::Reachable { .. })
    }
}

impl fmt::Display for Reachability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reachability::Reachable { detail } => write!(f, "reachable ({detail})"),
            Reachability::Unreachable { reason } => write!(f, "unreachable: {reason}"),
            Reachability::NotConfigured { reason } => write!(f, "not configured: {reason}"),
        }
    }
}

/// Caps on one answer: a hostile or broken upstream could
/// otherwise stream forever, and everything it sends would be held in
/// memory and saved. When a cap is reached the caller stops reading, keeps
/// what arrived, and marks the stored answer as truncated
/// ([`TRUNCATED_FIELD`]).
///
/// Configured per provider (`max_answer_bytes`, `max_answer_secs`) or for
/// all in `[defaults]` of `config.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerLimits {
    /// Bytes of answer text (UTF-8) kept at most.
    pub max_bytes: usize,
    /// Time from sending the request to the end of the answer.
    pub max_duration: std::time::Duration,
}

impl AnswerLimits {
    /// 128 KiB: far above any real answer (a 4k-token answer is ~16 KB),
    /// and small enough that its XHTML (escaping and paragraph tags can
    /// grow text up to about eightfold) stays under the store's 1 MiB
    /// message limit, so a capped answer is still saved.
    pub const DEFAULT_MAX_BYTES: usize = 128 * 1024;
    /// 10 minutes: a slow local model writing a long answer stays well below.
    pub const DEFAULT_MAX_SECS: u64 = 600;
}

impl Default for AnswerLimits {
    fn default() -> Self {
        Self {
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_duration: std::time::Duration::from_secs(Self::DEFAULT_MAX_SECS),
        }
    }
}

/// The key, inside a stored message's `usage` object, that marks an answer
/// cut short by [`AnswerLimits`]; its value says which cap and where, e.g.
/// `{"reason":"size","limit":1048576}`. `usage` keeps unknown keys, so the
/// mark survives every reader and writer of `llm.json`.
pub const TRUNCATED_FIELD: &str = "truncated";

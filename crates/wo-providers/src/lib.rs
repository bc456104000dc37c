//! WikiOracle's LLM providers behind one streaming interface, and the user
//! configuration that names them.
//!
//! A [`Provider`] turns an assembled prompt ([`ChatRequest`]: plain-text
//! [`ChatMessage`]s plus sampling parameters) into a stream of
//! [`StreamEvent`]s: text deltas, then exactly one `Done` with the finish
//! reason and token usage. Failures are [`ProviderError`]s whose messages name
//! the provider, URL and status and end with a hint; they never contain keys.
//!
//! | kind | module | speaks |
//! |---|---|---|
//! | `openai` | [`openai`] | Chat Completions SSE; any compatible `base_url` |
//! | `anthropic` | [`anthropic`] | Messages API SSE |
//! | `nanochat` | [`nanochat`] | NanoChat's `/chat/completions` token SSE |
//! | `wikioracle` | [`wikioracle`] | a WikiOracle server in stateless mode (wire types: the `wo_wire` crate) |
//! | `local` | `local` (feature `local`, on by default) | a GGUF model in-process via llama.cpp |
//!
//! Typical use:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use futures::StreamExt;
//! use wo_providers::{config, CancellationToken, ChatMessage, ChatRequest, StreamEvent};
//!
//! let cfg = config::Config::load()?;
//! let provider = config::build(cfg.default_provider(), &cfg)?;
//! let req = ChatRequest::new(vec![
//!     ChatMessage::system("Answer briefly."),
//!     ChatMessage::user("What is the capital of France?"),
//! ]);
//! let mut stream = provider.stream(req, CancellationToken::new()).await?;
//! while let Some(ev) = stream.next().await {
//!     match ev? {
//!         StreamEvent::Delta(text) => print!("{text}"),
//!         StreamEvent::Done { finish_reason, usage } => println!("\n[{finish_reason:?} {usage:?}]"),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! The trait uses [`async_trait`] (boxed futures) so that `Arc<dyn Provider>`
//! works; implementors write `#[async_trait::async_trait] impl Provider for …`.

#![warn(missing_docs)]

pub mod anthropic;
pub mod config;
pub mod embed;
pub mod env;
pub mod error;
pub mod http;
#[cfg(feature = "local")]
pub mod local;
pub mod nanochat;
pub mod openai;
pub mod proxy;
mod remote;
pub mod secret;
pub mod sse;
pub mod types;
pub mod wikioracle;

use futures::stream::BoxStream;

pub use config::{Config, ProviderInfo, ProviderKind, build, list};
pub use error::{ErrorKind, ProviderError, TimeoutPhase};
pub use http::{HttpSettings, RetryPolicy};
pub use remote::RemoteConfig;
pub use secret::Secret;
pub use types::{
    AnswerLimits, ChatMessage, ChatRequest, ChatRole, JsonSchema, Reachability, StreamEvent,
    TRUNCATED_FIELD, Usage,
};

/// Re-exported so callers need not depend on `tokio-util` themselves.
pub use tokio_util::sync::CancellationToken;
/// Short alias of [`CancellationToken`] (used by the `wo` commands).
pub use tokio_util::sync::CancellationToken as Cancel;

/// The answer stream: `Delta`s, then one `Done`; or an `Err` as the last item.
pub type EventStream = BoxStream<'static, Result<StreamEvent, ProviderError>>;

/// One LLM backend.
///
/// Contract for [`Provider::stream`]:
/// - Failures before the answer starts (bad key, 429/5xx after retries,
///   unreachable, first-byte timeout) are returned as `Err` from `stream`
///   itself; nothing has been shown yet.
/// - Afterwards the stream yields `Delta`s and ends with one `Done`, or ends
///   with one `Err` (dropped connection, idle timeout, malformed frame,
///   cancellation). Nothing is yielded after `Done` or an `Err`.
/// - Cancelling `cancel` ends the stream promptly with
///   [`ProviderError::Cancelled`]; dropping the stream aborts the request
///   (the HTTP connection is closed, the local generation thread stops).
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name (its `config.toml` entry, e.g. `openai`, `llamacpp`).
    fn name(&self) -> &str;
    /// Model used when [`ChatRequest::model`] is `None`.
    fn default_model(&self) -> &str;
    /// Context window in tokens for the default model (from config, or the
    /// kind's known default), used by the context assembler's budget.
    fn context_window(&self) -> usize;
    /// Send the request and stream the answer. See the trait docs.
    async fn stream(
        &self,
        req: ChatRequest,
        cancel: CancellationToken,
    ) -> Result<EventStream, ProviderError>;
    /// Whether the provider can answer now (a cheap request, or for `local`
    /// loading the model). Never fails: problems are described in the result.
    async fn check(&self) -> Reachability;
    /// Exact token count with the model's own tokenizer, when this provider
    /// has one in-process (`local`); `None` means "estimate (chars / 4)".
    fn count_tokens(&self, text: &str) -> Option<usize>;
    /// The caps on one answer from this provider, which the caller enforces
    /// while reading the stream (`wo_engine::chat::stream_answer`). Defaults
    /// to [`AnswerLimits::default`]; `config.toml` can change them.
    fn answer_limits(&self) -> AnswerLimits {
        AnswerLimits::default()
    }
    /// The models this provider offers: from its own model list where it
    /// has one (OpenAI-compatible servers and Anthropic: `GET /v1/models`;
    /// Ollama's `/api/tags` when its `/v1/models` is missing), else just
    /// its configured model. An error says why the list could not be had
    /// (the URL and the status or cause).
    async fn models(&self) -> Result<ModelList, ModelsError> {
        Ok(ModelList::configured(self.default_model()))
    }
    /// Why `req` may have failed: its server refusing it as longer than
    /// the model's window, asked once more without streaming, for at most
    /// `reply_tokens` tokens. For failures a window smaller than
    /// [`Provider::context_window`] can cause without saying so (a stream
    /// closed unanswered, an empty answer). `Some` is
    /// [`ProviderError::TooLong`]; `None`: the server did not say so (it
    /// answered, refused for another reason, or this provider cannot ask).
    async fn window_refusal(
        &self,
        _req: &ChatRequest,
        _reply_tokens: u32,
    ) -> Option<ProviderError> {
        None
    }
}

/// Why [`Provider::models`] has no list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelsError {
    /// The provider is not set up to be asked (no API key, a bad entry):
    /// a note, not a failure.
    #[error("not configured: {0}")]
    NotConfigured(String),
    /// It was asked and did not answer with a list (unreachable, refused,
    /// not a model list): the URL and the status or cause.
    #[error("{0}")]
    Failed(String),
}

/// What [`Provider::models`] found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ModelList {
    /// Model ids, as the provider names them (to use with `-m PROVIDER/MODEL`).
    pub models: Vec<String>,
    /// Where the list came from: the URL asked, or `"config"` when the
    /// provider has no list and this is its configured model.
    pub source: String,
}

impl ModelList {
    /// A provider without a model list: its configured model.
    pub fn configured(model: &str) -> Self {
        ModelList {
            models: vec![model.to_owned()],
            source: "config".into(),
        }
    }
}

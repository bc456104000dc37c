//! [`ProviderError`]: every way a provider call can fail, each with a message
//! that names the provider, the URL and the HTTP status and ends with a hint.
//!
//! Messages are built from already-scrubbed parts: URLs are shown without
//! credentials or query strings and server bodies have any known key replaced,
//! so an error can be printed or logged as-is.

use std::fmt;
use std::time::Duration;

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Opening the TCP/TLS connection.
    Connect,
    /// Waiting for the response headers and the first bytes of the answer.
    FirstByte,
    /// Waiting between two frames of a stream that had started.
    Idle,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Connect => "connecting",
            TimeoutPhase::FirstByte => "waiting for the first byte",
            TimeoutPhase::Idle => "waiting for the next frame",
        })
    }
}

/// The kind of a [`ProviderError`], for matching without destructuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// HTTP 401/403.
    Auth,
    /// HTTP 429 (after retries).
    RateLimited,
    /// HTTP 5xx or an error event inside the stream (after retries).
    Server,
    /// Any other HTTP 4xx, or a request the provider cannot represent.
    BadRequest,
    /// The stream did not follow the wire format.
    Malformed,
    /// The connection closed before the answer finished.
    ConnectionDropped,
    /// A timeout ran out.
    Timeout,
    /// The caller cancelled.
    Cancelled,
    /// The configuration is wrong or incomplete.
    Config,
    /// Nothing answered at the URL.
    Unreachable,
    /// The in-process model failed.
    Engine,
}

/// A failed provider call. See the module docs for what messages contain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// 401/403: the key is missing, wrong or lacks permission.
    #[error(
        "{provider}: authentication failed (HTTP {status} from {url}){}. Hint: {}",
        suffix(.detail),
        auth_hint(.key_source)
    )]
    Auth {
        /// Provider name (the config entry's name).
        provider: String,
        /// Request URL without credentials or query.
        url: String,
        /// HTTP status.
        status: u16,
        /// What the server said (scrubbed, one line, shortened).
        detail: String,
        /// Where the key comes from, e.g. `env OPENAI_API_KEY`.
        key_source: String,
    },
    /// 429 on every attempt, or a `Retry-After` too long to wait for.
    #[error(
        "{provider}: rate limited (HTTP 429 from {url}) after {attempts} attempt(s){}{}. Hint: {HINT_RATE}",
        retry_after_text(.retry_after),
        suffix(.detail)
    )]
    RateLimited {
        /// Provider name.
        provider: String,
        /// Request URL.
        url: String,
        /// The server's last `Retry-After`, if any.
        retry_after: Option<Duration>,
        /// Requests made.
        attempts: u32,
        /// What the server said.
        detail: String,
    },
    /// 5xx on every attempt, or an error event inside an accepted stream.
    #[error(
        "{provider}: {} {url}{}. Hint: {HINT_SERVER}",
        server_what(.status, *.attempts),
        suffix(.detail)
    )]
    Server {
        /// Provider name.
        provider: String,
        /// Request URL.
        url: String,
        /// HTTP status; `None` for an error reported inside the stream.
        status: Option<u16>,
        /// Requests made.
        attempts: u32,
        /// What the server said.
        detail: String,
    },
    /// Other 4xx, or a request this provider cannot send (too long, …).
    #[error(
        "{provider}: {}{}. Hint: {HINT_BAD_REQUEST}",
        bad_request_what(.status, .url),
        suffix(.detail)
    )]
    BadRequest {
        /// Provider name.
        provider: String,
        /// Request URL (empty for checks made before sending).
        url: String,
        /// HTTP status; `None` when we refused before sending.
        status: Option<u16>,
        /// What is wrong.
        detail: String,
    },
    /// The server refused the prompt as longer than the model's context
    /// window (an HTTP 4xx saying so; or a stream it closed unanswered,
    /// which the same request without streaming showed to be that). Its
    /// [`ErrorKind`] is `BadRequest`.
    #[error(
        "{provider}: the prompt is longer than the model's context window{} ({url}){}. Hint: {}",
        window_text(.window),
        suffix(.detail),
        too_long_hint(.provider, .window)
    )]
    TooLong {
        /// Provider name.
        provider: String,
        /// Request URL.
        url: String,
        /// The window the server said it has, in tokens, when it said.
        window: Option<usize>,
        /// What the server said.
        detail: String,
    },
    /// The response was not the expected wire format.
    #[error("{provider}: malformed stream from {url}{}. Hint: {HINT_MALFORMED}", suffix(.detail))]
    Malformed {
        /// Provider name.
        provider: String,
        /// Request URL.
        url: String,
        /// What was wrong, with a short excerpt.
        detail: String,
    },
    /// The connection ended before the answer was complete.
    #[error(
        "{provider}: connection to {url} dropped before the answer finished{}. Hint: {HINT_DROPPED}",
        suffix(.detail)
    )]
    ConnectionDropped {
        /// Provider name.
        provider: String,
        /// Request URL.
        url: String,
        /// Low-level cause.
        detail: String,
    },
    /// A connect, first-byte or idle timeout ran out.
    #[error(
        "{provider}: timed out after {:.1}s {phase} ({url}). Hint: {}",
        .after.as_secs_f64(),
        timeout_hint(*.phase)
    )]
    Timeout {
        /// Provider name.
        provider: String,
        /// Request URL.
        url: String,
        /// Which wait.
        phase: TimeoutPhase,
        /// How long we waited.
        after: Duration,
    },
    /// The cancellation token fired (e.g. Ctrl-C).
    #[error("{provider}: cancelled. Hint: {HINT_CANCELLED}")]
    Cancelled {
        /// Provider name.
        provider: String,
    },
    /// Bad or missing configuration (no key, no model file, bad URL, …).
    #[error("{provider}: configuration error: {message}. Hint: {}", config_hint())]
    Config {
        /// Provider name (or `config` for file-level problems).
        provider: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// Nothing accepted the connection.
    #[error(
        "{provider}: cannot reach {url} after {attempts} attempt(s){}. Hint: {HINT_UNREACHABLE}",
        suffix(.detail)
    )]
    Unreachable {
        /// Provider name.
        provider: String,
        /// Request URL.
        url: String,
        /// Requests made.
        attempts: u32,
        /// Low-level cause.
        detail: String,
    },
    /// The in-process model failed (load, decode, template).
    #[error("{provider}: local model failed: {detail}. Hint: {HINT_ENGINE}")]
    Engine {
        /// Provider name.
        provider: String,
        /// What failed.
        detail: String,
    },
}

impl ProviderError {
    /// The kind, for matching.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ProviderError::Auth { .. } => ErrorKind::Auth,
            ProviderError::RateLimited { .. } => ErrorKind::RateLimited,
            ProviderError::Server { .. } => ErrorKind::Server,
            ProviderError::BadRequest { .. } | ProviderError::TooLong { .. } => {
                ErrorKind::BadRequest
            }
            ProviderError::Malformed { .. } => ErrorKind::Malformed,
            ProviderError::ConnectionDropped { .. } => ErrorKind::ConnectionDropped,
            ProviderError::Timeout { .. } => ErrorKind::Timeout,
            ProviderError::Cancelled { .. } => ErrorKind::Cancelled,
            ProviderError::Config { .. } => ErrorKind::Config,
            ProviderError::Unreachable { .. } => ErrorKind::Unreachable,
            ProviderError::Engine { .. } => ErrorKind::Engine,
        }
    }

    /// The provider name the error is about.
    pub fn provider(&self) -> &str {
        match self {
            ProviderError::Auth { provider, .. }
            | ProviderError::RateLimited { provider, .. }
            | ProviderError::Server { provider, .. }
            | ProviderError::BadRequest { provider, .. }
            | ProviderError::TooLong { provider, .. }
            | ProviderError::Malformed { provider, .. }
            | ProviderError::ConnectionDropped { provider, .. }
            | ProviderError::Timeout { provider, .. }
            | ProviderError::Cancelled { provider }
            | ProviderError::Config { provider, .. }
            | ProviderError::Unreachable { provider, .. }
            | ProviderError::Engine { provider, .. } => provider,
        }
    }

    /// Shorthand for a configuration error.
    pub fn config(provider: impl Into<String>, message: impl Into<String>) -> Self {
        ProviderError::Config {
            provider: provider.into(),
            message: message.into(),
        }
    }

    /// The one-line advice at the end of the message.
    pub fn hint(&self) -> String {
        match self {
            ProviderError::Auth { key_source, .. } => auth_hint(key_source),
            ProviderError::RateLimited { .. } => HINT_RATE.into(),
            ProviderError::Server { .. } => HINT_SERVER.into(),
            ProviderError::BadRequest { .. } => HINT_BAD_REQUEST.into(),
            ProviderError::TooLong {
                provider, window, ..
            } => too_long_hint(provider, window),
            ProviderError::Malformed { .. } => HINT_MALFORMED.into(),
            ProviderError::ConnectionDropped { .. } => HINT_DROPPED.into(),
            ProviderError::Timeout { phase, .. } => timeout_hint(*phase).into(),
            ProviderError::Cancelled { .. } => HINT_CANCELLED.into(),
            ProviderError::Config { .. } => config_hint(),
            ProviderError::Unreachable { .. } => HINT_UNREACHABLE.into(),
            ProviderError::Engine { .. } => HINT_ENGINE.into(),
        }
    }
}

const HINT_RATE: &str = "wait a little and try again, or use another provider";
const HINT_SERVER: &str = "the service is failing; try again later or use another provider";
const HINT_BAD_REQUEST: &str =
    "check the model name, base_url and parameters (temperature, max_tokens)";
const HINT_MALFORMED: &str = "is base_url pointing at a server of this provider's kind?";
const HINT_DROPPED: &str = "the answer was cut off and nothing was saved; try again";
const HINT_CANCELLED: &str = "nothing was saved";
/// The configuration hint, naming the config file this process reads.
fn config_hint() -> String {
    format!(
        "see `wo providers` and {}",
        crate::env::config_path_for_hints()
    )
}
const HINT_UNREACHABLE: &str =
    "is the server running and is base_url right? (`wo providers` checks)";
const HINT_ENGINE: &str = "the model file may be damaged: rerun scripts/install-model.sh";

fn window_text(window: &Option<usize>) -> String {
    match window {
        Some(n) => format!(" of {n} tokens"),
        None => String::new(),
    }
}

/// Names the setting that makes every prompt fit: wo sizes its prompts to
/// `context_window`, which defaults to what the provider's kind usually
/// has (a local server is often started with far less).
fn too_long_hint(provider: &str, window: &Option<usize>) -> String {
    let config = crate::env::config_path_for_hints();
    match window {
        Some(n) => format!(
            "set context_window = {n} under [providers.{provider}] in {config}: wo then fits its prompts to the model"
        ),
        None => format!(
            "set context_window under [providers.{provider}] in {config} to the server's context size (llama.cpp -c, llama-cpp-python --n_ctx): wo then fits its prompts to it"
        ),
    }
}

fn auth_hint(key_source: &str) -> String {
    format!("check the API key ({key_source}) and that it may use this model")
}

fn timeout_hint(phase: TimeoutPhase) -> &'static str {
    match phase {
        TimeoutPhase::Connect => "is the server up? check base_url",
        _ => "the model may be slow: raise timeout_secs for this provider in config.toml",
    }
}

fn retry_after_text(d: &Option<Duration>) -> String {
    match d {
        Some(d) => format!("; server asks to retry after {}s", d.as_secs_f32().ceil()),
        None => String::new(),
    }
}

fn server_what(status: &Option<u16>, attempts: u32) -> String {
    match status {
        Some(s) => format!("server error (HTTP {s}) after {attempts} attempt(s) from"),
        None => "the server reported an error in the stream from".into(),
    }
}

fn bad_request_what(status: &Option<u16>, url: &str) -> String {
    match status {
        Some(s) => format!("request rejected (HTTP {s} from {url})"),
        None => "cannot send this request".into(),
    }
}

fn suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_well() {
        let e = ProviderError::Auth {
            provider: "openai".into(),
            url: "https://api.openai.com/v1/chat/completions".into(),
            status: 401,
            detail: "Incorrect API key provided".into(),
            key_source: "env OPENAI_API_KEY".into(),
        };
        assert_eq!(
            e.to_string(),
            "openai: authentication failed (HTTP 401 from https://api.openai.com/v1/chat/completions): \
             Incorrect API key provided. Hint: check the API key (env OPENAI_API_KEY) and that it may use this model"
        );
        let e = ProviderError::RateLimited {
            provider: "anthropic".into(),
            url: "u".into(),
            retry_after: Some(Duration::from_millis(1500)),
            attempts: 4,
            detail: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "anthropic: rate limited (HTTP 429 from u) after 4 attempt(s); server asks to retry after 2s. \
             Hint: wait a little and try again, or use another provider"
        );
        let e = ProviderError::Server {
            provider: "p".into(),
            url: "u".into(),
            status: Some(503),
            attempts: 2,
            detail: "busy".into(),
        };
        assert_eq!(
            e.to_string(),
            "p: server error (HTTP 503) after 2 attempt(s) from u: busy. \
             Hint: the service is failing; try again later or use another provider"
        );
        let e = ProviderError::Timeout {
            provider: "p".into(),
            url: "u".into(),
            phase: TimeoutPhase::Idle,
            after: Duration::from_millis(300),
        };
        assert_eq!(
            e.to_string(),
            "p: timed out after 0.3s waiting for the next frame (u). \
             Hint: the model may be slow: raise timeout_secs for this provider in config.toml"
        );
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert_eq!(e.provider(), "p");
    }
}

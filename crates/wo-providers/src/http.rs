//! The HTTP machinery the four remote providers share: one request with
//! retries, backoff and timeouts, then an SSE stream driven frame by frame.
//!
//! Retry rule: only failures *before the first byte of the answer* are
//! retried (connection errors, 429, 5xx, a 200 whose body closes empty),
//! because after the first delta the caller has already shown text and a
//! silent restart would duplicate it.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use rand::RngExt;
use reqwest::header::HeaderMap;
use reqwest::{Client, RequestBuilder, StatusCode};
use tokio_util::sync::CancellationToken;

use crate::error::{ProviderError, TimeoutPhase};
use crate::secret::Secret;
use crate::sse::{SseError, SseEvent, SseParser};

/// Backoff and retry limits.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 = never retry).
    pub max_attempts: u32,
    /// Delay before the first retry; doubles each time.
    pub base_delay: Duration,
    /// Upper bound for one computed delay.
    pub max_delay: Duration,
    /// A `Retry-After` longer than this is not waited for: the call fails at
    /// once with [`ProviderError::RateLimited`] carrying the server's value.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Delay before retry number `retry` (1-based) when the server gave no
    /// `Retry-After`: exponential, capped, with jitter in [50 %, 100 %] so
    /// many clients do not retry in lockstep.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.saturating_sub(1)));
        let capped = exp.min(self.max_delay);
        let factor: f64 = rand::rng().random_range(0.5..=1.0);
        capped.mul_f64(factor)
    }
}

/// Timeouts and retries for one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// TCP + TLS connect.
    pub connect_timeout: Duration,
    /// From sending the request to the first bytes of the answer body
    /// (covers prompt processing on slow servers).
    pub first_byte_timeout: Duration,
    /// Longest silence between two chunks once the answer has started.
    pub idle_timeout: Duration,
    /// Retries before the first byte.
    pub retry: RetryPolicy,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
        }
    }
}

impl HttpSettings {
    /// Settings where one number (`timeout_secs` in the config) bounds both
    /// the wait for the first byte and the silence between frames.
    pub fn with_timeout(secs: u64) -> Self {
        let t = Duration::from_secs(secs.max(1));
        Self {
            first_byte_timeout: t,
            idle_timeout: t,
            ..Self::default()
        }
    }
}

/// Redirect hops followed at most (all within the first request's origin).
const MAX_REDIRECTS: usize = 5;

/// Build a provider's client: rustls ([`wo_fetch::tls`]); redirects followed only within the
/// origin (scheme, host, port) of the request, because the API key header
/// and the prompt would otherwise go wherever a server points;
/// and no proxy but `proxy`, which the caller has resolved and checked
/// ([`crate::proxy`]) — reqwest would otherwise read `HTTP_PROXY`/`ALL_PROXY`
/// on its own and send every request, key included, through them.
pub(crate) fn client(
    settings: &HttpSettings,
    proxy: Option<&reqwest::Url>,
) -> Result<Client, String> {
    let mut b = Client::builder()
        .tls_backend_preconfigured(wo_fetch::tls::client_config(true))
        .connect_timeout(settings.connect_timeout)
        .user_agent(concat!("wikioracle/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::custom(same_origin_redirects))
        .no_proxy();
    if let Some(p) = proxy {
        b = b.proxy(reqwest::Proxy::all(p.clone()).map_err(|e| e.to_string())?);
    }
    b.build().map_err(|e| e.to_string())
}

fn same_origin_redirects(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    let Some(first) = attempt.previous().first() else {
        return attempt.follow();
    };
    let next = attempt.url();
    if next.origin() != first.origin() {
        let e = RedirectRefused(format!(
            "the server redirected to {}, a different origin than {}; not following, \
             so the API key and the prompt are not sent there. \
             If that is the service's new address, set base_url to it",
            origin_text(next),
            origin_text(first)
        ));
        return attempt.error(e);
    }
    if attempt.previous().len() > MAX_REDIRECTS {
        return attempt.error(RedirectRefused(format!(
            "more than {MAX_REDIRECTS} redirects"
        )));
    }
    attempt.follow()
}

fn origin_text(u: &reqwest::Url) -> String {
    u.origin().ascii_serialization()
}

/// Why a redirect was not followed (the message is shown as-is).
#[derive(Debug)]
struct RedirectRefused(String);

impl std::fmt::Display for RedirectRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedirectRefused {}

/// The refusal message when `e` is a redirect we declined to follow.
fn redirect_refusal(e: &reqwest::Error) -> Option<String> {
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<RedirectRefused>() {
            return Some(r.0.clone());
        }
        cur = err.source();
    }
    None
}

/// What every error built here needs to say.
#[derive(Debug, Clone)]
pub(crate) struct ErrCtx {
    pub provider: String,
    pub url: String,
    pub key_source: String,
    pub secret: Option<Secret>,
}

impl ErrCtx {
    /// What a server said, fit for an error message: the key scrubbed from
    /// the *whole* text first, then one line of at most [`DETAIL_MAX`]
    /// characters. The other order would let a cut leave part of the key
    /// unrecognised, and shown.
    pub fn detail(&self, text: &str) -> String {
        let scrubbed = match &self.secret {
            Some(s) => s.scrub(text),
            None => text.to_owned(),
        };
        shorten(&scrubbed, DETAIL_MAX)
    }
    pub fn malformed(&self, detail: impl AsRef<str>) -> ProviderError {
        ProviderError::Malformed {
            provider: self.provider.clone(),
            url: self.url.clone(),
            detail: self.detail(detail.as_ref()),
        }
    }
    pub fn dropped(&self, detail: impl AsRef<str>) -> ProviderError {
        ProviderError::ConnectionDropped {
            provider: self.provider.clone(),
            url: self.url.clone(),
            detail: self.detail(detail.as_ref()),
        }
    }
    pub fn timeout(&self, phase: TimeoutPhase, after: Duration) -> ProviderError {
        ProviderError::Timeout {
            provider: self.provider.clone(),
            url: self.url.clone(),
            phase,
            after,
        }
    }
    pub fn cancelled(&self) -> ProviderError {
        ProviderError::Cancelled {
            provider: self.provider.clone(),
        }
    }
}

/// Show a URL without `user:pass@` or `?query` (either may hold a key).
pub(crate) fn display_url(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// Join a base URL and a path, tolerating a trailing slash on the base.
pub(crate) fn join(base: &str, path: &str) -> Result<reqwest::Url, String> {
    let full = format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    );
    let url = reqwest::Url::parse(&full).map_err(|e| format!("invalid base_url {base:?}: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        s => Err(format!("base_url {base:?} must be http or https, not {s}")),
    }
}

/// Parse `Retry-After` (delta-seconds or an HTTP date), plus the
/// millisecond variant some OpenAI-compatible servers send.
pub fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let raw = headers.get("retry-after")?.to_str().ok()?.trim();
    parse_retry_after_value(raw, SystemTime::now())
}

/// The value half of [`parse_retry_after`], with an explicit "now".
pub fn parse_retry_after_value(raw: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(secs) = raw.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Some(Duration::from_secs_f64(secs));
        }
        return None;
    }
    let when = httpdate::parse_http_date(raw).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Longest server-provided detail in an error message, in characters.
pub(crate) const DETAIL_MAX: usize = 300;

/// Pull a human message out of an error body: JSON `error.message`,
/// `error` (string), `detail`, `message`, else the text itself. Not
/// shortened: [`ErrCtx::detail`] scrubs the key, then shortens.
pub(crate) fn error_detail(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            let s = |v: &serde_json::Value| match v {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Null => None,
                other => Some(other.to_string()),
            };
            v.pointer("/error/message")
                .and_then(s)
                .or_else(|| v.get("error").and_then(s))
                .or_else(|| v.get("detail").and_then(s))
                .or_else(|| v.get("message").and_then(s))
        })
        .unwrap_or_else(|| text.into_owned())
}

/// Whether a refusal's body says the prompt is longer than the model's
/// context window, and the window when it says: `Some(Some(n))`,
/// `Some(None)` (too long, size not said) or `None` (another refusal).
/// Read from what the servers send: OpenAI's and vLLM's "maximum context
/// length is N tokens" (code `context_length_exceeded`), llama.cpp's
/// `exceed_context_size_error` with `n_ctx`, llama-cpp-python's OpenAI
/// wording, Anthropic's "prompt is too long: A tokens > N maximum".
pub(crate) fn context_overflow(body: &[u8]) -> Option<Option<usize>> {
    let json = serde_json::from_slice::<serde_json::Value>(body).ok();
    let field = |name: &str| {
        json.as_ref()
            .and_then(|v| v.pointer(&format!("/error/{name}")))
    };
    let said = |name: &str, what: &str| field(name).and_then(|v| v.as_str()) == Some(what);
    let message = error_detail(body).to_ascii_lowercase();
    let overflow = said("code", "context_length_exceeded")
        || said("type", "exceed_context_size_error")
        || message.contains("maximum context length")
        || message.contains("exceeds the available context size")
        || message.contains("exceed context window")
        || message.contains("prompt is too long");
    if !overflow {
        return None;
    }
    let number_after = |phrase: &str| {
        let at = message.find(phrase)? + phrase.len();
        let digits: String = message[at..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse::<usize>().ok()
    };
    let window = field("n_ctx")
        .and_then(serde_json::Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .or_else(|| number_after("maximum context length is"))
        .or_else(|| number_after("context window of"))
        // Anthropic: "prompt is too long: 210000 tokens > 200000 maximum".
        .or_else(|| number_after("tokens >"))
        .filter(|&n| n > 0);
    Some(window)
}

/// One line, at most `max` characters, with an ellipsis when cut.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut out: String = one_line.chars().take(max).collect();
        out.push('…');
        out
    }
}

/// A response that started well: its body stream and the first chunk.
pub(crate) struct Opened {
    pub body: BoxStream<'static, reqwest::Result<Bytes>>,
    pub first: Bytes,
}

enum AttemptError {
    Status {
        status: StatusCode,
        retry_after: Option<Duration>,
        body: Vec<u8>,
    },
    Connect(String),
    /// A redirect to another origin (never retried: it would repeat).
    Redirect(String),
    EmptyBody(String),
    NotSse(String),
}

/// Whether an error body says the request failed validation (pydantic's
/// "1 validation error" / "2 validation errors", which FastAPI servers such
/// as llama-cpp-python's return with a 500): not a passing fault.
fn says_request_invalid(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]).to_ascii_lowercase();
    text.contains("validation error")
}

/// Send a request (rebuilt by `build` for each attempt), retrying per the
/// policy, until the response is 2xx and its first body bytes have arrived.
pub(crate) async fn open(
    ctx: &ErrCtx,
    settings: &HttpSettings,
    cancel: &CancellationToken,
    build: impl Fn() -> RequestBuilder,
) -> Result<Opened, ProviderError> {
    let policy = &settings.retry;
    let max = policy.max_attempts.max(1);
    let mut attempt = 0;
    let mut empty_bodies = 0;
    loop {
        attempt += 1;
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ctx.cancelled()),
            r = tokio::time::timeout(settings.first_byte_timeout, attempt_once(build())) => r,
        };
        let err = match result {
            Err(_elapsed) => {
                return Err(ctx.timeout(TimeoutPhase::FirstByte, settings.first_byte_timeout));
            }
            Ok(Ok(opened)) => return Ok(opened),
            Ok(Err(e)) => e,
        };
        // Decide: retry (with which delay) or fail with which error.
        let (retry_delay, final_err) = match err {
            AttemptError::Status {
                status,
                retry_after,
                body,
            } => {
                let detail = ctx.detail(&error_detail(&body));
                let code = status.as_u16();
                match code {
                    401 | 403 => {
                        return Err(ProviderError::Auth {
                            provider: ctx.provider.clone(),
                            url: ctx.url.clone(),
                            status: code,
                            detail,
                            key_source: ctx.key_source.clone(),
                        });
                    }
                    429 => {
                        let e = ProviderError::RateLimited {
                            provider: ctx.provider.clone(),
                            url: ctx.url.clone(),
                            retry_after,
                            attempts: attempt,
                            detail,
                        };
                        match retry_after {
                            Some(d) if d > policy.max_retry_after => return Err(e),
                            Some(d) => (Some(d), e),
                            None => (None, e),
                        }
                    }
                    // A server that reports the request itself as invalid
                    // with a 500 (llama-cpp-python's server does, for a
                    // field it does not take) says so again on every retry.
                    500..=599 if says_request_invalid(&body) => {
                        return Err(ProviderError::BadRequest {
                            provider: ctx.provider.clone(),
                            url: ctx.url.clone(),
                            status: Some(code),
                            detail,
                        });
                    }
                    500..=599 => {
                        let e = ProviderError::Server {
                            provider: ctx.provider.clone(),
                            url: ctx.url.clone(),
                            status: Some(code),
                            attempts: attempt,
                            detail,
                        };
                        // 503 often carries Retry-After too.
                        match retry_after {
                            Some(d) if d > policy.max_retry_after => return Err(e),
                            other => (other, e),
                        }
                    }
                    _ => {
                        if let Some(window) = context_overflow(&body) {
                            return Err(ProviderError::TooLong {
                                provider: ctx.provider.clone(),
                                url: ctx.url.clone(),
                                window,
                                detail,
                            });
                        }
                        return Err(ProviderError::BadRequest {
                            provider: ctx.provider.clone(),
                            url: ctx.url.clone(),
                            status: Some(code),
                            detail,
                        });
                    }
                }
            }
            AttemptError::Connect(detail) => (
                None,
                ProviderError::Unreachable {
                    provider: ctx.provider.clone(),
                    url: ctx.url.clone(),
                    attempts: attempt,
                    detail: ctx.detail(&detail),
                },
            ),
            AttemptError::Redirect(detail) => {
                return Err(ProviderError::Config {
                    provider: ctx.provider.clone(),
                    message: format!("{}: {detail}", ctx.url),
                });
            }
            // A server that answers with nothing twice will again: it is
            // refusing this request (llama-cpp-python so refuses a prompt
            // longer than its window), and the caller may find out why.
            AttemptError::EmptyBody(detail) if empty_bodies > 0 => {
                return Err(ctx.dropped(detail));
            }
            AttemptError::EmptyBody(detail) => {
                empty_bodies += 1;
                (None, ctx.dropped(detail))
            }
            AttemptError::NotSse(detail) => return Err(ctx.malformed(detail)),
        };
        if attempt >= max {
            return Err(final_err);
        }
        let delay = retry_delay.unwrap_or_else(|| policy.backoff(attempt));
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ctx.cancelled()),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

async fn attempt_once(req: RequestBuilder) -> Result<Opened, AttemptError> {
    let resp = req.send().await.map_err(|e| match redirect_refusal(&e) {
        Some(why) => AttemptError::Redirect(why),
        // Connection-level failure before any response: always retryable.
        None => AttemptError::Connect(describe_reqwest(&e)),
    })?;
    let status = resp.status();
    if !status.is_success() {
        let retry_after = parse_retry_after(resp.headers());
        let body = read_capped(resp, 64 * 1024).await;
        return Err(AttemptError::Status {
            status,
            retry_after,
            body,
        });
    }
    let ctype = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !ctype.is_empty() && !ctype.starts_with("text/event-stream") {
        let body = read_capped(resp, 4096).await;
        return Err(AttemptError::NotSse(format!(
            "expected text/event-stream, got {ctype}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    let mut body = resp.bytes_stream().boxed();
    loop {
        match body.next().await {
            Some(Ok(b)) if b.is_empty() => continue,
            Some(Ok(first)) => return Ok(Opened { body, first }),
            Some(Err(e)) => return Err(AttemptError::EmptyBody(describe_reqwest(&e))),
            None => {
                return Err(AttemptError::EmptyBody(
                    "the server accepted the request but sent an empty body".into(),
                ));
            }
        }
    }
}

async fn read_capped(resp: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        out.extend_from_slice(&chunk);
        if out.len() >= cap {
            out.truncate(cap);
            break;
        }
    }
    out
}

/// reqwest's Display hides the root cause ("error sending request"); walk
/// the source chain so "connection refused" is visible.
pub(crate) fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p: &String| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    // The URL is already in our message; reqwest's includes it too.
    parts
        .into_iter()
        .map(|p| match p.find(" for url (") {
            Some(i) => p[..i].to_string(),
            None => p,
        })
        .collect::<Vec<_>>()
        .join(": ")
}

/// Per-provider interpretation of SSE events.
pub(crate) trait Decoder: Send + 'static {
    /// What the stream yields ([`StreamEvent`] for the `Provider` API).
    type Item: Send + 'static;
    /// Handle one event, appending output; return `true` once the answer is
    /// complete (the decoder must have pushed its final item).
    fn event(&mut self, ev: &SseEvent, out: &mut Vec<Self::Item>) -> Result<bool, Fault>;
    /// The body ended without the end-of-answer frame. Push a final item and
    /// return `Ok` to accept (lenient servers), or say why not.
    fn eof(&mut self, out: &mut Vec<Self::Item>) -> Result<(), Fault> {
        let _ = out;
        Err(Fault::Dropped(
            "the stream ended without its end-of-answer frame".into(),
        ))
    }
}

/// A decoder's complaint, turned into a [`ProviderError`] with context.
#[derive(Debug)]
pub(crate) enum Fault {
    Malformed(String),
    Server(String),
    RateLimited(String),
    Auth(String),
    BadRequest(String),
    Dropped(String),
}

impl Fault {
    fn into_error(self, ctx: &ErrCtx) -> ProviderError {
        match self {
            Fault::Malformed(d) => ctx.malformed(d),
            Fault::Dropped(d) => ctx.dropped(d),
            Fault::Server(d) => ProviderError::Server {
                provider: ctx.provider.clone(),
                url: ctx.url.clone(),
                status: None,
                attempts: 1,
                detail: ctx.detail(&d),
            },
            Fault::RateLimited(d) => ProviderError::RateLimited {
                provider: ctx.provider.clone(),
                url: ctx.url.clone(),
                retry_after: None,
                attempts: 1,
                detail: ctx.detail(&d),
            },
            Fault::Auth(d) => ProviderError::Auth {
                provider: ctx.provider.clone(),
                url: ctx.url.clone(),
                status: 401,
                detail: ctx.detail(&d),
                key_source: ctx.key_source.clone(),
            },
            Fault::BadRequest(d) => ProviderError::BadRequest {
                provider: ctx.provider.clone(),
                url: ctx.url.clone(),
                status: None,
                detail: ctx.detail(&d),
            },
        }
    }
}

/// Parse a JSON payload or explain, with an excerpt, why not.
pub(crate) fn json<T: serde::de::DeserializeOwned>(data: &str) -> Result<T, Fault> {
    serde_json::from_str(data)
        .map_err(|e| Fault::Malformed(format!("bad JSON in frame ({e}): {data}")))
}

enum Read {
    Cancelled,
    Idle,
    Chunk(Option<reqwest::Result<Bytes>>),
}

struct Driver<D: Decoder> {
    ctx: ErrCtx,
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    first: Option<Bytes>,
    parser: SseParser,
    decoder: D,
    queue: VecDeque<Result<D::Item, ProviderError>>,
    /// The items of one read, before they join `queue` (kept: one
    /// allocation per stream, not per read).
    scratch: Vec<D::Item>,
    finished: bool,
    idle: Duration,
    cancel: CancellationToken,
}

impl<D: Decoder> Driver<D> {
    async fn next(&mut self) -> Option<Result<D::Item, ProviderError>> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                if item.is_err() {
                    // Nothing follows an error.
                    self.queue.clear();
                    self.finished = true;
                }
                return Some(item);
            }
            if self.finished {
                return None;
            }
            let chunk = match self.first.take() {
                Some(b) => Some(Ok(b)),
                None => {
                    let read = tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => Read::Cancelled,
                        r = tokio::time::timeout(self.idle, self.body.next()) => match r {
                            Ok(c) => Read::Chunk(c),
                            Err(_) => Read::Idle,
                        },
                    };
                    match read {
                        Read::Chunk(c) => c,
                        Read::Cancelled => {
                            self.fail(self.ctx.cancelled());
                            continue;
                        }
                        Read::Idle => {
                            self.fail(self.ctx.timeout(TimeoutPhase::Idle, self.idle));
                            continue;
                        }
                    }
                }
            };
            let mut out = std::mem::take(&mut self.scratch);
            let outcome = match chunk {
                Some(Ok(bytes)) => self.on_bytes(&bytes, &mut out),
                Some(Err(e)) => Err(Fault::Dropped(describe_reqwest(&e))),
                None => self.on_eof(&mut out),
            };
            self.queue.extend(out.drain(..).map(Ok));
            self.scratch = out;
            match outcome {
                Ok(true) => self.finished = true,
                Ok(false) => {}
                Err(f) => {
                    let e = f.into_error(&self.ctx);
                    self.queue.push_back(Err(e));
                }
            }
        }
    }

    fn fail(&mut self, e: ProviderError) {
        self.queue.clear();
        self.queue.push_back(Err(e));
    }

    /// One read of the body, parsed where it lies: each event is decoded
    /// as the parser completes it (no copy of its lines, no list of
    /// events in between).
    fn on_bytes(&mut self, bytes: &[u8], out: &mut Vec<D::Item>) -> Result<bool, Fault> {
        let decoder = &mut self.decoder;
        self.parser.feed_each(bytes, |ev| decoder.event(ev, out))
    }

    fn on_eof(&mut self, out: &mut Vec<D::Item>) -> Result<bool, Fault> {
        match self.parser.finish() {
            Ok(Some(ev)) => {
                if self.decoder.event(&ev, out)? {
                    return Ok(true);
                }
            }
            Ok(None) => {}
            Err(SseError::Truncated) => {
                return Err(Fault::Dropped(
                    "the connection closed in the middle of a frame".into(),
                ));
            }
            Err(e) => return Err(sse_fault(e)),
        }
        self.decoder.eof(out)?;
        Ok(true)
    }
}

impl From<SseError> for Fault {
    fn from(e: SseError) -> Self {
        sse_fault(e)
    }
}

fn sse_fault(e: SseError) -> Fault {
    match e {
        SseError::InvalidUtf8 => Fault::Malformed("a frame is not valid UTF-8".into()),
        SseError::LineTooLong => Fault::Malformed("a line longer than 4 MiB".into()),
        SseError::Truncated => {
            Fault::Dropped("the connection closed in the middle of a frame".into())
        }
    }
}

/// Turn an opened response into a stream of the decoder's items.
pub(crate) fn drive<D: Decoder>(
    ctx: ErrCtx,
    opened: Opened,
    idle: Duration,
    cancel: CancellationToken,
    decoder: D,
) -> BoxStream<'static, Result<D::Item, ProviderError>> {
    let driver = Driver {
        ctx,
        body: opened.body,
        first: Some(opened.first),
        parser: SseParser::new(),
        decoder,
        queue: VecDeque::new(),
        scratch: Vec::new(),
        finished: false,
        idle,
        cancel,
    };
    futures::stream::unfold(driver, |mut d| async move {
        let item = d.next().await?;
        Some((item, d))
    })
    .boxed()
}

/// `Provider::models` for servers with a model list: GETs `url` (short
/// timeouts, no retries) and reads the ids from `data[].id` (OpenAI,
/// Anthropic) or `models[].name` (Ollama's `/api/tags`). On a 404 it tries
/// `fallback` (Ollama's own list, for an Ollama without `/v1/models`).
pub(crate) async fn list_models(
    client: &Client,
    url: reqwest::Url,
    fallback: Option<reqwest::Url>,
    headers: HeaderMap,
) -> Result<crate::ModelList, crate::ModelsError> {
    list_models_at(client, url, fallback, headers)
        .await
        .map_err(crate::ModelsError::Failed)
}

async fn list_models_at(
    client: &Client,
    url: reqwest::Url,
    fallback: Option<reqwest::Url>,
    headers: HeaderMap,
) -> Result<crate::ModelList, String> {
    let shown = display_url(&url);
    let resp = client
        .get(url)
        .headers(headers.clone())
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| match redirect_refusal(&e) {
            Some(why) => format!("GET {shown}: {why}"),
            None => format!("GET {shown}: {}", describe_reqwest(&e)),
        })?;
    let status = resp.status().as_u16();
    if status == 404
        && let Some(next) = fallback
    {
        return Box::pin(list_models_at(client, next, None, headers)).await;
    }
    let body = resp
        .bytes()
        .await
        .map_err(|e| format!("GET {shown}: {}", describe_reqwest(&e)))?;
    match status {
        200..=299 => {}
        401 | 403 => return Err(format!("GET {shown} → {status}: the API key was refused")),
        _ => {
            return Err(format!(
                "GET {shown} → HTTP {status}{}",
                match error_detail(&body) {
                    d if d.is_empty() => String::new(),
                    d => format!(": {d}"),
                }
            ));
        }
    }
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| format!("GET {shown}: not a model list (not JSON: {e})"))?;
    let ids: Option<Vec<String>> = v
        .get("data")
        .and_then(|d| d.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_owned))
                .collect()
        })
        .or_else(|| {
            v.get("models").and_then(|d| d.as_array()).map(|a| {
                a.iter()
                    .filter_map(|m| {
                        m.get("name")
                            .or_else(|| m.get("model"))
                            .and_then(|i| i.as_str())
                            .map(str::to_owned)
                    })
                    .collect()
            })
        });
    match ids {
        Some(models) => Ok(crate::ModelList {
            models,
            source: shown,
        }),
        None => Err(format!(
            "GET {shown}: not a model list (no data[] or models[] array)"
        )),
    }
}

/// A quick GET for `check()`: short timeouts, no retries.
pub(crate) async fn probe(
    client: &Client,
    url: reqwest::Url,
    headers: HeaderMap,
) -> crate::types::Reachability {
    use crate::types::Reachability;
    let shown = display_url(&url);
    let started = std::time::Instant::now();
    let resp = client
        .get(url)
        .headers(headers)
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    match resp {
        Ok(r) if r.status().is_success() => Reachability::Reachable {
            detail: format!(
                "GET {shown} → {} in {} ms",
                r.status().as_u16(),
                started.elapsed().as_millis()
            ),
        },
        Ok(r) if matches!(r.status().as_u16(), 401 | 403) => Reachability::Unreachable {
            reason: format!(
                "GET {shown} → {}: the API key was refused",
                r.status().as_u16()
            ),
        },
        Ok(r) => Reachability::Unreachable {
            reason: format!("GET {shown} → HTTP {}", r.status().as_u16()),
        },
        Err(e) => Reachability::Unreachable {
            reason: match redirect_refusal(&e) {
                Some(why) => format!("GET {shown}: {why}"),
                None => format!("GET {shown}: {}", describe_reqwest(&e)),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            parse_retry_after_value("3", now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_retry_after_value("0.25", now),
            Some(Duration::from_millis(250))
        );
        let later = now + Duration::from_secs(42);
        let date = httpdate::fmt_http_date(later);
        assert_eq!(
            parse_retry_after_value(&date, now),
            Some(Duration::from_secs(42))
        );
        // A date in the past means "now".
        assert_eq!(
            parse_retry_after_value(&httpdate::fmt_http_date(now), later),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after_value("soon", now), None);
        assert_eq!(parse_retry_after_value("-1", now), None);
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let p = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            ..RetryPolicy::default()
        };
        for _ in 0..50 {
            let d1 = p.backoff(1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = p.backoff(3);
            assert!(d3 >= Duration::from_millis(175) && d3 <= Duration::from_millis(350));
            assert!(p.backoff(30) <= Duration::from_millis(350));
        }
    }

    #[test]
    fn urls_hide_credentials_and_queries() {
        let u = reqwest::Url::parse("https://user:sk-secret@host.example/v1/x?key=sk-2#f").unwrap();
        assert_eq!(display_url(&u), "https://host.example/v1/x");
        assert!(join("ftp://x", "a").is_err());
        assert_eq!(
            join("http://h:1/v1/", "/chat/completions")
                .unwrap()
                .as_str(),
            "http://h:1/v1/chat/completions"
        );
    }

    #[test]
    fn error_bodies() {
        assert_eq!(
            error_detail(br#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(error_detail(br#"{"detail":"too long"}"#), "too long");
        assert_eq!(error_detail(b"plain\n text"), "plain\n text");
        assert_eq!(shorten(&"x".repeat(10), 4), "xxxx…");
    }
}

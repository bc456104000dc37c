//! What the four HTTP providers have in common: their settings and client.

use reqwest::Client;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::error::ProviderError;
use crate::http::{self, Decoder, ErrCtx, HttpSettings};
use crate::secret::Secret;
use crate::types::{AnswerLimits, Reachability};

/// Settings for an HTTP provider (`openai`, `anthropic`, `nanochat`,
/// `wikioracle`). [`crate::config::build`] fills these from `config.toml`.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// The provider's name in messages (the config entry's name).
    pub name: String,
    /// Base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Model used when the request names none.
    pub model: String,
    /// API key, when the service needs one.
    pub api_key: Option<Secret>,
    /// Where the key comes from, for hints (`env OPENAI_API_KEY`,
    /// `config file api_key`, `no key configured`). Never the key itself.
    pub key_source: String,
    /// Context window in tokens, reported by `context_window()`.
    pub context_window: usize,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// Proxy URL for this provider's requests; `None` connects directly
    /// (the environment's proxy variables are not read here: see
    /// [`crate::proxy`]). A key is never sent through an `http://` proxy to
    /// an `http://` service: [`Remote::new`] refuses that.
    pub proxy: Option<String>,
    /// Caps on the size and duration of one answer.
    pub limits: AnswerLimits,
}

impl RemoteConfig {
    /// Settings with default timeouts, no key, and the given basics.
    pub fn new(
        name: impl Into<String>,
        base_url: impl Into<String>,
        model: impl Into<String>,
        context_window: usize,
    ) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            key_source: "no key configured".into(),
            context_window,
            http: HttpSettings::default(),
            proxy: None,
            limits: AnswerLimits::default(),
        }
    }
    /// Builder: set the key and say where it came from.
    pub fn with_key(mut self, key: Secret, source: impl Into<String>) -> Self {
        self.api_key = Some(key);
        self.key_source = source.into();
        self
    }
    /// Builder: send requests through this proxy.
    pub fn with_proxy(mut self, proxy: impl Into<String>) -> Self {
        self.proxy = Some(proxy.into());
        self
    }
    /// Builder: set timeouts and retries.
    pub fn with_http(mut self, http: HttpSettings) -> Self {
        self.http = http;
        self
    }
}

/// The sampling parameters OpenAI-style servers share, each left out of the
/// body when unset (the server's default applies).
#[derive(serde::Serialize)]
pub(crate) struct Sampling {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
}

/// A configured client plus its settings.
#[derive(Debug)]
pub(crate) struct Remote {
    pub cfg: RemoteConfig,
    pub client: Client,
}

impl Remote {
    pub fn new(cfg: RemoteConfig) -> Result<Self, ProviderError> {
        // Validate the base URL once, up front, so a typo fails at build time.
        http::join(&cfg.base_url, "x").map_err(|m| ProviderError::config(&cfg.name, m))?;
        let proxy = match &cfg.proxy {
            Some(p) => Some(
                crate::proxy::check(p, &cfg.base_url, cfg.api_key.is_some())
                    .map_err(|m| ProviderError::config(&cfg.name, m))?,
            ),
            None => None,
        };
        let client = http::client(&cfg.http, proxy.as_ref())
            .map_err(|m| ProviderError::config(&cfg.name, m))?;
        Ok(Self { cfg, client })
    }

    /// The key as the sensitive header `name: value_of(key)`, when there is
    /// a key. A key that is no valid header value is not sent (the service
    /// then answers 401, which names the key's source).
    pub fn key_headers(&self, name: HeaderName, value_of: impl Fn(&str) -> String) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(key) = &self.cfg.api_key
            && let Ok(mut v) = HeaderValue::from_str(&value_of(key.expose()))
        {
            v.set_sensitive(true);
            h.insert(name, v);
        }
        h
    }

    /// `Authorization: Bearer <key>`, when there is a key.
    pub fn bearer_headers(&self) -> HeaderMap {
        self.key_headers(AUTHORIZATION, |key| format!("Bearer {key}"))
    }

    /// The error for a service (`who`) that needs a key when none is
    /// configured: what `stream` answers before sending anything.
    pub fn key_required(&self, who: &str) -> ProviderError {
        ProviderError::config(
            &self.cfg.name,
            format!(
                "{who} needs an API key ({}); export it or set api_key in config.toml",
                self.cfg.key_source
            ),
        )
    }

    /// What `check` answers for a service that needs a key when none is
    /// configured.
    pub fn no_key(&self) -> Reachability {
        Reachability::NotConfigured {
            reason: format!("no API key ({})", self.cfg.key_source),
        }
    }

    /// A request refused before it is sent (nothing to send, too large):
    /// no URL or status, since no request was made.
    pub fn bad_request(&self, detail: impl Into<String>) -> ProviderError {
        ProviderError::BadRequest {
            provider: self.cfg.name.clone(),
            url: String::new(),
            status: None,
            detail: detail.into(),
        }
    }

    /// `base_url` + `path`, already validated in `new`.
    pub fn url(&self, path: &str) -> reqwest::Url {
        http::join(&self.cfg.base_url, path).expect("base_url validated in Remote::new")
    }

    pub fn ctx(&self, url: &reqwest::Url) -> ErrCtx {
        ErrCtx {
            provider: self.cfg.name.clone(),
            url: http::display_url(url),
            key_source: self.cfg.key_source.clone(),
            secret: self.cfg.api_key.clone(),
        }
    }

    /// POSTs `body` as JSON (retrying per the settings until the answer
    /// starts) and decodes the SSE answer with `decoder`: the request every
    /// remote provider makes.
    pub async fn post_sse<D: Decoder>(
        &self,
        ctx: ErrCtx,
        url: reqwest::Url,
        headers: reqwest::header::HeaderMap,
        body: &impl serde::Serialize,
        cancel: tokio_util::sync::CancellationToken,
        decoder: D,
    ) -> Result<futures::stream::BoxStream<'static, Result<D::Item, ProviderError>>, ProviderError>
    {
        let body = serde_json::to_vec(body).map_err(|e| ctx.malformed(e.to_string()))?;
        let opened = http::open(&ctx, &self.cfg.http, &cancel, || {
            self.client
                .post(url.clone())
                .headers(headers.clone())
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .body(body.clone())
        })
        .await?;
        Ok(http::drive(
            ctx,
            opened,
            self.cfg.http.idle_timeout,
            cancel,
            decoder,
        ))
    }

    /// Why a server closed a stream it had accepted without sending a
    /// byte, when the reason is a prompt longer than its window: some
    /// servers (llama-cpp-python) say so only to a request that does not
    /// stream. `body` is the streamed request; the same is sent once
    /// without streaming, for `reply_tokens` tokens, and a refusal saying
    /// "too long" is returned. Anything else (it answers, another refusal, no answer
    /// within the first-byte timeout) is `None`: the first error stands.
    pub async fn too_long_unstreamed(
        &self,
        ctx: &ErrCtx,
        url: reqwest::Url,
        headers: reqwest::header::HeaderMap,
        body: &impl serde::Serialize,
        reply_tokens: u32,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Option<ProviderError> {
        let mut body = serde_json::to_value(body).ok()?;
        let fields = body.as_object_mut()?;
        fields.insert("stream".into(), serde_json::Value::Bool(false));
        fields.remove("stream_options");
        // Not needed to measure the prompt, and refused by some servers
        // that take it otherwise (llama-cpp-python's `json_schema`).
        fields.remove("response_format");
        fields.insert("max_tokens".into(), serde_json::json!(reply_tokens));
        let body = serde_json::to_vec(&body).ok()?;
        let send = || {
            self.client
                .post(url.clone())
                .headers(headers.clone())
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
        };
        // The server may have closed the kept-alive connection the empty
        // stream came on, and the pool hands it out once more: one new try.
        let mut resp = None;
        for _ in 0..2 {
            let sent = tokio::select! {
                biased;
                _ = cancel.cancelled() => return None,
                r = tokio::time::timeout(self.cfg.http.first_byte_timeout, send()) => r.ok()?,
            };
            if let Ok(r) = sent {
                resp = Some(r);
                break;
            }
        }
        let resp = resp?;
        if !resp.status().is_client_error() {
            return None;
        }
        let body = resp.bytes().await.ok()?;
        let window = http::context_overflow(&body)?;
        Some(ProviderError::TooLong {
            provider: ctx.provider.clone(),
            url: ctx.url.clone(),
            window,
            detail: ctx.detail(&http::error_detail(&body)),
        })
    }

    pub fn model<'a>(&'a self, requested: &'a Option<String>) -> &'a str {
        requested.as_deref().unwrap_or(&self.cfg.model)
    }
}

/// The [`crate::Provider`] methods every remote provider answers from its
/// settings alone (its `remote` field): name, default model, context window
/// and answer caps. Used inside each one's `impl Provider`.
macro_rules! settings_methods {
    () => {
        fn name(&self) -> &str {
            &self.remote.cfg.name
        }

        fn default_model(&self) -> &str {
            &self.remote.cfg.model
        }

        fn context_window(&self) -> usize {
            self.remote.cfg.context_window
        }

        fn answer_limits(&self) -> crate::types::AnswerLimits {
            self.remote.cfg.limits
        }
    };
}
pub(crate) use settings_methods;

/// Declares a remote provider: a struct holding its [`Remote`], and `new`,
/// which fails only on an invalid `base_url` or a proxy that would carry
/// the key in clear (see [`Remote::new`]).
macro_rules! remote_provider {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        #[derive(Debug)]
        pub struct $name {
            remote: crate::remote::Remote,
        }

        impl $name {
            /// A provider with these settings; fails only on an invalid
            /// `base_url`, or a proxy that would see the key in clear.
            pub fn new(
                cfg: crate::remote::RemoteConfig,
            ) -> Result<Self, crate::error::ProviderError> {
                Ok(Self {
                    remote: crate::remote::Remote::new(cfg)?,
                })
            }
        }
    };
}
pub(crate) use remote_provider;

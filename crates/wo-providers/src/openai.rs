//! `openai`: the Chat Completions API with `stream: true`, spoken by OpenAI
//! and by most local and hosted servers (llama.cpp's server and
//! llama-cpp-python, Ollama, vLLM, LM Studio, OpenRouter, LiteLLM).
//!
//! Wire format: `POST {base_url}/chat/completions`, optional
//! `Authorization: Bearer KEY`; the answer is SSE frames
//! `data: {"choices":[{"delta":{"content":"…"},"finish_reason":null}]}`,
//! then a frame with `finish_reason`, optionally a usage frame
//! (`stream_options.include_usage`), then `data: [DONE]`. `:` comment lines
//! (llama.cpp keep-alives) are skipped by the SSE parser.
//!
//! Parameters: `temperature` and `max_tokens` are sent when set. `top_k` is
//! not part of OpenAI's API (its server rejects unknown fields), so it is
//! sent only when `base_url` is not `api.openai.com`; llama.cpp, vLLM and
//! Ollama's compatibility layer read it.

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorKind, ProviderError};
use crate::http::{self, Decoder, Fault};

use crate::sse::SseEvent;
use crate::types::{ChatRequest, Reachability, StreamEvent, Usage};
use crate::{EventStream, Provider};

/// OpenAI's default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Default model for OpenAI proper.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// Context window assumed for the default model.
pub const DEFAULT_CONTEXT_WINDOW: usize = 128_000;

crate::remote::remote_provider!(
    /// An OpenAI-compatible Chat Completions endpoint.
    OpenAiProvider
);

impl OpenAiProvider {
    fn auth_headers(&self) -> HeaderMap {
        self.remote.bearer_headers()
    }

    fn is_openai_proper(&self) -> bool {
        self.remote.url("x").host_str() == Some("api.openai.com")
    }
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(flatten)]
    sampling: crate::remote::Sampling,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
}

#[derive(Default)]
struct OpenAiDecoder {
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl OpenAiDecoder {
    fn done(&mut self, out: &mut Vec<StreamEvent>) {
        out.push(StreamEvent::Done {
            finish_reason: self.finish_reason.take(),
            usage: self.usage.take(),
        });
    }
}

impl Decoder for OpenAiDecoder {
    type Item = StreamEvent;

    fn event(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Fault> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.done(out);
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = http::json(data)?;
        if let Some(err) = chunk.error {
            let msg = err
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            return Err(Fault::Server(msg));
        }
        for choice in chunk.choices {
            if let Some(text) = choice.delta.and_then(|d| d.content)
                && !text.is_empty()
            {
                out.push(StreamEvent::Delta(text));
            }
            if let Some(r) = choice.finish_reason {
                self.finish_reason = Some(r);
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            });
        }
        Ok(false)
    }

    fn eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), Fault> {
        // Some servers close right after the finish_reason chunk without
        // `[DONE]`; the answer is complete, so accept it.
        if self.finish_reason.is_some() {
            self.done(out);
            return Ok(());
        }
        Err(Fault::Dropped(
            "the stream ended before `finish_reason` or `[DONE]`".into(),
        ))
    }
}

impl OpenAiProvider {
    /// The streamed Chat Completions request for `req`.
    fn wire<'a>(&'a self, req: &'a ChatRequest) -> WireRequest<'a> {
        WireRequest {
            model: self.remote.model(&req.model),
            messages: req
                .messages
                .iter()
                .map(|m| WireMessage {
                    role: m.role.as_str(),
                    content: &m.content,
                })
                .collect(),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            sampling: crate::remote::Sampling {
                temperature: req.temperature,
                max_tokens: req.max_tokens,
                top_k: if self.is_openai_proper() {
                    None
                } else {
                    req.top_k
                },
            },
            // Chat Completions' structured output (OpenAI, llama.cpp's
            // server, vLLM, Ollama, LM Studio turn it into a constraint).
            response_format: req.json_schema.as_ref().map(|s| {
                serde_json::json!({
                    "type": "json_schema",
                    "json_schema": {"name": s.name, "schema": s.schema},
                })
            }),
        }
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    async fn stream(
        &self,
        req: ChatRequest,
        cancel: CancellationToken,
    ) -> Result<EventStream, ProviderError> {
        if self.is_openai_proper() && self.remote.cfg.api_key.is_none() {
            return Err(self.remote.key_required("api.openai.com"));
        }
        let url = self.remote.url("chat/completions");
        let ctx = self.remote.ctx(&url);
        let mut body = self.wire(&req);
        let first = self
            .remote
            .post_sse(
                ctx.clone(),
                url.clone(),
                self.auth_headers(),
                &body,
                cancel.clone(),
                OpenAiDecoder::default(),
            )
            .await;
        match (first, &req.json_schema) {
            // llama-cpp-python's server takes a schema only as
            // `{"type": "json_object", "schema": …}` and refuses the other
            // form (with a 500): asked that way once more, it answers under
            // the same grammar.
            (Err(e), Some(s)) if !self.is_openai_proper() && refuses_json_schema(&e) => {
                body.response_format = Some(serde_json::json!({
                    "type": "json_object",
                    "schema": s.schema,
                }));
                self.remote
                    .post_sse(
                        ctx,
                        url,
                        self.auth_headers(),
                        &body,
                        cancel,
                        OpenAiDecoder::default(),
                    )
                    .await
            }
            // A server that closes the stream unanswered may be refusing a
            // prompt longer than its window without saying so (llama-cpp-
            // python): asked again without streaming, it says.
            (Err(e), _) if e.kind() == crate::ErrorKind::ConnectionDropped => {
                Err(self.window_refusal(&req, 1).await.unwrap_or(e))
            }
            (first, _) => first,
        }
    }

    async fn window_refusal(&self, req: &ChatRequest, reply_tokens: u32) -> Option<ProviderError> {
        let url = self.remote.url("chat/completions");
        let ctx = self.remote.ctx(&url);
        let body = self.wire(req);
        self.remote
            .too_long_unstreamed(
                &ctx,
                url,
                self.auth_headers(),
                &body,
                reply_tokens,
                &CancellationToken::new(),
            )
            .await
    }

    async fn check(&self) -> Reachability {
        if self.is_openai_proper() && self.remote.cfg.api_key.is_none() {
            return self.remote.no_key();
        }
        http::probe(
            &self.remote.client,
            self.remote.url("models"),
            self.auth_headers(),
        )
        .await
    }

    async fn models(&self) -> Result<crate::ModelList, crate::ModelsError> {
        if self.is_openai_proper() && self.remote.cfg.api_key.is_none() {
            return Err(crate::ModelsError::NotConfigured(format!(
                "no API key ({})",
                self.remote.cfg.key_source
            )));
        }
        // An Ollama base URL ends in /v1; its own list is /api/tags beside it.
        let base = self.remote.cfg.base_url.trim_end_matches('/');
        let fallback = base
            .strip_suffix("/v1")
            .and_then(|root| http::join(root, "api/tags").ok());
        http::list_models(
            &self.remote.client,
            self.remote.url("models"),
            fallback,
            self.auth_headers(),
        )
        .await
    }

    /// Exact counts for OpenAI's own models (tiktoken's o200k/cl100k BPEs);
    /// other servers' models have their own vocabularies, so `None` there.
    fn count_tokens(&self, text: &str) -> Option<usize> {
        openai_bpe(&self.remote.cfg.model).map(|bpe| bpe.encode_ordinary(text).len())
    }

    crate::remote::settings_methods!();
}

/// The BPE of a known OpenAI model name, if any.
fn openai_bpe(model: &str) -> Option<&'static tiktoken_rs::CoreBPE> {
    use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};
    match get_tokenizer(model)? {
        Tokenizer::O200kBase => Some(tiktoken_rs::o200k_base_singleton()),
        Tokenizer::Cl100kBase => Some(tiktoken_rs::cl100k_base_singleton()),
        _ => None,
    }
}

/// Whether `e` is a server refusing `response_format`'s `json_schema` type
/// (before anything was streamed), as llama-cpp-python's does.
fn refuses_json_schema(e: &ProviderError) -> bool {
    matches!(e.kind(), ErrorKind::BadRequest | ErrorKind::Server)
        && e.to_string().contains("json_schema")
}

#[cfg(test)]
mod token_tests {
    use super::openai_bpe;

    #[test]
    fn openai_models_count_with_their_own_bpe() {
        let o200k = openai_bpe("gpt-4o-mini").expect("gpt-4o family uses o200k");
        assert_eq!(o200k.encode_ordinary("hello world").len(), 2);
        assert!(openai_bpe("gpt-4").is_some(), "cl100k");
        assert!(
            openai_bpe("smollm2").is_none(),
            "unknown models fall back to estimates"
        );
    }
}

//! `anthropic`: the Messages API with `stream: true`.
//!
//! Request: `POST {base_url}/messages` with `x-api-key`,
//! `anthropic-version: 2023-06-01`; system text goes in the top-level
//! `system` field, and `messages` must alternate user/assistant starting with
//! a user turn — see [`to_wire`] for how any [`ChatMessage`] list is mapped.
//! `max_tokens` is required by the API; 4096 is sent when the request has none.
//!
//! Response: SSE with named events — `message_start` (input token usage),
//! `content_block_start`, `content_block_delta` (`text_delta` carries text;
//! other delta types such as `thinking_delta` are skipped), `content_block_stop`,
//! `message_delta` (`stop_reason` and cumulative output usage), `message_stop`
//! (the end), `ping`, and `error` (`{"type":"error","error":{"type","message"}}`).
//! Unknown event types are ignored, as Anthropic's versioning policy asks.

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::ProviderError;
use crate::http::{self, Decoder, Fault};

use crate::sse::SseEvent;
use crate::types::{ChatMessage, ChatRequest, ChatRole, Reachability, StreamEvent, Usage};
use crate::{EventStream, Provider};

/// Anthropic's base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";
/// Default model.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// Context window of current Claude models.
pub const DEFAULT_CONTEXT_WINDOW: usize = 200_000;
/// The API version header value this client is written against.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` sent when the request leaves it unset (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// Text of the user turn inserted when a conversation would otherwise start
/// with an assistant turn (the API requires a user turn first).
pub const RESUME_MARKER: &str = "(continuing an earlier conversation)";

crate::remote::remote_provider!(
    /// The Anthropic Messages API.
    AnthropicProvider
);

impl AnthropicProvider {
    fn headers(&self) -> HeaderMap {
        let mut h = self
            .remote
            .key_headers(HeaderName::from_static("x-api-key"), str::to_owned);
        h.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        h
    }
}

/// One turn as the Messages API wants it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WireMessage {
    /// `user` or `assistant`.
    pub role: &'static str,
    /// Text.
    pub content: String,
}

/// Map messages to `(system, turns)`:
/// - every system message (wherever it is) joins the top-level `system`,
///   in order, separated by blank lines;
/// - empty messages are dropped (the API rejects empty content);
/// - consecutive turns of the same role are merged with a blank line;
/// - a leading assistant turn gets a short user turn ([`RESUME_MARKER`])
///   before it.
pub fn to_wire(messages: &[ChatMessage]) -> (Option<String>, Vec<WireMessage>) {
    let mut system: Vec<&str> = Vec::new();
    let mut turns: Vec<WireMessage> = Vec::new();
    for m in messages {
        if m.content.trim().is_empty() {
            continue;
        }
        let role = match m.role {
            ChatRole::System => {
                system.push(&m.content);
                continue;
            }
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
        };
        match turns.last_mut() {
            Some(last) if last.role == role => {
                last.content.push_str("\n\n");
                last.content.push_str(&m.content);
            }
            _ => turns.push(WireMessage {
                role,
                content: m.content.clone(),
            }),
        }
    }
    if turns.first().is_some_and(|t| t.role == "assistant") {
        turns.insert(
            0,
            WireMessage {
                role: "user",
                content: RESUME_MARKER.into(),
            },
        );
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (system, turns)
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<WireMessage>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u32>,
    /// Structured output: one tool whose input is the answer, forced by
    /// `tool_choice`; its `input_json_delta`s stream as the answer text.
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u32>,
    #[serde(default)]
    output_tokens: Option<u32>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u32>,
    #[serde(default)]
    cache_read_input_tokens: Option<u32>,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Frame {
    #[serde(rename = "message_start")]
    MessageStart { message: StartMessage },
    #[serde(rename = "content_block_delta")]
    BlockDelta { delta: BlockDelta },
    #[serde(rename = "message_delta")]
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    #[serde(rename = "message_stop")]
    MessageStop,
    #[serde(rename = "error")]
    Error { error: ErrorBody },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct BlockDelta {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    /// A piece of a tool's input (`input_json_delta`).
    #[serde(default)]
    partial_json: Option<String>,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

#[derive(Default)]
struct AnthropicDecoder {
    input_tokens: Option<u32>,
    output_tokens: Option<u32>,
    stop_reason: Option<String>,
    started: bool,
}

impl Decoder for AnthropicDecoder {
    type Item = StreamEvent;

    fn event(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Fault> {
        // The `type` inside the JSON is authoritative; the `event:` name is
        // the same string. `ping` frames carry `{"type": "ping"}`.
        if ev.data.trim().is_empty() {
            return Ok(false);
        }
        let frame: Frame = http::json(&ev.data)?;
        match frame {
            Frame::MessageStart { message } => {
                self.started = true;
                if let Some(u) = message.usage {
                    let input = u.input_tokens.unwrap_or(0)
                        + u.cache_creation_input_tokens.unwrap_or(0)
                        + u.cache_read_input_tokens.unwrap_or(0);
                    self.input_tokens = Some(input);
                    self.output_tokens = u.output_tokens;
                }
            }
            Frame::BlockDelta { delta } => {
                let piece = match delta.kind.as_str() {
                    "text_delta" => delta.text,
                    // The forced tool's input is the structured answer.
                    "input_json_delta" => delta.partial_json,
                    _ => None,
                };
                if let Some(t) = piece
                    && !t.is_empty()
                {
                    out.push(StreamEvent::Delta(t));
                }
            }
            Frame::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(u) = usage {
                    // Cumulative counts: the latest wins.
                    if u.output_tokens.is_some() {
                        self.output_tokens = u.output_tokens;
                    }
                    if let Some(i) = u.input_tokens {
                        self.input_tokens = Some(i);
                    }
                }
            }
            Frame::MessageStop => {
                let usage =
                    (self.input_tokens.is_some() || self.output_tokens.is_some()).then(|| Usage {
                        prompt_tokens: self.input_tokens.unwrap_or(0),
                        completion_tokens: self.output_tokens.unwrap_or(0),
                    });
                out.push(StreamEvent::Done {
                    finish_reason: self.stop_reason.take(),
                    usage,
                });
                return Ok(true);
            }
            Frame::Error { error } => {
                let msg = format!("{}: {}", error.kind, error.message);
                return Err(match error.kind.as_str() {
                    "rate_limit_error" => Fault::RateLimited(msg),
                    "authentication_error" | "permission_error" => Fault::Auth(msg),
                    "invalid_request_error" | "not_found_error" | "request_too_large" => {
                        Fault::BadRequest(msg)
                    }
                    _ => Fault::Server(msg),
                });
            }
            Frame::Other => {}
        }
        if !self.started {
            return Err(Fault::Malformed(format!(
                "expected message_start first, got {}",
                &ev.data
            )));
        }
        Ok(false)
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    async fn stream(
        &self,
        req: ChatRequest,
        cancel: CancellationToken,
    ) -> Result<EventStream, ProviderError> {
        if self.remote.cfg.api_key.is_none() {
            return Err(self.remote.key_required("Anthropic"));
        }
        let (system, messages) = to_wire(&req.messages);
        if messages.is_empty() {
            return Err(self.remote.bad_request("there is no user message to send"));
        }
        let url = self.remote.url("messages");
        let ctx = self.remote.ctx(&url);
        let body = WireRequest {
            model: self.remote.model(&req.model),
            max_tokens: req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            system,
            messages,
            stream: true,
            // Anthropic's range is 0–1 (OpenAI's is 0–2).
            temperature: req.temperature.map(|t| t.clamp(0.0, 1.0)),
            top_k: req.top_k,
            tools: req.json_schema.as_ref().map(|s| {
                serde_json::json!([{
                    "name": s.name,
                    "description": "Give the answer as this tool's input.",
                    "input_schema": s.schema,
                }])
            }),
            tool_choice: req
                .json_schema
                .as_ref()
                .map(|s| serde_json::json!({"type": "tool", "name": s.name})),
        };
        self.remote
            .post_sse(
                ctx,
                url,
                self.headers(),
                &body,
                cancel,
                AnthropicDecoder::default(),
            )
            .await
    }

    async fn check(&self) -> Reachability {
        if self.remote.cfg.api_key.is_none() {
            return self.remote.no_key();
        }
        http::probe(
            &self.remote.client,
            self.remote.url("models"),
            self.headers(),
        )
        .await
    }

    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }

    async fn models(&self) -> Result<crate::ModelList, crate::ModelsError> {
        if self.remote.cfg.api_key.is_none() {
            return Err(crate::ModelsError::NotConfigured(format!(
                "no API key ({})",
                self.remote.cfg.key_source
            )));
        }
        http::list_models(
            &self.remote.client,
            self.remote.url("models"),
            None,
            self.headers(),
        )
        .await
    }

    crate::remote::settings_methods!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_merged_and_system_lifted() {
        let (sys, turns) = to_wire(&[
            ChatMessage::system("rules"),
            ChatMessage::assistant("earlier answer"),
            ChatMessage::user("a"),
            ChatMessage::user("b"),
            ChatMessage::system("more rules"),
            ChatMessage::assistant(""),
            ChatMessage::user("c"),
        ]);
        assert_eq!(sys.as_deref(), Some("rules\n\nmore rules"));
        let roles: Vec<_> = turns.iter().map(|t| t.role).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(turns[0].content, RESUME_MARKER);
        assert_eq!(turns[2].content, "a\n\nb\n\nc");
    }
}

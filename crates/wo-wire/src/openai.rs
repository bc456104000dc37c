//! The OpenAI-compatible face of a local server: the bodies of
//! `GET /v1/models` and `POST /v1/chat/completions` as OpenAI's API defines
//! them, so that any OpenAI client (the `openai` SDKs, simonw/llm, aichat,
//! Open WebUI, IDE plugins) can use WikiOracle as its base URL.
//!
//! A streamed answer is `data: {chunk}\n\n` frames of
//! [`OpenAiChunk`] (`object: "chat.completion.chunk"`): the first carries
//! `delta.role`, the next ones `delta.content`, the last one
//! `finish_reason`; with `stream_options.include_usage`, a final chunk with
//! no choices carries the usage (when the upstream reported it); then
//! `data: [DONE]`. A failure after the stream began is one
//! `data: {"error": {...}}` frame ([`OpenAiError`]), and no `[DONE]`.
//!
//! Requests keep fields this server does not use in `extra` (clients send
//! many: `top_p`, `seed`, …); those that would change the answer's shape
//! and are not supported (`n` > 1, `tools`) are refused by the server.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `object` of a non-streamed answer.
pub const OBJECT_COMPLETION: &str = "chat.completion";
/// `object` of each streamed chunk.
pub const OBJECT_CHUNK: &str = "chat.completion.chunk";
/// `object` of the model list.
pub const OBJECT_LIST: &str = "list";
/// `object` of one model.
pub const OBJECT_MODEL: &str = "model";
/// The last frame of a stream.
pub const DONE_FRAME: &str = "data: [DONE]\n\n";

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiChatRequest {
    /// Which model answers: an id from `GET /v1/models` (a configured
    /// provider's name), or `PROVIDER/MODEL` for another model of that
    /// provider.
    pub model: String,
    /// The conversation, oldest first; the last message is the user's
    /// question. System (and developer) messages become the instructions;
    /// the person's memory is added around them.
    pub messages: Vec<OpenAiMessage>,
    /// Stream the answer as `chat.completion.chunk` frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Streaming options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<OpenAiStreamOptions>,
    /// Sampling temperature, in [0, 2].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2))]
    pub temperature: Option<f32>,
    /// Cap on generated tokens (older name of `max_completion_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// Cap on generated tokens; wins over `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_completion_tokens: Option<u32>,
    /// How many answers: only 1 is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Tool definitions: not supported (refused when not empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// Other fields, accepted and not used.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `stream_options`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiStreamOptions {
    /// Send a last chunk with the usage (when the upstream reported it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    /// Other options, accepted and not used.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Who said a message of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpenAiRole {
    /// Instructions.
    System,
    /// Instructions (OpenAI's newer name for `system`).
    Developer,
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool's result: not supported (refused).
    Tool,
    /// A function's result (deprecated): not supported (refused).
    Function,
}

/// One message of the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiMessage {
    /// Who said it.
    pub role: OpenAiRole,
    /// The text, or a list of parts (only `text` parts are supported).
    /// May be null on an assistant message.
    #[serde(default)]
    pub content: Option<OpenAiContent>,
    /// Other fields (`name`, …), accepted and not used.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message's content: a string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OpenAiContent {
    /// Plain text.
    Text(String),
    /// Parts (`{"type": "text", "text": "..."}`, …).
    Parts(Vec<OpenAiContentPart>),
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiContentPart {
    /// `text` (supported), `image_url`, `input_audio`, `file`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The other fields of the part.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Token accounting, as OpenAI reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiUsage {
    /// Tokens in the prompt, as the upstream counted them (the memory
    /// WikiOracle added included).
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// The sum of both.
    pub total_tokens: u64,
}

impl OpenAiUsage {
    /// Usage from the two counts, with their total.
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        OpenAiUsage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
        }
    }
}

/// The answer of a non-streamed request (`object: "chat.completion"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiChatCompletion {
    /// `chatcmpl-…`.
    pub id: String,
    /// Always `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// `PROVIDER/MODEL`: the provider and model that answered.
    pub model: String,
    /// One answer.
    pub choices: Vec<OpenAiChoice>,
    /// Token usage, when the upstream reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<OpenAiUsage>,
}

/// One answer of [`OpenAiChatCompletion`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiChoice {
    /// Always 0.
    pub index: u32,
    /// The answer.
    pub message: OpenAiAssistantMessage,
    /// Always null.
    pub logprobs: Option<Value>,
    /// `stop`, or `length` when a token or size cap cut the answer.
    pub finish_reason: String,
}

/// The answer's message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiAssistantMessage {
    /// Always `assistant`.
    pub role: String,
    /// The answer's text.
    pub content: String,
    /// Always null.
    pub refusal: Option<String>,
}

/// One frame of a streamed answer (`object: "chat.completion.chunk"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiChunk {
    /// The same `chatcmpl-…` on every chunk of an answer.
    pub id: String,
    /// Always `chat.completion.chunk`.
    pub object: String,
    /// Unix seconds, the same on every chunk.
    pub created: u64,
    /// `PROVIDER/MODEL`.
    pub model: String,
    /// One choice; empty on the usage chunk.
    pub choices: Vec<OpenAiChunkChoice>,
    /// On the last chunk only, with `stream_options.include_usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<OpenAiUsage>,
}

/// The one choice of a chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiChunkChoice {
    /// Always 0.
    pub index: u32,
    /// What this chunk adds.
    pub delta: OpenAiDelta,
    /// Always null.
    pub logprobs: Option<Value>,
    /// Null until the last content chunk's successor, which says why the
    /// answer ended.
    pub finish_reason: Option<String>,
}

/// What a chunk adds to the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiDelta {
    /// `assistant`, on the first chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A piece of the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// `GET /v1/models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiModelList {
    /// Always `list`.
    pub object: String,
    /// The models a request may name.
    pub data: Vec<OpenAiModel>,
}

/// One model a request may name: a configured provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiModel {
    /// The provider's name in config.toml (the default provider first).
    pub id: String,
    /// Always `model`.
    pub object: String,
    /// Unix seconds: when this server started.
    pub created: u64,
    /// Always `wikioracle`.
    pub owned_by: String,
}

/// An error answer, in OpenAI's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiError {
    /// What went wrong.
    pub error: OpenAiErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenAiErrorDetail {
    /// Human-readable; never carries a secret or message content.
    pub message: String,
    /// `invalid_request_error`, `authentication_error`,
    /// `permission_error`, `not_found_error`, `rate_limit_error`,
    /// `api_error` (the upstream or this server failed).
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault (`messages.[2].content`), if one is.
    pub param: Option<String>,
    /// Machine-readable: `invalid_api_key`, `model_not_found`, or this
    /// server's error kind (`bad_request`, `provider`, `timeout`, …).
    pub code: Option<String>,
}

/// A JSON pointer into a request body (`/messages/2/content`) written as
/// OpenAI names a parameter (`messages.[2].content`); `None` for the body
/// as a whole.
pub fn param_of_pointer(pointer: &str) -> Option<String> {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !out.is_empty() {
            out.push('.');
        }
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push('[');
            out.push_str(&seg);
            out.push(']');
        } else {
            out.push_str(&seg);
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_from_the_openai_sdk_parses() {
        let raw = json!({
            "model": "local",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                {"role": "assistant", "content": null, "name": "bot"},
                {"role": "user", "content": "And now?"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_completion_tokens": 20,
            "top_p": 0.9
        });
        let r: OpenAiChatRequest = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(r.messages.len(), 4);
        assert_eq!(r.messages[0].role, OpenAiRole::System);
        assert!(matches!(
            &r.messages[1].content,
            Some(OpenAiContent::Parts(p)) if p[0].text.as_deref() == Some("Hi")
        ));
        assert_eq!(r.messages[2].content, None);
        assert_eq!(r.extra["top_p"], 0.9);
        let back: Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, raw);
        let bad = serde_json::from_value::<OpenAiChatRequest>(
            json!({"model": "x", "messages": [{"role": "robot", "content": "x"}]}),
        );
        assert!(bad.is_err());
    }

    #[test]
    fn chunks_and_errors_serialise_as_openai_does() {
        let c = OpenAiChunk {
            id: "chatcmpl-1".into(),
            object: OBJECT_CHUNK.into(),
            created: 1,
            model: "local/smollm2".into(),
            choices: vec![OpenAiChunkChoice {
                index: 0,
                delta: OpenAiDelta {
                    role: None,
                    content: Some("Hi".into()),
                },
                logprobs: None,
                finish_reason: None,
            }],
            usage: None,
        };
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                   "model": "local/smollm2", "choices": [{"index": 0,
                   "delta": {"content": "Hi"}, "logprobs": null, "finish_reason": null}]})
        );
        let e = OpenAiError {
            error: OpenAiErrorDetail {
                message: "m".into(),
                kind: "invalid_request_error".into(),
                param: None,
                code: Some("model_not_found".into()),
            },
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"error": {"message": "m", "type": "invalid_request_error",
                   "param": null, "code": "model_not_found"}})
        );
        assert_eq!(OpenAiUsage::new(3, 4).total_tokens, 7);
    }

    #[test]
    fn pointers_become_openai_params() {
        assert_eq!(param_of_pointer(""), None);
        assert_eq!(param_of_pointer("/model").as_deref(), Some("model"));
        assert_eq!(
            param_of_pointer("/messages/2/content").as_deref(),
            Some("messages.[2].content")
        );
        assert_eq!(param_of_pointer("/a~1b").as_deref(), Some("a/b"));
    }
}

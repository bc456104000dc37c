//! `nanochat`: the web server of karpathy/nanochat (`scripts/chat_web.py`).
//!
//! Request: `POST {base_url}/chat/completions` with
//! `{"messages":[{"role":"user"|"assistant","content":…}], "temperature", "max_tokens", "top_k"}`.
//! There is no system role: system text is folded into the first user turn
//! (see [`fit_messages`]). The server's limits — 500 messages, 8,000
//! characters per message, 32,000 in all, temperature 0–2, top_k 0–200,
//! max_tokens 1–4096 — are enforced here before sending, because the server
//! answers a violation with a bare HTTP 400.
//!
//! Response: `text/event-stream` frames `data: {"token": "…", "gpu": 0}`,
//! ending with `data: {"done": true}` (no `[DONE]`, no ids, no usage).
//! Health: `GET {base_url}/health` → `{"status":"ok","ready":…}`.

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::ProviderError;
use crate::http::{self, Decoder, Fault};

use crate::sse::SseEvent;
use crate::types::{ChatMessage, ChatRequest, ChatRole, Reachability, StreamEvent};
use crate::{EventStream, Provider};

/// Most messages the server accepts.
pub const MAX_MESSAGES: usize = 500;
/// Most characters (Unicode scalar values, as Python's `len`) in one message.
pub const MAX_MESSAGE_CHARS: usize = 8_000;
/// Most characters over all messages.
pub const MAX_TOTAL_CHARS: usize = 32_000;
/// Largest `max_tokens` the server accepts.
pub const MAX_TOKENS_LIMIT: u32 = 4096;
/// Largest `top_k` the server accepts.
pub const MAX_TOP_K: u32 = 200;
/// Default model name (NanoChat serves one model and ignores the name).
pub const DEFAULT_MODEL: &str = "nanochat";
/// NanoChat models are trained with a 2,048-token sequence length.
pub const DEFAULT_CONTEXT_WINDOW: usize = 2048;
/// Appended to an older turn that was shortened to fit.
pub const TRUNCATION_MARK: &str = " … [truncated]";

crate::remote::remote_provider!(
    /// A NanoChat server.
    NanoChatProvider
);

impl NanoChatProvider {
    fn headers(&self) -> HeaderMap {
        // NanoChat has no auth; a key is still sent as a bearer token so a
        // reverse proxy in front of it can check one.
        self.remote.bearer_headers()
    }
}

/// One NanoChat turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WireMessage {
    /// `user` or `assistant`.
    pub role: &'static str,
    /// Text.
    pub content: String,
}

/// The messages that fit, and what had to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    /// What will be sent, oldest first, starting with a user turn that
    /// carries the system text.
    pub messages: Vec<WireMessage>,
    /// How many of the oldest turns were dropped to fit.
    pub dropped: usize,
    /// How many older turns were shortened to 8,000 characters.
    pub truncated: usize,
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Map messages onto NanoChat's format within its limits.
///
/// 1. System messages are joined and become a prefix of the first user turn
///    (`SYSTEM\n\nUSER`), since NanoChat has no system role.
/// 2. Empty turns are dropped; consecutive same-role turns are merged.
/// 3. An older turn over 8,000 characters is cut to fit and marked
///    [`TRUNCATION_MARK`]; the newest turn is never cut.
/// 4. The oldest turns are dropped (keeping the conversation starting with a
///    user turn) until at most 500 messages and 32,000 characters remain.
///
/// Fails (with a message saying by how much) when even the system text plus
/// the newest turn alone break a limit.
pub fn fit_messages(messages: &[ChatMessage]) -> Result<Fitted, String> {
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == ChatRole::System && !m.content.trim().is_empty())
        .map(|m| m.content.as_str())
        .collect();
    let system = system.join("\n\n");
    let mut turns: Vec<WireMessage> = Vec::new();
    for m in messages {
        let role = match m.role {
            ChatRole::System => continue,
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
        };
        if m.content.trim().is_empty() {
            continue;
        }
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
    let Some(last) = turns.last() else {
        return Err("there is no user or assistant message to send".into());
    };
    let last_len = chars(&last.content);
    if last_len > MAX_MESSAGE_CHARS {
        return Err(format!(
            "the newest message is {last_len} characters; NanoChat accepts at most {MAX_MESSAGE_CHARS} per message"
        ));
    }
    let mut truncated = 0;
    let n = turns.len();
    for t in turns.iter_mut().take(n - 1) {
        if chars(&t.content) > MAX_MESSAGE_CHARS {
            let keep = MAX_MESSAGE_CHARS - chars(TRUNCATION_MARK);
            t.content = t.content.chars().take(keep).collect::<String>() + TRUNCATION_MARK;
            truncated += 1;
        }
    }
    // Drop from the front until everything fits with the system text folded in.
    let mut start = 0;
    loop {
        // Start on a user turn, so the fold has somewhere to go.
        while start < n - 1 && turns[start].role != "user" {
            start += 1;
        }
        let window = &turns[start..];
        let fold_into_first = window[0].role == "user";
        let prefix_len = if system.is_empty() {
            0
        } else {
            chars(&system) + 2
        };
        let first_len = chars(&window[0].content) + prefix_len;
        // With no user turn left (only the newest, an assistant turn), the
        // system text becomes its own user turn.
        let extra_msgs = usize::from(!system.is_empty() && !fold_into_first);
        let count = window.len() + extra_msgs;
        let total: usize = window.iter().map(|t| chars(&t.content)).sum::<usize>() + prefix_len;
        let first_ok = if fold_into_first {
            first_len <= MAX_MESSAGE_CHARS
        } else {
            chars(&system) <= MAX_MESSAGE_CHARS
        };
        if first_ok && count <= MAX_MESSAGES && total <= MAX_TOTAL_CHARS {
            let mut out: Vec<WireMessage> = window.to_vec();
            if !system.is_empty() {
                if fold_into_first {
                    out[0].content = format!("{system}\n\n{}", out[0].content);
                } else {
                    out.insert(
                        0,
                        WireMessage {
                            role: "user",
                            content: system.clone(),
                        },
                    );
                }
            }
            return Ok(Fitted {
                messages: out,
                dropped: start,
                truncated,
            });
        }
        if start >= n - 1 {
            let why = if !first_ok {
                format!(
                    "the system text and context ({} characters) plus the newest message ({last_len}) exceed NanoChat's {MAX_MESSAGE_CHARS} characters per message",
                    chars(&system)
                )
            } else {
                format!(
                    "the system text and context plus the newest message are {total} characters; NanoChat accepts at most {MAX_TOTAL_CHARS} in all"
                )
            };
            return Err(why);
        }
        start += 1;
    }
}

#[derive(Serialize)]
struct WireRequest {
    messages: Vec<WireMessage>,
    #[serde(flatten)]
    sampling: crate::remote::Sampling,
}

#[derive(Deserialize)]
struct Frame {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    done: Option<bool>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Default)]
struct NanoDecoder;

impl Decoder for NanoDecoder {
    type Item = StreamEvent;

    fn event(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, Fault> {
        if ev.data.trim().is_empty() {
            return Ok(false);
        }
        let frame: Frame = http::json(&ev.data)?;
        if let Some(e) = frame.error {
            let msg = e
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| e.to_string());
            return Err(Fault::Server(msg));
        }
        if let Some(t) = frame.token {
            if !t.is_empty() {
                out.push(StreamEvent::Delta(t));
            }
            return Ok(false);
        }
        if frame.done == Some(true) {
            out.push(StreamEvent::Done {
                finish_reason: None,
                usage: None,
            });
            return Ok(true);
        }
        Err(Fault::Malformed(format!(
            "expected {{\"token\":…}} or {{\"done\":true}}, got {}",
            &ev.data
        )))
    }
}

#[async_trait]
impl Provider for NanoChatProvider {
    async fn stream(
        &self,
        req: ChatRequest,
        cancel: CancellationToken,
    ) -> Result<EventStream, ProviderError> {
        let fitted =
            fit_messages(&req.messages).map_err(|detail| self.remote.bad_request(detail))?;
        let url = self.remote.url("chat/completions");
        let ctx = self.remote.ctx(&url);
        let body = WireRequest {
            messages: fitted.messages,
            // Clamped to the server's accepted ranges rather than failing:
            // these are defaults shared with other providers.
            sampling: crate::remote::Sampling {
                temperature: req.temperature.map(|t| t.clamp(0.0, 2.0)),
                max_tokens: req.max_tokens.map(|n| n.clamp(1, MAX_TOKENS_LIMIT)),
                top_k: req.top_k.map(|k| k.min(MAX_TOP_K)),
            },
        };
        self.remote
            .post_sse(ctx, url, self.headers(), &body, cancel, NanoDecoder)
            .await
    }

    async fn check(&self) -> Reachability {
        let url = self.remote.url("health");
        let shown = http::display_url(&url);
        let resp = self
            .remote
            .client
            .get(url)
            .headers(self.headers())
            .timeout(std::time::Duration::from_secs(5))
            .send()
            .await;
        let resp = match resp {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                return Reachability::Unreachable {
                    reason: format!("GET {shown} → HTTP {}", r.status().as_u16()),
                };
            }
            Err(e) => {
                return Reachability::Unreachable {
                    reason: format!("GET {shown}: {}", http::describe_reqwest(&e)),
                };
            }
        };
        let body = resp.bytes().await.unwrap_or_default();
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(v) if v.get("ready") == Some(&serde_json::Value::Bool(false)) => {
                Reachability::Unreachable {
                    reason: format!("{shown}: the server is up but its model is not ready yet"),
                }
            }
            Ok(v) => Reachability::Reachable {
                detail: format!(
                    "GET {shown} → ok ({} GPU(s), {} worker(s) available)",
                    v.get("num_gpus").map_or("?".into(), |x| x.to_string()),
                    v.get("available_workers")
                        .map_or("?".into(), |x| x.to_string())
                ),
            },
            Err(e) => Reachability::Unreachable {
                reason: format!("GET {shown}: not a NanoChat health answer ({e})"),
            },
        }
    }

    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }

    crate::remote::settings_methods!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_is_folded_into_first_user_turn() {
        let f = fit_messages(&[
            ChatMessage::system("Be brief."),
            ChatMessage::user("hi"),
            ChatMessage::assistant("hello"),
            ChatMessage::user("bye"),
        ])
        .unwrap();
        assert_eq!(f.messages[0].content, "Be brief.\n\nhi");
        assert_eq!(f.messages.len(), 3);
        assert_eq!(f.dropped, 0);
    }

    #[test]
    fn oldest_turns_dropped_to_fit_count_and_total() {
        let mut msgs = vec![ChatMessage::system("S")];
        for i in 0..600 {
            msgs.push(ChatMessage::user(format!("q{i}")));
            msgs.push(ChatMessage::assistant(format!("a{i}")));
        }
        msgs.push(ChatMessage::user("last"));
        let f = fit_messages(&msgs).unwrap();
        assert!(f.messages.len() <= MAX_MESSAGES);
        assert_eq!(f.messages[0].role, "user");
        assert!(f.messages[0].content.starts_with("S\n\n"));
        assert_eq!(f.messages.last().unwrap().content, "last");

        let big = "x".repeat(7_000);
        let mut msgs = vec![ChatMessage::system("S")];
        for _ in 0..6 {
            msgs.push(ChatMessage::user(big.clone()));
            msgs.push(ChatMessage::assistant("ok"));
        }
        msgs.push(ChatMessage::user("q"));
        let f = fit_messages(&msgs).unwrap();
        let total: usize = f.messages.iter().map(|m| m.content.chars().count()).sum();
        assert!(total <= MAX_TOTAL_CHARS, "{total}");
        assert!(f.dropped > 0);
    }

    #[test]
    fn long_history_truncated_newest_refused() {
        let f = fit_messages(&[
            ChatMessage::user("é".repeat(9_000)),
            ChatMessage::assistant("ok"),
            ChatMessage::user("q"),
        ])
        .unwrap();
        assert_eq!(f.truncated, 1);
        assert_eq!(f.messages[0].content.chars().count(), MAX_MESSAGE_CHARS);
        let e = fit_messages(&[ChatMessage::user("x".repeat(8_001))]).unwrap_err();
        assert!(e.contains("8001 characters"), "{e}");
        let e = fit_messages(&[
            ChatMessage::system("s".repeat(7_999)),
            ChatMessage::user("hello"),
        ])
        .unwrap_err();
        assert!(e.contains("per message"), "{e}");
        assert!(fit_messages(&[ChatMessage::system("only")]).is_err());
    }
}

//! `wikioracle`: a remote WikiOracle server in stateless mode (the hosted
//! deployment), spoken with the types of the `wo_wire` crate.
//!
//! Two ways to use it:
//! - as a [`Provider`]: an assembled [`ChatRequest`] is mapped onto a
//!   [`StatelessChatRequest`] — system messages become the `context`
//!   (escaped into XHTML), earlier turns the `window`, the last user turn the
//!   `message`, no `truth` (it is already inside the system text) — and the
//!   answer's `delta`/`done` events become [`StreamEvent`]s;
//! - with [`WikiOracleProvider::chat`], which sends a full
//!   [`StatelessChatRequest`] (context, selected truth, window, params) and
//!   yields the server's [`ServerEvent`]s, including the `done` event's
//!   message ids, sources and `state_patch`.
//!
//! An optional key is sent as `Authorization: Bearer …` for deployments that
//! require one.

use async_trait::async_trait;
use futures::stream::BoxStream;
use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use crate::error::ProviderError;
use crate::http::{self, Decoder, Fault};

use crate::sse::SseEvent;
use crate::types::{ChatRequest, ChatRole, Reachability, StreamEvent};
use crate::{EventStream, Provider};
use wo_format::xhtml::text_to_xhtml;
use wo_wire::{
    ChatParams, EVENT_DELTA, EVENT_DONE, EVENT_ERROR, ServerEvent, StatelessChatRequest,
    WindowMessage,
};

/// Model name meaning "whatever the server operator configured".
pub const DEFAULT_MODEL: &str = "default";
/// Context window assumed when the config does not say.
pub const DEFAULT_CONTEXT_WINDOW: usize = 32_768;

crate::remote::remote_provider!(
    /// A WikiOracle server in stateless mode.
    WikiOracleProvider
);

/// The stream of [`WikiOracleProvider::chat`]: `delta`s then one `done`; a
/// server `error` event arrives as an `Err`.
pub type ServerEventStream = BoxStream<'static, Result<ServerEvent, ProviderError>>;

impl WikiOracleProvider {
    fn headers(&self) -> HeaderMap {
        self.remote.bearer_headers()
    }

    /// Map an assembled prompt onto the stateless request (see module docs).
    pub fn to_stateless(&self, req: &ChatRequest) -> StatelessChatRequest {
        let system: Vec<&str> = req
            .messages
            .iter()
            .filter(|m| m.role == ChatRole::System)
            .map(|m| m.content.as_str())
            .collect();
        let last_user = req.messages.iter().rposition(|m| m.role == ChatRole::User);
        let window = req
            .messages
            .iter()
            .enumerate()
            .filter(|(i, m)| m.role != ChatRole::System && Some(*i) != last_user)
            .map(|(_, m)| WindowMessage {
                role: Some(m.role),
                username: m.role.as_str().to_owned(),
                content: text_to_xhtml(&m.content),
                ..WindowMessage::default()
            })
            .collect();
        let model = req
            .model
            .clone()
            .or_else(|| Some(self.remote.cfg.model.clone()))
            .filter(|m| m != DEFAULT_MODEL);
        StatelessChatRequest {
            message: last_user
                .map(|i| req.messages[i].content.clone())
                .unwrap_or_default(),
            context: if system.is_empty() {
                String::new()
            } else {
                format!("<div>{}</div>", text_to_xhtml(&system.join("\n\n")))
            },
            window,
            params: ChatParams {
                model,
                temperature: req.temperature,
                max_tokens: req.max_tokens,
                ..ChatParams::default()
            },
            ..StatelessChatRequest::default()
        }
    }

    /// Send one full stateless turn and stream the server's events.
    pub async fn chat(
        &self,
        req: StatelessChatRequest,
        cancel: CancellationToken,
    ) -> Result<ServerEventStream, ProviderError> {
        if req.message.trim().is_empty() {
            return Err(self.remote.bad_request("the message is empty"));
        }
        let url = self.remote.url(wo_wire::STATELESS_CHAT_PATH);
        let ctx = self.remote.ctx(&url);
        self.remote
            .post_sse(ctx, url, self.headers(), &req, cancel, ServerDecoder)
            .await
    }
}

struct ServerDecoder;

impl Decoder for ServerDecoder {
    type Item = ServerEvent;

    fn event(&mut self, ev: &SseEvent, out: &mut Vec<ServerEvent>) -> Result<bool, Fault> {
        let name = ev.event.as_deref().unwrap_or("message");
        if ![EVENT_DELTA, EVENT_DONE, EVENT_ERROR].contains(&name) {
            // Unknown events are for newer clients; skip them.
            return Ok(false);
        }
        let parsed = ServerEvent::from_sse(name, &ev.data)
            .map_err(|e| Fault::Malformed(format!("{e}: {}", &ev.data)))?;
        match parsed {
            ServerEvent::Error(e) => Err(match e.kind.as_deref() {
                Some("rate_limited") => Fault::RateLimited(e.message),
                Some("auth") => Fault::Auth(e.message),
                Some("bad_request") => Fault::BadRequest(e.message),
                _ => Fault::Server(e.message),
            }),
            done @ ServerEvent::Done(_) => {
                out.push(done);
                Ok(true)
            }
            delta => {
                out.push(delta);
                Ok(false)
            }
        }
    }
}

#[async_trait]
impl Provider for WikiOracleProvider {
    async fn stream(
        &self,
        req: ChatRequest,
        cancel: CancellationToken,
    ) -> Result<EventStream, ProviderError> {
        use futures::StreamExt;
        let events = self.chat(self.to_stateless(&req), cancel).await?;
        Ok(events
            .filter_map(|item| async move {
                match item {
                    Ok(ServerEvent::Delta(d)) if d.text.is_empty() => None,
                    Ok(ServerEvent::Delta(d)) => Some(Ok(StreamEvent::Delta(d.text))),
                    Ok(ServerEvent::Done(d)) => Some(Ok(StreamEvent::Done {
                        finish_reason: d.finish_reason,
                        usage: d.usage,
                    })),
                    // The decoder turns `error` events into `Err`.
                    Ok(ServerEvent::Error(_)) => None,
                    Err(e) => Some(Err(e)),
                }
            })
            .boxed())
    }

    async fn check(&self) -> Reachability {
        http::probe(
            &self.remote.client,
            self.remote.url(wo_wire::HEALTH_PATH),
            self.headers(),
        )
        .await
    }

    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }

    crate::remote::settings_methods!();
}

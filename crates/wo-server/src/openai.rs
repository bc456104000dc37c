//! The OpenAI-compatible face of a local server (product §10): `GET
//! /v1/models` and `POST /v1/chat/completions`, so that any OpenAI client
//! pointed at `http://127.0.0.1:PORT/v1` gets answers with the person's
//! memory. The bodies are `wo_wire::openai`'s.
//!
//! * **Models**: a model id is a configured provider's name (the default
//!   provider is listed first); `PROVIDER/MODEL` picks another model of
//!   that provider. Anything else is a 404 `model_not_found`.
//! * **A request**: its last message is the question; its system (and
//!   developer) messages are the instructions and its earlier user and
//!   assistant messages the conversation — the client owns it, so they take
//!   the place of the stored recent turns — and the engine adds the memory
//!   around them (context, truth, recalled messages, file chunks). The turn
//!   is the engine's one turn ([`wo_engine::chat::run_turn`] on
//!   [`LocalTurn`]): the exchange is appended to `llm.json` as a web turn's
//!   is, and nothing is appended when the upstream fails or the client
//!   goes away mid-answer.
//! * **Memory**: with an interpreter configured, the turn's memory step
//!   runs as a web turn's does, after the commit — but the client's answer
//!   (the completion, or the stream, closed after `[DONE]`) is complete at
//!   `done`: the step finishes in the turn's task, so an OpenAI client that
//!   reads to the end of the stream is not kept waiting for it.
//! * **Streaming**: [`ChunkSink`] writes `chat.completion.chunk` frames;
//!   the response starts with the first piece of the answer, so a failure
//!   before it (a bad field, the upstream refusing) is an HTTP error.
//! * **Errors** are OpenAI's `{"error": {"message", "type", "param",
//!   "code"}}` ([`error_response`]); the guard uses it for every refusal
//!   under `/v1/`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use wo_engine::chat::{FnSink, TurnError, TurnEvent, TurnOutcome, TurnSink, run_turn};
use wo_engine::request::Field;
use wo_format::Role;
use wo_providers::Provider;
use wo_wire::openai::{
    DONE_FRAME, OBJECT_CHUNK, OBJECT_COMPLETION, OBJECT_LIST, OBJECT_MODEL, OpenAiAssistantMessage,
    OpenAiChatCompletion, OpenAiChatRequest, OpenAiChoice, OpenAiChunk, OpenAiChunkChoice,
    OpenAiContent, OpenAiDelta, OpenAiModel, OpenAiModelList, OpenAiRole, OpenAiUsage,
};

use crate::app::{App, Local};
use crate::error::ApiError;
pub use crate::error::{error_response, openai_error};
use crate::extract::JsonBody;
use crate::sse;
use crate::turn::{LocalTurn, Started};

/// `owned_by` of every model.
const OWNER: &str = "wikioracle";

/// Unix seconds now.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether provider `info` can answer: its key is there (if it needs one)
/// and, for a model file, the file is.
fn can_answer(info: &wo_providers::config::ProviderInfo) -> Result<(), String> {
    use wo_providers::config::KeyStatus;
    if let KeyStatus::Missing { var } = &info.key {
        return Err(match var {
            Some(v) => format!("provider {:?} has no API key (set {v})", info.name),
            None => format!("provider {:?} has no API key", info.name),
        });
    }
    if info.kind == wo_providers::config::ProviderKind::Local {
        match &info.model_path {
            Some(path) if path.is_file() => {}
            Some(path) => {
                return Err(format!(
                    "provider {:?}'s model file {} is not there (scripts/install-model.sh installs it)",
                    info.name,
                    path.display()
                ));
            }
            None => {
                return Err(format!(
                    "provider {:?} has no model file (set model_path in config.toml)",
                    info.name
                ));
            }
        }
    }
    Ok(())
}

/// The providers a model id may name, the default first.
fn answering_providers(app: &App) -> Vec<wo_providers::config::ProviderInfo> {
    let mut infos: Vec<_> = wo_providers::config::list(&app.config)
        .into_iter()
        .filter(|i| can_answer(i).is_ok())
        .collect();
    infos.sort_by_key(|i| !i.is_default);
    infos
}

/// `GET /v1/models`: the configured providers that can answer.
pub async fn models(State(app): State<Arc<Local>>) -> Json<OpenAiModelList> {
    let created = unix_now();
    Json(OpenAiModelList {
        object: OBJECT_LIST.into(),
        data: answering_providers(&app)
            .into_iter()
            .map(|i| OpenAiModel {
                id: i.name,
                object: OBJECT_MODEL.into(),
                created,
                owned_by: OWNER.into(),
            })
            .collect(),
    })
}

/// The provider and model a request's `model` names: a provider's name,
/// or `PROVIDER/MODEL`.
fn choose_model(app: &App, id: &str) -> Result<(String, Option<String>), ApiError> {
    let infos = wo_providers::config::list(&app.config);
    let find = |name: &str| infos.iter().find(|i| i.name == name);
    let (info, model) = match find(id) {
        Some(i) => (i, None),
        None => match id.split_once('/') {
            Some((p, m)) if !m.trim().is_empty() && find(p).is_some() => {
                (find(p).expect("just found"), Some(m.to_owned()))
            }
            _ => {
                let ids: Vec<String> = answering_providers(app)
                    .into_iter()
                    .map(|i| i.name)
                    .collect();
                return Err(model_not_found(format!(
                    "the model {id:?} does not exist on this server; name a provider ({}) or PROVIDER/MODEL (GET /v1/models lists them)",
                    ids.join(", ")
                )));
            }
        },
    };
    can_answer(info).map_err(model_not_found)?;
    Ok((info.name.clone(), model))
}

fn model_not_found(message: String) -> ApiError {
    ApiError {
        pointer: Some("/model".into()),
        ..ApiError::new(StatusCode::NOT_FOUND, "model_not_found", message)
    }
}

/// A request's messages as the engine takes them.
#[derive(Debug, PartialEq)]
struct Conversation {
    /// The system and developer messages, joined.
    system: Option<String>,
    /// The user and assistant messages before the question.
    turns: Vec<(Role, String)>,
    /// The last message's text.
    question: String,
}

fn bad(pointer: String, message: impl Into<String>) -> ApiError {
    ApiError::bad_field(pointer, message)
}

/// Splits `req.messages` into instructions, conversation and question;
/// refuses what cannot be sent on faithfully (images, tool results, `n` >
/// 1, tools) rather than dropping it.
fn conversation(req: &OpenAiChatRequest) -> Result<Conversation, ApiError> {
    if req.n.is_some_and(|n| n != 1) {
        return Err(bad("/n".into(), "only one answer (n = 1) is supported"));
    }
    if req.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(bad(
            "/tools".into(),
            "tools are not supported: WikiOracle answers with text only",
        ));
    }
    let Some(last) = req.messages.last() else {
        return Err(bad("/messages".into(), "at least one message is needed"));
    };
    if last.role != OpenAiRole::User {
        return Err(bad(
            format!("/messages/{}/role", req.messages.len() - 1),
            format!(
                "the last message must be the user's question (role \"user\"), not {:?}",
                role_name(last.role)
            ),
        ));
    }
    let mut system: Vec<String> = Vec::new();
    let mut turns: Vec<(Role, String)> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        let text = match &m.content {
            None if m.role == OpenAiRole::Assistant => continue,
            None => {
                return Err(bad(
                    format!("/messages/{i}/content"),
                    "the content is missing",
                ));
            }
            Some(OpenAiContent::Text(t)) => t.clone(),
            Some(OpenAiContent::Parts(parts)) => {
                let mut text = Vec::with_capacity(parts.len());
                for (j, p) in parts.iter().enumerate() {
                    let at = format!("/messages/{i}/content/{j}");
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => text.push(t.as_str()),
                        ("text", None) => return Err(bad(format!("{at}/text"), "missing")),
                        (other, _) => {
                            return Err(bad(
                                format!("{at}/type"),
                                format!("only text parts are supported, not {other:?}"),
                            ));
                        }
                    }
                }
                text.join("\n")
            }
        };
        match m.role {
            OpenAiRole::System | OpenAiRole::Developer => {
                if !text.trim().is_empty() {
                    system.push(text);
                }
            }
            OpenAiRole::User => turns.push((Role::User, text)),
            OpenAiRole::Assistant => turns.push((Role::Assistant, text)),
            OpenAiRole::Tool | OpenAiRole::Function => {
                return Err(bad(
                    format!("/messages/{i}/role"),
                    "tool and function results are not supported: WikiOracle answers with text only",
                ));
            }
        }
    }
    let (_, question) = turns.pop().expect("the last message is the user's");
    // Empty turns (an assistant's tool-call stub) carry nothing to send.
    turns.retain(|(_, t)| !t.trim().is_empty());
    Ok(Conversation {
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        turns,
        question,
    })
}

fn role_name(r: OpenAiRole) -> &'static str {
    match r {
        OpenAiRole::System => "system",
        OpenAiRole::Developer => "developer",
        OpenAiRole::User => "user",
        OpenAiRole::Assistant => "assistant",
        OpenAiRole::Tool => "tool",
        OpenAiRole::Function => "function",
    }
}

/// The request field an engine field error is about.
fn field_pointer(field: Field, req: &OpenAiChatRequest) -> String {
    match field {
        Field::Message => format!("/messages/{}/content", req.messages.len().saturating_sub(1)),
        Field::Temperature => "/temperature".into(),
        Field::MaxTokens if req.max_completion_tokens.is_some() => "/max_completion_tokens".into(),
        Field::MaxTokens => "/max_tokens".into(),
        Field::Provider | Field::Model => "/model".into(),
        Field::Username => String::new(),
        Field::MinCertainty | Field::Certainty | Field::Parent | Field::Regenerate => String::new(),
    }
}

/// A turn error as an HTTP error (a turn that failed before anything was
/// streamed, or a non-streamed one).
fn turn_error(e: &TurnError, req: &OpenAiChatRequest) -> ApiError {
    use wo_providers::ErrorKind;
    match e {
        TurnError::Field(f) => bad(field_pointer(f.field, req), f.message.clone()),
        TurnError::Provider(p) => {
            let status = match p.kind() {
                ErrorKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
                ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
                _ => StatusCode::BAD_GATEWAY,
            };
            ApiError::new(status, "provider", e.to_string())
        }
        TurnError::EmptyAnswer => ApiError::new(StatusCode::BAD_GATEWAY, "provider", e.to_string()),
        _ => crate::turn::early_error(e),
    }
}

/// OpenAI's `finish_reason` for the engine's: a cap is `length`.
fn finish_reason(r: Option<&str>) -> String {
    match r {
        Some("length" | "truncated") => "length",
        Some("content_filter") => "content_filter",
        _ => "stop",
    }
    .into()
}

/// The upstream's usage, when it reported any.
fn usage(outcome: &TurnOutcome) -> Option<OpenAiUsage> {
    let u = outcome.usage.as_ref()?;
    if u.prompt_tokens.is_none() && u.completion_tokens.is_none() {
        return None;
    }
    Some(OpenAiUsage::new(
        u.prompt_tokens.unwrap_or(0),
        u.completion_tokens.unwrap_or(0),
    ))
}

/// What every chunk (or the completion) of one answer repeats.
#[derive(Clone)]
struct Answer {
    id: String,
    created: u64,
    model: String,
}

impl Answer {
    fn new(provider: &dyn Provider, req: &wo_engine::chat::TurnRequest) -> Self {
        Answer {
            // Random, as OpenAI's: the message ids exist only after the commit.
            id: format!("chatcmpl-{}", &crate::guard::new_token()[..24]),
            created: unix_now(),
            model: format!(
                "{}/{}",
                provider.name(),
                wo_engine::chat::model_for(provider, req)
            ),
        }
    }

    fn chunk(&self, delta: OpenAiDelta, finish: Option<String>) -> OpenAiChunk {
        OpenAiChunk {
            id: self.id.clone(),
            object: OBJECT_CHUNK.into(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![OpenAiChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason: finish,
            }],
            usage: None,
        }
    }
}

/// The streaming face of a turn: `chat.completion.chunk` frames. The stream
/// begins with the first piece of the answer (a role chunk, then the
/// content); a failure before it goes to `started` as an HTTP error, one
/// after it is a last `data: {"error": …}` frame (and no `[DONE]`).
pub struct ChunkSink {
    /// The stream's frames; dropped after `[DONE]`, which ends the stream
    /// while the turn's memory step goes on.
    events: Option<sse::EventSink>,
    started: Option<Started>,
    answer: Answer,
    include_usage: bool,
    request: Arc<OpenAiChatRequest>,
}

impl ChunkSink {
    /// Sends a `data:` frame while the stream is open.
    fn data<T: serde::Serialize>(&self, data: &T) {
        if let Some(events) = &self.events {
            events.data(data);
        }
    }

    fn begin(&mut self) {
        if let Some(started) = self.started.take() {
            let _ = started.send(Ok(()));
            self.data(&self.answer.chunk(
                OpenAiDelta {
                    role: Some("assistant".into()),
                    content: Some(String::new()),
                },
                None,
            ));
        }
    }
}

impl TurnSink for ChunkSink {
    fn event(&mut self, event: TurnEvent<'_>) {
        match event {
            // The memory step's outcome has no place in OpenAI's stream,
            // which ended at `done` (see below).
            TurnEvent::Assembled(_) | TurnEvent::Remembered(_) => {}
            TurnEvent::Delta(text) => {
                self.begin();
                self.data(&self.answer.chunk(
                    OpenAiDelta {
                        role: None,
                        content: Some(text.to_owned()),
                    },
                    None,
                ));
            }
            TurnEvent::Done(outcome) => {
                self.begin();
                self.data(&self.answer.chunk(
                    OpenAiDelta::default(),
                    Some(finish_reason(outcome.finish_reason.as_deref())),
                ));
                if self.include_usage
                    && let Some(usage) = usage(outcome)
                {
                    let mut last = self.answer.chunk(OpenAiDelta::default(), None);
                    last.choices.clear();
                    last.usage = Some(usage);
                    self.data(&last);
                }
                // The turn is committed: end the stream here (dropping the
                // only sender), so a client reading to the end is not kept
                // waiting for the memory step, which goes on in the turn's
                // task (the stream's end fires the turn's cancellation,
                // which the memory step does not watch).
                if let Some(events) = self.events.take() {
                    events.raw(DONE_FRAME);
                }
            }
            TurnEvent::Failed(e) => {
                let error = turn_error(e, &self.request);
                match self.started.take() {
                    Some(started) => {
                        let _ = started.send(Err(error));
                    }
                    None => self.data(&openai_error(&error)),
                }
            }
        }
    }
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(app): State<Arc<Local>>,
    body: Result<JsonBody<OpenAiChatRequest>, ApiError>,
) -> Response {
    match completions(app, body).await {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

async fn completions(
    app: Arc<Local>,
    body: Result<JsonBody<OpenAiChatRequest>, ApiError>,
) -> Result<Response, ApiError> {
    let JsonBody(body) = body?;
    let conv = conversation(&body)?;
    let (provider_name, model) = choose_model(&app, &body.model)?;
    let provider = app.provider(Some(&provider_name)).await.map_err(|mut e| {
        // The provider is chosen by `model` here, not `params.provider`.
        e.pointer = e.pointer.map(|_| "/model".into());
        e
    })?;
    // As a web turn: the server's user name, the memory on (`rag`), links
    // not fetched; where it goes is decided below.
    let mut req = wo_engine::request::TurnParams {
        message: conv.question,
        system: conv.system,
        provider_named: true,
        model,
        temperature: body.temperature,
        max_tokens: body.max_completion_tokens.or(body.max_tokens),
        rag: true,
        max_message_chars: Some(app.limits.message_chars),
        conversation: Some(conv.turns),
        ..Default::default()
    }
    .build(&app.config, || app.username.clone())
    .map_err(|e| bad(field_pointer(e.field, &body), e.message))?;
    // The client's own thread: the stored conversation holding exactly the
    // turns it sent, else a new one — never the file's newest message.
    let turns = req.conversation.clone().unwrap_or_default();
    let known = req.known_models.clone();
    req.parent = app
        .with_store(move |store| {
            Ok(
                wo_engine::conversation::continued_by(store.state(), &turns, &known)
                    .map(|m| m.id.clone()),
            )
        })
        .await?;
    req.new_conversation = req.parent.is_none();
    // The client keeps its own copy of a stopped answer: nothing is kept.
    let req = crate::setup::set_up_local(&app, &provider, req, Vec::new(), false).await?;
    let answer = Answer::new(provider.as_ref(), &req);
    let body = Arc::new(body);

    if body.stream != Some(true) {
        // The turn runs in its own task and the answer is returned at
        // `done` (committed), while its memory step goes on there. A
        // client that goes away before then cancels it (the guard),
        // and with it the upstream's answer: nothing is committed.
        let cancel = wo_providers::Cancel::new();
        let guard = cancel.clone().drop_guard();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<TurnOutcome>();
        let mut done_tx = Some(done_tx);
        let turn = tokio::spawn(run_turn(
            LocalTurn { app },
            provider,
            req,
            cancel,
            FnSink::new(move |event: TurnEvent<'_>| {
                if let TurnEvent::Done(outcome) = event
                    && let Some(tx) = done_tx.take()
                {
                    let _ = tx.send(outcome.clone());
                }
            }),
        ));
        let outcome = match done_rx.await {
            Ok(outcome) => outcome,
            // No `done`: the turn failed (or panicked) before its commit.
            Err(_) => {
                return Err(match turn.await {
                    Ok(Err(e)) => turn_error(&e, &body),
                    Ok(Ok(_)) | Err(_) => ApiError::internal("the turn ended without an answer"),
                });
            }
        };
        guard.disarm();
        return Ok(Json(OpenAiChatCompletion {
            id: answer.id,
            object: OBJECT_COMPLETION.into(),
            created: answer.created,
            model: answer.model,
            choices: vec![OpenAiChoice {
                index: 0,
                message: OpenAiAssistantMessage {
                    role: "assistant".into(),
                    content: outcome.answer.clone(),
                    refusal: None,
                },
                logprobs: None,
                finish_reason: finish_reason(outcome.finish_reason.as_deref()),
            }],
            usage: usage(&outcome),
        })
        .into_response());
    }

    let include_usage = body
        .stream_options
        .as_ref()
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    crate::turn::respond_with(
        |events, started| ChunkSink {
            events: Some(events),
            started: Some(started),
            answer,
            include_usage,
            request: body,
        },
        |cancel, sink| crate::turn::run(LocalTurn { app }, provider, req, cancel, sink),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(v: serde_json::Value) -> OpenAiChatRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn messages_become_instructions_conversation_and_question() {
        let c = conversation(&request(json!({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": null},
            {"role": "assistant", "content": "Hello!"},
            {"role": "developer", "content": "Use metric units."},
            {"role": "user", "content": [{"type": "text", "text": "How"}, {"type": "text", "text": "far?"}]}
        ]})))
        .unwrap();
        assert_eq!(
            c,
            Conversation {
                system: Some("Be brief.\n\nUse metric units.".into()),
                turns: vec![
                    (Role::User, "Hi".into()),
                    (Role::Assistant, "Hello!".into())
                ],
                question: "How\nfar?".into(),
            }
        );
    }

    #[test]
    fn what_cannot_be_sent_faithfully_is_refused_with_its_field() {
        let cases = [
            (json!([]), "/messages"),
            (
                json!([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]),
                "/messages/1/role",
            ),
            (
                json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
                "/messages/0/content/0/type",
            ),
            (
                json!([{"role": "tool", "content": "r"}, {"role": "user", "content": "q"}]),
                "/messages/0/role",
            ),
            (json!([{"role": "user"}]), "/messages/0/content"),
        ];
        for (messages, pointer) in cases {
            let e =
                conversation(&request(json!({"model": "m", "messages": messages}))).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{messages}");
            assert_eq!(
                e.pointer.as_deref(),
                Some(pointer),
                "{messages}: {}",
                e.message
            );
        }
        let one = json!([{"role": "user", "content": "q"}]);
        let e = conversation(&request(json!({"model": "m", "messages": one, "n": 2}))).unwrap_err();
        assert_eq!(e.pointer.as_deref(), Some("/n"));
        let e = conversation(&request(
            json!({"model": "m", "messages": one, "tools": [{"type": "function"}]}),
        ))
        .unwrap_err();
        assert_eq!(e.pointer.as_deref(), Some("/tools"));
        assert!(
            conversation(&request(
                json!({"model": "m", "messages": one, "n": 1, "tools": []})
            ))
            .is_ok()
        );
    }

    #[test]
    fn errors_take_openai_types_and_params() {
        let e = openai_error(&ApiError::unauthorized_program());
        assert_eq!(e.error.kind, "invalid_request_error");
        assert_eq!(e.error.code.as_deref(), Some("invalid_api_key"));
        let e = openai_error(&ApiError::bad_field("/messages/2/content", "x"));
        assert_eq!(e.error.param.as_deref(), Some("messages.[2].content"));
        assert_eq!(e.error.code.as_deref(), Some("bad_request"));
        let e = openai_error(&model_not_found("no".into()));
        assert_eq!(e.error.code.as_deref(), Some("model_not_found"));
        assert_eq!(e.error.param.as_deref(), Some("model"));
        let e = openai_error(&ApiError::internal("x"));
        assert_eq!(e.error.kind, "server_error");
    }

    #[test]
    fn finish_reasons_are_openai_s() {
        assert_eq!(finish_reason(None), "stop");
        assert_eq!(finish_reason(Some("stop")), "stop");
        assert_eq!(finish_reason(Some("truncated")), "length");
        assert_eq!(finish_reason(Some("length")), "length");
        assert_eq!(finish_reason(Some("eos")), "stop");
    }
}

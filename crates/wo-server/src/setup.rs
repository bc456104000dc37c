//! A turn's inputs from a request, for every face of the server (the local
//! chat, the stateless chat and what it keeps of a stopped turn, the
//! OpenAI-compatible endpoint): the engine's request built and validated
//! once, with the operator's limits; the regenerated question found; the
//! file chunks — the project index's and a client's own — checked. Below
//! the handlers that use it: it reaches only the app's configuration.

use std::sync::Arc;

use wo_engine::chat::TurnRequest;
use wo_engine::setup::{Dense, TurnSetup};
use wo_wire::ChatParams;

use crate::app::{App, Local};
use crate::error::ApiError;

/// The engine request for a turn from the API's parameters, validated by
/// the engine's one builder (with the config's `[defaults]`); a bad field
/// is named by its JSON pointer. The provider is already chosen here, so
/// its default model applies (not `[defaults] model`).
pub fn turn_request(
    app: &App,
    message: String,
    username: Option<String>,
    parent: Option<String>,
    new_conversation: bool,
    params: &ChatParams,
) -> Result<TurnRequest, ApiError> {
    turn_params(app, message, username, parent, new_conversation, params)?
        .build(&app.config, || app.username.clone())
        .map_err(|e| ApiError::bad_field(e.field.pointer(), e.message))
}

/// The engine's parameters for [`turn_request`], before they are built.
pub fn turn_params(
    app: &App,
    message: String,
    username: Option<String>,
    parent: Option<String>,
    new_conversation: bool,
    params: &ChatParams,
) -> Result<wo_engine::request::TurnParams, ApiError> {
    let max_tokens = app.checked_choices(params)?;
    Ok(wo_engine::request::TurnParams {
        message,
        username,
        system: None,
        provider_named: true,
        model: params.model.clone(),
        temperature: params.temperature,
        max_tokens,
        parent,
        new_conversation,
        rag: params.rag != Some(false),
        url_fetch: params.url_fetch == Some(true),
        max_entries: params.max_entries,
        min_certainty: params.min_certainty,
        max_message_chars: Some(app.limits.message_chars),
        conversation: None,
        regenerate: None,
    })
}

/// [`turn_request`] for a local chat's body (`POST /api/chat`, and the
/// turn a stateless client stopped); `again`: the stored question a
/// `regenerate` body names, found in the state ([`regenerating`]).
pub fn chat_turn_request(
    app: &App,
    body: wo_wire::ChatRequest,
    again: Option<wo_engine::request::Regenerating>,
) -> Result<TurnRequest, ApiError> {
    let mut params = turn_params(
        app,
        body.message,
        body.username,
        body.parent,
        body.new_conversation,
        &body.params,
    )?;
    if let Some(again) = again {
        again.apply(&mut params);
    }
    params
        .build(&app.config, || app.username.clone())
        .map_err(|e| ApiError::bad_field(e.field.pointer(), e.message))
}

/// The stored question a chat body's `regenerate` names, if it names one.
pub async fn regenerating(
    app: &Arc<Local>,
    body: &wo_wire::ChatRequest,
) -> Result<Option<wo_engine::request::Regenerating>, ApiError> {
    let Some(id) = body.regenerate.clone() else {
        return Ok(None);
    };
    app.with_store(move |store| {
        wo_engine::request::regenerating(store.state(), &id)
            .map(Some)
            .map_err(|e| ApiError::bad_field(e.field.pointer(), e.message))
    })
    .await
}

/// The local turn's set-up ([`wo_engine::setup::TurnSetup`]): the
/// directory index's chunks and `client_chunks`, the memory step after a
/// turn answered by `provider`, whether a stop keeps the exchange, and
/// recall by meaning when the embedding model is installed (the question
/// embedded here). A missing or unreadable index costs the chunks, not the
/// turn.
pub async fn set_up_local(
    app: &Arc<Local>,
    provider: &Arc<dyn wo_providers::Provider>,
    mut req: TurnRequest,
    client_chunks: Vec<wo_engine::assemble::ChunkCandidate>,
    keep_partial: bool,
) -> Result<TurnRequest, ApiError> {
    let memory = app.memory_step(provider, app.project_dir()).await;
    req.said_windows = Some(app.said_windows.clone());
    let app = app.clone();
    tokio::task::spawn_blocking(move || {
        let index = if req.no_rag {
            None
        } else {
            app.index().ok().flatten()
        };
        TurnSetup {
            index: index.as_deref(),
            client_chunks,
            memory,
            keep_partial,
            dense: app.dense().map_or(Dense::Off, |d| Dense::Live(d)),
        }
        .apply(&mut req);
        req
    })
    .await
    .map_err(|e| ApiError::internal(format!("the turn's set-up panicked: {e}")))
}

/// The stateless turn's set-up: the client's chunks (no index, no file to
/// recall by meaning from), the memory step with the operator's or the
/// built-in prompt; the client keeps a stopped turn itself.
pub async fn set_up_stateless(
    app: &App,
    provider: &Arc<dyn wo_providers::Provider>,
    req: &mut TurnRequest,
    client_chunks: Vec<wo_engine::assemble::ChunkCandidate>,
) {
    req.said_windows = Some(app.said_windows.clone());
    TurnSetup {
        index: None,
        client_chunks,
        memory: app.memory_step(provider, None).await,
        keep_partial: false,
        dense: Dense::Off,
    }
    .apply(req);
}

/// The chunks a client retrieved from its own folder index, checked
/// (`wo_engine::files::client_chunks`); a fault names its JSON pointer.
pub fn client_chunks(
    given: Vec<wo_wire::FileChunk>,
) -> Result<Vec<wo_engine::assemble::ChunkCandidate>, ApiError> {
    let given = given
        .into_iter()
        .map(|c| wo_index::ContextChunk {
            id: c.id,
            label: c.label,
            text: c.text,
        })
        .collect();
    wo_engine::files::client_chunks(given)
        .map_err(|e| ApiError::bad_field(e.pointer("/chunks"), e.message))
}

/// Retrieval prefs a client sent (`PATCH /api/state`, a stateless turn's
/// `retrieval_prefs`), refused with the pointer of the first value out of
/// range ([`wo_engine::setup::check_prefs`]).
pub fn check_prefs(p: &wo_format::RetrievalPrefs) -> Result<(), ApiError> {
    wo_engine::setup::check_prefs(p).map_err(|e| ApiError::bad_field(e.pointer(), e.message))
}

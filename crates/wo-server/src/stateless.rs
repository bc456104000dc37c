//! Stateless mode's turn (product §6): the browser sends what the turn needs,
//! the server builds a throwaway state from it, streams the answer and ends
//! with a `state_patch` the browser applies to its own `llm.json`. Nothing
//! is written anywhere and no message content is logged.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde_json::{Value, json};
use wo_format::xhtml::sanitize_html;
use wo_format::{Message, Timestamp, TruthEntry};
use wo_wire::StatelessChatRequest;

use crate::app::Stateless;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::setup::turn_request;
use crate::turn::StatelessTurn;

/// A state holding only what a client sent: context, truth entries and a
/// window of messages, each checked and sanitised (it came from a browser).
/// `window_pointer` names the messages in errors.
pub fn state_from_parts(
    context: String,
    truth: Vec<Value>,
    window: Vec<Value>,
    window_pointer: &str,
) -> Result<wo_format::State, ApiError> {
    let mut state = wo_format::State::new(Timestamp::now());
    state.context = sanitize_html(&context);
    // Ids seen, so each entry costs one lookup (`add_truth` scans the list).
    let mut ids = std::collections::HashSet::new();
    for (i, raw) in truth.into_iter().enumerate() {
        let mut entry: TruthEntry = serde_json::from_value(raw)
            .map_err(|e| ApiError::bad_field(format!("/truth/{i}"), e.to_string()))?;
        wo_engine::request::check_certainty(entry.certainty)
            .map_err(|m| ApiError::bad_field(format!("/truth/{i}/certainty"), m))?;
        entry.content = sanitize_html(&entry.content);
        if entry.id.is_empty() {
            entry.id =
                wo_format::ids::truth_id(&entry.title, entry.timestamp.as_str(), &entry.content);
        }
        if ids.insert(entry.id.clone()) {
            state.truth.trust.push(entry);
        }
    }
    for (i, mut raw) in window.into_iter().enumerate() {
        // The protocol lets a client leave out what it has not stored yet.
        if let Value::Object(m) = &mut raw {
            for key in ["title", "username"] {
                m.entry(key).or_insert_with(|| json!(""));
            }
            if m.get("id").is_some_and(|v| v.as_str() == Some("")) {
                m.remove("id");
            }
        }
        let mut m: Message = serde_json::from_value(raw)
            .map_err(|e| ApiError::bad_field(format!("{window_pointer}/{i}"), e.to_string()))?;
        m.content = sanitize_html(&m.content);
        if m.id.is_empty() {
            m.id = wo_format::ids::message_id(&m.username, m.timestamp.as_str(), &m.content);
        }
        state.push_message(m);
    }
    // Held to the same rules as every other way in (depth, structure);
    // pointers name the throwaway state's parts.
    let admitted = wo_format::admit::admit_state(state).map_err(|issues| {
        let first = issues.first();
        ApiError::bad_field(
            first.map(|i| i.pointer.clone()).unwrap_or_default(),
            first.map(|i| i.to_string()).unwrap_or_default(),
        )
    })?;
    Ok(admitted.state)
}

fn to_values<T: serde::Serialize>(items: Vec<T>) -> Vec<Value> {
    items
        .into_iter()
        .map(|i| serde_json::to_value(i).unwrap_or(Value::Null))
        .collect()
}

/// `POST /api/stateless/chat`.
pub async fn chat(
    State(app): State<Arc<Stateless>>,
    JsonBody(body): JsonBody<StatelessChatRequest>,
) -> Result<Response, ApiError> {
    if body.window.len() > app.limits.window_messages {
        return Err(ApiError::bad_field(
            "/window",
            format!("more than {} messages", app.limits.window_messages),
        ));
    }
    if body.truth.len() > app.limits.truth_entries {
        return Err(ApiError::bad_field(
            "/truth",
            format!("more than {} entries", app.limits.truth_entries),
        ));
    }
    if body.new_conversation && !body.window.is_empty() {
        return Err(ApiError::bad_field(
            "/window",
            "must be empty when new_conversation is true (a new conversation follows no message)",
        ));
    }
    let prefs = match body.retrieval_prefs {
        Some(v) => {
            let p: wo_format::RetrievalPrefs = serde_json::from_value(v)
                .map_err(|e| ApiError::bad_field("/retrieval_prefs", e.to_string()))?;
            crate::setup::check_prefs(&p)?;
            Some(p)
        }
        None => None,
    };
    let provider = app.provider(body.params.provider.as_deref()).await?;
    let (context, truth, window) = (body.context, to_values(body.truth), to_values(body.window));
    // Sanitising what the client sent is CPU-heavy: off the async workers.
    let mut state = app
        .cpu(move || state_from_parts(context, truth, window, "/window"))
        .await??;
    // The memory is picked by the file's own prefs, as a local server does.
    if let Some(p) = prefs {
        state.truth.retrieval_prefs = p;
    }
    // The window is the branch up to the new message: its newest message is
    // the parent — or, to regenerate, the question answered again.
    let newest = state.messages().last().map(|m| m.id.clone());
    let mut req = if body.regenerate {
        let question = newest.ok_or_else(|| {
            ApiError::bad_field("/window", "is empty: regenerate answers its newest message")
        })?;
        let again = wo_engine::request::regenerating(&state, &question)
            .map_err(|e| ApiError::bad_field("/window", e.message))?;
        let mut params = crate::setup::turn_params(
            &app,
            String::new(),
            body.username,
            None,
            false,
            &body.params,
        )?;
        again.apply(&mut params);
        params
            .build(&app.config, || app.username.clone())
            .map_err(|e| ApiError::bad_field(e.field.pointer(), e.message))?
    } else {
        turn_request(
            &app,
            body.message,
            body.username,
            newest,
            body.new_conversation,
            &body.params,
        )?
    };
    // No index here: the file chunks are those the browser's own folder
    // index retrieved (the ingestion page), checked, then assembled like a
    // local server's.
    let chunks = crate::setup::client_chunks(body.chunks)?;
    crate::setup::set_up_stateless(&app, &provider, &mut req, chunks).await;
    let state = StatelessTurn {
        app: app.clone(),
        state: Arc::new(state),
    };
    let name = provider.name().to_owned();
    crate::turn::respond(&name, true, |cancel, sink| {
        crate::turn::run(state, provider, req, cancel, sink)
    })
    .await
}

/// Most journal records `POST /api/stateless/memory/undo` takes (one per
/// exchange that changed memory).
pub const MAX_JOURNAL_RECORDS: usize = 10_000;

/// `POST /api/stateless/memory/undo`: the engine's undo (as `wo memory
/// undo` runs it) on the journal and truth entries the client sent; the
/// answer lists the changes for the client to apply to its own state.
pub async fn memory_undo(
    State(app): State<Arc<Stateless>>,
    JsonBody(body): JsonBody<wo_wire::api::StatelessMemoryUndo>,
) -> Result<axum::Json<wo_wire::api::StatelessMemoryUndone>, ApiError> {
    use wo_engine::memory::{LOG_KEY, undo};
    // The chat's caps: the work is linear in what is sent, and this bounds it.
    if body.truth.len() > app.limits.truth_entries {
        return Err(ApiError::bad_field(
            "/truth",
            format!("more than {} entries", app.limits.truth_entries),
        ));
    }
    if body.memory_log.len() > MAX_JOURNAL_RECORDS {
        return Err(ApiError::bad_field(
            "/memory_log",
            format!("more than {MAX_JOURNAL_RECORDS} records"),
        ));
    }
    let out = app
        .cpu(move || {
            let mut state = state_from_parts(String::new(), body.truth, Vec::new(), "/window")?;
            state.extra.insert(
                LOG_KEY.to_owned(),
                wo_format::RawJson::from(Value::Array(body.memory_log)),
            );
            let before = state.truth.clone();
            let undone = undo(&mut state, &body.exchange, Timestamp::now())
                .map_err(|e| ApiError::bad_field("/exchange", e.reason))?;
            let trust =
                crate::turn::changed_records(&before.trust, &state.truth.trust, |e| e.id.as_str());
            let deleted =
                crate::turn::changed_records(&before.deleted, &state.truth.deleted, |d| {
                    d.id.as_str()
                });
            let memory_log = match state.extra.get(LOG_KEY).map(wo_format::RawJson::to_value) {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            };
            Ok::<_, ApiError>(wo_wire::api::StatelessMemoryUndone {
                undone: wo_wire::api::MemoryUndone {
                    exchange: body.exchange,
                    removed: undone.removed,
                    reopened: undone.reopened,
                    untouched: undone.untouched,
                    kept: undone.kept,
                },
                trust,
                deleted,
                memory_log,
            })
        })
        .await??;
    Ok(axum::Json(out))
}

/// Most `sources` a stopped turn may name (a turn sends far fewer).
const MAX_STOPPED_SOURCES: usize = 1000;

/// `POST /api/stateless/stopped`: the patch that keeps a turn its reader
/// stopped — Stop, or the tab closed mid-answer — which the client keeps
/// itself, since the turn's own `state_patch` never reached it. The two
/// messages are the engine's ([`wo_engine::chat::stopped_turn`]): the
/// question as a turn stores it, the answer so far (possibly empty)
/// marked `usage.truncated = {"reason": "stopped"}`, as the local server
/// keeps a stopped turn. Nothing is written anywhere.
pub async fn stopped(
    State(app): State<Arc<Stateless>>,
    JsonBody(body): JsonBody<wo_wire::api::StatelessStopped>,
) -> Result<axum::Json<wo_wire::api::StatelessKept>, ApiError> {
    let provider = app
        .provider(body.turn.params.provider.as_deref())
        .await
        .map_err(|e| e.within("/turn"))?;
    if let Some(parent) = body.turn.parent.as_deref()
        && !wo_format::validate::is_valid_id(parent)
    {
        return Err(ApiError::bad_field(
            "/turn/parent",
            format!("{parent:?} is not a message id"),
        ));
    }
    let sent_at = Timestamp::parse(&body.sent_at).map_err(|e| {
        ApiError::bad_field(
            "/sent_at",
            format!("{:?} is not a timestamp: {e}", body.sent_at),
        )
    })?;
    let cap = provider.answer_limits().max_bytes;
    if body.answer.len() > cap {
        return Err(ApiError::bad_field(
            "/answer",
            format!("longer than this provider's answers ({cap} bytes)"),
        ));
    }
    if body.sources.len() > MAX_STOPPED_SOURCES {
        return Err(ApiError::bad_field(
            "/sources",
            format!("more than {MAX_STOPPED_SOURCES} sources"),
        ));
    }
    if let Some(i) = body
        .sources
        .iter()
        .position(|id| !wo_format::validate::is_valid_id(id))
    {
        return Err(ApiError::bad_field(
            format!("/sources/{i}"),
            format!("{:?} is not an id", body.sources[i]),
        ));
    }
    // The same checks as the turn itself: message size, provider and model
    // allowed here, `parent` and `new_conversation` not both.
    let req =
        crate::setup::chat_turn_request(&app, body.turn, None).map_err(|e| e.within("/turn"))?;
    let context_used = body
        .context_used
        .map(serde_json::from_value::<wo_format::ContextUsed>)
        .transpose()
        .map_err(|e| ApiError::bad_field("/context_used", format!("not a context record: {e}")))?;
    let (answer, sources) = (body.answer, body.sources);
    let kept = app
        .cpu(move || {
            let mut state = wo_format::State::new(Timestamp::now());
            let turn = wo_engine::chat::stopped_turn(
                &state,
                provider.as_ref(),
                &req,
                sent_at,
                (sources, context_used),
                answer,
            );
            let (user_id, assistant_id) = wo_engine::turn::apply_turn(&mut state, &turn);
            let state_patch = crate::turn::turn_patch(&state, &user_id, &assistant_id, &[]);
            wo_wire::api::StatelessKept {
                user_message_id: user_id,
                assistant_message_id: assistant_id,
                state_patch,
            }
        })
        .await?;
    Ok(axum::Json(kept))
}

//! Stateless mode's turn (product §6): the browser sends what the turn needs,
//! the server builds a throwaway state from it, streams the answer and ends
//! with a `state_patch` the browser applies to its own `llm.json`. Nothing
//! is written anywhere and no message content is logged.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde_json::{Value, json};
use wo_engine::chat::completed_turn;
use wo_engine::turn::apply_turn;
use wo_format::xhtml::sanitize_html;
use wo_format::{Message, Timestamp, TruthEntry};
use wo_wire::StatelessChatRequest;

use crate::api::turn_request;
use crate::app::Stateless;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::sse;

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
    for (i, raw) in truth.into_iter().enumerate() {
        let mut entry: TruthEntry = serde_json::from_value(raw)
            .map_err(|e| ApiError::bad_field(format!("/truth/{i}"), e.to_string()))?;
        if !(0.0..=1.0).contains(&entry.certainty) {
            return Err(ApiError::bad_field(
                format!("/truth/{i}/certainty"),
                "must be between 0 and 1",
            ));
        }
        entry.content = sanitize_html(&entry.content);
        if entry.id.is_empty() {
            entry.id =
                wo_format::ids::truth_id(&entry.title, entry.timestamp.as_str(), &entry.content);
        }
        state.add_truth(entry);
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
    let provider = app.provider(body.params.provider.as_deref()).await?;
    let (context, truth, window) = (body.context, to_values(body.truth), to_values(body.window));
    // Sanitising what the client sent is CPU-heavy: off the async workers.
    let state = app
        .cpu(move || state_from_parts(context, truth, window, "/window"))
        .await??;
    // The window is the branch up to the new message: its newest message is
    // the parent.
    let parent = state.messages().last().map(|m| m.id.clone());
    let mut req = turn_request(&app, body.message, body.username, parent, &body.params)?;
    req.chunks = Vec::new();
    let sent_at = Timestamp::now();
    let (state, mut assembled) = {
        let (provider, req) = (provider.clone(), req.clone());
        app.cpu(move || {
            let assembled = wo_engine::chat::prepare(&state, provider.as_ref(), &req)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            Ok::<_, ApiError>((state, assembled))
        })
        .await??
    };
    let state = Arc::new(state);
    if let Some(policy) = &req.url_fetch {
        let links = wo_engine::chat::links_to_fetch(&state, &assembled);
        if !links.is_empty() {
            let fetched = wo_engine::chat::fetch_links(links, policy).await;
            let (provider, req, state) = (provider.clone(), req.clone(), state.clone());
            assembled = app
                .cpu(move || {
                    wo_engine::chat::prepare_with_links(&state, provider.as_ref(), &req, fetched)
                        .map_err(|e| ApiError::bad_request(e.to_string()))
                })
                .await??;
        }
    }

    let (resp, sink, cancel) = sse::channel();
    tokio::spawn(async move {
        let Some(streamed) =
            sse::stream_turn(&sink, provider.as_ref(), &assembled, &req, cancel).await
        else {
            return;
        };
        // The answer becomes XHTML here: a hostile upstream can send
        // anything, so off the async workers too.
        let sources = assembled.sources.clone();
        let finished = {
            let (provider, streamed) = (provider.clone(), streamed.clone());
            app.cpu(move || {
                let mut state = Arc::try_unwrap(state).unwrap_or_else(|s| (*s).clone());
                let turn = completed_turn(
                    &state,
                    provider.as_ref(),
                    &req,
                    sent_at,
                    sources.clone(),
                    &streamed,
                );
                let (user_id, assistant_id) = apply_turn(&mut state, &turn);
                let patch = turn_patch(&state, &user_id, &assistant_id, &sources);
                ((user_id, assistant_id), patch, turn.model)
            })
            .await
        };
        match finished {
            Ok((ids, state_patch, model)) => sink.event(&sse::done_event(
                ids,
                assembled.sources,
                state_patch,
                &streamed,
                provider.name(),
                model,
            )),
            Err(e) => sink.error(e.message, Some("server".into())),
        }
    });
    Ok(resp)
}

/// The patch that brings the client's state up to date after a turn: the
/// new `date`, the two messages, and the `refs` of the truth entries used
/// (see `wo_wire::apply_state_patch` for how arrays of records apply).
fn turn_patch(
    state: &wo_format::State,
    user_id: &str,
    assistant_id: &str,
    sources: &[String],
) -> Value {
    let messages: Vec<Value> = [user_id, assistant_id]
        .iter()
        .filter_map(|id| state.message(id))
        .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
        .collect();
    let refs: Vec<Value> = state
        .truth
        .trust
        .iter()
        .filter(|t| sources.contains(&t.id))
        .map(|t| json!({"id": t.id, "refs": t.refs}))
        .collect();
    let mut patch = json!({"date": Timestamp::now(), "messages": messages});
    if !refs.is_empty() {
        patch["truth"] = json!({"trust": refs});
    }
    patch
}

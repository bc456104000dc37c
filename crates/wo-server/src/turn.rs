//! The server's two faces of the engine's one turn
//! ([`wo_engine::chat::run_turn`]): how each mode reads and commits state
//! ([`LocalTurn`]: the shared store, locked only inside short closures;
//! [`StatelessTurn`]: the client's throwaway state, whose commit yields the
//! `state_patch`), and the sink that turns the turn's events into an SSE
//! response ([`respond`]; the OpenAI face's sink is
//! [`crate::openai::ChunkSink`], started by [`respond_with`]). No turn
//! sequencing lives here.

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use wo_engine::chat::{
    Committed, TurnError, TurnEvent, TurnRequest, TurnSink, TurnState, run_turn,
};
use wo_engine::memory::{OpsError, Record};
use wo_engine::turn::{CompletedTurn, apply_turn};
use wo_format::{State, Timestamp};
use wo_providers::Provider;

use crate::app::{Local, Stateless};
use crate::error::ApiError;
use crate::sse;

/// The `context` event: what the prompt included and dropped, and why.
pub fn context_report(
    a: &wo_engine::Assembled,
) -> wo_wire::ContextReport<&wo_engine::assemble::Included, &wo_engine::assemble::Dropped> {
    wo_wire::ContextReport {
        tokens: a.tokens,
        budget: a.budget,
        sources: a.sources.clone(),
        included: a.included.iter().collect(),
        dropped: a.dropped.iter().collect(),
        context_used: serde_json::to_value(wo_engine::explain::context_used(a)).unwrap_or_default(),
    }
}

/// An [`ApiError`] carried through the engine's [`TurnError::State`], with
/// the `error` event kind to report it under once the stream has begun.
#[derive(Debug)]
struct Refused {
    error: ApiError,
    stream_kind: &'static str,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error.message)
    }
}

impl std::error::Error for Refused {}

fn refused(error: ApiError, stream_kind: &'static str) -> TurnError {
    TurnError::State(Box::new(Refused { error, stream_kind }))
}

/// Local mode: the one store, behind the app's lock. Each read and the
/// commit lock it on a blocking thread for as long as their closure runs;
/// nothing holds it while the model answers, so many chats run at once.
pub struct LocalTurn {
    /// The local server's shared state (the store behind its mutex).
    pub app: Arc<Local>,
}

impl TurnState for LocalTurn {
    async fn read<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&State) -> Result<T, TurnError> + Send + 'static,
    ) -> Result<T, TurnError> {
        self.app
            .read(move |state| Ok(f(state)))
            .await
            .map_err(|e| refused(e, "storage"))?
    }

    async fn read_indexed<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&State, Option<&wo_engine::RecallIndex>) -> Result<T, TurnError> + Send + 'static,
    ) -> Result<T, TurnError> {
        self.app
            .read_indexed(move |state, index| Ok(f(state, Some(index))))
            .await
            .map_err(|e| refused(e, "storage"))?
    }

    async fn commit(
        &mut self,
        record: impl FnOnce(&State) -> CompletedTurn + Send + 'static,
    ) -> Result<Committed, TurnError> {
        // Grouped: turns finishing together share one durable write; each
        // is acknowledged (`done`) only after that write's fsync.
        let embed = self.app.dense().is_some();
        let (committed, new) = self
            .app
            .commit_grouped(move |state| {
                let turn = record(state);
                let (user_id, assistant_id) = apply_turn(state, &turn);
                // The two messages, for recall by meaning (appended: last).
                let new: Vec<wo_format::Message> = if embed {
                    state
                        .messages()
                        .iter()
                        .rev()
                        .take(64)
                        .filter(|m| m.id == user_id || m.id == assistant_id)
                        .cloned()
                        .collect()
                } else {
                    Vec::new()
                };
                (Committed::kept(user_id, assistant_id), new)
            })
            .await
            .map_err(|e| refused(e, "storage"))?;
        // Embedded after the turn is saved, off the answer's path; until
        // then recall finds them by words.
        if let Some(dense) = self.app.dense().cloned()
            && !new.is_empty()
        {
            tokio::task::spawn_blocking(move || {
                let _ = dense.top_up(dense.pending_new(&new), None);
            });
        }
        Ok(committed)
    }

    async fn remember(
        &mut self,
        apply: impl FnOnce(&mut State) -> Result<Record, OpsError> + Send + 'static,
    ) -> Result<(Result<Record, OpsError>, Value), TurnError> {
        self.app
            .commit_grouped(move |state| (apply(state), Value::Null))
            .await
            .map_err(|e| refused(e, "storage"))
    }
}

/// Stateless mode: the state built from what the client sent. Reads and
/// the commit run off the async workers ([`crate::app::App::cpu`]): a hostile upstream
/// or client can send anything, and sanitising it is CPU work.
pub struct StatelessTurn {
    /// The stateless server's shared state (providers, caps, the CPU pool).
    pub app: Arc<Stateless>,
    /// The throwaway state built from the request; a commit changes it (for
    /// the memory step that follows) and yields the client's patch.
    pub state: Arc<State>,
}

impl TurnState for StatelessTurn {
    async fn read<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&State) -> Result<T, TurnError> + Send + 'static,
    ) -> Result<T, TurnError> {
        let state = self.state.clone();
        self.app
            .cpu(move || f(&state))
            .await
            .map_err(|e| refused(e, "server"))?
    }

    async fn commit(
        &mut self,
        record: impl FnOnce(&State) -> CompletedTurn + Send + 'static,
    ) -> Result<Committed, TurnError> {
        let state = std::mem::replace(&mut self.state, Arc::new(State::new(Timestamp::now())));
        let (committed, state) = self
            .app
            .cpu(move || {
                let mut state = Arc::try_unwrap(state).unwrap_or_else(|s| (*s).clone());
                let turn = record(&state);
                let before = state.truth.trust.clone();
                let (user_id, assistant_id) = apply_turn(&mut state, &turn);
                let state_patch = turn_patch(&state, &user_id, &assistant_id, &before);
                let committed = Committed {
                    user_id,
                    assistant_id,
                    state_patch,
                };
                (committed, state)
            })
            .await
            .map_err(|e| refused(e, "server"))?;
        // Kept for the memory step, which reads and changes it next.
        self.state = Arc::new(state);
        Ok(committed)
    }

    async fn remember(
        &mut self,
        apply: impl FnOnce(&mut State) -> Result<Record, OpsError> + Send + 'static,
    ) -> Result<(Result<Record, OpsError>, Value), TurnError> {
        let state = std::mem::replace(&mut self.state, Arc::new(State::new(Timestamp::now())));
        let (applied, state) = self
            .app
            .cpu(move || {
                let mut state = Arc::try_unwrap(state).unwrap_or_else(|s| (*s).clone());
                let before = state.truth.trust.clone();
                let applied = apply(&mut state).map(|record| {
                    let patch = memory_patch(&before, &state);
                    (record, patch)
                });
                (applied, state)
            })
            .await
            .map_err(|e| refused(e, "server"))?;
        self.state = Arc::new(state);
        Ok(match applied {
            Ok((record, patch)) => (Ok(record), patch),
            Err(e) => (Err(e), Value::Null),
        })
    }
}

/// The patch that brings the client's truth up to date after the memory
/// step: every entry created or changed (superseded, resolved, touched), in
/// full. The journal record travels beside it in the `memory` event (the
/// client appends it to its `memory_log`: a merge patch would replace the
/// whole journal, and the client did not send it).
fn memory_patch(before: &[wo_format::TruthEntry], state: &State) -> Value {
    let changed = changed_records(before, &state.truth.trust, |e| e.id.as_str());
    if changed.is_empty() {
        return Value::Null;
    }
    json!({"date": Timestamp::now(), "truth": {"trust": changed}})
}

/// The records of `after` that are new or differ from their `before`
/// version (matched by `id`), as JSON. Linear: `before` comes from a client
/// and may be large, so each record is compared with its own old version
/// only, never with every other record.
pub(crate) fn changed_records<T: PartialEq + serde::Serialize>(
    before: &[T],
    after: &[T],
    id: impl Fn(&T) -> &str,
) -> Vec<Value> {
    let old: std::collections::HashMap<&str, &T> = before.iter().map(|r| (id(r), r)).collect();
    after
        .iter()
        .filter(|r| old.get(id(r)).is_none_or(|o| *o != *r))
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect()
}

/// The patch that brings the client's state up to date after a turn: the
/// new `date`, the two messages, and the truth entries the turn changed
/// (`before`: the truth it started from) — those used (`refs`, `used`) and
/// those it archived — in full (see `wo_wire::apply_state_patch` for how
/// arrays of records apply).
pub(crate) fn turn_patch(
    state: &State,
    user_id: &str,
    assistant_id: &str,
    before: &[wo_format::TruthEntry],
) -> Value {
    let messages: Vec<Value> = [user_id, assistant_id]
        .iter()
        .filter_map(|id| state.message(id))
        .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
        .collect();
    let refs = changed_records(before, &state.truth.trust, |e| e.id.as_str());
    let mut patch = json!({"date": Timestamp::now(), "messages": messages});
    if !refs.is_empty() {
        patch["truth"] = json!({"trust": refs});
    }
    patch
}

/// The HTTP error for a turn that failed before its stream began.
pub fn early_error(e: &TurnError) -> ApiError {
    match e {
        TurnError::Field(f) => ApiError::bad_field(f.field.pointer(), f.message.clone()),
        TurnError::State(inner) => match inner.downcast_ref::<Refused>() {
            Some(r) => r.error.clone(),
            None => ApiError::internal(e.to_string()),
        },
        TurnError::Store(_) | TurnError::Assemble(_) => ApiError::bad_request(e.to_string()),
        _ => ApiError::internal(e.to_string()),
    }
}

/// How a sink tells [`respond_with`] that its stream has begun (`Ok`: answer
/// with the stream) or that the turn failed before (`Err`: answer with this
/// HTTP error instead).
pub type Started = oneshot::Sender<Result<(), ApiError>>;

/// The SSE face of a turn. Until the prompt is assembled the handler waits
/// on `started`: a failure before then is an ordinary HTTP error; after
/// it, an `error` event.
pub struct SseSink {
    events: sse::EventSink,
    started: Option<Started>,
    provider: String,
    /// A hosted server's anonymous client: errors go out without URLs
    /// (`crate::error::scrub_urls`), the log keeps them.
    hosted: bool,
}

impl TurnSink for SseSink {
    fn event(&mut self, event: TurnEvent<'_>) {
        match event {
            TurnEvent::Assembled(a) => {
                if let Some(started) = self.started.take() {
                    let _ = started.send(Ok(()));
                }
                self.events
                    .named(wo_wire::EVENT_CONTEXT, &context_report(a));
            }
            TurnEvent::Delta(text) => self.events.delta(text),
            TurnEvent::Done(outcome) => self
                .events
                .event(&sse::done_event(outcome, self.provider.clone())),
            TurnEvent::Remembered(remembered) => self
                .events
                .named(wo_wire::EVENT_MEMORY, &sse::memory_event(remembered)),
            TurnEvent::Failed(e) => match self.started.take() {
                Some(started) => {
                    let _ = started.send(Err(early_error(e)));
                }
                None => {
                    let (message, kind) = match e {
                        TurnError::State(inner) => match inner.downcast_ref::<Refused>() {
                            Some(r) => (r.error.message.clone(), Some(r.stream_kind.to_owned())),
                            None => (e.to_string(), sse::error_kind(e)),
                        },
                        _ => (e.to_string(), sse::error_kind(e)),
                    };
                    let message = if self.hosted {
                        match crate::error::scrub_urls(&message) {
                            std::borrow::Cow::Owned(clean) => {
                                eprintln!("wo serve: a turn failed: {message}");
                                clean
                            }
                            std::borrow::Cow::Borrowed(_) => message,
                        }
                    } else {
                        message
                    };
                    self.events.error(message, kind);
                }
            },
        }
    }
}

/// Runs a turn (`run`: the engine's [`run_turn`] with this mode's
/// [`TurnState`], given the cancellation token and the sink) and answers
/// with its SSE stream once the prompt is assembled, or with the HTTP error
/// that stopped it before. The handler drives the turn itself until then
/// (no task hop before the headers, as when it assembled the prompt
/// itself); the rest runs in its own task, which the client going away
/// does not end: it fires the token, and the turn commits what its
/// request's `keep_partial` says (the stopped exchange, or nothing).
///
/// `run` is a closure rather than a generic state so that the future's
/// type is concrete at the call site, where it is known to be `Send`.
pub async fn respond<F, Fut>(provider: &str, hosted: bool, run: F) -> Result<Response, ApiError>
where
    F: FnOnce(wo_providers::Cancel, SseSink) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    respond_with(
        |events, started| SseSink {
            events,
            started: Some(started),
            provider: provider.to_owned(),
            hosted,
        },
        run,
    )
    .await
}

/// [`respond`] with any sink: `sink` builds it from the stream's frames and
/// the [`Started`] signal it must send once (when the stream begins, or
/// with the error that ended the turn before).
pub async fn respond_with<S, F, Fut>(
    sink: impl FnOnce(sse::EventSink, Started) -> S,
    run: F,
) -> Result<Response, ApiError>
where
    F: FnOnce(wo_providers::Cancel, S) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (resp, events, cancel) = sse::channel();
    let (started, began) = oneshot::channel();
    let turn = Box::pin(run(cancel, sink(events, started)));
    match futures::future::select(began, turn).await {
        futures::future::Either::Left((began, rest)) => {
            tokio::spawn(rest);
            match began {
                Ok(Ok(())) => Ok(resp),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(ApiError::internal("the turn ended before it began")),
            }
        }
        // The turn ended before the select saw it begin: it sent its
        // outcome on `started` all the same.
        futures::future::Either::Right(((), mut began)) => match began.try_recv() {
            Ok(Ok(())) => Ok(resp),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ApiError::internal("the turn ended before it began")),
        },
    }
}

/// [`run_turn`] for [`respond`]: the outcome went to the sink.
pub async fn run(
    state: impl TurnState,
    provider: Arc<dyn Provider>,
    req: TurnRequest,
    cancel: wo_providers::Cancel,
    sink: impl TurnSink + Send,
) {
    let _ = run_turn(state, provider, req, cancel, sink).await;
}

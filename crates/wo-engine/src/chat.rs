//! One chat turn end to end (product §2, §4). [`run_turn`] is the only code
//! that sequences a turn — assemble, fetch the links of the truth sent,
//! assemble again, stream the answer, commit the exchange — for every face:
//! `wo ask`, `wo chat`, the local server and the stateless server.
//!
//! A face differs from another in two things only, each a trait (ripgrep's
//! `Searcher`/`Sink` split is the model):
//!
//! * [`TurnState`]: how the state is read and the exchange committed. The
//!   CLI holds its [`Store`] for the whole turn ([`StoreTurn`]); the local
//!   server locks its shared store only inside short closures, never while
//!   the model answers; the stateless server reads a throwaway state and
//!   its commit yields the patch the browser applies.
//! * [`TurnSink`]: where the turn's events go (the assembled context, each
//!   delta, the committed outcome, a failure): a terminal, or SSE frames.
//!
//! A provider failure, an empty answer or a cancellation commits nothing
//! (product §2: provider errors are never saved as messages) — except a
//! cancellation of a request with [`TurnRequest::keep_partial`]: the
//! question and the answer as far as it got (possibly nothing yet) are
//! kept, the answer marked incomplete.

use std::sync::Arc;

use crate::window::{Unanswered, refused_as_too_long};
use futures::StreamExt;
use wo_format::{Role, State, Timestamp};
use wo_providers::{
    Cancel as CancellationToken, ChatMessage, ChatRequest, Provider, ProviderError, StreamEvent,
};
use wo_store::{Store, StoreError};

use crate::assemble::{
    Assembled, AssemblyOptions, ChunkCandidate, assemble_indexed, estimate_tokens,
};
use crate::memory::{Exchange, OpsError, Origin, Record};
use crate::recall::RecallIndex;
pub use crate::request::{
    DEFAULT_ANSWER_RESERVE, MemoryStep, STOPPED, TurnRequest, configured_models,
};
use crate::turn::{CompletedTurn, apply_turn};

/// What the memory step made of an exchange: the operations recorded, or
/// why nothing was (the turn itself is committed either way).
#[derive(Clone, Debug)]
pub struct Remembered {
    /// The exchange (its answer's message id).
    pub exchange: String,
    /// The journal record, or why nothing was remembered (a rejected or
    /// failed call, operations that no longer applied).
    pub result: Result<crate::memory::Record, String>,
    /// What a client holding its own state applies (stateless: the truth
    /// entries created or changed); `Null` where the state is kept here.
    pub state_patch: serde_json::Value,
}

/// Links fetched per turn at most: each costs a round trip before the answer.
pub const MAX_FETCHED_LINKS: usize = 3;

/// Progress reported while a turn runs, in this order: `Assembled` once,
/// `Delta` for each piece of the answer, then `Done` (after the commit) or
/// `Failed` (at any point; nothing was committed, or the commit failed).
pub enum TurnEvent<'a> {
    /// The prompt was built: what is sent and what was dropped.
    Assembled(&'a Assembled),
    /// A piece of the answer.
    Delta(&'a str),
    /// The exchange was committed.
    Done(&'a TurnOutcome),
    /// After `Done`, when the turn has a [`MemoryStep`]: what it remembered.
    Remembered(&'a Remembered),
    /// The turn failed; [`run_turn`] returns the same error.
    Failed(&'a TurnError),
}

/// Where a turn's events go (a terminal, an SSE stream). Each face is one.
pub trait TurnSink {
    /// Takes one event; called in the order [`TurnEvent`] describes, from the
    /// task running the turn. It cannot fail: a sink whose reader went away
    /// (a closed stream) drops what follows, and the caller cancels the turn.
    fn event(&mut self, event: TurnEvent<'_>);
}

/// A closure as a [`TurnSink`] (as ripgrep's `sinks::UTF8` wraps one).
pub struct FnSink<F>(F);

impl<F: FnMut(TurnEvent<'_>)> FnSink<F> {
    /// Wraps `f` (the bound here makes a closure take events of any lifetime).
    pub fn new(f: F) -> Self {
        FnSink(f)
    }
}

impl<F: FnMut(TurnEvent<'_>)> TurnSink for FnSink<F> {
    fn event(&mut self, event: TurnEvent<'_>) {
        (self.0)(event)
    }
}

impl<S: TurnSink + ?Sized> TurnSink for &mut S {
    fn event(&mut self, event: TurnEvent<'_>) {
        (**self).event(event)
    }
}

/// What a commit appended.
#[derive(Clone, Debug, Default)]
pub struct Committed {
    /// The id of the user message appended.
    pub user_id: String,
    /// The id of the assistant message appended (the exchange's id).
    pub assistant_id: String,
    /// What a client holding its own state applies to it (the stateless
    /// server's `state_patch`); `Null` where the state is kept here.
    pub state_patch: serde_json::Value,
}

impl Committed {
    /// An exchange committed to state kept here (no patch for a client).
    pub fn kept(user_id: String, assistant_id: String) -> Self {
        Committed {
            user_id,
            assistant_id,
            state_patch: serde_json::Value::Null,
        }
    }
}

/// How a turn reads its state and commits its exchange.
///
/// Implementations hold any lock only while a closure they were given
/// runs: [`run_turn`] never holds state access across the model's answer.
///
/// The returned futures are declared `Send` so that a server can spawn a
/// turn whatever its state type.
pub trait TurnState: Send {
    /// Runs `f` on the current state (to assemble the prompt, find links).
    fn read<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&State) -> Result<T, TurnError> + Send + 'static,
    ) -> impl Future<Output = Result<T, TurnError>> + Send;

    /// Runs `f` on the current state and the recall index kept beside it,
    /// if this face keeps one (the local server: brought up to date with
    /// the state first, see [`crate::recall::RecallIndex::sync`]); by
    /// default there is none, and recall scans the transcript. The prompt
    /// is the same either way.
    fn read_indexed<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&State, Option<&RecallIndex>) -> Result<T, TurnError> + Send + 'static,
    ) -> impl Future<Output = Result<T, TurnError>> + Send {
        self.read(move |state| f(state, None))
    }

    /// Runs while the model answers; by default just awaits `answering`.
    /// The CLI's store uses the time to serialise its messages.
    fn while_answering<T>(
        &mut self,
        answering: impl Future<Output = T> + Send,
    ) -> impl Future<Output = T> + Send {
        answering
    }

    /// Appends the exchange `record` builds from the state it is appended
    /// to (whose latest message is the default parent), atomically.
    fn commit(
        &mut self,
        record: impl FnOnce(&State) -> CompletedTurn + Send + 'static,
    ) -> impl Future<Output = Result<Committed, TurnError>> + Send;

    /// Applies the memory step's operations (`apply` is all or nothing),
    /// atomically, after [`TurnState::commit`]; returns `apply`'s result and
    /// the patch a client holding its own state applies (else `Null`).
    fn remember(
        &mut self,
        apply: impl FnOnce(&mut State) -> Result<Record, OpsError> + Send + 'static,
    ) -> impl Future<Output = Result<(Result<Record, OpsError>, serde_json::Value), TurnError>> + Send;
}

/// A finished, committed turn.
#[derive(Clone, Debug)]
pub struct TurnOutcome {
    /// The id of the user message appended.
    pub user_id: String,
    /// The id of the assistant message appended (the exchange's id).
    pub assistant_id: String,
    /// See [`Committed::state_patch`].
    pub state_patch: serde_json::Value,
    /// The answer as the model streamed it (Markdown); the message stores it
    /// as XHTML.
    pub answer: String,
    /// Why the model stopped (`stop`, `length`, …) when the provider said.
    pub finish_reason: Option<String>,
    /// Token counts the provider reported, if any.
    pub usage: Option<wo_format::Usage>,
    /// The answer's `sources` (see [`Assembled::sources`]).
    pub sources: Vec<String>,
    /// The model that answered, as recorded on the answer.
    pub model: String,
    /// What the memory step did, when the turn had one.
    pub memory: Option<Remembered>,
    /// True in the `Done` event when a memory step follows it (a
    /// `Remembered` event will come): a face can say "remembering…".
    pub memory_follows: bool,
    /// The window the prompt was fitted to, in tokens, when the server
    /// refused one sized to the provider's `context_window` as longer than
    /// the model holds (the setting is larger than the server's): a face
    /// says so and names the setting.
    pub fitted_to_window: Option<usize>,
}

impl TurnOutcome {
    /// The answer was stopped by its reader and kept as far as it got
    /// ([`TurnRequest::keep_partial`]).
    pub fn stopped(&self) -> bool {
        self.finish_reason.as_deref() == Some(STOPPED)
    }
}

/// Why a turn failed. Nothing was appended in any case.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The prompt could not be built (e.g. the window is too small for the
    /// instructions and the question).
    #[error("{0}")]
    Assemble(String),
    /// An input named something that is not there (the parent message).
    #[error(transparent)]
    Field(#[from] crate::request::FieldError),
    /// A [`TurnState`] other than the store could not read or commit; the
    /// face that made it knows the concrete error.
    #[error(transparent)]
    State(Box<dyn std::error::Error + Send + Sync>),
    /// The provider failed or was cancelled.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(
        "the model returned an empty answer; nothing was saved\nhint: try again, or raise --max-tokens; a server that holds fewer tokens than were sent (llama.cpp's default window is 2,048) answers nothing: set context_window in its provider's settings to its size; and llama-cpp-python's server ends an answer empty when another request to it starts (another tool using the same server)"
    )]
    /// The answer was empty: nothing worth saving.
    EmptyAnswer,
    /// The store could not read or commit (its error names the file).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl TurnError {
    /// Exit code (product §2): 1 for provider and usage errors, 2 when the
    /// state could not be written.
    pub fn exit_code(&self) -> u8 {
        match self {
            TurnError::Store(e) => e.exit_code(),
            _ => 1,
        }
    }
}

/// Builds the prompt for `req` against the state. This and the other steps
/// below are private: [`run_turn`] is the only code that sequences them.
///
/// `window` is the model's context window when the server said it is
/// smaller than the provider's setting; else the setting is used.
fn prepare(
    state: &State,
    index: Option<&RecallIndex>,
    provider: &dyn Provider,
    req: &TurnRequest,
    window: Option<usize>,
) -> Result<Assembled, TurnError> {
    let reserve = req.max_tokens.unwrap_or(DEFAULT_ANSWER_RESERVE) as usize;
    let window = window.unwrap_or_else(|| provider.context_window());
    let mut opts = AssemblyOptions::new(state, window, reserve);
    opts.system = req.system.clone();
    opts.leaf = req.parent.clone();
    opts.conversation = req.conversation.clone();
    opts.new_conversation = req.new_conversation;
    opts.rag = !req.no_rag;
    if let Some(n) = req.recall_tokens {
        opts.recall_tokens = n;
    }
    opts.known_models = req.known_models.clone();
    opts.dense = req.dense.clone();
    opts.known_models.push(provider.default_model().to_owned());
    opts.known_models.extend(req.model.clone());
    if let Some(n) = req.max_entries {
        opts.prefs.max_entries = n;
    }
    if let Some(c) = req.min_certainty {
        opts.prefs.min_certainty = c;
    }
    let count = |text: &str| {
        provider
            .count_tokens(text)
            .unwrap_or_else(|| estimate_tokens(text))
    };
    assemble_indexed(state, index, &req.prompt, &opts, &count, &req.chunks)
        .map_err(|e| TurnError::Assemble(e.0))
}

/// The provider request for an assembled prompt.
fn chat_request(assembled: &Assembled, req: &TurnRequest) -> ChatRequest {
    let mut messages = vec![ChatMessage::system(assembled.system.clone())];
    for (role, text) in &assembled.turns {
        messages.push(match role {
            Role::Assistant => ChatMessage::assistant(text.clone()),
            _ => ChatMessage::user(text.clone()),
        });
    }
    ChatRequest {
        model: req.model.clone(),
        messages,
        temperature: req.temperature,
        max_tokens: req.max_tokens,
        top_k: None,
        json_schema: None,
    }
}

/// What the `url_fetch` tool fetched for one turn.
#[derive(Default)]
struct FetchedLinks {
    /// Pages fetched, as extra sources for the second assembly.
    pub pages: Vec<ChunkCandidate>,
    /// Links refused or failed, with the reason.
    pub failures: Vec<(String, String)>,
    /// Links beyond [`MAX_FETCHED_LINKS`].
    pub skipped: Vec<String>,
}

/// The links written in the question, then those in the truth entries a
/// first assembly selected, in order: both under the same `url_fetch`
/// policy and the same [`MAX_FETCHED_LINKS`].
fn links_to_fetch(state: &State, first: &Assembled, prompt: &str) -> Vec<String> {
    let mut links: Vec<String> = wo_fetch::links_in_text(prompt);
    for id in &first.sources {
        if let Some(entry) = state.truth_entry(id) {
            for link in wo_fetch::links_in_xhtml(&entry.content) {
                if !links.contains(&link) {
                    links.push(link);
                }
            }
        }
    }
    links
}

/// The `url_fetch` tool: fetches up to [`MAX_FETCHED_LINKS`] links (text
/// only, product §4's refusals enforced by `wo-fetch`). Holds no state, so a
/// server can run it without its lock.
async fn fetch_links(mut links: Vec<String>, policy: &wo_fetch::FetchPolicy) -> FetchedLinks {
    let skipped: Vec<String> = links.split_off(links.len().min(MAX_FETCHED_LINKS));
    let results =
        futures::future::join_all(links.iter().map(|url| wo_fetch::fetch_text(url, policy))).await;
    let mut out = FetchedLinks {
        skipped,
        ..FetchedLinks::default()
    };
    for (url, result) in links.iter().zip(results) {
        match result {
            Ok(page) => out.pages.push(ChunkCandidate {
                id: format!("url:{}", page.url),
                label: match &page.title {
                    Some(t) => format!("{} ({t})", page.url),
                    None => page.url.clone(),
                },
                text: if page.truncated {
                    format!("{} …", page.text)
                } else {
                    page.text
                },
            }),
            Err(e) => out.failures.push((url.clone(), e.to_string())),
        }
    }
    out
}

/// Assembles again with the fetched pages as extra sources; refused or
/// failed links are reported among the dropped parts, never silently
/// skipped.
fn prepare_with_links(
    state: &State,
    index: Option<&RecallIndex>,
    provider: &dyn Provider,
    req: &TurnRequest,
    fetched: FetchedLinks,
    window: Option<usize>,
) -> Result<Assembled, TurnError> {
    let mut req = req.clone();
    req.chunks.extend(fetched.pages);
    let mut assembled = prepare(state, index, provider, &req, window)?;
    for (url, reason) in fetched.failures {
        assembled.dropped.push(crate::assemble::Dropped {
            kind: crate::assemble::SourceKind::Chunk,
            id: Some(format!("url:{url}")),
            label: url,
            reason: format!("not fetched: {reason}"),
        });
    }
    for url in fetched.skipped {
        assembled.dropped.push(crate::assemble::Dropped {
            kind: crate::assemble::SourceKind::Chunk,
            id: Some(format!("url:{url}")),
            label: url,
            reason: format!("beyond {MAX_FETCHED_LINKS} links per turn"),
        });
    }
    Ok(assembled)
}

/// The answer as it streamed.
#[derive(Clone, Debug, Default)]
pub struct StreamedAnswer {
    /// Every delta joined, as the model wrote it.
    pub answer: String,
    /// Why the model stopped, when the provider said.
    pub finish_reason: Option<String>,
    /// Token counts the provider reported, if any.
    pub usage: Option<wo_format::Usage>,
}

/// Streams the answer to `request`, calling `on_delta` with each piece.
/// An empty answer is an error: nothing would be worth saving.
///
/// The provider's [`wo_providers::AnswerLimits`] bound the answer (issue
/// 11.9): past `max_bytes` of text, or `max_duration` after the request was
/// sent, reading stops (dropping the stream closes the connection), what
/// arrived is kept — cut at a character boundary — and the answer is
/// marked: `usage.truncated = {"reason": "size"|"time", "limit": N}`
/// ([`wo_providers::TRUNCATED_FIELD`]) and `finish_reason = "truncated"`.
/// A cap reached before any text arrived is a timeout error as usual.
pub async fn stream_answer(
    provider: &dyn Provider,
    request: ChatRequest,
    cancel: CancellationToken,
    on_delta: impl FnMut(&str),
) -> Result<StreamedAnswer, TurnError> {
    stream_answer_keeping(provider, request, cancel, false, on_delta).await
}

/// [`stream_answer`], and with `keep_partial` a cancellation ends the
/// answer instead of failing it: what arrived is kept — nothing at all if
/// it came before the first word, so that the question is still kept —
/// marked `usage.truncated = {"reason": "stopped"}` with finish reason
/// [`STOPPED`].
pub async fn stream_answer_keeping(
    provider: &dyn Provider,
    request: ChatRequest,
    cancel: CancellationToken,
    keep_partial: bool,
    mut on_delta: impl FnMut(&str),
) -> Result<StreamedAnswer, TurnError> {
    let limits = provider.answer_limits();
    let deadline = tokio::time::Instant::now() + limits.max_duration;
    let time_cap = || {
        TurnError::Provider(ProviderError::Timeout {
            provider: provider.name().to_owned(),
            // Not a URL: where the limit comes from, for the message.
            url: "the answer cap, max_answer_secs in config.toml".into(),
            phase: wo_providers::TimeoutPhase::FirstByte,
            after: limits.max_duration,
        })
    };
    let mut out = StreamedAnswer::default();
    let stopped =
        |e: &ProviderError| keep_partial && e.kind() == wo_providers::ErrorKind::Cancelled;
    let mut stream = match tokio::time::timeout_at(deadline, provider.stream(request, cancel))
        .await
        .map_err(|_| time_cap())?
    {
        Ok(stream) => stream,
        // Stopped before the request was even answered: the question is
        // kept all the same, with an empty answer marked stopped.
        Err(e) if stopped(&e) => return Ok(stopped_answer(out)),
        Err(e) => return Err(e.into()),
    };
    let mut truncated: Option<serde_json::Value> = None;
    loop {
        let event = match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(event)) => event,
            Ok(None) => break,
            Err(_elapsed) if out.answer.is_empty() => return Err(time_cap()),
            Err(_elapsed) => {
                truncated = Some(serde_json::json!({
                    "reason": "time",
                    "limit": limits.max_duration.as_secs(),
                }));
                break;
            }
        };
        let event = match event {
            Ok(event) => event,
            Err(e) if stopped(&e) => {
                truncated = Some(serde_json::json!({ "reason": STOPPED }));
                break;
            }
            Err(e) => return Err(e.into()),
        };
        match event {
            StreamEvent::Delta(text) => {
                let room = limits.max_bytes.saturating_sub(out.answer.len());
                if text.len() > room {
                    let mut cut = room;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    out.answer.push_str(&text[..cut]);
                    on_delta(&text[..cut]);
                    truncated = Some(serde_json::json!({
                        "reason": "size",
                        "limit": limits.max_bytes,
                    }));
                    break;
                }
                out.answer.push_str(&text);
                on_delta(&text);
            }
            StreamEvent::Done {
                finish_reason,
                usage,
            } => {
                out.finish_reason = finish_reason;
                out.usage = usage.map(|u| wo_format::Usage {
                    prompt_tokens: Some(u64::from(u.prompt_tokens)),
                    completion_tokens: Some(u64::from(u.completion_tokens)),
                    extra: Default::default(),
                });
                break;
            }
        }
    }
    // Stop reading now: the upstream may still be sending.
    drop(stream);
    let stopped = truncated
        .as_ref()
        .and_then(|mark| mark.get("reason"))
        .and_then(|r| r.as_str())
        == Some(STOPPED);
    if stopped {
        return Ok(stopped_answer(out));
    }
    if out.answer.trim().is_empty() {
        return Err(TurnError::EmptyAnswer);
    }
    if let Some(mark) = truncated {
        out.finish_reason = Some("truncated".into());
        out.usage
            .get_or_insert_with(Default::default)
            .extra
            .insert(wo_providers::TRUNCATED_FIELD.into(), mark.into());
    }
    Ok(out)
}

/// `out` as an answer stopped by its reader: kept as far as it got — even
/// empty, so that the question is never lost — with finish
/// reason [`STOPPED`] and `usage.truncated = {"reason": "stopped"}`.
fn stopped_answer(mut out: StreamedAnswer) -> StreamedAnswer {
    out.finish_reason = Some(STOPPED.into());
    out.usage.get_or_insert_with(Default::default).extra.insert(
        wo_providers::TRUNCATED_FIELD.into(),
        serde_json::json!({ "reason": STOPPED }).into(),
    );
    out
}

/// The model that answers `req` on `provider`.
pub fn model_for(provider: &dyn Provider, req: &TurnRequest) -> String {
    req.model
        .clone()
        .unwrap_or_else(|| provider.default_model().to_owned())
}

/// The record of a streamed turn, ready for [`apply_turn`]. `state` is the
/// state the turn is appended to (for the default parent: its latest
/// message). Converts the answer to XHTML here, so call it before
/// [`Store::transact`]: the transaction then only appends ready messages.
fn completed_turn(
    state: &State,
    provider: &dyn Provider,
    req: &TurnRequest,
    sent_at: Timestamp,
    (sources, context_used): (Vec<String>, Option<wo_format::ContextUsed>),
    streamed: &StreamedAnswer,
) -> CompletedTurn {
    CompletedTurn {
        username: req.username.clone(),
        prompt: req.prompt.clone(),
        answer: streamed.answer.clone(),
        answer_xhtml: crate::turn::answer_xhtml(&streamed.answer),
        sent_at,
        finished_at: Timestamp::now(),
        provider: provider.name().to_owned(),
        model: model_for(provider, req),
        usage: streamed.usage.clone(),
        sources,
        context_used,
        parent: if req.new_conversation {
            None
        } else {
            req.parent
                .clone()
                .or_else(|| state.messages().last().map(|m| m.id.clone()))
        },
        new_conversation: req.new_conversation,
        question: req.regenerate.clone(),
        archive_after_days: req.archive_after_days,
    }
}

/// The exchange a client keeps itself when its reader stopped the turn
/// (the stateless web client: Stop, or a tab closed mid-answer, so the
/// server's commit never reached it): the question as a turn stores it and
/// `answer` as far as it got — possibly empty —, marked as [`run_turn`]
/// marks a stopped answer ([`STOPPED`]). `state` gives the default parent,
/// as for a commit; `sent` is the turn's `sources` and context record, as
/// its `context` event told the client.
pub fn stopped_turn(
    state: &State,
    provider: &dyn Provider,
    req: &TurnRequest,
    sent_at: Timestamp,
    sent: (Vec<String>, Option<wo_format::ContextUsed>),
    answer: String,
) -> CompletedTurn {
    let streamed = stopped_answer(StreamedAnswer {
        answer,
        ..StreamedAnswer::default()
    });
    completed_turn(state, provider, req, sent_at, sent, &streamed)
}

/// Drives `streamed` to completion while another thread serialises the
/// state's messages, so the save after the answer only writes bytes (on a
/// 100k-message file that moves ~100 ms off the critical path). Needs the
/// multi-threaded runtime; on any other, the stream simply runs alone.
fn overlap_with_cache_warming<T>(
    store: &mut Store,
    streamed: impl std::future::Future<Output = T>,
) -> T {
    let handle = tokio::runtime::Handle::current();
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return futures::executor::block_on(streamed);
    }
    tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let warming = scope.spawn(|| store.warm_cache());
            let out = handle.block_on(streamed);
            let _ = warming.join();
            out
        })
    })
}

/// A store held for the whole turn (the CLI: one process, one turn, the
/// store's file lock taken only for the commit's transaction), and the
/// recall index kept beside it, if any (`wo ask` reads it from the recall
/// sidecar, [`crate::recall_file`]; `wo chat` keeps it across turns): it is
/// synced with the state before each use.
pub struct StoreTurn<'a>(pub &'a mut Store, pub Option<&'a mut RecallIndex>);

impl TurnState for StoreTurn<'_> {
    async fn read<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&State) -> Result<T, TurnError> + Send + 'static,
    ) -> Result<T, TurnError> {
        f(self.0.state())
    }

    async fn read_indexed<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&State, Option<&RecallIndex>) -> Result<T, TurnError> + Send + 'static,
    ) -> Result<T, TurnError> {
        let state = self.0.state();
        let index = self.1.as_deref_mut().map(|index| {
            index.sync(state);
            &*index
        });
        f(state, index)
    }

    async fn while_answering<T>(&mut self, answering: impl Future<Output = T> + Send) -> T {
        overlap_with_cache_warming(self.0, answering)
    }

    async fn commit(
        &mut self,
        record: impl FnOnce(&State) -> CompletedTurn + Send + 'static,
    ) -> Result<Committed, TurnError> {
        // Built (the answer converted to XHTML) before the transaction, so
        // the transaction only appends ready messages.
        let turn = record(self.0.state());
        let ((user_id, assistant_id), _) = self.0.transact(|state| apply_turn(state, &turn))?;
        Ok(Committed::kept(user_id, assistant_id))
    }

    async fn remember(
        &mut self,
        apply: impl FnOnce(&mut State) -> Result<Record, OpsError> + Send + 'static,
    ) -> Result<(Result<Record, OpsError>, serde_json::Value), TurnError> {
        let (applied, _) = self.0.transact(apply)?;
        Ok((applied, serde_json::Value::Null))
    }
}

/// The prompt for `req`, with the `url_fetch` tool's pages when it is on:
/// the first assembly picks the truth entries, their links are fetched
/// (with no state access held), and the prompt is assembled again.
async fn assemble_turn(
    state: &mut impl TurnState,
    provider: Arc<dyn Provider>,
    req: Arc<TurnRequest>,
    window: Option<usize>,
) -> Result<Assembled, TurnError> {
    let (first, links) = {
        let (provider, req) = (provider.clone(), req.clone());
        state
            .read_indexed(move |state, index| {
                if let Some(parent) = &req.parent
                    && state.message(parent).is_none()
                {
                    return Err(crate::request::FieldError::new(
                        crate::request::Field::Parent,
                        format!("no such message {parent:?}"),
                    )
                    .into());
                }
                let first = prepare(state, index, provider.as_ref(), &req, window)?;
                let links = match req.url_fetch {
                    Some(_) => links_to_fetch(state, &first, &req.prompt),
                    None => Vec::new(),
                };
                Ok((first, links))
            })
            .await?
    };
    let Some(policy) = req.url_fetch.as_ref().filter(|_| !links.is_empty()) else {
        return Ok(first);
    };
    let fetched = fetch_links(links, policy).await;
    let (provider, req) = (provider.clone(), req.clone());
    state
        .read_indexed(move |state, index| {
            prepare_with_links(state, index, provider.as_ref(), &req, fetched, window)
        })
        .await
}

/// Runs one turn: assemble (with the `url_fetch` tool's pages), stream the
/// answer, commit the exchange. `sink` sees every [`TurnEvent`] in order;
/// the result is also returned. Nothing is committed when the provider
/// fails, the answer is empty or `cancel` fires (unless
/// [`TurnRequest::keep_partial`]: then the question and the answer so far,
/// possibly empty, are committed, marked [`STOPPED`], and no memory step runs).
///
/// With a [`MemoryStep`], the interpreter runs after `Done` (the answer is
/// already shown and saved): one call on a copy of the truth taken through
/// `state` (no access held while the model answers), then its operations
/// applied through [`TurnState::remember`], re-checked against the state as
/// it is then; a `Remembered` event follows. Its failure never fails the
/// turn.
///
/// The future is boxed and `Send` (proven here, where the state and sink
/// types are generic): proving it at a server's spawn instead trips the
/// compiler's higher-ranked `Send` inference over the futures inside.
pub fn run_turn<'a>(
    mut state: impl TurnState + 'a,
    provider: Arc<dyn Provider>,
    req: TurnRequest,
    cancel: CancellationToken,
    mut sink: impl TurnSink + Send + 'a,
) -> futures::future::BoxFuture<'a, Result<TurnOutcome, TurnError>> {
    Box::pin(async move {
        let mut req = req;
        let memory = req.memory.take();
        let mut result = turn_steps(&mut state, provider, req, cancel, &mut sink).await;
        match &mut result {
            Ok(outcome) => {
                // A stopped answer is kept as it is; its reader is leaving,
                // so no interpreter call follows it.
                let memory = memory.filter(|_| !outcome.stopped());
                outcome.memory_follows = memory.is_some();
                sink.event(TurnEvent::Done(outcome));
                if let Some(step) = memory {
                    let remembered = remember_step(&mut state, step, outcome).await;
                    sink.event(TurnEvent::Remembered(&remembered));
                    outcome.memory = Some(remembered);
                }
            }
            Err(e) => sink.event(TurnEvent::Failed(e)),
        }
        result
    })
}

/// The memory step of a committed turn (see [`run_turn`]).
async fn remember_step(
    state: &mut impl TurnState,
    step: MemoryStep,
    outcome: &TurnOutcome,
) -> Remembered {
    let exchange = Exchange {
        question_id: outcome.user_id.clone(),
        answer_id: outcome.assistant_id.clone(),
    };
    let origin = Origin::exchange(&exchange, &step.by);
    let failed = |why: String| Remembered {
        exchange: exchange.answer_id.clone(),
        result: Err(why),
        state_patch: serde_json::Value::Null,
    };
    let prepared = {
        let (exchange, prompt) = (exchange.clone(), step.prompt.clone());
        state
            .read(move |s| {
                Ok(crate::memory::interpreter_request(s, &exchange, &prompt)
                    .map(|req| (req, crate::memory::check_copy(s))))
            })
            .await
    };
    let (request, scratch) = match prepared {
        Ok(Ok(prepared)) => prepared,
        Ok(Err(e)) => return failed(e.to_string()),
        Err(e) => return failed(e.to_string()),
    };
    let ops =
        match crate::memory::interpret(step.provider.as_ref(), request, &scratch, &origin).await {
            Ok(ops) => ops,
            Err(e) => return failed(crate::memory_jobs::plain_interpret_reason(&e)),
        };
    match state
        .remember(move |s| crate::memory::apply_ops(s, &ops, &origin))
        .await
    {
        Ok((Ok(record), state_patch)) => Remembered {
            exchange: exchange.answer_id.clone(),
            result: Ok(record),
            state_patch,
        },
        Ok((Err(stale), _)) => failed(format!(
            "the operations no longer apply to the file as it is now: {stale}"
        )),
        Err(e) => failed(e.to_string()),
    }
}

async fn turn_steps(
    state: &mut impl TurnState,
    provider: Arc<dyn Provider>,
    req: TurnRequest,
    cancel: CancellationToken,
    sink: &mut (impl TurnSink + Send),
) -> Result<TurnOutcome, TurnError> {
    let sent_at = Timestamp::now();
    let req = Arc::new(req);
    // A server that refuses the prompt as longer than its window, and says
    // how long that is, is asked once more with the prompt fitted to it
    // (a local server is often started with a window far smaller than the
    // provider's setting assumes; nothing was streamed yet).
    let mut fitted_to_window = None;
    let mut with_room = false;
    let mut window = req
        .said_windows
        .as_ref()
        .and_then(|w| w.get(provider.name()));
    let (assembled, streamed) = loop {
        let assembled = assemble_turn(state, provider.clone(), req.clone(), window).await?;
        sink.event(TurnEvent::Assembled(&assembled));
        let mut shown = false;
        let streamed = state
            .while_answering(stream_answer_keeping(
                provider.as_ref(),
                chat_request(&assembled, &req),
                cancel.clone(),
                req.keep_partial,
                |text| {
                    shown = true;
                    sink.event(TurnEvent::Delta(text));
                },
            ))
            .await;
        let current = window.unwrap_or_else(|| provider.context_window());
        let why = match &streamed {
            Err(TurnError::Provider(e)) => Some(Unanswered::Failed(e)),
            Err(TurnError::EmptyAnswer) => Some(Unanswered::Empty),
            _ => None,
        };
        let refusal = match why {
            Some(why) if !shown => {
                // Built again only on this failure path, not copied for
                // every turn.
                let request = chat_request(&assembled, &req);
                let reply = req.max_tokens.unwrap_or(DEFAULT_ANSWER_RESERVE);
                refused_as_too_long(provider.as_ref(), why, &request, reply).await
            }
            _ => None,
        };
        match refusal {
            Some(ProviderError::TooLong {
                window: Some(said), ..
            }) if fitted_to_window.is_none() && said < current => {
                fitted_to_window = Some(said);
                window = Some(said);
                if let Some(kept) = &req.said_windows {
                    kept.set(provider.name(), said);
                }
            }
            // The window is the one the prompt was fitted to, so the server
            // counted more tokens than the estimate (4 characters a token
            // undercounts code and most scripts but Latin): once more,
            // with a quarter of the window spare.
            Some(ProviderError::TooLong {
                window: Some(said), ..
            }) if !with_room && said >= current => {
                with_room = true;
                window = Some(current - current / 4);
            }
            // Said too long for the window it has: that is the error.
            Some(too_long) => return Err(too_long.into()),
            None => break (assembled, streamed?),
        }
    };
    let model = model_for(provider.as_ref(), &req);
    let committed = {
        let (provider, req, streamed) = (provider.clone(), req.clone(), streamed.clone());
        let sent = (
            assembled.sources.clone(),
            Some(crate::explain::context_used(&assembled)),
        );
        state
            .commit(move |state| {
                completed_turn(state, provider.as_ref(), &req, sent_at, sent, &streamed)
            })
            .await?
    };
    Ok(TurnOutcome {
        user_id: committed.user_id,
        assistant_id: committed.assistant_id,
        state_patch: committed.state_patch,
        answer: streamed.answer,
        finish_reason: streamed.finish_reason,
        usage: streamed.usage,
        sources: assembled.sources,
        model,
        memory: None,
        memory_follows: false,
        fitted_to_window,
    })
}

//! The one turn ([`run_turn`]) tested once, with a fake provider and fake
//! state backends: the order of events, no state access held while the
//! model answers, nothing committed on cancellation or provider error, a
//! commit failure surfaced, an unknown parent named by its field, and the
//! CLI's store backend appending the exchange.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use wo_engine::chat::{
    Committed, FnSink, MemoryStep, StoreTurn, TurnError, TurnEvent, TurnRequest, TurnState,
    run_turn,
};
use wo_engine::memory::{OpsError, Record, read_log};
use wo_engine::request::Field;
use wo_engine::turn::{CompletedTurn, apply_turn};
use wo_format::{State, Timestamp};
use wo_providers::{
    Cancel, ChatRequest, EventStream, Provider, ProviderError, Reachability, StreamEvent,
};

/// What the fake provider does when asked.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Two deltas, then done.
    Answer,
    /// One delta, then waits until cancelled.
    UntilCancelled,
    /// No text: waits until cancelled (refuses at once when asked after
    /// the cancellation, as a request aborted before it was sent).
    SilentUntilCancelled,
    /// Fails before any text.
    Fail,
    /// Its scripted replies in turn, one a call, then fails (the memory
    /// interpreter).
    Replies,
}

/// A provider that, while answering, checks that the turn's state is not
/// locked (it tries the lock the fake state takes for every access). One
/// shape for the answering model and for the memory interpreter.
struct Fake {
    script: Script,
    /// Its name and model (`fake`, or `interp` for the interpreter).
    name: &'static str,
    model: &'static str,
    /// [`Script::Replies`]' replies, first first.
    replies: Mutex<Vec<String>>,
    state: Arc<Mutex<State>>,
    /// Times the lock was found free while answering.
    free_while_answering: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Provider for Fake {
    fn name(&self) -> &str {
        self.name
    }
    fn default_model(&self) -> &str {
        self.model
    }
    fn context_window(&self) -> usize {
        8192
    }
    async fn stream(
        &self,
        _req: ChatRequest,
        cancel: Cancel,
    ) -> Result<EventStream, ProviderError> {
        if self.state.try_lock().is_ok() {
            self.free_while_answering.fetch_add(1, Ordering::SeqCst);
        }
        let provider = self.name.to_owned();
        let cancelled = move || ProviderError::Cancelled { provider };
        let done = || {
            Ok(StreamEvent::Done {
                finish_reason: Some("stop".into()),
                usage: None,
            })
        };
        match self.script {
            Script::Fail => Err(ProviderError::Config {
                provider: self.name.into(),
                message: "scripted failure".into(),
            }),
            Script::Answer => Ok(futures::stream::iter([
                Ok(StreamEvent::Delta("Par".into())),
                Ok(StreamEvent::Delta("is".into())),
                done(),
            ])
            .boxed()),
            Script::UntilCancelled => {
                let first = futures::stream::iter([Ok(StreamEvent::Delta("Pa".into()))]);
                let rest = futures::stream::once(async move {
                    cancel.cancelled().await;
                    Err(cancelled())
                });
                Ok(first.chain(rest).boxed())
            }
            Script::SilentUntilCancelled if cancel.is_cancelled() => Err(cancelled()),
            Script::SilentUntilCancelled => Ok(futures::stream::once(async move {
                cancel.cancelled().await;
                Err(cancelled())
            })
            .boxed()),
            Script::Replies => {
                let mut replies = self.replies.lock().unwrap();
                if replies.is_empty() {
                    return Err(ProviderError::Config {
                        provider: self.name.into(),
                        message: "no more scripted replies".into(),
                    });
                }
                let reply = replies.remove(0);
                Ok(futures::stream::iter([Ok(StreamEvent::Delta(reply)), done()]).boxed())
            }
        }
    }
    async fn check(&self) -> Reachability {
        Reachability::Reachable {
            detail: self.name.into(),
        }
    }
    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }
}

/// A shared state like the local server's: every access locks it, only
/// for as long as the closure runs.
struct Shared {
    state: Arc<Mutex<State>>,
    commits: Arc<AtomicUsize>,
    fail_commit: bool,
}

impl TurnState for Shared {
    async fn read<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&State) -> Result<T, TurnError> + Send + 'static,
    ) -> Result<T, TurnError> {
        f(&self.state.lock().unwrap())
    }

    async fn commit(
        &mut self,
        record: impl FnOnce(&State) -> CompletedTurn + Send + 'static,
    ) -> Result<Committed, TurnError> {
        if self.fail_commit {
            return Err(TurnError::State("the disk is full".into()));
        }
        let mut state = self.state.lock().unwrap();
        let turn = record(&state);
        let (user_id, assistant_id) = apply_turn(&mut state, &turn);
        self.commits.fetch_add(1, Ordering::SeqCst);
        Ok(Committed::kept(user_id, assistant_id))
    }

    async fn remember(
        &mut self,
        apply: impl FnOnce(&mut State) -> Result<Record, OpsError> + Send + 'static,
    ) -> Result<(Result<Record, OpsError>, serde_json::Value), TurnError> {
        let mut state = self.state.lock().unwrap();
        Ok((apply(&mut state), serde_json::Value::Null))
    }
}

struct Setup {
    state: Arc<Mutex<State>>,
    commits: Arc<AtomicUsize>,
    free_while_answering: Arc<AtomicUsize>,
}

impl Setup {
    fn new() -> Self {
        Setup {
            state: Arc::new(Mutex::new(State::new(Timestamp::now()))),
            commits: Arc::new(AtomicUsize::new(0)),
            free_while_answering: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn provider(&self, script: Script) -> Arc<dyn Provider> {
        Arc::new(Fake {
            script,
            name: "fake",
            model: "fake-model",
            replies: Mutex::new(Vec::new()),
            state: self.state.clone(),
            free_while_answering: self.free_while_answering.clone(),
        })
    }

    fn backend(&self, fail_commit: bool) -> Shared {
        Shared {
            state: self.state.clone(),
            commits: self.commits.clone(),
            fail_commit,
        }
    }
}

fn request(prompt: &str) -> TurnRequest {
    TurnRequest {
        prompt: prompt.into(),
        username: "ann".into(),
        ..TurnRequest::default()
    }
}

/// Runs a turn, recording its events as short names.
fn run(
    backend: impl TurnState + 'static,
    provider: Arc<dyn Provider>,
    req: TurnRequest,
    cancel: Cancel,
) -> (Result<wo_engine::chat::TurnOutcome, TurnError>, Vec<String>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut events = Vec::new();
    let result = rt.block_on(run_turn(
        backend,
        provider,
        req,
        cancel,
        FnSink::new(|e: TurnEvent<'_>| {
            events.push(match e {
                TurnEvent::Assembled(_) => "assembled".to_owned(),
                TurnEvent::Delta(t) => format!("delta {t}"),
                TurnEvent::Done(o) => format!("done {}", o.answer),
                TurnEvent::Remembered(r) => match &r.result {
                    Ok(rec) => format!("remembered {}", rec.ops.len()),
                    Err(_) => "remembered nothing".to_owned(),
                },
                TurnEvent::Failed(_) => "failed".to_owned(),
            })
        }),
    ));
    (result, events)
}

#[test]
fn events_come_in_order_and_the_exchange_is_committed_once() {
    let s = Setup::new();
    let (result, events) = run(
        s.backend(false),
        s.provider(Script::Answer),
        request("capital of France?"),
        Cancel::new(),
    );
    let outcome = result.unwrap();
    assert_eq!(
        events,
        ["assembled", "delta Par", "delta is", "done Paris"],
        "assembled, then each delta, then done after the commit"
    );
    assert_eq!(outcome.answer, "Paris");
    assert_eq!(outcome.model, "fake-model");
    assert_eq!(s.commits.load(Ordering::SeqCst), 1);
    let state = s.state.lock().unwrap();
    let msgs = state.messages();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0].id, outcome.user_id);
    assert_eq!(msgs[1].id, outcome.assistant_id);
    assert_eq!(msgs[1].parent.as_deref(), Some(outcome.user_id.as_str()));
}

/// Runs a turn and returns its outcome and the turns the prompt carried
/// (role and text, oldest first).
fn run_capturing(s: &Setup, req: TurnRequest) -> (wo_engine::chat::TurnOutcome, Vec<String>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut turns = Vec::new();
    let outcome = rt
        .block_on(run_turn(
            s.backend(false),
            s.provider(Script::Answer),
            req,
            Cancel::new(),
            FnSink::new(|e: TurnEvent<'_>| {
                if let TurnEvent::Assembled(a) = e {
                    turns = a.turns.iter().map(|(_, t)| t.clone()).collect();
                }
            }),
        ))
        .unwrap();
    (outcome, turns)
}

#[test]
fn a_new_conversation_follows_nothing_and_sends_no_earlier_turns() {
    let s = Setup::new();
    let (first, _) = run_capturing(&s, request("capital of France?"));
    // Without a parent a turn continues from the latest message.
    let (second, turns) = run_capturing(&s, request("and of Spain?"));
    assert!(
        turns.iter().any(|t| t.contains("capital of France")),
        "{turns:?}"
    );
    {
        let state = s.state.lock().unwrap();
        let q = state.message(&second.user_id).unwrap();
        assert_eq!(q.parent.as_deref(), Some(first.assistant_id.as_str()));
        assert!(!q.starts_conversation());
    }
    // A new conversation: stored as a root, no earlier turn sent.
    let (fresh, turns) = run_capturing(
        &s,
        TurnRequest {
            new_conversation: true,
            ..request("tell me about kilns")
        },
    );
    assert_eq!(
        turns,
        ["tell me about kilns"],
        "only the new question is sent"
    );
    {
        let state = s.state.lock().unwrap();
        let q = state.message(&fresh.user_id).unwrap();
        assert_eq!(q.parent, None);
        assert!(q.starts_conversation());
        let branch: Vec<&str> = state
            .branch(&fresh.assistant_id)
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(
            branch,
            [fresh.user_id.as_str(), fresh.assistant_id.as_str()]
        );
    }
    // Its follow-up carries that conversation and nothing before it.
    let (_, turns) = run_capturing(
        &s,
        TurnRequest {
            parent: Some(fresh.assistant_id.clone()),
            ..request("how hot do they get?")
        },
    );
    assert!(turns.iter().any(|t| t.contains("kilns")), "{turns:?}");
    assert!(
        !turns
            .iter()
            .any(|t| t.contains("France") || t.contains("Spain")),
        "the earlier conversation leaked into the new one: {turns:?}"
    );
}

#[test]
fn no_state_access_is_held_while_the_model_answers() {
    let s = Setup::new();
    let (result, _) = run(
        s.backend(false),
        s.provider(Script::Answer),
        request("hi"),
        Cancel::new(),
    );
    result.unwrap();
    assert_eq!(
        s.free_while_answering.load(Ordering::SeqCst),
        1,
        "the provider found the state's lock taken while it answered"
    );
}

/// When a test's reader stops the turn.
#[derive(Clone, Copy, Debug)]
enum StopAt {
    /// Once the prompt is built, before the request is sent.
    Assembled,
    /// Once the first delta arrived (the sink sees it first).
    FirstDelta,
    /// From another thread, 50 ms in, while the model is silent.
    AfterRequest,
}

/// Runs `req` on a provider following `script`, stopped at `at`; the
/// result and the events as short names.
fn run_stopped(
    s: &Setup,
    script: Script,
    req: TurnRequest,
    at: StopAt,
) -> (Result<wo_engine::chat::TurnOutcome, TurnError>, Vec<String>) {
    let cancel = Cancel::new();
    let trigger = cancel.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if let StopAt::AfterRequest = at {
        let trigger = trigger.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            trigger.cancel();
        });
    }
    let mut events = Vec::new();
    let result = rt.block_on(run_turn(
        s.backend(false),
        s.provider(script),
        req,
        cancel,
        FnSink::new(|e: TurnEvent<'_>| match e {
            TurnEvent::Assembled(_) => {
                events.push("assembled".to_owned());
                if let StopAt::Assembled = at {
                    trigger.cancel();
                }
            }
            TurnEvent::Delta(t) => {
                events.push(format!("delta {t}"));
                if let StopAt::FirstDelta = at {
                    trigger.cancel();
                }
            }
            TurnEvent::Done(o) => {
                events.push(format!("done {:?} follows={}", o.answer, o.memory_follows))
            }
            TurnEvent::Remembered(_) => events.push("remembered".into()),
            TurnEvent::Failed(_) => events.push("failed".into()),
        }),
    ));
    (result, events)
}

#[test]
fn cancellation_commits_nothing() {
    let s = Setup::new();
    let (result, events) = run_stopped(
        &s,
        Script::UntilCancelled,
        request("hi"),
        StopAt::FirstDelta,
    );
    match result {
        Err(TurnError::Provider(p)) => {
            assert_eq!(p.kind(), wo_providers::ErrorKind::Cancelled)
        }
        other => panic!("expected a cancelled turn, got {other:?}"),
    }
    assert_eq!(events, ["assembled", "delta Pa", "failed"]);
    assert_eq!(s.commits.load(Ordering::SeqCst), 0);
    assert!(s.state.lock().unwrap().messages().is_empty());
}

#[test]
fn a_stopped_answer_is_kept_when_asked_marked_and_not_remembered() {
    let s = Setup::new();
    let req = TurnRequest {
        keep_partial: true,
        // A memory step that must not run for a stopped answer.
        memory: Some(wo_engine::chat::MemoryStep::new(
            s.provider(Script::UntilCancelled),
            "interpret".into(),
        )),
        ..request("hi")
    };
    let (result, events) = run_stopped(&s, Script::UntilCancelled, req, StopAt::FirstDelta);
    let outcome = result.expect("a stopped answer is a kept turn");
    assert!(outcome.stopped());
    assert_eq!(
        outcome.finish_reason.as_deref(),
        Some(wo_engine::chat::STOPPED)
    );
    assert_eq!(
        events,
        ["assembled", "delta Pa", "done \"Pa\" follows=false"]
    );
    assert_eq!(s.commits.load(Ordering::SeqCst), 1);
    let state = s.state.lock().unwrap();
    assert_eq!(state.messages().len(), 2);
    let answer = &state.messages()[1];
    assert_eq!(answer.content, "<p>Pa</p>");
    let mark = answer.usage.as_ref().unwrap().extra["truncated"].to_value();
    assert_eq!(mark, serde_json::json!({"reason": "stopped"}));
}

/// A turn of [`Script::SilentUntilCancelled`] stopped before any text.
fn stopped_before_any_text(
    s: &Setup,
    keep_partial: bool,
    at: StopAt,
) -> (Result<wo_engine::chat::TurnOutcome, TurnError>, Vec<String>) {
    let req = TurnRequest {
        keep_partial,
        ..request("are you there?")
    };
    run_stopped(s, Script::SilentUntilCancelled, req, at)
}

#[test]
fn a_turn_stopped_before_any_text_keeps_the_question_with_an_empty_stopped_answer() {
    for at in [StopAt::Assembled, StopAt::AfterRequest] {
        let s = Setup::new();
        let (result, events) = stopped_before_any_text(&s, true, at);
        let outcome = result.expect("a stopped turn is kept, even without text");
        assert!(outcome.stopped(), "{at:?}");
        assert_eq!(events, ["assembled", "done \"\" follows=false"]);
        let state = s.state.lock().unwrap();
        let msgs = state.messages();
        assert_eq!(msgs.len(), 2, "{at:?}");
        assert_eq!(msgs[0].content, "<p>are you there?</p>");
        assert_eq!(msgs[1].parent.as_deref(), Some(msgs[0].id.as_str()));
        assert_eq!(msgs[1].content, "");
        let mark = msgs[1].usage.as_ref().unwrap().extra["truncated"].to_value();
        assert_eq!(mark, serde_json::json!({"reason": "stopped"}));
        // The file it makes is valid.
        let bytes = wo_format::to_canonical_vec(&state);
        wo_format::parse(&bytes).expect("the kept exchange is a valid llm.json");
    }
    // Without keep_partial the same stop keeps nothing.
    let s = Setup::new();
    let (result, events) = stopped_before_any_text(&s, false, StopAt::AfterRequest);
    assert!(matches!(result, Err(TurnError::Provider(_))), "{result:?}");
    assert_eq!(events, ["assembled", "failed"]);
    assert!(s.state.lock().unwrap().messages().is_empty());
}

#[test]
fn an_empty_stopped_answer_is_not_sent_again() {
    let s = Setup::new();
    let (first, _) = stopped_before_any_text(&s, true, StopAt::Assembled);
    let first = first.unwrap();
    let (_, turns) = run_capturing(
        &s,
        TurnRequest {
            parent: Some(first.assistant_id.clone()),
            ..request("hello?")
        },
    );
    // The question stays in the conversation; the empty answer is not a turn.
    assert_eq!(turns, ["are you there?", "hello?"]);
}

#[test]
fn a_provider_error_commits_nothing() {
    let s = Setup::new();
    let (result, events) = run(
        s.backend(false),
        s.provider(Script::Fail),
        request("hi"),
        Cancel::new(),
    );
    assert!(matches!(result, Err(TurnError::Provider(_))), "{result:?}");
    assert_eq!(events, ["assembled", "failed"]);
    assert_eq!(s.commits.load(Ordering::SeqCst), 0);
    assert!(s.state.lock().unwrap().messages().is_empty());
}

#[test]
fn a_commit_failure_surfaces_after_the_answer() {
    let s = Setup::new();
    let (result, events) = run(
        s.backend(true),
        s.provider(Script::Answer),
        request("hi"),
        Cancel::new(),
    );
    match result {
        Err(TurnError::State(e)) => assert_eq!(e.to_string(), "the disk is full"),
        other => panic!("expected the commit's error, got {other:?}"),
    }
    assert_eq!(events, ["assembled", "delta Par", "delta is", "failed"]);
    assert!(s.state.lock().unwrap().messages().is_empty());
}

#[test]
fn an_unknown_parent_is_a_field_error_before_anything_is_sent() {
    let s = Setup::new();
    let mut req = request("hi");
    req.parent = Some("m_nope".into());
    let (result, events) = run(
        s.backend(false),
        s.provider(Script::Answer),
        req,
        Cancel::new(),
    );
    match result {
        Err(TurnError::Field(f)) => {
            assert_eq!(f.field, Field::Parent);
            assert!(f.message.contains("m_nope"), "{}", f.message);
        }
        other => panic!("expected a parent field error, got {other:?}"),
    }
    assert_eq!(events, ["failed"]);
    assert_eq!(s.free_while_answering.load(Ordering::SeqCst), 0);
}

#[test]
fn the_cli_store_backend_appends_the_exchange_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm.json");
    let mut store = wo_store::Store::open(
        &path,
        wo_store::OpenOptions {
            create_if_missing: true,
            ..Default::default()
        },
    )
    .unwrap();
    let s = Setup::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut events = Vec::new();
    let outcome = rt
        .block_on(run_turn(
            StoreTurn(&mut store, None),
            s.provider(Script::Answer),
            request("capital of France?"),
            Cancel::new(),
            FnSink::new(|e: TurnEvent<'_>| {
                if let TurnEvent::Delta(t) = e {
                    events.push(t.to_owned())
                }
            }),
        ))
        .unwrap();
    assert_eq!(events, ["Par", "is"]);
    let reopened = wo_store::Store::open(&path, Default::default()).unwrap();
    let ids: Vec<&str> = reopened
        .state()
        .messages()
        .iter()
        .map(|m| m.id.as_str())
        .collect();
    assert_eq!(
        ids,
        [outcome.user_id.as_str(), outcome.assistant_id.as_str()]
    );
}

fn with_memory(setup: &Setup, replies: &[&str]) -> (TurnRequest, Arc<AtomicUsize>) {
    let free = Arc::new(AtomicUsize::new(0));
    // The interpreter counts its own unlocked calls, apart from the answer's.
    let interp = Fake {
        script: Script::Replies,
        name: "interp",
        model: "interp-model",
        replies: Mutex::new(replies.iter().map(|r| r.to_string()).collect()),
        state: setup.state.clone(),
        free_while_answering: free.clone(),
    };
    let mut req = request("What is the capital of France?");
    req.memory = Some(MemoryStep::new(Arc::new(interp), "Interpret.".into()));
    (req, free)
}

const ADD_FACT: &str = r#"{"ops":[{"op":"add","kind":"fact","title":"Capital of France","content":"Paris is the capital of France.","certainty":0.9}]}"#;

#[test]
fn the_memory_step_runs_after_done_and_records_with_provenance() {
    let setup = Setup::new();
    let (req, free) = with_memory(&setup, &[ADD_FACT]);
    let (result, events) = run(
        setup.backend(false),
        setup.provider(Script::Answer),
        req,
        Cancel::new(),
    );
    let outcome = result.unwrap();
    assert_eq!(
        events,
        [
            "assembled",
            "delta Par",
            "delta is",
            "done Paris",
            "remembered 1"
        ]
    );
    // The interpreter's call ran with the state unlocked.
    assert_eq!(free.load(Ordering::SeqCst), 1);
    let state = setup.state.lock().unwrap();
    let fact = state
        .truth
        .trust
        .iter()
        .find(|e| e.title == "Capital of France")
        .expect("the fact was added");
    let prov = fact.provenance.as_ref().unwrap();
    assert_eq!(
        prov.messages,
        [outcome.user_id.clone(), outcome.assistant_id.clone()]
    );
    assert_eq!(prov.by, "interp/interp-model");
    let log = read_log(&state);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].exchange, outcome.assistant_id);
    assert_eq!(
        outcome.memory.unwrap().result.unwrap().effect.created,
        std::slice::from_ref(&fact.id)
    );
}

#[test]
fn hostile_interpreter_output_changes_nothing_and_the_turn_stands() {
    let setup = Setup::new();
    // Invalid twice (the call is retried once): an unknown op, then prose.
    let (req, _) = with_memory(
        &setup,
        &[
            r#"{"ops":[{"op":"drop_table"}]}"#,
            "Sure! Here are the facts.",
        ],
    );
    let (result, events) = run(
        setup.backend(false),
        setup.provider(Script::Answer),
        req,
        Cancel::new(),
    );
    let outcome = result.expect("the turn itself succeeded");
    assert_eq!(events.last().unwrap(), "remembered nothing");
    let why = outcome.memory.unwrap().result.unwrap_err();
    // Said in plain words, never as a parser error.
    assert!(why.contains("not usable memory operations"), "{why}");
    let state = setup.state.lock().unwrap();
    assert!(state.truth.trust.is_empty());
    assert!(read_log(&state).is_empty());
    // The exchange is saved all the same.
    assert_eq!(state.messages().len(), 2);
}

#[test]
fn an_interpreter_that_fails_costs_the_memory_not_the_turn() {
    let setup = Setup::new();
    let (req, _) = with_memory(&setup, &[]);
    let (result, events) = run(
        setup.backend(false),
        setup.provider(Script::Answer),
        req,
        Cancel::new(),
    );
    assert!(result.is_ok());
    assert_eq!(events.last().unwrap(), "remembered nothing");
    assert!(setup.state.lock().unwrap().truth.trust.is_empty());
}

#[test]
fn no_memory_step_runs_when_the_turn_fails() {
    let setup = Setup::new();
    let (req, free) = with_memory(&setup, &[ADD_FACT]);
    let (result, events) = run(
        setup.backend(false),
        setup.provider(Script::Fail),
        req,
        Cancel::new(),
    );
    assert!(result.is_err());
    assert!(!events.iter().any(|e| e.starts_with("remembered")));
    assert_eq!(free.load(Ordering::SeqCst), 0);
}

/// What the live report showed (the assembly the sink saw) is what the
/// answer keeps: the record in the file equals the one built from the
/// assembly, names the memory entry and recalled parts by id, and a reader
/// finds it again by the answer's id or its question's.
#[test]
fn the_answer_keeps_the_record_of_what_its_prompt_was_made_of() {
    let s = Setup::new();
    {
        let mut state = s.state.lock().unwrap();
        let mut entry = wo_format::TruthEntry::new(
            "Paris is the capital of France",
            Timestamp::now(),
            0.9,
            "<p>Paris is the capital of France.</p>",
        );
        entry.kind = Some(wo_format::TruthKind::Fact);
        state.add_truth(entry);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut live = None;
    let outcome = rt
        .block_on(run_turn(
            s.backend(false),
            s.provider(Script::Answer),
            request("what is the capital of France?"),
            Cancel::new(),
            FnSink::new(|e: TurnEvent<'_>| {
                if let TurnEvent::Assembled(a) = e {
                    live = Some(wo_engine::explain::context_used(a));
                }
            }),
        ))
        .unwrap();
    let live = live.expect("the sink saw the assembly");
    let state = s.state.lock().unwrap();
    let answer = state.message(&outcome.assistant_id).unwrap();
    let kept = answer.context_used().expect("the answer keeps a record");
    assert_eq!(kept, live);
    let kinds: Vec<&str> = kept.sent.iter().map(|p| p.kind.as_str()).collect();
    assert!(kinds.contains(&"memory"), "{kinds:?}");
    assert!(kinds.contains(&"query"), "{kinds:?}");
    let memory = kept.sent.iter().find(|p| p.kind == "memory").unwrap();
    assert_eq!(
        memory.id.as_deref(),
        state.truth.trust.first().map(|t| t.id.as_str())
    );
    assert!(memory.tokens.unwrap() > 0);
    assert!(kept.tokens > 0 && kept.tokens <= kept.budget);

    for by in [&outcome.assistant_id[..6], &outcome.user_id[..]] {
        let (found, used) = wo_engine::explain::recorded_context(&state, by).unwrap();
        assert_eq!(
            (found.id.as_str(), &used),
            (outcome.assistant_id.as_str(), &kept)
        );
    }
    let text = wo_engine::explain::render_context_used(&state, &kept);
    assert!(text.contains("Paris is the capital of France"), "{text}");
    let missing = wo_engine::explain::recorded_context(&state, "m_ffff").unwrap_err();
    assert!(
        missing.contains("no message has an id starting with"),
        "{missing}"
    );
}

/// An answer written without a record (an import, an older wo) says so
/// and names the sources it does keep.
#[test]
fn an_answer_without_a_record_says_so() {
    let mut state = State::new(Timestamp::now());
    let turn = CompletedTurn {
        sources: vec!["t_0123456789abcdef".into()],
        ..CompletedTurn::new(
            "ann",
            "q",
            "a",
            ("fake", "fake-model"),
            (Timestamp::now(), Timestamp::now()),
        )
    };
    let (_, answer) = apply_turn(&mut state, &turn);
    let err = wo_engine::explain::recorded_context(&state, &answer).unwrap_err();
    assert!(err.contains("keeps no record of its context"), "{err}");
    assert!(err.contains("t_0123456789abcdef"), "{err}");
}

/// A server holding `holds` tokens behind a provider whose setting says
/// 8,192 (a llama.cpp server left at its default window). A longer prompt
/// is refused — saying so when `says` is true, else (llama-cpp-python
/// streaming) answered with nothing — and asked unstreamed it says so.
struct SmallWindow {
    holds: usize,
    says: bool,
    /// Its provider's `context_window` setting.
    setting: usize,
    /// Tokens the server counts per token of wo's estimate.
    counts: f64,
    /// Answers nothing even to a prompt that fits.
    mute: bool,
    /// The estimated prompt size of each streamed request.
    sent: Mutex<Vec<usize>>,
}

impl SmallWindow {
    /// A server holding `holds` tokens behind a setting of 8,192, counting
    /// as wo estimates.
    fn new(holds: usize, says: bool) -> Self {
        SmallWindow {
            holds,
            says,
            mute: false,
            setting: 8192,
            counts: 1.0,
            sent: Mutex::new(Vec::new()),
        }
    }

    fn tokens(&self, req: &ChatRequest) -> usize {
        let estimate: usize = req
            .messages
            .iter()
            .map(|m| wo_engine::assemble::estimate_tokens(&m.content) + 8)
            .sum();
        (estimate as f64 * self.counts) as usize
    }
    fn refusal(&self) -> ProviderError {
        ProviderError::TooLong {
            provider: "small".into(),
            url: "http://127.0.0.1:1/v1/chat/completions".into(),
            window: Some(self.holds),
            detail: format!(
                "This model's maximum context length is {} tokens",
                self.holds
            ),
        }
    }
}

#[async_trait::async_trait]
impl Provider for SmallWindow {
    fn name(&self) -> &str {
        "small"
    }
    fn default_model(&self) -> &str {
        "small-model"
    }
    fn context_window(&self) -> usize {
        self.setting
    }
    async fn stream(&self, req: ChatRequest, _: Cancel) -> Result<EventStream, ProviderError> {
        let tokens = self.tokens(&req);
        self.sent.lock().unwrap().push(tokens);
        let done = Ok(StreamEvent::Done {
            finish_reason: Some("stop".into()),
            usage: None,
        });
        if !self.mute && tokens + req.max_tokens.unwrap_or(512) as usize <= self.holds {
            Ok(futures::stream::iter([Ok(StreamEvent::Delta("fits".into())), done]).boxed())
        } else if self.says {
            Err(self.refusal())
        } else {
            Ok(futures::stream::iter([done]).boxed())
        }
    }
    async fn window_refusal(&self, req: &ChatRequest, reply: u32) -> Option<ProviderError> {
        (self.tokens(req) + reply as usize > self.holds).then(|| self.refusal())
    }
    async fn check(&self) -> Reachability {
        Reachability::Reachable {
            detail: "small".into(),
        }
    }
    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }
}

/// Eight long exchanges in the fake state: recent turns alone pass 2,048
/// tokens.
fn long_conversation(s: &Setup) {
    let mut state = s.state.lock().unwrap();
    for i in 0..8 {
        let long = format!(
            "turn {i}: {}",
            "the kiln cools slowly overnight. ".repeat(60)
        );
        let turn = CompletedTurn::new(
            "ann",
            format!("question {i}"),
            long,
            ("small", "small-model"),
            (Timestamp::now(), Timestamp::now()),
        );
        apply_turn(&mut state, &turn);
    }
}

#[test]
fn a_server_holding_fewer_tokens_than_the_setting_gets_a_prompt_fitted_to_what_it_says() {
    for says in [true, false] {
        let s = Setup::new();
        long_conversation(&s);
        let provider = Arc::new(SmallWindow::new(2048, says));
        let (result, events) = run(
            s.backend(false),
            provider.clone(),
            request("and how fast should it cool?"),
            Cancel::new(),
        );
        let outcome = result.unwrap_or_else(|e| panic!("says {says}: {e}"));
        assert_eq!(outcome.answer, "fits");
        assert_eq!(outcome.fitted_to_window, Some(2048), "says {says}");
        assert_eq!(
            events,
            ["assembled", "assembled", "delta fits", "done fits"],
            "says {says}: assembled again, nothing shown from the refused request"
        );
        let sent = provider.sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 2, "says {sent:?}");
        assert!(
            sent[0] > 2048 && sent[1] + 512 <= 2048,
            "says {says}: {sent:?}"
        );
        assert_eq!(s.commits.load(Ordering::SeqCst), 1);

        // With the windows kept (a server, a chat session), the next turn
        // is fitted from the start: one request.
        let kept = Arc::new(wo_engine::window::SaidWindows::default());
        // A long question after the long conversation: too long unfitted.
        let long = format!("and the glaze? {}", "it crawled on the shelf. ".repeat(160));
        let mut req = request(&long);
        req.parent = Some(outcome.assistant_id.clone());
        req.said_windows = Some(kept.clone());
        let (result, _) = run(s.backend(false), provider.clone(), req, Cancel::new());
        let outcome = result.unwrap();
        assert_eq!(outcome.fitted_to_window, Some(2048), "learned");
        assert_eq!(kept.get("small"), Some(2048));
        assert_eq!(provider.sent.lock().unwrap().len(), 4);
        let long = format!("and the clay? {}", "it cracked on the shelf. ".repeat(160));
        let mut req = request(&long);
        req.parent = Some(outcome.assistant_id.clone());
        req.said_windows = Some(kept.clone());
        let (result, _) = run(s.backend(false), provider.clone(), req, Cancel::new());
        assert_eq!(
            result.unwrap().fitted_to_window,
            None,
            "fitted from the start"
        );
        assert_eq!(provider.sent.lock().unwrap().len(), 5, "one request");
    }
}

#[test]
fn a_question_longer_than_the_window_the_server_says_is_refused_with_the_window_named() {
    let s = Setup::new();
    let provider = Arc::new(SmallWindow::new(300, false));
    let question = "why does the kiln crack? ".repeat(200);
    let (result, events) = run(
        s.backend(false),
        provider.clone(),
        request(&question),
        Cancel::new(),
    );
    let err = result.unwrap_err();
    // Fitted to 300 tokens the question no longer fits at all: the
    // assembler says so with the window, and nothing is committed.
    assert!(err.to_string().contains("context window 300"), "{err}");
    assert_eq!(events.last().map(String::as_str), Some("failed"));
    assert_eq!(s.commits.load(Ordering::SeqCst), 0);
}

#[test]
fn an_empty_answer_the_server_does_not_explain_stays_an_empty_answer() {
    // The server holds plenty, answers nothing, and says nothing more
    // when asked unstreamed: the turn fails as an empty answer, once.
    let s = Setup::new();
    let provider = Arc::new(SmallWindow {
        mute: true,
        ..SmallWindow::new(4096, false)
    });
    let (result, _) = run(
        s.backend(false),
        provider.clone(),
        request("hello"),
        Cancel::new(),
    );
    assert!(matches!(result, Err(TurnError::EmptyAnswer)), "{result:?}");
    assert_eq!(provider.sent.lock().unwrap().len(), 1);
}

#[test]
fn a_server_counting_more_tokens_than_estimated_gets_a_prompt_with_room_to_spare() {
    // The setting is the server's own window, but the server counts 45 %
    // more tokens than wo's estimate (code, other scripts): the
    // prompt fitted to the window is refused, and sent once more with a
    // quarter of the window spare. No note: the setting is right.
    let s = Setup::new();
    long_conversation(&s);
    let provider = Arc::new(SmallWindow {
        setting: 2048,
        counts: 1.45,
        ..SmallWindow::new(2048, true)
    });
    let (result, _) = run(
        s.backend(false),
        provider.clone(),
        request("and how fast should it cool?"),
        Cancel::new(),
    );
    let outcome = result.unwrap();
    assert_eq!(outcome.answer, "fits");
    assert_eq!(outcome.fitted_to_window, None, "no smaller window was said");
    let sent = provider.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent[0] + 512 > 2048 && sent[1] + 512 <= 2048, "{sent:?}");
}

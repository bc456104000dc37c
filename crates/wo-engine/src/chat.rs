//! One chat turn end to end (seed 001's lifecycle), shared by `wo ask`,
//! `wo chat` and the local server: assemble the prompt from the state, stream
//! the answer from a provider (holding no lock meanwhile), then append the
//! user and assistant messages in one locked, atomic write.
//!
//! A provider failure appends nothing (SPEC §2: provider errors are never
//! saved as messages).

use std::sync::Arc;

use futures::StreamExt;
use wo_format::{Role, Timestamp};
use wo_providers::{
    Cancel as CancellationToken, ChatMessage, ChatRequest, Provider, ProviderError, StreamEvent,
};
use wo_store::{Store, StoreError};

use crate::assemble::{Assembled, AssemblyOptions, ChunkCandidate, assemble, estimate_tokens};
use crate::turn::{CompletedTurn, apply_turn};

/// Tokens kept free for the answer when `max_tokens` is not given.
pub const DEFAULT_ANSWER_RESERVE: u32 = 512;

/// What the caller asks for one turn.
#[derive(Clone, Debug, Default)]
pub struct TurnRequest {
    pub prompt: String,
    pub username: String,
    /// System instructions for this turn only (never persisted).
    pub system: Option<String>,
    pub model: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// The message this turn follows (branching); default: the latest.
    pub parent: Option<String>,
    /// Include truth entries (the `rag` tool; default on).
    pub no_rag: bool,
    /// File chunks retrieved from the directory index, if any.
    pub chunks: Vec<ChunkCandidate>,
    /// Fetch the links of the truth entries sent (the `url_fetch` tool),
    /// under this policy; `None` leaves links unfetched.
    pub url_fetch: Option<wo_fetch::FetchPolicy>,
}

/// Links fetched per turn at most: each costs a round trip before the answer.
pub const MAX_FETCHED_LINKS: usize = 3;

/// Progress reported while a turn runs.
pub enum TurnEvent<'a> {
    /// The prompt was built: what is sent and what was dropped.
    Assembled(&'a Assembled),
    /// A piece of the answer.
    Delta(&'a str),
}

/// A finished, stored turn.
#[derive(Clone, Debug)]
pub struct TurnOutcome {
    pub user_id: String,
    pub assistant_id: String,
    pub answer: String,
    pub finish_reason: Option<String>,
    pub usage: Option<wo_format::Usage>,
    pub sources: Vec<String>,
    pub model: String,
}

/// Why a turn failed. Nothing was appended in any case.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("{0}")]
    Assemble(String),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(
        "the model returned an empty answer; nothing was saved\nhint: try again, or raise --max-tokens"
    )]
    EmptyAnswer,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl TurnError {
    /// Exit code (seed 001): 1 for provider and usage errors, 2 when the
    /// state could not be written.
    pub fn exit_code(&self) -> u8 {
        match self {
            TurnError::Store(e) => e.exit_code(),
            _ => 1,
        }
    }
}

/// Builds the prompt for `req` against the store's current state.
pub fn prepare(
    store: &Store,
    provider: &dyn Provider,
    req: &TurnRequest,
) -> Result<Assembled, TurnError> {
    let state = store.state();
    let reserve = req.max_tokens.unwrap_or(DEFAULT_ANSWER_RESERVE) as usize;
    let mut opts = AssemblyOptions::new(state, provider.context_window(), reserve);
    opts.system = req.system.clone();
    opts.leaf = req.parent.clone();
    opts.rag = !req.no_rag;
    let count = |text: &str| {
        provider
            .count_tokens(text)
            .unwrap_or_else(|| estimate_tokens(text))
    };
    assemble(state, &req.prompt, &opts, &count, &req.chunks).map_err(|e| TurnError::Assemble(e.0))
}

/// The provider request for an assembled prompt.
pub fn chat_request(assembled: &Assembled, req: &TurnRequest) -> ChatRequest {
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
    }
}

/// The `url_fetch` tool: fetches the links of the truth entries the first
/// assembly selected (text only, SPEC §4's refusals enforced by `wo-fetch`),
/// then assembles again with the pages as extra sources. Refused or failed
/// links are reported among the dropped parts, never silently skipped.
async fn with_fetched_links(
    store: &Store,
    provider: &dyn Provider,
    req: &TurnRequest,
    first: Assembled,
    policy: &wo_fetch::FetchPolicy,
) -> Result<Assembled, TurnError> {
    let state = store.state();
    let mut links: Vec<String> = Vec::new();
    for id in &first.sources {
        if let Some(entry) = state.truth_entry(id) {
            for link in wo_fetch::links_in_xhtml(&entry.content) {
                if !links.contains(&link) {
                    links.push(link);
                }
            }
        }
    }
    if links.is_empty() {
        return Ok(first);
    }
    let skipped: Vec<String> = links.split_off(links.len().min(MAX_FETCHED_LINKS));
    let results =
        futures::future::join_all(links.iter().map(|url| wo_fetch::fetch_text(url, policy))).await;
    let mut req = req.clone();
    let mut failures = Vec::new();
    for (url, result) in links.iter().zip(results) {
        match result {
            Ok(page) => req.chunks.push(ChunkCandidate {
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
            Err(e) => failures.push((url.clone(), e.to_string())),
        }
    }
    let mut assembled = prepare(store, provider, &req)?;
    for (url, reason) in failures {
        assembled.dropped.push(crate::assemble::Dropped {
            kind: crate::assemble::SourceKind::Chunk,
            id: Some(format!("url:{url}")),
            label: url,
            reason: format!("not fetched: {reason}"),
        });
    }
    for url in skipped {
        assembled.dropped.push(crate::assemble::Dropped {
            kind: crate::assemble::SourceKind::Chunk,
            id: Some(format!("url:{url}")),
            label: url,
            reason: format!("beyond {MAX_FETCHED_LINKS} links per turn"),
        });
    }
    Ok(assembled)
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

/// Runs one turn: assemble, stream, append. `on_event` sees the assembled
/// prompt and each delta as they come.
pub async fn run_turn(
    store: &mut Store,
    provider: Arc<dyn Provider>,
    req: TurnRequest,
    cancel: CancellationToken,
    mut on_event: impl FnMut(TurnEvent<'_>),
) -> Result<TurnOutcome, TurnError> {
    let sent_at = Timestamp::now();
    let mut assembled = prepare(store, provider.as_ref(), &req)?;
    if let Some(policy) = &req.url_fetch {
        assembled = with_fetched_links(store, provider.as_ref(), &req, assembled, policy).await?;
    }
    on_event(TurnEvent::Assembled(&assembled));
    let request = chat_request(&assembled, &req);
    let model = req
        .model
        .clone()
        .unwrap_or_else(|| provider.default_model().to_owned());

    let mut stream = provider.stream(request, cancel).await?;
    let streamed = async {
        let mut answer = String::new();
        let mut finish_reason = None;
        let mut usage = None;
        while let Some(event) = stream.next().await {
            match event? {
                StreamEvent::Delta(text) => {
                    answer.push_str(&text);
                    on_event(TurnEvent::Delta(&text));
                }
                StreamEvent::Done {
                    finish_reason: reason,
                    usage: u,
                } => {
                    finish_reason = reason;
                    usage = u.map(|u| wo_format::Usage {
                        prompt_tokens: Some(u64::from(u.prompt_tokens)),
                        completion_tokens: Some(u64::from(u.completion_tokens)),
                        extra: Default::default(),
                    });
                    break;
                }
            }
        }
        Ok::<_, ProviderError>((answer, finish_reason, usage))
    };
    let (answer, finish_reason, usage) = overlap_with_cache_warming(store, streamed)?;
    if answer.trim().is_empty() {
        return Err(TurnError::EmptyAnswer);
    }
    let turn = CompletedTurn {
        username: req.username.clone(),
        prompt: req.prompt.clone(),
        answer: answer.clone(),
        sent_at,
        finished_at: Timestamp::now(),
        provider: provider.name().to_owned(),
        model: model.clone(),
        usage: usage.clone(),
        sources: assembled.sources.clone(),
        parent: req
            .parent
            .clone()
            .or_else(|| store.state().messages().last().map(|m| m.id.clone())),
    };
    let ((user_id, assistant_id), _) = store.transact(|state| apply_turn(state, &turn))?;
    Ok(TurnOutcome {
        user_id,
        assistant_id,
        answer,
        finish_reason,
        usage,
        sources: assembled.sources,
        model,
    })
}

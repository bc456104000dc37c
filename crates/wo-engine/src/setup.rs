//! One turn's set-up, for every face: what a face found for a turn — file
//! chunks (the directory index's and a client's own), the memory step, its
//! stop policy, recall by meaning — put into the validated [`TurnRequest`]
//! by one rule ([`TurnSetup::apply`]), so the CLI, the local and stateless
//! chats and the OpenAI-compatible endpoint only parse, call
//! [`crate::chat::run_turn`] and render.
//!
//! Recall by meaning comes from the embeddings sidecar
//! ([`crate::embed_file`]): prepared ahead by a one-shot process
//! ([`Dense::Ready`], `wo ask`), or kept for a long-lived one
//! ([`LiveEmbeddings`], `wo serve`), which embeds only the question, on
//! another thread while the turn is set up; messages that have no vector
//! yet are embedded off the answer's path ([`LiveEmbeddings::top_up`]) and
//! are found by words (BM25) until then. Without the embedding model, recall is by words alone and
//! the face says so once ([`embedder_or_note`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use wo_format::{Message, RetrievalPrefs, State};
use wo_providers::Provider;
use wo_providers::embed::Embedder;

use crate::assemble::ChunkCandidate;
use crate::dense::{DENSE_PARAMS, DenseRecall, EmbeddingStore, Quantized, QueryVector};
use crate::embed_file::{Loaded, load, save};
use crate::request::{MemoryStep, TurnRequest};

/// What a face found for one turn, beside the request it built.
pub struct TurnSetup<'a> {
    /// The directory index, if there is one: its chunks relevant to the
    /// question are sent.
    pub index: Option<&'a wo_index::Index>,
    /// Chunks a client retrieved from its own folder index, already checked
    /// ([`crate::files::client_chunks`]), sent after the index's.
    pub client_chunks: Vec<ChunkCandidate>,
    /// The memory step after the commit, as [`memory_step`] set it up.
    pub memory: Option<MemoryStep>,
    /// A cancellation keeps the question and the answer so far
    /// ([`TurnRequest::keep_partial`]): the CLI's Ctrl-C and the local web
    /// chat; not a client that keeps its own copy (stateless, OpenAI).
    pub keep_partial: bool,
    /// Recall by meaning.
    pub dense: Dense<'a>,
}

/// Where a turn's recall by meaning comes from.
pub enum Dense<'a> {
    /// Recall by words (BM25) alone.
    Off,
    /// Prepared ahead (the question embedded while the file was read).
    Ready(DenseRecall),
    /// A long-lived process's vectors: the question is embedded now.
    Live(&'a LiveEmbeddings),
}

impl TurnSetup<'_> {
    /// Puts the set-up into `req`. With the `rag` tool off no file chunk is
    /// sent and the index is not searched (truth is left out by assembly);
    /// recall of earlier messages, by words and by meaning, goes on either
    /// way. Blocking: the index is searched; with [`Dense::Live`] the
    /// question is embedded on another thread meanwhile (started first, so
    /// that the search and the rest of the turn's set-up overlap it).
    pub fn apply(self, req: &mut TurnRequest) {
        req.dense = match self.dense {
            Dense::Off => None,
            Dense::Ready(d) => Some(d),
            Dense::Live(live) => live.for_question(&req.prompt),
        };
        req.chunks = if req.no_rag {
            Vec::new()
        } else {
            let mut chunks = self
                .index
                .map(|index| crate::files::relevant_chunks(index, &req.prompt))
                .unwrap_or_default();
            chunks.extend(self.client_chunks);
            chunks
        };
        req.memory = self.memory;
        req.keep_partial = self.keep_partial;
    }
}

/// The memory step after a turn answered by `answered_by`
/// ([`crate::memory::step_for`]): `interpreter` is the `[interpreter]
/// provider` the face built, `Err` with why it could not. A step that
/// cannot be set up costs the memory, never the turn: the second value
/// then says why, for the face to show.
pub fn memory_step(
    cfg: &wo_providers::Config,
    answered_by: &Arc<dyn Provider>,
    interpreter: Result<Option<Arc<dyn Provider>>, String>,
    project_dir: Option<&std::path::Path>,
) -> (Option<MemoryStep>, Option<String>) {
    // An interpreter that could not be built matters only when the step
    // would run.
    let name = crate::memory::interpreter_name(cfg, answered_by.as_ref());
    if cfg.interpreter_mode_for(name) == wo_providers::config::InterpreterMode::Off {
        return (None, None);
    }
    let interpreter = match interpreter {
        Ok(p) => p,
        Err(why) => {
            let named = cfg.interpreter.provider.as_deref().unwrap_or(name);
            return (
                None,
                Some(format!("memory: [interpreter] provider {named:?}: {why}")),
            );
        }
    };
    match crate::memory::step_for(cfg, answered_by, interpreter, project_dir) {
        Ok(step) => (step, None),
        Err(e) => (None, Some(format!("memory: {e}"))),
    }
}

/// The installed embedding model, or `None` and the note a face shows once:
/// recall is by words alone, and what installs the model.
pub fn embedder_or_note(
    env: &wo_providers::config::Env,
) -> (Option<Arc<dyn Embedder>>, Option<String>) {
    match wo_providers::embed::open_installed(env) {
        Ok(e) => (Some(e), None),
        Err(why) => (None, Some(format!("recall uses words only (BM25): {why}"))),
    }
}

/// A retrieval preference out of range: the field's name under
/// `retrieval_prefs` and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefsError {
    /// `min_certainty`, `certainty_weight` or `recency_weight`.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl PrefsError {
    /// The field's JSON pointer in a state (`/retrieval_prefs/…`).
    pub fn pointer(&self) -> String {
        format!("/retrieval_prefs/{}", self.field)
    }
}

/// Retrieval prefs a client sent (a state patch, a stateless turn's own),
/// checked before they pick any memory: a certainty within 0–1, weights
/// finite and ≥ 0.
pub fn check_prefs(p: &RetrievalPrefs) -> Result<(), PrefsError> {
    if let Some(c) = p.min_certainty {
        crate::request::check_certainty(c).map_err(|message| PrefsError {
            field: "min_certainty",
            message,
        })?;
    }
    for (field, w) in [
        ("certainty_weight", p.certainty_weight),
        ("recency_weight", p.recency_weight),
    ] {
        if let Some(w) = w
            && !(w.is_finite() && w >= 0.0)
        {
            return Err(PrefsError {
                field,
                message: "must be a number ≥ 0".into(),
            });
        }
    }
    Ok(())
}

/// The transcript's vectors kept by a long-lived process (the local
/// server), read once from the embeddings sidecar and kept up to date off
/// the answer's path.
pub struct LiveEmbeddings {
    embedder: Arc<dyn Embedder>,
    sidecar: PathBuf,
    /// Swapped whole by [`Self::top_up`]: a turn holds the vectors it began
    /// with, never a lock.
    store: Mutex<Arc<EmbeddingStore>>,
    /// Held by a top-up: one at a time, the next waits (a turn's messages
    /// saved while the start's top-up runs are embedded after it).
    filling: Mutex<()>,
}

impl LiveEmbeddings {
    /// The vectors of the sidecar at `sidecar` for `embedder` (none when it
    /// is missing, damaged or another model's: rebuilt by [`Self::top_up`]).
    /// Embeds nothing.
    pub fn open(embedder: Arc<dyn Embedder>, sidecar: PathBuf) -> (Self, Loaded) {
        let (store, loaded) = load(&sidecar, embedder.id(), embedder.dim());
        (
            LiveEmbeddings {
                embedder,
                sidecar,
                store: Mutex::new(Arc::new(store)),
                filling: Mutex::new(()),
            },
            loaded,
        )
    }

    /// Vectors held now.
    pub fn len(&self) -> usize {
        self.current().len()
    }

    /// True when no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn current(&self) -> Arc<EmbeddingStore> {
        self.store.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Dense recall for `question` with the vectors held now. The question
    /// is embedded on another thread, started here: the turn's set-up goes
    /// on beside it (the transcript keyed, words searched) and the ranking
    /// waits for it — the one cost on the answer's path. When the model
    /// fails, recall is by words alone.
    pub fn for_question(&self, question: &str) -> Option<DenseRecall> {
        Some(DenseRecall {
            embedder: self.embedder.clone(),
            store: self.current(),
            params: DENSE_PARAMS,
            query: Some(QueryVector::start(self.embedder.clone(), question)),
        })
    }

    /// The messages of `state`'s whole transcript with no vector yet
    /// (newest first, at most `limit`), as what [`Self::top_up`] embeds:
    /// read under the caller's lock on the state, embedded after it is let
    /// go. When all fit, the vectors of messages gone are dropped too.
    pub fn pending(&self, state: &State, limit: usize) -> Pending {
        let store = self.current();
        // The state's keys (kept between turns), for what is missing and
        // what to keep.
        let keys = state.content_keys();
        let missing = store.reconcile_keyed(state.messages(), keys).missing;
        Pending {
            texts: missing
                .iter()
                .take(limit)
                .map(|(k, m)| (*k, crate::dense::embedded_text(m)))
                .collect(),
            keep: (missing.len() <= limit).then(|| keys.iter().copied().collect()),
        }
    }

    /// Messages just added (a turn's two) with no vector yet: what
    /// [`Self::top_up`] embeds after the turn is saved.
    pub fn pending_new(&self, new: &[Message]) -> Pending {
        let store = self.current();
        Pending {
            texts: store
                .missing(new)
                .iter()
                .map(|m| (crate::dense::key(m), crate::dense::embedded_text(m)))
                .collect(),
            keep: None,
        }
    }

    /// Embeds `pending` (blocking: milliseconds a message) and writes the
    /// sidecar when anything changed. Meant for a background thread after
    /// a turn is saved, never while a turn waits; waits for a top-up
    /// already running. Returns the vectors added. A failure to write the
    /// sidecar (a read-only directory) only costs the cache.
    pub fn top_up(&self, pending: Pending, deadline: Option<Instant>) -> std::io::Result<usize> {
        let _one_at_a_time = self.filling.lock().unwrap_or_else(|p| p.into_inner());
        let mut added = Vec::new();
        for group in pending.texts.chunks(16) {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let refs: Vec<&str> = group.iter().map(|(_, t)| t.as_str()).collect();
            let Ok(vectors) = self.embedder.embed(&refs) else {
                break;
            };
            for ((k, _), v) in group.iter().zip(vectors) {
                if v.len() == self.embedder.dim() {
                    added.push((*k, Quantized::new(&v)));
                }
            }
        }
        let n = added.len();
        let snapshot = {
            let mut held = self.store.lock().unwrap_or_else(|p| p.into_inner());
            let store = Arc::make_mut(&mut held);
            let before = store.len();
            for (k, v) in &added {
                store.insert(*k, v);
            }
            if let Some(keep) = &pending.keep {
                store.retain(|k| keep.contains(&k));
            }
            if store.len() == before && n == 0 {
                return Ok(0);
            }
            held.clone()
        };
        save(&self.sidecar, &snapshot)?;
        Ok(n)
    }
}

/// Messages to embed, from [`LiveEmbeddings::pending`].
pub struct Pending {
    texts: Vec<(u64, String)>,
    /// Every message's key, when all missing ones are in `texts`: vectors
    /// of messages gone (edited, removed) are dropped then.
    keep: Option<crate::dense::KeySet>,
}

impl Pending {
    /// Messages to embed.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// True when every message has its vector.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

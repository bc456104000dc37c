//! `local`: a GGUF model run in-process with llama.cpp (`llama-cpp-2`), the
//! offline default (SmolLM2-135M-Instruct; `scripts/install-model.sh`).
//!
//! - The prompt is built with the model's own chat template from its GGUF
//!   metadata (`tokenizer.chat_template`, applied by llama.cpp); a model
//!   without one falls back to ChatML.
//! - Each model file is loaded once per process and cached; generations on
//!   one model run one at a time (a second request waits, cancellably),
//!   because two would only fight over the same cores.
//! - Generation runs on one long-lived thread per process (llama.cpp's
//!   OpenMP team stays with it; see [`run_on_generation_thread`]) and sends
//!   deltas over a channel. Cancelling the token or dropping the stream stops
//!   it within one token.
//! - Sampling: temperature 0 is greedy; otherwise top-k (default 40), top-p
//!   0.95, min-p 0.05, a mild repetition penalty (small models loop without
//!   it) and the temperature (default 0.7). `max_tokens` defaults to 512.
//! - Usage is counted exactly (prompt and generated tokens).
//! - Structured output ([`ChatRequest::json_schema`]): llguidance compiles
//!   the schema for the model's vocabulary and masks, at every step, the
//!   tokens that could not continue valid JSON (see [`Loaded`]).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use futures::StreamExt;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::ProviderError;
use crate::types::{ChatMessage, ChatRequest, Reachability, StreamEvent, Usage};
use crate::{EventStream, Provider};

/// `max_tokens` when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 512;
/// Temperature when the request sets none.
pub const DEFAULT_TEMPERATURE: f32 = 0.7;
/// Top-k when the request sets none.
pub const DEFAULT_TOP_K: u32 = 40;
/// Tokens decoded per batch while reading the prompt.
const PROMPT_BATCH: usize = 512;

/// Settings for [`LocalProvider`].
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Provider name in messages.
    pub name: String,
    /// The GGUF file.
    pub model_path: PathBuf,
    /// Name reported by `default_model()` (the file stem by default).
    pub model_name: String,
    /// Cap on the context (tokens); the model's training context when unset.
    pub context_window: Option<usize>,
    /// CPU threads; all available cores when unset.
    pub threads: Option<usize>,
    /// Caps on one answer.
    pub limits: crate::types::AnswerLimits,
}

impl LocalConfig {
    /// Settings for a model file, named after its stem.
    pub fn new(name: impl Into<String>, model_path: impl Into<PathBuf>) -> Self {
        let model_path = model_path.into();
        let model_name = model_path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".into());
        Self {
            name: name.into(),
            model_path,
            model_name,
            context_window: None,
            threads: None,
            limits: crate::types::AnswerLimits::default(),
        }
    }
}

/// A loaded model plus what every generation needs from it.
struct Loaded {
    model: LlamaModel,
    template: LlamaChatTemplate,
    n_ctx_train: u32,
    // Held (owned) by the generation thread for its whole run.
    gen_lock: Arc<tokio::sync::Mutex<()>>,
    /// What turns a JSON Schema into a constraint on this model's tokens:
    /// made on the first request with a schema (it reads the whole
    /// vocabulary), then kept.
    schemas: OnceLock<Result<llguidance::ParserFactory, String>>,
}

impl Loaded {
    /// A matcher that lets the model spell only JSON following `schema`.
    ///
    /// Whitespace between tokens is bounded (at most 20 spaces, tabs or
    /// newlines, as llama.cpp's own converter allowed) unless the schema's
    /// own `x-guidance` options say otherwise: unbounded, a small model can
    /// fill its whole answer with blank lines. `oneOf` is read as `anyOf`,
    /// as llama.cpp's converter and the usual servers read it.
    fn schema_matcher(&self, schema: &serde_json::Value) -> Result<llguidance::Matcher, String> {
        let factory = self
            .schemas
            .get_or_init(|| {
                let env = LlamaSampler::llguidance_tok_env(&self.model);
                let mut factory = llguidance::ParserFactory::new_simple(&env)
                    .map_err(|e| format!("the vocabulary: {e}"))?;
                // Errors come back as values; nothing goes to stderr.
                factory.quiet();
                Ok(factory)
            })
            .as_ref()
            .map_err(Clone::clone)?;
        let mut schema = schema.clone();
        if let serde_json::Value::Object(root) = &mut schema {
            root.entry("x-guidance").or_insert_with(|| {
                serde_json::json!({
                    "whitespace_pattern": "[ \t\n]{1,20}",
                    "coerce_one_of": true,
                })
            });
        }
        let grammar = llguidance::api::TopLevelGrammar::from_json_schema(schema);
        let parser = factory.create_parser(grammar).map_err(|e| e.to_string())?;
        Ok(llguidance::Matcher::new(Ok(parser)))
    }
}

/// The process's one llama.cpp backend (llama.cpp may be initialised only
/// once per process): shared by the chat models and the embedding model.
pub(crate) fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp logs every tensor to stderr by default, which would
            // interleave with the answer on a terminal; route logs to
            // `tracing` with logging off.
            llama_cpp_2::send_logs_to_tracing(
                llama_cpp_2::LogOptions::default().with_logs_enabled(false),
            );
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<Loaded>>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Loaded>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Load (or fetch from the cache) a model. Blocking: call from a blocking
/// thread.
fn load(name: &str, path: &Path) -> Result<Arc<Loaded>, ProviderError> {
    let key = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    // The lock is held while loading so two callers never load one file twice.
    let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = map.get(&key) {
        return Ok(m.clone());
    }
    if !path.is_file() {
        return Err(missing_model(name, path));
    }
    let backend = backend().map_err(|d| ProviderError::Engine {
        provider: name.to_owned(),
        detail: format!("llama.cpp backend: {d}"),
    })?;
    let model =
        LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()).map_err(|e| {
            ProviderError::Engine {
                provider: name.to_owned(),
                detail: format!("cannot load {}: {e}", path.display()),
            }
        })?;
    let template = model
        .chat_template(None)
        .or_else(|_| LlamaChatTemplate::new("chatml"))
        .map_err(|e| ProviderError::Engine {
            provider: name.to_owned(),
            detail: format!("chat template: {e}"),
        })?;
    let n_ctx_train = model.n_ctx_train();
    let loaded = Arc::new(Loaded {
        model,
        template,
        n_ctx_train,
        gen_lock: Arc::new(tokio::sync::Mutex::new(())),
        schemas: OnceLock::new(),
    });
    map.insert(key, loaded.clone());
    Ok(loaded)
}

fn missing_model(name: &str, path: &Path) -> ProviderError {
    ProviderError::config(
        name,
        format!(
            "model file {} not found; run scripts/install-model.sh (or set WO_MODEL, or model_path in config.toml)",
            path.display()
        ),
    )
}

/// The embedded model provider.
#[derive(Debug)]
pub struct LocalProvider {
    cfg: LocalConfig,
}

impl LocalProvider {
    /// Fails when the model file does not exist; the model itself is loaded
    /// on first use.
    pub fn new(cfg: LocalConfig) -> Result<Self, ProviderError> {
        if !cfg.model_path.is_file() {
            return Err(missing_model(&cfg.name, &cfg.model_path));
        }
        Ok(Self { cfg })
    }

    fn threads(&self) -> i32 {
        let n = self.cfg.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        });
        i32::try_from(n.max(1)).unwrap_or(1)
    }

    fn n_ctx(&self, loaded: &Loaded) -> usize {
        let train = loaded.n_ctx_train as usize;
        self.cfg.context_window.map_or(train, |c| c.min(train))
    }

    async fn load_async(&self) -> Result<Arc<Loaded>, ProviderError> {
        let name = self.cfg.name.clone();
        let path = self.cfg.model_path.clone();
        tokio::task::spawn_blocking(move || load(&name, &path))
            .await
            .map_err(|e| ProviderError::Engine {
                provider: self.cfg.name.clone(),
                detail: format!("loader thread: {e}"),
            })?
    }
}

/// A prompt ready to run.
struct Prepared {
    tokens: Vec<LlamaToken>,
    n_ctx: usize,
    max_new: usize,
    temperature: f32,
    top_k: u32,
    /// What the answer must follow: [`ChatRequest::json_schema`] compiled
    /// by llguidance for this model's tokens (taken by the sampler).
    matcher: Option<llguidance::Matcher>,
}

fn prepare(
    p: &LocalProvider,
    loaded: &Loaded,
    req: &ChatRequest,
    matcher: Option<llguidance::Matcher>,
) -> Result<Prepared, ProviderError> {
    let name = &p.cfg.name;
    let bad = |detail: String| bad_request(name, detail);
    if req.messages.is_empty() {
        return Err(bad("there is no message to answer".into()));
    }
    let chat = req
        .messages
        .iter()
        .map(|m: &ChatMessage| LlamaChatMessage::new(m.role.as_str().into(), m.content.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad("a message contains a NUL character".into()))?;
    let prompt = loaded
        .model
        .apply_chat_template(&loaded.template, &chat, true)
        .map_err(|e| ProviderError::Engine {
            provider: name.clone(),
            detail: format!("applying the chat template: {e}"),
        })?;
    // parse_special: the template's markers (<|im_start|>) are control
    // tokens, not text.
    let tokens = loaded.model.vocab().tokenize(prompt.as_bytes(), true, true);
    if tokens.is_empty() {
        return Err(bad(
            "the prompt is empty after applying the chat template".into()
        ));
    }
    let n_ctx = p.n_ctx(loaded);
    if tokens.len() + 1 >= n_ctx {
        return Err(bad(format!(
            "the prompt is {} tokens but the model's context is {n_ctx}; shorten the context or history",
            tokens.len()
        )));
    }
    let want = req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS).max(1) as usize;
    Ok(Prepared {
        max_new: want.min(n_ctx - tokens.len()),
        n_ctx,
        tokens,
        temperature: req.temperature.unwrap_or(DEFAULT_TEMPERATURE).max(0.0),
        top_k: req.top_k.unwrap_or(DEFAULT_TOP_K),
        matcher,
    })
}

fn bad_request(provider: &str, detail: String) -> ProviderError {
    ProviderError::BadRequest {
        provider: provider.to_owned(),
        url: String::new(),
        status: None,
        detail,
    }
}

/// The matcher for `req`'s schema, if it has one, made on a blocking thread
/// (the first one reads the model's whole vocabulary).
async fn schema_matcher(
    p: &LocalProvider,
    loaded: &Arc<Loaded>,
    req: &ChatRequest,
) -> Result<Option<llguidance::Matcher>, ProviderError> {
    let Some(s) = &req.json_schema else {
        return Ok(None);
    };
    let (l, schema) = (loaded.clone(), s.schema.clone());
    tokio::task::spawn_blocking(move || l.schema_matcher(&schema))
        .await
        .map_err(|e| ProviderError::Engine {
            provider: p.cfg.name.clone(),
            detail: format!("compiling the schema: {e}"),
        })?
        .map(Some)
        .map_err(|e| {
            bad_request(
                &p.cfg.name,
                format!("schema {:?} cannot be followed: {e}", s.name),
            )
        })
}

/// A generation, run to its end on the generation thread.
type GenerationJob = Box<dyn FnOnce() + Send>;

/// Runs `job` on the process's one generation thread, starting it (again) if
/// needed.
///
/// Why one long-lived thread rather than `spawn_blocking`: llama.cpp's CPU
/// backend computes on an OpenMP team that belongs to the thread calling
/// `decode`. When a generation landed on another blocking thread than the
/// one before, it got a second team and generated at half speed for its
/// whole run (measured on 2 cores with the default spinning waits: 40–50
/// tok/s instead of 80–100, in exactly the rounds whose thread id changed).
/// Generations on one model run one at a time anyway (`gen_lock`), so one
/// thread costs no parallelism.
fn run_on_generation_thread(job: GenerationJob) -> std::io::Result<()> {
    static QUEUE: Mutex<Option<std::sync::mpsc::Sender<GenerationJob>>> = Mutex::new(None);
    let mut queue = QUEUE.lock().unwrap_or_else(|p| p.into_inner());
    let job = match queue.as_ref() {
        Some(running) => match running.send(job) {
            Ok(()) => return Ok(()),
            // The thread is gone: start another.
            Err(std::sync::mpsc::SendError(job)) => job,
        },
        None => job,
    };
    let (send, jobs) = std::sync::mpsc::channel::<GenerationJob>();
    std::thread::Builder::new()
        .name("wo-local-generation".into())
        .spawn(move || {
            for job in jobs {
                // A panic inside llama.cpp's bindings fails that generation
                // (its channel closes, the caller sees an error) and must not
                // take the thread, and so every later generation, with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
        })?;
    send.send(job)
        .map_err(|_| std::io::Error::other("the generation thread ended before its first job"))?;
    *queue = Some(send);
    Ok(())
}

type Tx = mpsc::Sender<Result<StreamEvent, ProviderError>>;

/// The generation loop (blocking thread). Returns when done, on error (sent
/// down the channel), on cancellation, or when the receiver is gone.
fn generate(
    name: &str,
    loaded: &Loaded,
    mut job: Prepared,
    threads: i32,
    stop: &CancellationToken,
    tx: &Tx,
) {
    let engine = |detail: String| ProviderError::Engine {
        provider: name.to_owned(),
        detail,
    };
    let result = (|| -> Result<Option<StreamEvent>, ProviderError> {
        let backend = backend().map_err(engine)?;
        // Only as much KV cache as this request can use: allocating the full
        // training context would cost time and memory for nothing.
        let ctx_len = (job.tokens.len() + job.max_new).min(job.n_ctx);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(u32::try_from(ctx_len).unwrap_or(u32::MAX)))
            .with_n_batch(PROMPT_BATCH as u32)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let mut ctx = loaded
            .model
            .new_context(backend, params)
            .map_err(|e| engine(format!("creating a context: {e}")))?;
        let mut batch = LlamaBatch::new(PROMPT_BATCH, 1);
        let last = job.tokens.len() - 1;
        for (chunk_no, chunk) in job.tokens.chunks(PROMPT_BATCH).enumerate() {
            if stop.is_cancelled() {
                return Ok(None);
            }
            batch.clear();
            for (j, tok) in chunk.iter().enumerate() {
                let pos = chunk_no * PROMPT_BATCH + j;
                batch
                    .add(*tok, pos as i32, &[0], pos == last)
                    .map_err(|e| engine(format!("batch: {e}")))?;
            }
            ctx.decode(&mut batch)
                .map_err(|e| engine(format!("reading the prompt: {e}")))?;
        }
        let mut sampler = sampler(loaded, &mut job);
        let vocab = loaded.model.vocab();
        let mut decoder = encoding_rs::UTF_8.new_decoder();
        let mut piece = Vec::new();
        let mut pos = job.tokens.len();
        let mut generated = 0usize;
        let finish = loop {
            if stop.is_cancelled() {
                return Ok(None);
            }
            let token = sampler.sample(&ctx, batch.n_tokens() - 1);
            if vocab.is_eog(token) {
                break "stop";
            }
            generated += 1;
            piece.clear();
            // special = false: control tokens never reach the text.
            vocab.token_to_piece_into(token, &mut piece, false, None);
            let cap = decoder
                .max_utf8_buffer_length(piece.len())
                .unwrap_or(piece.len() * 3 + 8);
            let mut text = String::with_capacity(cap);
            let _ = decoder.decode_to_string(&piece, &mut text, false);
            if !text.is_empty() && tx.blocking_send(Ok(StreamEvent::Delta(text))).is_err() {
                return Ok(None); // the stream was dropped
            }
            if generated >= job.max_new {
                break "length";
            }
            batch.clear();
            batch
                .add(token, pos as i32, &[0], true)
                .map_err(|e| engine(format!("batch: {e}")))?;
            pos += 1;
            ctx.decode(&mut batch)
                .map_err(|e| engine(format!("generating: {e}")))?;
        };
        let mut tail = String::with_capacity(16);
        let _ = decoder.decode_to_string(&[], &mut tail, true);
        if !tail.is_empty() && tx.blocking_send(Ok(StreamEvent::Delta(tail))).is_err() {
            return Ok(None);
        }
        Ok(Some(StreamEvent::Done {
            finish_reason: Some(finish.to_owned()),
            usage: Some(Usage {
                prompt_tokens: job.tokens.len() as u32,
                completion_tokens: generated as u32,
            }),
        }))
    })();
    match result {
        Ok(Some(done)) => {
            let _ = tx.blocking_send(Ok(done));
        }
        Ok(None) => {}
        Err(e) => {
            let _ = tx.blocking_send(Err(e));
        }
    }
}

/// The sampler chain of a job: its schema's matcher first (it removes every
/// token the schema forbids), then greedy or the usual sampling.
fn sampler(loaded: &Loaded, job: &mut Prepared) -> LlamaSampler {
    let mut chain = Vec::new();
    if let Some(matcher) = job.matcher.take() {
        chain.push(LlamaSampler::from(matcher));
    }
    if job.temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
    } else {
        let seed: u32 = rand::random();
        chain.extend([
            LlamaSampler::penalties(loaded.model.n_vocab(), 64, 1.1, 0.0, 0.0),
            LlamaSampler::top_k(job.top_k.max(1) as i32),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::min_p(0.05, 1),
            LlamaSampler::temp(job.temperature),
            LlamaSampler::dist(seed),
        ]);
    }
    LlamaSampler::chain_simple(chain)
}

#[async_trait]
impl Provider for LocalProvider {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn default_model(&self) -> &str {
        &self.cfg.model_name
    }

    /// Loads the model (once per process) to read its training context.
    fn context_window(&self) -> usize {
        match load(&self.cfg.name, &self.cfg.model_path) {
            Ok(l) => self.n_ctx(&l),
            Err(_) => self.cfg.context_window.unwrap_or(8192),
        }
    }

    async fn stream(
        &self,
        req: ChatRequest,
        cancel: CancellationToken,
    ) -> Result<EventStream, ProviderError> {
        let cancelled = || ProviderError::Cancelled {
            provider: self.cfg.name.clone(),
        };
        let loaded = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(cancelled()),
            l = self.load_async() => l?,
        };
        let matcher = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(cancelled()),
            m = schema_matcher(self, &loaded, &req) => m?,
        };
        let job = prepare(self, &loaded, &req, matcher)?;
        // Wait for our turn on this model, cancellably.
        let guard = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(cancelled()),
            g = loaded.gen_lock.clone().lock_owned() => g,
        };
        let (tx, rx) = mpsc::channel(64);
        // The generation thread stops when either the caller cancels or the
        // stream is dropped (the drop guard cancels `stop`).
        let stop = cancel.child_token();
        let drop_guard = stop.clone().drop_guard();
        let name = self.cfg.name.clone();
        let threads = self.threads();
        let thread_stop = stop.clone();
        run_on_generation_thread(Box::new(move || {
            let _turn = guard;
            generate(&name, &loaded, job, threads, &thread_stop, &tx);
        }))
        .map_err(|e| ProviderError::Engine {
            provider: self.cfg.name.clone(),
            detail: format!("cannot start the generation thread: {e}"),
        })?;
        let provider = self.cfg.name.clone();
        struct State {
            rx: mpsc::Receiver<Result<StreamEvent, ProviderError>>,
            cancel: CancellationToken,
            provider: String,
            finished: bool,
            _guard: tokio_util::sync::DropGuard,
        }
        let state = State {
            rx,
            cancel,
            provider,
            finished: false,
            _guard: drop_guard,
        };
        Ok(futures::stream::unfold(state, |mut st| async move {
            if st.finished {
                return None;
            }
            let item = tokio::select! {
                biased;
                _ = st.cancel.cancelled() => {
                    // Make the generation thread's next send fail even if
                    // the caller keeps the stream around.
                    st.rx.close();
                    Some(Err(ProviderError::Cancelled {
                        provider: st.provider.clone(),
                    }))
                }
                item = st.rx.recv() => item,
            };
            match item {
                Some(ev) => {
                    if matches!(ev, Err(_) | Ok(StreamEvent::Done { .. })) {
                        st.finished = true;
                    }
                    Some((ev, st))
                }
                None => {
                    // The thread ended without Done or error: it saw the
                    // cancellation first.
                    st.finished = true;
                    Some((
                        Err(ProviderError::Cancelled {
                            provider: st.provider.clone(),
                        }),
                        st,
                    ))
                }
            }
        })
        .boxed())
    }

    async fn check(&self) -> Reachability {
        if !self.cfg.model_path.is_file() {
            return Reachability::NotConfigured {
                reason: format!(
                    "model file {} not found; run scripts/install-model.sh",
                    self.cfg.model_path.display()
                ),
            };
        }
        let started = std::time::Instant::now();
        match self.load_async().await {
            Ok(l) => Reachability::Reachable {
                detail: format!(
                    "{} loaded in-process ({} M parameters, context {} tokens, {} ms)",
                    self.cfg.model_path.display(),
                    l.model.n_params() / 1_000_000,
                    self.n_ctx(&l),
                    started.elapsed().as_millis()
                ),
            },
            Err(e) => Reachability::Unreachable {
                reason: e.to_string(),
            },
        }
    }

    /// Exact count with the model's tokenizer (loads the model once).
    fn count_tokens(&self, text: &str) -> Option<usize> {
        let l = load(&self.cfg.name, &self.cfg.model_path).ok()?;
        Some(
            l.model
                .vocab()
                .tokenize(text.as_bytes(), false, false)
                .len(),
        )
    }
    fn answer_limits(&self) -> crate::types::AnswerLimits {
        self.cfg.limits
    }
}

#[cfg(test)]
mod tests {
    use super::run_on_generation_thread;
    use std::sync::mpsc;

    fn thread_of_next_job() -> std::thread::ThreadId {
        let (tx, rx) = mpsc::channel();
        run_on_generation_thread(Box::new(move || {
            tx.send(std::thread::current().id()).unwrap();
        }))
        .unwrap();
        rx.recv().unwrap()
    }

    /// Every generation shares one thread (and so one OpenMP team), even
    /// when jobs are submitted from different threads, and a panicking job
    /// does not take the thread down with it.
    #[test]
    fn generations_share_one_thread_that_outlives_a_panic() {
        let first = thread_of_next_job();
        assert_ne!(first, std::thread::current().id());
        let from_elsewhere = std::thread::spawn(thread_of_next_job).join().unwrap();
        assert_eq!(from_elsewhere, first);
        run_on_generation_thread(Box::new(|| panic!("a failing generation"))).unwrap();
        assert_eq!(thread_of_next_job(), first);
    }
}

//! The server's state, one type per mode: [`App`] is what both modes share
//! (token and cookie names, providers built once and reused, limits, the
//! hosted mode's allow-lists, and the gate CPU-heavy work runs through);
//! [`Local`] adds the one store, [`Stateless`] nothing. Routers are typed by
//! the mode ([`Mode`]), so only local handlers can reach a store.

use std::collections::HashMap;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wo_providers::{Config, Provider};
use wo_store::Store;

use crate::credentials::CookieNames;
use crate::error::ApiError;
use crate::rate::RateLimiter;

/// Size caps on what clients send.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Most JSON requests.
    pub body_bytes: usize,
    /// `POST /api/merge` (a whole export).
    pub upload_bytes: usize,
    /// One new message, in characters.
    pub message_chars: usize,
    /// Stateless turns: messages a request's window may carry.
    pub window_messages: usize,
    /// Stateless turns: truth entries a request may carry.
    pub truth_entries: usize,
    /// Time a client has to send a request's headers (and, on a kept-alive
    /// connection, to start the next request): slowloris.
    pub header_timeout: Duration,
    /// Time a client has to send a whole request body: one deadline for
    /// all of it, however it trickles in (an upload gets a second more per
    /// MiB it declares, see `extract::read_body`).
    pub body_timeout: Duration,
    /// Longest a request waits for its CPU-heavy work (sanitising, XHTML
    /// conversion, parsing an upload) before it is answered 503.
    pub cpu_timeout: Duration,
    /// CPU-heavy jobs run at once; more wait (0: the number of cores).
    pub cpu_jobs: usize,
    /// Open connections at once; more wait in the listen queue.
    pub max_connections: usize,
    /// Open connections from one address (0: no cap of its own); more are
    /// closed at once.
    pub max_connections_per_ip: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: 4 << 20,
            upload_bytes: 256 << 20,
            message_chars: 32_000,
            window_messages: 200,
            truth_entries: 1_000,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(20),
            cpu_timeout: Duration::from_secs(30),
            cpu_jobs: 0,
            max_connections: 1024,
            max_connections_per_ip: 0,
        }
    }
}

/// What anonymous clients of a stateless server may choose (the operator's
/// keys pay for every turn). Empty lists mean the defaults named below.
#[derive(Clone, Debug, Default)]
pub struct Hosted {
    /// Providers a client may name; empty: only the default provider.
    pub allow_providers: Vec<String>,
    /// Models a client may name; empty: only each allowed provider's
    /// configured model.
    pub allow_models: Vec<String>,
    /// Largest `max_tokens` a client may ask for; also sent when it asks
    /// for none (or the config's default, if lower). `None`:
    /// [`HOSTED_MAX_TOKENS`]. Local mode has no cap.
    pub max_tokens: Option<u32>,
}

/// The largest `max_tokens` a stateless server grants when the operator
/// names no cap.
pub const HOSTED_MAX_TOKENS: u32 = 4096;

/// Everything a handler may need.
pub struct App {
    /// Local mode (the signed-in user: every configured provider, any
    /// model) rather than stateless (anonymous clients: the operator's
    /// allow-lists and caps). A policy only: the state file is reachable
    /// through [`Local`] alone.
    pub local: bool,
    /// `Some` in local mode: the session token.
    pub token: Option<String>,
    /// `Host` names accepted beside the loopback ones (`*`: any; stateless
    /// only), against DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// This server's cookie names (see [`CookieNames`]).
    pub cookies: CookieNames,
    /// Requests a minute per client to `/api/`.
    pub limiter: RateLimiter,
    /// Size and time caps on what clients send.
    pub limits: Limits,
    /// Stateless mode: what clients may choose.
    pub hosted: Hosted,
    /// CPU-heavy jobs: a permit each.
    cpu_permits: Arc<tokio::sync::Semaphore>,
    /// Blocking jobs waiting or running (reported by `/api/health`).
    busy: Arc<AtomicUsize>,
    /// The providers' configuration, read once at startup.
    pub config: Config,
    /// Name on the user's messages when the client sends none.
    pub username: String,
    /// The directory index used for retrieval and search, if any.
    pub index_root: Option<PathBuf>,
    providers: Mutex<HashMap<String, Arc<dyn Provider>>>,
    /// The answers in flight: memory steps give way to them
    /// (`wo_engine::priority`).
    foreground: Arc<wo_engine::priority::Foreground>,
    /// The loaded directory index and the `index.json` stamp it was read at.
    index_cache: Mutex<Option<(IndexStamp, Arc<wo_index::Index>)>>,
    /// Windows the providers' servers have said they hold, smaller than
    /// their settings: every later turn is fitted to them from the start.
    pub said_windows: Arc<wo_engine::window::SaidWindows>,
}

/// Size and modification time of `index.json`: `wo index` rewrites the
/// file atomically, so either changes when the index does.
type IndexStamp = (u64, Option<std::time::SystemTime>);

impl App {
    /// The shared part of a server; `token` is `Some` in local mode.
    pub fn new(
        local: bool,
        token: Option<String>,
        cookies: CookieNames,
        opts: &crate::ServeOptions,
    ) -> App {
        let cpu_jobs = match opts.limits.cpu_jobs {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        App {
            local,
            token,
            allowed_hosts: opts.allowed_hosts.clone(),
            cookies,
            limiter: RateLimiter::new(opts.rate_per_minute),
            limits: opts.limits.clone(),
            hosted: opts.hosted.clone(),
            cpu_permits: Arc::new(tokio::sync::Semaphore::new(cpu_jobs)),
            busy: Arc::new(AtomicUsize::new(0)),
            config: opts.config.clone(),
            username: opts.username.clone(),
            index_root: opts.index_root.clone(),
            providers: Mutex::new(HashMap::new()),
            foreground: wo_engine::priority::Foreground::new(),
            index_cache: Mutex::new(None),
            said_windows: Arc::default(),
        }
    }

    /// `"local"` or `"stateless"`, as `/api/info` reports it.
    pub fn mode(&self) -> &'static str {
        if self.local { "local" } else { "stateless" }
    }

    /// The body limit of a path.
    pub fn body_limit(&self, path: &str) -> usize {
        if path == wo_wire::routes::MERGE_PATH {
            self.limits.upload_bytes
        } else {
            self.limits.body_bytes
        }
    }

    /// The provider called `name` (default: the configured default), built
    /// on first use and reused: a local model loads once. Its answers are
    /// counted as in flight, so memory steps give way to them.
    pub async fn provider(&self, name: Option<&str>) -> Result<Arc<dyn Provider>, ApiError> {
        let name = name.unwrap_or_else(|| self.default_provider()).to_owned();
        if !self.local && !self.offered_providers().contains(&name) {
            return Err(ApiError::bad_field(
                "/params/provider",
                format!(
                    "provider {name:?} is not offered by this server (offered: {})",
                    self.offered_providers().join(", ")
                ),
            ));
        }
        let built = self.configured_provider(name).await?;
        Ok(wo_engine::priority::ForegroundProvider::wrap(
            built,
            self.foreground.clone(),
        ))
    }

    /// The provider called `name`, built on first use, whether or not a
    /// client may choose it (the operator's `[interpreter] provider`).
    async fn configured_provider(&self, name: String) -> Result<Arc<dyn Provider>, ApiError> {
        if let Some(p) = self.lock_providers().get(&name) {
            return Ok(p.clone());
        }
        if let Some(unknown) = wo_engine::request::unknown_provider(&self.config, &name) {
            return Err(ApiError::bad_field("/params/provider", unknown));
        }
        let config = self.config.clone();
        let built_name = name.clone();
        let built = tokio::task::spawn_blocking(move || wo_providers::build(&built_name, &config))
            .await
            .map_err(|e| ApiError::internal(format!("provider setup panicked: {e}")))?
            .map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::BAD_GATEWAY,
                    "provider",
                    e.to_string(),
                )
            })?;
        Ok(self.lock_providers().entry(name).or_insert(built).clone())
    }

    /// The memory step after a turn answered by `answered_by` (see
    /// `wo_engine::memory::step_for`), with the prompt of the project in
    /// `project_dir`. A step that cannot be set up costs the memory, not
    /// the turn: the reason goes to the log. The step's calls give way to
    /// answers in flight (`wo_engine::priority`): with the in-process model
    /// the next answer never waits for the interpreter's generation.
    pub async fn memory_step(
        &self,
        answered_by: &Arc<dyn Provider>,
        project_dir: Option<&std::path::Path>,
    ) -> Option<wo_engine::chat::MemoryStep> {
        let interpreter = match &self.config.interpreter.provider {
            // The operator's choice: not limited to what clients may pick.
            Some(name) => self
                .configured_provider(name.clone())
                .await
                .map(Some)
                .map_err(|e| e.message),
            None => Ok(None),
        };
        // The provider itself, not the answers' wrapper handed to the turn.
        let answered_by = self
            .configured_provider(answered_by.name().to_owned())
            .await
            .unwrap_or_else(|_| answered_by.clone());
        let (step, note) =
            wo_engine::setup::memory_step(&self.config, &answered_by, interpreter, project_dir);
        if let Some(note) = note {
            eprintln!("wo serve: {note}");
        }
        // One person's server waits, as the CLI does, for a pause in their
        // questions (a model on their machine evaluates a prompt it was sent
        // to the end, one request at a time); a hosted one, answering many
        // people, would then rarely find one: its calls only give way.
        let pause = if self.local {
            self.config.interpreter.pause()
        } else {
            std::time::Duration::ZERO
        };
        step.map(|mut step| {
            step.provider = wo_engine::priority::BackgroundProvider::wrap(
                step.provider,
                self.foreground.clone(),
                pause,
            );
            step
        })
    }

    /// The provider used when a client names none: the configured default,
    /// or in stateless mode the first allowed one if the default is not.
    pub fn default_provider(&self) -> &str {
        let default = self.config.default_provider();
        if self.local
            || self.hosted.allow_providers.is_empty()
            || self.hosted.allow_providers.iter().any(|p| p == default)
        {
            default
        } else {
            &self.hosted.allow_providers[0]
        }
    }

    /// The providers a client may choose: every configured one (local
    /// mode, the user's own), or the operator's allow-list (stateless;
    /// default: the default provider only).
    pub fn offered_providers(&self) -> Vec<String> {
        if self.local {
            self.config.providers.keys().cloned().collect()
        } else if self.hosted.allow_providers.is_empty() {
            vec![self.default_provider().to_owned()]
        } else {
            self.hosted.allow_providers.clone()
        }
    }

    /// The models a stateless client may name with provider `info`: its
    /// configured model and the operator's `allow_models`. `None` in local
    /// mode (any model the provider takes).
    pub fn offered_models(&self, info: &wo_providers::config::ProviderInfo) -> Option<Vec<String>> {
        if self.local {
            return None;
        }
        let mut models = vec![info.model.clone()];
        models.extend(
            self.hosted
                .allow_models
                .iter()
                .filter(|m| **m != info.model)
                .cloned(),
        );
        Some(models)
    }

    /// The most `max_tokens` a stateless client may ask for (`--max-tokens`).
    pub fn max_tokens_cap(&self) -> u32 {
        self.hosted.max_tokens.unwrap_or(HOSTED_MAX_TOKENS)
    }

    /// Checks a stateless client's model and `max_tokens` against what the
    /// operator offers; returns the `max_tokens` to send (the cap when the
    /// client asks for none). Local mode: the client's own, unchanged.
    pub fn checked_choices(&self, params: &wo_wire::ChatParams) -> Result<Option<u32>, ApiError> {
        if self.local {
            return Ok(params.max_tokens);
        }
        let provider = params
            .provider
            .as_deref()
            .unwrap_or_else(|| self.default_provider());
        if let Some(model) = params.model.as_deref().filter(|m| !m.is_empty()) {
            let offered = wo_providers::config::list(&self.config)
                .into_iter()
                .find(|i| i.name == provider)
                .and_then(|i| self.offered_models(&i))
                .unwrap_or_default();
            if !offered.iter().any(|m| m == model) {
                return Err(ApiError::bad_field(
                    "/params/model",
                    format!(
                        "model {model:?} is not offered by this server for {provider} (offered: {})",
                        offered.join(", ")
                    ),
                ));
            }
        }
        let cap = self.max_tokens_cap();
        match params.max_tokens {
            Some(n) if n > cap => Err(ApiError::bad_field(
                "/params/max_tokens",
                format!("at most {cap} on this server"),
            )),
            Some(n) => Ok(Some(n)),
            None => Ok(Some(
                self.config.defaults.max_tokens.map_or(cap, |d| d.min(cap)),
            )),
        }
    }

    fn lock_providers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn Provider>>> {
        self.providers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The directory index, if there is one: loaded once and kept (a large
    /// project's `index.json` takes seconds to parse), reloaded when `wo
    /// index` has rewritten it. Blocking: call it on a blocking thread.
    pub fn index(&self) -> Result<Option<Arc<wo_index::Index>>, ApiError> {
        let Some(root) = &self.index_root else {
            return Ok(None);
        };
        let file = wo_index::cache_dir(root).join(wo_index::INDEX_FILE);
        let stamp = std::fs::metadata(&file)
            .map(|m| (m.len(), m.modified().ok()))
            .map_err(|e| {
                ApiError::internal(format!(
                    "cannot read the directory index {}: {e}; run `wo index` in the project",
                    file.display()
                ))
            })?;
        // Held while loading, so concurrent requests wait for one load.
        let mut cache = self.index_cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, index)) = cache.as_ref()
            && *at == stamp
        {
            return Ok(Some(index.clone()));
        }
        let index =
            Arc::new(wo_index::Index::open(root).map_err(|e| {
                ApiError::internal(format!("cannot open the directory index: {e}"))
            })?);
        *cache = Some((stamp, index.clone()));
        Ok(Some(index))
    }
}

impl App {
    /// Blocking jobs waiting or running now.
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// Runs CPU-heavy `f` (sanitising, XHTML conversion, parsing) on a
    /// blocking thread, never on the async workers: one hostile body must
    /// not stall every other client. At most `cpu_jobs` run at once; a
    /// request whose job has not finished within `cpu_timeout` (waiting
    /// included) is answered 503 (the thread finishes on its own, holding
    /// its permit, so the cap stays true).
    pub async fn cpu<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let deadline = tokio::time::Instant::now() + self.limits.cpu_timeout;
        let busy = Busy::new(&self.busy);
        let too_long = || {
            ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                format!(
                    "the server could not finish this request within {} s; send less (smaller or less deeply nested content) or try again later",
                    self.limits.cpu_timeout.as_secs()
                ),
            )
        };
        let permit = tokio::time::timeout_at(deadline, self.cpu_permits.clone().acquire_owned())
            .await
            .map_err(|_| too_long())?
            .map_err(|_| ApiError::internal("the CPU gate is closed"))?;
        let job = tokio::task::spawn_blocking(move || {
            let _held = (permit, busy);
            f()
        });
        match tokio::time::timeout_at(deadline, job).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(ApiError::internal(format!("a job panicked: {e}"))),
            Err(_) => Err(too_long()),
        }
    }
}

/// Counts a blocking job while it lives.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Busy(count.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a router answers with: a local server (the shared part and the one
/// state file) or a stateless one. Handlers take the mode they serve, so a
/// local-only route cannot be reached on a stateless server: its router has
/// no such route and its state has no store.
pub trait Mode: Deref<Target = App> + Send + Sync + 'static {
    /// The shared part, as the guard middleware takes it.
    fn shared(&self) -> &Arc<App>;
    /// The state file's name (never its directory), for `/api/info`.
    fn state_file_name(&self) -> Option<String> {
        None
    }
}

/// A local server: the one state file it owns, behind a mutex used only on
/// blocking threads. Only handlers that take it can reach the file:
///
/// ```no_run
/// async fn reads_the_file(l: &wo_server::app::Local) {
///     let _ = l.with_store(|_| Ok(())).await;
/// }
/// ```
pub struct Local {
    app: Arc<App>,
    store: Arc<Mutex<Store>>,
    /// Turns' commits go through it: the turns that finish while a write
    /// is in progress share the next write and its fsync.
    group: Arc<wo_store::GroupCommit>,
    /// Taken (asynchronously) before a store operation takes a blocking
    /// thread: operations wait their turn here, not each on a thread of
    /// its own blocked on the store's mutex.
    turnstile: Arc<tokio::sync::Mutex<()>>,
    /// The state as last written or read, for turns' reads
    /// ([`Local::read`], [`Local::read_indexed`]): they never wait for the
    /// store's mutex, which a batch holds through its fsyncs. Taken after
    /// `store`, never before.
    published: Arc<Mutex<Published>>,
    /// Turns' reads running at once (one per core): each holds a blocking
    /// thread while it runs, none while it waits.
    readers: Arc<tokio::sync::Semaphore>,
    /// The transcript's recall postings, kept across turns: readers share
    /// it; the first reader after a change brings it up to date alone
    /// (taken after `store`, before `published`).
    recall: Arc<std::sync::RwLock<wo_engine::RecallIndex>>,
    /// The directory of the state file: the project whose prompts apply.
    project_dir: Option<PathBuf>,
    /// Recall by meaning: the transcript's vectors (the embeddings sidecar),
    /// when the embedding model is installed; `None`: by words alone.
    dense: Option<Arc<wo_engine::setup::LiveEmbeddings>>,
    /// `/mcp`: the MCP server on this same store.
    pub mcp: wo_mcp::http::McpHttpService,
}

/// An MCP session idle this long is closed (its client starts another).
const MCP_IDLE: Duration = Duration::from_secs(30 * 60);

impl Local {
    /// A local server on `store`; `app` must be built with `local = true`.
    /// `mcp_allow_write` lets `/mcp` clients write.
    pub fn new(app: Arc<App>, store: Store, mcp_allow_write: bool) -> Local {
        debug_assert!(app.local && app.token.is_some());
        let project_dir = store.path().parent().map(std::path::Path::to_path_buf);
        let state = store.path().to_path_buf();
        let group = Arc::new(wo_store::GroupCommit::new(&store));
        let published = Arc::new(Mutex::new(Published::of(&store)));
        let store = Arc::new(Mutex::new(store));
        let recall = Arc::new(std::sync::RwLock::new(wo_engine::RecallIndex::new()));
        let readers = Arc::new(tokio::sync::Semaphore::new(
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
        ));
        let dense = Self::open_dense(&app, &state);
        // Built in the background, so the first turn finds it ready (a
        // 100k-message transcript takes a moment to tokenise); then the
        // messages the embeddings sidecar lacks are embedded, found by
        // words alone until then.
        {
            let (store, recall, dense) = (store.clone(), recall.clone(), dense.clone());
            let published = published.clone();
            std::thread::spawn(move || {
                let pending = {
                    let store = store.lock().unwrap_or_else(|p| p.into_inner());
                    let state = lock(&published).state.clone();
                    recall
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .sync(&state);
                    dense.as_ref().map(|d| d.pending(store.state(), usize::MAX))
                };
                if let (Some(dense), Some(pending)) = (dense, pending)
                    && !pending.is_empty()
                    && let Err(e) = dense.top_up(pending, None)
                {
                    eprintln!("wo serve: recall: cannot write the embeddings sidecar: {e}");
                }
            });
        }
        // The same store, so `/mcp`, the API and the OpenAI endpoint never
        // race each other's writes inside this process.
        let mcp = wo_mcp::WikiOracleMcp::on_store(
            store.clone(),
            wo_mcp::McpOptions {
                state,
                open: wo_store::OpenOptions::default(),
                allow_write: mcp_allow_write,
                index: app.index_root.clone(),
            },
        );
        Local {
            mcp: wo_mcp::http::service(mcp, MCP_IDLE),
            app,
            store,
            group,
            turnstile: Arc::new(tokio::sync::Mutex::new(())),
            published,
            readers,
            recall,
            project_dir,
            dense,
        }
    }

    /// The embedding model and the sidecar beside the state file at
    /// `state`, or one note that recall is by words alone.
    fn open_dense(
        app: &App,
        state: &std::path::Path,
    ) -> Option<Arc<wo_engine::setup::LiveEmbeddings>> {
        let (embedder, note) = wo_engine::setup::embedder_or_note(app.config.env());
        if let Some(note) = note {
            eprintln!("wo serve: note: {note}");
        }
        let sidecar = wo_engine::embed_file::sidecar_path(state);
        let embedder = embedder?;
        if let Some(note) = wo_engine::recall_file::refused_sidecar(&sidecar) {
            eprintln!("wo serve: note: {note}");
        }
        let (live, _) = wo_engine::setup::LiveEmbeddings::open(embedder, sidecar);
        Some(Arc::new(live))
    }

    /// Recall by meaning, when the embedding model is installed.
    pub fn dense(&self) -> Option<&Arc<wo_engine::setup::LiveEmbeddings>> {
        self.dense.as_ref()
    }

    /// The directory of the state file (its project's prompts apply).
    pub fn project_dir(&self) -> Option<&std::path::Path> {
        self.project_dir.as_deref()
    }

    /// Runs `f` on the store on a blocking thread (it reads and fsyncs
    /// files), first taking in any change made outside the server.
    pub async fn with_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let (store, published) = (self.store.clone(), self.published.clone());
        let busy = Busy::new(&self.app.busy);
        let _turn = self.turnstile.lock().await;
        tokio::task::spawn_blocking(move || {
            let _busy = busy;
            let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
            let refreshed = guard.refresh()?;
            let result = f(&mut guard);
            // What `f` wrote (or the refresh took in) is what turns read
            // next: an edit acknowledged here is in the next turn's prompt.
            let mut published = lock(&published);
            published.stale |= refreshed;
            published.publish(&guard);
            result
        })
        .await
        .map_err(|e| ApiError::internal(format!("a state operation panicked: {e}")))?
    }
}

impl Local {
    /// Applies `change` and writes it durably, in one write with the other
    /// changes committed this way meanwhile ([`wo_store::GroupCommit`]):
    /// returns once that write is durable, or with its error (every change
    /// of a failed write fails). The store's lock is held only by the
    /// write, never while a caller waits for its turn.
    pub async fn commit_grouped<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut wo_format::State) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let busy = Busy::new(&self.app.busy);
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Queued without holding a thread; only the leader of a batch
        // takes one (profile: a blocking thread per waiting turn meant a
        // hundred threads, each faulting in fresh heap pages).
        let must_lead = self.group.submit(change, move |verdict| {
            let _ = tx.send(verdict);
        });
        if must_lead {
            let (store, group) = (self.store.clone(), self.group.clone());
            let published = self.published.clone();
            // Published before the batch's committers hear they are
            // durable: a client's next turn names this one as its parent.
            tokio::task::spawn_blocking(move || {
                group.lead_then(&store, &|store| lock(&published).publish(store));
            });
        }
        let verdict = rx
            .await
            .map_err(|_| ApiError::internal("the write holding this change was abandoned"))?;
        drop(busy);
        verdict.map(|(value, _)| value).map_err(ApiError::from)
    }

    /// Runs `f` on the state as last written or read (taking in a change
    /// made outside the server when the store is free to look), on a
    /// blocking thread, one per core at once. Never waits for the store's
    /// mutex: a batch of turns holds it through its fsyncs, and a turn's
    /// read (the prompt) needs only what was durable when it began.
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Arc<wo_format::State>) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let (store, published) = (self.store.clone(), self.published.clone());
        let busy = Busy::new(&self.app.busy);
        let permit = self
            .readers
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::internal("the readers' gate is closed"))?;
        tokio::task::spawn_blocking(move || {
            let _held = (permit, busy);
            let state = latest(&store, &published)?;
            f(&state)
        })
        .await
        .map_err(|e| ApiError::internal(format!("a state operation panicked: {e}")))?
    }

    /// [`Local::read`] with the recall index: the index is brought up to
    /// date with the state (appended messages added, the tail re-indexed
    /// after insertions) and lent with it. Readers share the index; the
    /// first one after a change updates it alone.
    pub async fn read_indexed<T: Send + 'static>(
        &self,
        f: impl FnOnce(&wo_format::State, &wo_engine::RecallIndex) -> Result<T, ApiError>
        + Send
        + 'static,
    ) -> Result<T, ApiError> {
        let (recall, published) = (self.recall.clone(), self.published.clone());
        self.read(move |state| {
            {
                let index = recall.read().unwrap_or_else(|p| p.into_inner());
                if index.is_current(state) {
                    return f(state, &index);
                }
            }
            let mut index = recall.write().unwrap_or_else(|p| p.into_inner());
            // The newest state, not this read's (which may be older than
            // what another reader indexed meanwhile): the index only moves
            // forward, never back and forth between versions.
            let state = lock(&published).state.clone();
            index.sync(&state);
            f(&state, &index)
        })
        .await
    }
}

/// The state published for readers ([`Local::read`]).
struct Published {
    state: Arc<wo_format::State>,
    /// The store's transcript version `state` was copied at, to bring a
    /// copy up to date by copying only what changed since.
    copied: wo_format::TranscriptVersion,
    /// What `state` was published from: its date (every write sets it to
    /// a later microsecond) and transcript version (every change of a
    /// message changes it).
    key: (wo_format::Timestamp, wo_format::TranscriptVersion),
    /// The store re-read the file since (an outside change, which need not
    /// change the key): publish it again.
    stale: bool,
    /// The copy published before `state`, with its version: once no reader
    /// holds it, the next publication brings it up to date in place rather
    /// than cloning the whole state (a 3,000-message transcript is ~17 MB,
    /// copied after every batch, in fresh pages each time).
    spare: Option<(Arc<wo_format::State>, wo_format::TranscriptVersion)>,
}

impl Published {
    fn of(store: &Store) -> Published {
        let mut state = wo_format::State::new(store.state().date.clone());
        let copied = state.refresh_copy(store.state(), None);
        Published {
            state: Arc::new(state),
            copied,
            key: Published::key_of(store.state()),
            stale: false,
            spare: None,
        }
    }

    fn key_of(state: &wo_format::State) -> (wo_format::Timestamp, wo_format::TranscriptVersion) {
        (state.date.clone(), state.transcript_version())
    }

    /// Publishes the store's state unless it is what is published already.
    fn publish(&mut self, store: &Store) {
        if !self.stale && self.key == Published::key_of(store.state()) {
            return;
        }
        let src = store.state();
        // The spare when no reader holds it any more (only this struct
        // hands out clones of it, under its mutex), else a fresh copy.
        let reused = self.spare.take().and_then(|(mut spare, copied)| {
            let copy = Arc::get_mut(&mut spare)?;
            let copied = copy.refresh_copy(src, Some(&copied));
            Some((spare, copied))
        });
        let (state, copied) = reused.unwrap_or_else(|| {
            let mut copy = wo_format::State::new(src.date.clone());
            let copied = copy.refresh_copy(src, None);
            (Arc::new(copy), copied)
        });
        let previous = std::mem::replace(&mut self.state, state);
        let previous_copied = std::mem::replace(&mut self.copied, copied);
        self.spare = Some((previous, previous_copied));
        self.key = Published::key_of(src);
        self.stale = false;
    }
}

/// The state to read: when the store is free, first brought up to date with
/// the file (an outside change taken in) and published; when a write holds
/// it, what was published last (that write publishes again when it ends).
fn latest(
    store: &Mutex<Store>,
    published: &Mutex<Published>,
) -> Result<Arc<wo_format::State>, ApiError> {
    let free = match store.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    if let Some(mut store) = free {
        let refreshed = store.refresh()?;
        let mut published = lock(published);
        published.stale |= refreshed;
        published.publish(&store);
        return Ok(published.state.clone());
    }
    Ok(lock(published).state.clone())
}

/// A poisoned lock only means a panic elsewhere; what it guards is whole.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Deref for Local {
    type Target = App;
    fn deref(&self) -> &App {
        &self.app
    }
}

impl Mode for Local {
    fn shared(&self) -> &Arc<App> {
        &self.app
    }

    fn state_file_name(&self) -> Option<String> {
        let s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        Some(
            s.path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )
    }
}

/// A stateless server: nothing but the shared part. It has no store to
/// reach, so a handler that needs one cannot be written for it:
///
/// ```compile_fail
/// async fn wants_the_file(s: &wo_server::app::Stateless) {
///     let _ = s.with_store(|_| Ok(())).await;
/// }
/// ```
pub struct Stateless {
    app: Arc<App>,
}

impl Stateless {
    /// A stateless server; `app` must be built with `local = false`.
    pub fn new(app: Arc<App>) -> Stateless {
        debug_assert!(!app.local && app.token.is_none());
        Stateless { app }
    }
}

impl Deref for Stateless {
    type Target = App;
    fn deref(&self) -> &App {
        &self.app
    }
}

impl Mode for Stateless {
    fn shared(&self) -> &Arc<App> {
        &self.app
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use wo_engine::chat::TurnState;
    use wo_format::{Message, State, Timestamp};

    fn msg(n: i64) -> Message {
        Message::new(
            "alec",
            Timestamp::from_unix(1_800_000_000 + n),
            format!("m{n}"),
            format!("<p>message {n}</p>"),
        )
    }

    /// A local server's state on a fresh file in `dir` (no model, no HOME).
    fn local(dir: &std::path::Path) -> Arc<Local> {
        let path = dir.join("llm.json");
        let store = Store::create(
            &path,
            State::new(Timestamp::from_unix(1_800_000_000)),
            wo_store::OpenOptions::default(),
        )
        .unwrap();
        let config =
            wo_providers::Config::builtin(wo_providers::env::Env::from_pairs::<&str, &str>([]));
        let opts = crate::ServeOptions::new(Some(path), config);
        let cookies = CookieNames::new(1, "test");
        let app = Arc::new(App::new(true, Some("token".into()), cookies, &opts));
        Arc::new(Local::new(app, store, false))
    }

    /// Holds the store's mutex on a thread of its own, as a batch of turns
    /// holds it through its write and fsyncs, until the sender is dropped.
    fn hold_store(local: &Local) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let store = local.store.clone();
        let (held, is_held) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _guard = store.lock().unwrap();
            held.send(()).unwrap();
            let _ = released.recv();
        });
        is_held.recv().unwrap();
        (release, holder)
    }

    async fn messages_read(local: &Arc<Local>, indexed: bool) -> Vec<String> {
        let mut turn = crate::turn::LocalTurn { app: local.clone() };
        let ids =
            |s: &State| -> Vec<String> { s.messages().iter().map(|m| m.id.clone()).collect() };
        let read = async {
            if indexed {
                turn.read_indexed(move |s, index| {
                    assert!(index.is_some_and(|i| i.is_current(s)));
                    Ok(ids(s))
                })
                .await
            } else {
                turn.read(move |s| Ok(ids(s))).await
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("a turn's read waited for the store's mutex")
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_turns_read_never_waits_for_a_write_in_progress_and_sees_what_was_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let local = local(dir.path());
        let first = msg(1);
        let id = first.id.clone();
        local
            .commit_grouped(move |s| s.push_message(first))
            .await
            .unwrap();
        let (release, holder) = hold_store(&local);
        // Acknowledged before the store was taken: read while it is held.
        assert_eq!(messages_read(&local, false).await, vec![id.clone()]);
        assert_eq!(messages_read(&local, true).await, vec![id]);
        drop(release);
        holder.join().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_edit_through_the_store_and_an_outside_change_reach_the_next_read() {
        let dir = tempfile::tempdir().unwrap();
        let local = local(dir.path());
        // An API edit (the store lent out mutably, written).
        let edited = msg(1);
        let edited_id = edited.id.clone();
        local
            .with_store(move |store| {
                store.transact(|s| s.push_message(edited))?;
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(messages_read(&local, true).await, vec![edited_id.clone()]);
        // Another process writes the file: the next read takes it in.
        let mut other = Store::open(
            dir.path().join("llm.json"),
            wo_store::OpenOptions::default(),
        )
        .unwrap();
        let outside = msg(2);
        let outside_id = outside.id.clone();
        other.transact(|s| s.push_message(outside)).unwrap();
        assert_eq!(
            messages_read(&local, true).await,
            vec![edited_id, outside_id]
        );
    }
}

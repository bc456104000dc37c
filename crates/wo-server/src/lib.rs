//! `wo serve` (product §6): an axum server in one of two modes.
//!
//! * **Local** (default): owns exactly the one state file named at startup
//!   (after merging the `llm_*.json` exports beside it), binds a loopback
//!   address, and admits only holders of a random token printed in the
//!   launch URL; [`signin`] keeps that token per project across restarts.
//! * **Stateless** (`--stateless`, the hosted deployment): keeps nothing; the
//!   browser holds the state and sends what each turn needs.
//!
//! The two modes are two router states ([`app::Local`], [`app::Stateless`]):
//! a local-only handler takes `Local`, the only state with a store, so it
//! cannot be routed on a stateless server. Paths and bodies are the
//! `wo_wire` crate's, shared with the `wikioracle` provider and the tests.
//!
//! Modules: [`guard`] (every security check), [`extract`] (request bodies:
//! limits, timeout, JSON errors with pointers), [`api`] (JSON handlers),
//! [`stateless`] (the stateless turn's input), [`turn`] (each mode's state
//! access and the SSE sink for the engine's one turn), [`openai`] (the
//! OpenAI-compatible `/v1/`), [`mcp`] (MCP at `/mcp`), [`sse`] (streaming), [`app`] (the
//! state of each mode), [`error`] (error bodies), [`assets`] (the web
//! client and the OpenAPI document), [`signin`] (the per-project token kept
//! across restarts).
//!
//! A local server also faces other tools, with the bearer token: an
//! OpenAI-compatible API (`/v1/models`, `/v1/chat/completions`: answers
//! with the person's memory, exchanges recorded) and MCP over streamable
//! HTTP (`/mcp`: the tools of `wo mcp`, on the same store).

pub mod api;
pub mod app;
pub mod assets;
pub mod credentials;
pub mod error;
pub mod extract;
pub mod guard;
pub mod mcp;
pub mod openai;
pub mod rate;
pub mod setup;
pub mod signin;
pub mod sse;
pub mod stateless;
pub mod turn;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, patch, post};
use wo_wire::routes as path;

use crate::app::{App, Hosted, Limits, Local, Mode, Stateless};
use crate::error::ApiError;

/// How to run the server.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// `Some(path)`: local mode on this state file; `None`: stateless.
    pub state_file: Option<PathBuf>,
    /// Where to listen; local mode accepts loopback addresses only.
    pub addr: SocketAddr,
    /// Extra `Host` names to accept (`*` for any; stateless only).
    pub allowed_hosts: Vec<String>,
    /// Requests a minute per client to `/api/` (0: no limit).
    pub rate_per_minute: u32,
    /// Size and time caps on what clients send.
    pub limits: Limits,
    /// Providers and `[defaults]` (`~/.config/wikioracle/config.toml`).
    pub config: wo_providers::Config,
    /// Name on the user's messages when the client sends none.
    pub username: String,
    /// The directory index used for retrieval and search; `None`: none.
    pub index_root: Option<PathBuf>,
    /// A fixed token (tests, scripts); default: the project's kept token
    /// (`token_dir`), else a fresh random one.
    pub token: Option<String>,
    /// Local mode: WikiOracle's data directory, where [`signin`] keeps the
    /// project's token so sign-in links survive restarts; `None`: a new
    /// token each start.
    pub token_dir: Option<PathBuf>,
    /// Local mode: replace the kept token (`wo serve --new-token`): every
    /// earlier link and cookie stops working.
    pub new_token: bool,
    /// How the state file is opened (symlinks, size limits, lock timeout).
    pub store: wo_store::OpenOptions,
    /// Stateless mode: the operator's allow-lists and caps.
    pub hosted: Hosted,
    /// Local mode: let `/mcp` clients write (`remember`, `resolve`,
    /// `log_exchange`); off by default, as `wo mcp --allow-write` is.
    pub mcp_allow_write: bool,
}

impl ServeOptions {
    /// Local mode on `state_file` (stateless with `None`) answering with
    /// `config`'s providers, on a free loopback port, with the default
    /// limits, no rate limit, no index, no MCP writes and a new token each
    /// start; set what differs with struct update syntax.
    pub fn new(state_file: Option<PathBuf>, config: wo_providers::Config) -> ServeOptions {
        ServeOptions {
            state_file,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            allowed_hosts: Vec::new(),
            rate_per_minute: 0,
            limits: Limits::default(),
            config,
            username: "you".into(),
            index_root: None,
            token: None,
            token_dir: None,
            new_token: false,
            store: wo_store::OpenOptions::default(),
            hosted: Hosted::default(),
            mcp_allow_write: false,
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The options contradict each other or the mode (a public address in
    /// local mode, a stateless flag in local mode, an unknown provider).
    #[error("{0}")]
    Refused(String),
    #[error("cannot listen on {addr}: {error}\nhint: {hint}")]
    /// The address could not be bound (in use, not permitted).
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error (shown once, in the message: it is
        /// not a `source`, so no caller prints it a second time).
        error: std::io::Error,
        /// What to do: open the WikiOracle server already there when it
        /// is this project's, else pick another port.
        hint: String,
    },
    /// The state file could not be opened or its exports merged.
    #[error(transparent)]
    Store(#[from] wo_store::StoreError),
    /// The project's sign-in token could not be kept.
    #[error(transparent)]
    Token(#[from] signin::TokenError),
}

/// What to tell a person whose port is taken: asks whoever listens at
/// `addr` (loopback, one second at most) whether it is a WikiOracle server,
/// and whether it is this project's (it accepts this project's kept token).
async fn already_serving(addr: SocketAddr, token: Option<&str>) -> String {
    const OTHER: &str =
        "another program uses the port; pick a free one with --port (--port 0: any)";
    let host = if addr.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    let ask = |path: &'static str, bearer: Option<String>| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
        let auth = bearer
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut reply = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut reply).await.ok()?;
        let reply = String::from_utf8_lossy(&reply).into_owned();
        let status: u16 = reply.split(' ').nth(1)?.parse().ok()?;
        Some((status, reply))
    };
    let timeout = std::time::Duration::from_secs(1);
    let health = tokio::time::timeout(timeout, ask("/api/health", None)).await;
    let Ok(Some((200, body))) = health else {
        return OTHER.into();
    };
    if !body.contains("\"status\":\"ok\"") {
        return OTHER.into();
    }
    let ours = match token {
        Some(t) => matches!(
            tokio::time::timeout(timeout, ask("/api/info", Some(t.to_owned()))).await,
            Ok(Some((200, _)))
        ),
        None => false,
    };
    match token {
        Some(t) if ours => {
            format!("WikiOracle already serves this project there: open http://{host}/?token={t}")
        }
        _ => format!(
            "a WikiOracle server for another project already listens on {host}; pick another port with --port"
        ),
    }
}

/// A bound server, not yet serving.
pub struct Bound {
    listener: tokio::net::TcpListener,
    served: Served,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The URL to open: in local mode it carries the token, once.
    pub launch_url: String,
    /// Exports merged at startup.
    pub merged: Vec<wo_store::exports::FileMerge>,
    /// Local mode with a `token_dir`: where the token is kept and whether
    /// it is an earlier start's (`origin`).
    pub kept_token: Option<signin::ProjectToken>,
}

/// Opens the state (local mode), merges exports beside it, and binds.
pub async fn bind(opts: ServeOptions) -> Result<Bound, ServeError> {
    let local = opts.state_file.is_some();
    if local && !opts.addr.ip().is_loopback() {
        return Err(ServeError::Refused(format!(
            "local mode serves your llm.json and binds loopback addresses only, not {}\nhint: use --stateless for a public server, or keep the default 127.0.0.1",
            opts.addr.ip()
        )));
    }
    if local && !opts.allowed_hosts.is_empty() {
        return Err(ServeError::Refused(
            "--allow-host is for --stateless servers; local mode answers loopback names only"
                .into(),
        ));
    }
    let hosted = &opts.hosted;
    if !local && opts.mcp_allow_write {
        return Err(ServeError::Refused(
            "--mcp-allow-write is for local mode: a stateless server has no llm.json to write"
                .into(),
        ));
    }
    if local
        && (!hosted.allow_providers.is_empty()
            || !hosted.allow_models.is_empty()
            || hosted.max_tokens.is_some())
    {
        return Err(ServeError::Refused(
            "--allow-provider, --allow-model and --max-tokens are for --stateless servers; in local mode every configured provider is yours".into(),
        ));
    }
    if let Some((name, unknown)) = hosted
        .allow_providers
        .iter()
        .find_map(|n| wo_engine::request::unknown_provider(&opts.config, n).map(|why| (n, why)))
    {
        return Err(ServeError::Refused(format!(
            "--allow-provider {name}: {unknown}"
        )));
    }
    if opts.new_token && (!local || opts.token.is_some()) {
        return Err(ServeError::Refused(
            if local {
                "--new-token rotates the kept token; it cannot be combined with WO_SERVE_TOKEN (a token of your own)"
            } else {
                "--new-token is for local mode: a stateless server has no sign-in"
            }
            .into(),
        ));
    }
    if hosted.max_tokens == Some(0) {
        return Err(ServeError::Refused(
            "--max-tokens must be at least 1".into(),
        ));
    }
    let (store, merged) = match &opts.state_file {
        Some(path) => {
            let mut store_opts = opts.store.clone();
            store_opts.create_if_missing = true;
            // The file may have been edited by anyone: what is served to
            // the browser is sanitised on every read, as an import is.
            store_opts.sanitise_content = true;
            let mut store = wo_store::Store::open(path, store_opts)?;
            let merged = wo_store::exports::auto_merge(&mut store, false)?;
            (Some(store), merged)
        }
        None => (None, Vec::new()),
    };
    // After the store is open, so the state file exists and its canonical
    // path (the project's key) is what every later start will see.
    let kept_token = match (&opts.state_file, &opts.token, &opts.token_dir) {
        (Some(file), None, Some(dir)) => Some(signin::load_or_create(dir, file, opts.new_token)?),
        _ => None,
    };
    let token = local.then(|| {
        opts.token
            .clone()
            .or_else(|| kept_token.as_ref().map(|k| k.token.clone()))
            .unwrap_or_else(guard::new_token)
    });
    let listener = match tokio::net::TcpListener::bind(opts.addr).await {
        Ok(l) => l,
        Err(error) => {
            let hint = if error.kind() == std::io::ErrorKind::AddrInUse {
                already_serving(opts.addr, token.as_deref()).await
            } else {
                "pick another address or port with --bind / --port".into()
            };
            return Err(ServeError::Bind {
                addr: opts.addr,
                error,
                hint,
            });
        }
    };
    let addr = listener.local_addr().map_err(|error| ServeError::Bind {
        addr: opts.addr,
        error,
        hint: "pick another address or port with --bind / --port".into(),
    })?;
    let host = if addr.ip().is_unspecified() {
        format!("127.0.0.1:{}", addr.port())
    } else {
        addr.to_string()
    };
    let launch_url = match &token {
        Some(t) => format!("http://{host}/?token={t}"),
        None => format!("http://{host}/"),
    };
    // Local mode: the project's id, so a restart keeps the cookie's name
    // (and the cookie keeps working); stateless servers set no session.
    let instance = match &opts.state_file {
        Some(file) => signin::cookie_id(file),
        None => guard::new_instance_id(),
    };
    let cookies = guard::CookieNames::new(addr.port(), &instance);
    let app = Arc::new(App::new(local, token, cookies, &opts));
    let served = match store {
        Some(store) => Served::Local(Arc::new(Local::new(app, store, opts.mcp_allow_write))),
        None => Served::Stateless(Arc::new(Stateless::new(app))),
    };
    Ok(Bound {
        listener,
        served,
        addr,
        launch_url,
        merged,
        kept_token,
    })
}

impl Bound {
    /// Serves until `shutdown` resolves, letting open streams finish.
    ///
    /// Our own accept loop rather than `axum::serve`, for the slowloris
    /// defences: a header-read timeout (which also ends idle kept-alive
    /// connections), at most `max_connections` open connections (the rest
    /// wait in the listen queue) and at most `max_connections_per_ip` from
    /// one address (the rest are closed at once). Body reads are bounded by
    /// the extractors of [`extract`].
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        use hyper_util::rt::{TokioIo, TokioTimer};
        use tower::ServiceExt as _;

        let limits = self.served.app().limits.clone();
        let router = router(&self.served);
        let open = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
        let per_ip = PerIp::new(limits.max_connections_per_ip);
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                p = open.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                () = &mut shutdown => break,
            };
            let (tcp, remote) = tokio::select! {
                r = self.listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, as
                        // axum::serve does, rather than spin.
                        if !matches!(
                            e.kind(),
                            std::io::ErrorKind::ConnectionAborted
                                | std::io::ErrorKind::ConnectionReset
                                | std::io::ErrorKind::ConnectionRefused
                        ) {
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let Some(slot) = per_ip.take(remote.ip()) else {
                drop(tcp);
                continue;
            };
            // Small SSE writes must not wait for the client's delayed ACK
            // (Nagle): on a kept-alive connection that cost ~40 ms a request.
            let _ = tcp.set_nodelay(true);
            let router = router.clone();
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut()
                        .insert(axum::extract::ConnectInfo(remote));
                    router.clone().oneshot(req.map(axum::body::Body::new))
                },
            );
            let conn = graceful.watch(http.serve_connection(TokioIo::new(tcp), service));
            tokio::spawn(async move {
                let _ = conn.await;
                drop((permit, slot));
            });
        }
        drop(self.listener);
        graceful.shutdown().await;
        Ok(())
    }
}

/// Open connections per client address.
#[derive(Clone)]
struct PerIp {
    cap: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One open connection of an address; released on drop.
struct PerIpSlot {
    ip: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerIp {
    fn new(cap: usize) -> Self {
        PerIp {
            cap,
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A slot for `ip`, or `None` when it has `cap` open already.
    fn take(&self, ip: IpAddr) -> Option<PerIpSlot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(ip).or_insert(0);
        if self.cap != 0 && *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(PerIpSlot {
            ip,
            open: self.open.clone(),
        })
    }
}

impl Drop for PerIpSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The server of one mode, ready to route.
pub enum Served {
    /// Local mode: the one state file.
    Local(Arc<Local>),
    /// Stateless mode: nothing kept.
    Stateless(Arc<Stateless>),
}

impl Served {
    /// The part both modes share.
    pub fn app(&self) -> &Arc<App> {
        match self {
            Served::Local(l) => l.shared(),
            Served::Stateless(s) => s.shared(),
        }
    }
}

/// Every route of the mode served. Each mode's router holds only its own
/// routes (`wo_wire::ROUTES` says which), typed by its state: a path of the
/// other mode answers 404 like any unknown path.
pub fn router(served: &Served) -> Router {
    match served {
        Served::Local(local) => finish(
            common::<Local>()
                .route(
                    path::STATE_PATH,
                    get(api::get_state).patch(api::patch_state),
                )
                .route(path::TRUTH_PATH, post(api::add_truth))
                .route(
                    path::TRUTH_ENTRY_PATH,
                    patch(api::edit_truth).delete(api::delete_truth),
                )
                .route(path::MESSAGE_PATH, patch(api::rename_message))
                .route(path::CHAT_PATH, post(api::chat))
                .route(path::MEMORY_UNDO_PATH, post(api::memory_undo))
                .route(path::MERGE_PATH, post(api::merge))
                .route(path::EXPORT_PATH, get(api::export))
                .route(path::SEARCH_PATH, get(api::search))
                .route(path::CONVERSATIONS_PATH, get(api::conversations))
                .route(path::CHUNK_PATH, get(api::chunk))
                .route(path::CONTEXT_DRAFT_PATH, post(api::context_draft_local))
                .route(path::CONTEXT_APPLY_PATH, post(api::context_apply))
                .route(path::OPENAI_MODELS_PATH, get(openai::models))
                .route(path::OPENAI_CHAT_PATH, post(openai::chat_completions))
                // rmcp answers the methods MCP does not use itself (405).
                .route(path::MCP_PATH, any(mcp::handle)),
            local.clone(),
        ),
        Served::Stateless(stateless) => finish(
            common::<Stateless>()
                .route(
                    path::STATELESS_MEMORY_UNDO_PATH,
                    post(crate::stateless::memory_undo),
                )
                .route(path::CONTEXT_DRAFT_PATH, post(api::context_draft_stateless))
                .route(path::STATELESS_CHAT_PATH, post(stateless::chat))
                .route(path::STATELESS_STOPPED_PATH, post(stateless::stopped))
                // Anonymous clients never see an upstream's address.
                .layer(axum::middleware::map_response(
                    crate::error::scrub_error_urls,
                )),
            stateless.clone(),
        ),
    }
}

/// The routes both modes serve: the web client, the OpenAPI document,
/// health, info and providers.
fn common<M: Mode>() -> Router<Arc<M>> {
    let mut router = Router::new();
    // The web client's modules, imported by `/app.js` as `./js/<name>`.
    for &(name, body) in assets::APP_MODULES {
        router = router.route(
            &format!("/js/{name}"),
            get(move || static_file(body, "text/javascript; charset=utf-8")),
        );
    }
    router
        .route("/", get(index::<M>))
        .route(
            "/app.js",
            get(|| static_file(assets::APP_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/app.css",
            get(|| static_file(assets::APP_CSS, "text/css; charset=utf-8")),
        )
        .route(
            "/wasm/wo_wasm.js",
            get(|| static_file(assets::WASM_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/wasm/wo_wasm_bg.wasm",
            // application/wasm: what WebAssembly.instantiateStreaming requires.
            get(|| static_file(assets::WASM_MODULE, "application/wasm")),
        )
        .route(
            "/ingest.html",
            get(|| static_file(assets::INGEST_HTML, "text/html; charset=utf-8")),
        )
        .route(
            "/ingest.js",
            get(|| static_file(assets::INGEST_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/ingest-lib.js",
            get(|| static_file(assets::INGEST_LIB_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/ingest.css",
            get(|| static_file(assets::INGEST_CSS, "text/css; charset=utf-8")),
        )
        .route(
            "/wasm/wo_index_wasm.js",
            get(|| static_file(assets::INDEX_WASM_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/wasm/wo_index_wasm_bg.wasm",
            get(|| static_file(assets::INDEX_WASM_MODULE, "application/wasm")),
        )
        .route(
            "/manifest.webmanifest",
            get(|| static_file(assets::MANIFEST, "application/manifest+json")),
        )
        .route(
            "/sw.js",
            get(|| static_file(assets::SERVICE_WORKER, "text/javascript; charset=utf-8")),
        )
        .route(
            "/icon.svg",
            get(|| static_file(assets::ICON_SVG, "image/svg+xml")),
        )
        .route(
            "/icon-192.png",
            get(|| static_file(assets::ICON_192, "image/png")),
        )
        .route(
            "/icon-512.png",
            get(|| static_file(assets::ICON_512, "image/png")),
        )
        .route(
            path::OPENAPI_PATH,
            get(|| static_file(assets::OPENAPI_JSON, "application/json")),
        )
        .route(path::HEALTH_PATH, get(api::health::<M>))
        .route(path::INFO_PATH, get(api::info::<M>))
        .route(path::PROVIDERS_PATH, get(api::providers::<M>))
        .route(path::MARKDOWN_PATH, post(api::markdown::<M>))
}

/// The 404 for unknown paths, the guard and the access log around a mode's
/// routes.
fn finish<M: Mode>(routes: Router<Arc<M>>, state: Arc<M>) -> Router {
    routes
        .fallback(|req: Request| async move {
            let e = ApiError::not_found("no such path");
            if guard::speaks_openai(req.uri().path()) {
                openai::error_response(&e)
            } else {
                e.into_response()
            }
        })
        .layer(axum::middleware::from_fn_with_state(
            state.shared().clone(),
            guard::guard,
        ))
        .layer(axum::middleware::from_fn(access_log))
        .with_state(state)
}

async fn static_file(body: impl IntoResponse + 'static, content_type: &'static str) -> Response {
    let mut resp = body.into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

#[derive(serde::Deserialize)]
struct IndexQuery {
    token: Option<String>,
}

/// `GET /`: the web client; with `?token=`, the sign-in: a valid token
/// becomes the session cookie and the browser is sent to a clean URL (the
/// token leaves the address bar and the history).
async fn index<M: Mode>(
    State(app): State<Arc<M>>,
    Query(q): Query<IndexQuery>,
    req: Request,
) -> Response {
    let Some(given) = q.token else {
        return static_file(assets::INDEX_HTML, "text/html; charset=utf-8").await;
    };
    match &app.token {
        Some(token) if guard::token_matches(token, &given) => {
            let secure = req
                .headers()
                .get("x-forwarded-proto")
                .is_some_and(|v| v.as_bytes() == b"https");
            let secure = if secure { "; Secure" } else { "" };
            let mut cookies = vec![format!(
                "{}={token}; HttpOnly; SameSite=Strict; Path=/{secure}",
                app.cookies.session
            )];
            // Sessions of earlier servers on this port are dead: expire
            // them so they do not pile up. Other ports' are left alone.
            let sent = req
                .headers()
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(';'))
                .filter_map(|c| c.trim().split_once('=').map(|(n, _)| n.to_owned()));
            for name in sent.filter(|n| app.cookies.is_stale_session(n)) {
                cookies.push(format!(
                    "{name}=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/{secure}"
                ));
            }
            let mut resp = StatusCode::SEE_OTHER.into_response();
            let h = resp.headers_mut();
            h.insert(header::LOCATION, HeaderValue::from_static("/"));
            for c in cookies {
                if let Ok(v) = HeaderValue::from_str(&c) {
                    h.append(header::SET_COOKIE, v);
                }
            }
            resp
        }
        Some(_) => {
            // A styled page saying what to run; the old cookie, if any, is
            // left alone (it may still be this server's).
            let mut resp = static_file(assets::SIGNIN_HTML, "text/html; charset=utf-8").await;
            *resp.status_mut() = StatusCode::UNAUTHORIZED;
            resp.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp
        }
        None => static_file(assets::INDEX_HTML, "text/html; charset=utf-8").await,
    }
}

/// One stderr line per request: method, path (never the query: it may
/// carry the token or a search), status, milliseconds. No content.
/// `WO_SERVE_QUIET` (any value) turns it off.
async fn access_log(req: Request, next: axum::middleware::Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    static QUIET: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*QUIET.get_or_init(|| std::env::var_os("WO_SERVE_QUIET").is_some()) {
        eprintln!(
            "{method} {path} {} {:.1}ms",
            resp.status().as_u16(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    resp
}

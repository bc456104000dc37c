//! The server's shared state: mode, token, the one store (local mode),
//! providers built once and reused, limits.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use wo_providers::{Config, Provider};
use wo_store::Store;

use crate::error::ApiError;
use crate::guard::RateLimiter;

/// Size caps on what clients send.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Most JSON requests.
    pub body_bytes: usize,
    /// `POST /api/merge` (a whole export).
    pub upload_bytes: usize,
    /// One new message, in characters.
    pub message_chars: usize,
    /// Stateless turns: messages in the window, truth entries.
    pub window_messages: usize,
    pub truth_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: 4 << 20,
            upload_bytes: 256 << 20,
            message_chars: 32_000,
            window_messages: 200,
            truth_entries: 1_000,
        }
    }
}

/// Everything a handler may need.
pub struct App {
    /// `Some` in local mode: the state file this server owns.
    pub store: Option<Arc<Mutex<Store>>>,
    /// `Some` in local mode: the session token.
    pub token: Option<String>,
    pub allowed_hosts: Vec<String>,
    pub limiter: RateLimiter,
    pub limits: Limits,
    pub config: Config,
    pub username: String,
    /// The directory index used for retrieval and search, if any.
    pub index_root: Option<PathBuf>,
    providers: Mutex<HashMap<String, Arc<dyn Provider>>>,
    /// The loaded directory index and the `index.json` stamp it was read at.
    index_cache: Mutex<Option<(IndexStamp, Arc<wo_index::Index>)>>,
}

/// Size and modification time of `index.json`: `wo index` rewrites the
/// file atomically, so either changes when the index does.
type IndexStamp = (u64, Option<std::time::SystemTime>);

impl App {
    /// `store` is `Some` in local mode, with the session `token`.
    pub fn new(store: Option<Store>, token: Option<String>, opts: &crate::ServeOptions) -> App {
        App {
            store: store.map(|s| Arc::new(Mutex::new(s))),
            token,
            allowed_hosts: opts.allowed_hosts.clone(),
            limiter: RateLimiter::new(opts.rate_per_minute),
            limits: opts.limits.clone(),
            config: opts.config.clone(),
            username: opts.username.clone(),
            index_root: opts.index_root.clone(),
            providers: Mutex::new(HashMap::new()),
            index_cache: Mutex::new(None),
        }
    }

    pub fn mode(&self) -> &'static str {
        if self.store.is_some() {
            "local"
        } else {
            "stateless"
        }
    }

    /// The body limit of a path.
    pub fn body_limit(&self, path: &str) -> usize {
        if path == "/api/merge" {
            self.limits.upload_bytes
        } else {
            self.limits.body_bytes
        }
    }

    /// The provider called `name` (default: the configured default), built
    /// on first use and reused: a local model loads once.
    pub async fn provider(&self, name: Option<&str>) -> Result<Arc<dyn Provider>, ApiError> {
        let name = name
            .unwrap_or_else(|| self.config.default_provider())
            .to_owned();
        if let Some(p) = self.lock_providers().get(&name) {
            return Ok(p.clone());
        }
        if !self.config.providers.contains_key(&name) {
            let known: Vec<&str> = self.config.providers.keys().map(String::as_str).collect();
            return Err(ApiError::bad_field(
                "/params/provider",
                format!(
                    "no provider named {name:?} (configured: {})",
                    known.join(", ")
                ),
            ));
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

    /// Runs `f` on the store on a blocking thread (it reads and fsyncs
    /// files), first taking in any change made outside the server.
    pub async fn with_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let store = self.store.clone().ok_or_else(|| {
            ApiError::not_found("this server is stateless: there is no state file")
        })?;
        tokio::task::spawn_blocking(move || {
            let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
            guard.refresh()?;
            f(&mut guard)
        })
        .await
        .map_err(|e| ApiError::internal(format!("a state operation panicked: {e}")))?
    }
}

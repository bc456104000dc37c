//! The user configuration: `config.toml`, built-in providers, key lookup,
//! and [`build`]/[`list`] for the CLI.
//!
//! Location: `$WO_CONFIG` if set (the file must then exist), else
//! `$XDG_CONFIG_HOME/wikioracle/config.toml`, else
//! `~/.config/wikioracle/config.toml`. With no file, the built-in providers
//! are used; a file adds providers and replaces built-ins of the same name.
//!
//! ```toml
//! [defaults]
//! provider = "local"          # used when --provider is not given
//! model = "…"                 # default model for the default provider
//! temperature = 0.7
//! max_tokens = 512
//! save_path = "~/answers/last.md"
//! max_answer_bytes = 1048576  # cap on one answer (default 1 MiB) …
//! max_answer_secs = 600       # … and on its duration (default 10 min)
//!
//! [providers.llamacpp]
//! kind = "openai"             # openai | anthropic | nanochat | wikioracle | local
//! base_url = "http://127.0.0.1:8080/v1"
//! model = "smollm2"
//! api_key_env = "LLAMACPP_KEY" # name of an environment variable holding the key
//! # api_key = "…"             # or the key itself (config file only; keep it chmod 600)
//! context_window = 8192
//! timeout_secs = 120
//! # proxy = "https://proxy.example:3128"  # this provider's requests go through it
//! # max_answer_bytes = 65536             # per-provider caps override [defaults]
//!
//! [providers.tiny]
//! kind = "local"
//! model_path = "~/models/other.gguf"
//! ```
//!
//! Built-ins: `local` (the default; model at `$WO_MODEL`, else
//! `$XDG_DATA_HOME/wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf`,
//! else `~/.local/share/wikioracle/models/…`), `openai` (key from
//! `OPENAI_API_KEY`) and `anthropic` (key from `ANTHROPIC_API_KEY`).
//!
//! As OpenAI's and Anthropic's own clients do, an `openai` or `anthropic`
//! entry without `base_url` (the built-ins included) uses
//! `$OPENAI_BASE_URL` / `$ANTHROPIC_BASE_URL` when set; anything in the
//! file wins over the environment ([`Config::base_url_for`]).
//!
//! Proxies: none unless the entry sets `proxy` or `WO_USE_ENV_PROXY=1` opts
//! in to `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY`; see [`crate::proxy`].
//!
//! Keys are read only from the environment or this file, held as
//! [`Secret`]s (redacted in `Debug`), and never written anywhere.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use crate::env::{Env, config_path, config_path_for_hints, data_dir};
use crate::error::ProviderError;
use crate::http::{self, HttpSettings};
use crate::remote::RemoteConfig;
use crate::secret::Secret;
use crate::types::{AnswerLimits, Reachability};
use crate::{Provider, anthropic, nanochat, openai, wikioracle};

/// File name of the default model.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Name of the default provider when the config names none.
pub const DEFAULT_PROVIDER: &str = "local";

/// Why memory's interpreter is off by default with the built-in offline
/// model, and the lines that turn it on anyway.
pub const SMALL_MODEL_INTERPRETER_NOTE: &str = "memory: the interpreter is off with the built-in offline model (SmolLM2-135M): measured, it does not produce usable memory operations. Entries you add with `wo memory add` are used as before. To turn it on anyway, add to config.toml:\n  [interpreter]\n  mode = \"after\"\n  [providers.local]\n  kind = \"local\"\n  context_window = 8192";

/// The context window the built-in offline model is given unless
/// `context_window` says otherwise: measured here, it reads about 100
/// prompt tokens a second on two cores (264 for a short prompt), so its
/// whole 8,192-token training context would keep a long conversation's
/// first word waiting a minute or more; 2,048 (llama.cpp's own server
/// default) bounds that wait at ~15 s on such a machine.
pub const BUILTIN_MODEL_WINDOW: usize = 2048;
/// Base URL for `openai` entries without one, as OpenAI's clients read it.
pub const OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
/// Base URL for `anthropic` entries without one, as Anthropic's clients read it.
pub const ANTHROPIC_BASE_URL: &str = "ANTHROPIC_BASE_URL";

/// Where the default local model is expected: `$WO_MODEL`, else
/// `DATA_DIR/models/SmolLM2-135M-Instruct.Q4_1.gguf`.
/// `scripts/install-model.sh` puts it there.
pub fn default_model_path(env: &Env) -> Option<PathBuf> {
    if let Some(p) = env.get("WO_MODEL") {
        return Some(PathBuf::from(p));
    }
    Some(data_dir(env)?.join("models").join(DEFAULT_MODEL_FILE))
}

/// Which protocol a provider entry speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (and compatible servers).
    Openai,
    /// Anthropic Messages API.
    Anthropic,
    /// NanoChat's web server.
    Nanochat,
    /// A WikiOracle server in stateless mode.
    Wikioracle,
    /// An embedded GGUF model.
    Local,
}

impl ProviderKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Nanochat => "nanochat",
            ProviderKind::Wikioracle => "wikioracle",
            ProviderKind::Local => "local",
        }
    }
    fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Openai => openai::DEFAULT_MODEL,
            ProviderKind::Anthropic => anthropic::DEFAULT_MODEL,
            ProviderKind::Nanochat => nanochat::DEFAULT_MODEL,
            ProviderKind::Wikioracle => wikioracle::DEFAULT_MODEL,
            ProviderKind::Local => "SmolLM2-135M-Instruct",
        }
    }
    fn default_context_window(self) -> usize {
        match self {
            ProviderKind::Openai => openai::DEFAULT_CONTEXT_WINDOW,
            ProviderKind::Anthropic => anthropic::DEFAULT_CONTEXT_WINDOW,
            ProviderKind::Nanochat => nanochat::DEFAULT_CONTEXT_WINDOW,
            ProviderKind::Wikioracle => wikioracle::DEFAULT_CONTEXT_WINDOW,
            ProviderKind::Local => 8192,
        }
    }
    fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::Openai => Some(openai::DEFAULT_BASE_URL),
            ProviderKind::Anthropic => Some(anthropic::DEFAULT_BASE_URL),
            _ => None,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[defaults]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Provider used when none is named.
    pub provider: Option<String>,
    /// Model for the default provider when its entry names none.
    pub model: Option<String>,
    /// Default sampling temperature (applied by the caller).
    pub temperature: Option<f32>,
    /// Default token cap (applied by the caller).
    pub max_tokens: Option<u32>,
    /// Default file for `wo ask --save` (`~` expanded).
    pub save_path: Option<PathBuf>,
    /// Cap on one answer's size in bytes, for every provider whose entry
    /// sets none (default [`AnswerLimits::DEFAULT_MAX_BYTES`]).
    pub max_answer_bytes: Option<usize>,
    /// Cap on one answer's duration in seconds, likewise (default
    /// [`AnswerLimits::DEFAULT_MAX_SECS`]).
    pub max_answer_secs: Option<u64>,
}

/// `[interpreter]`: the memory interpreter run after each exchange
/// (product §7). Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterpreterConfig {
    /// `off`, `after` (each answer) or `background`; default: `after` when a
    /// config file is in use (a provider is configured), else `off`.
    pub mode: Option<InterpreterMode>,
    /// Provider for the interpreter call, with its configured model
    /// (default: the one that answered).
    pub provider: Option<String>,
    /// Seconds with no answer in progress on the file before the
    /// background interpreter (the CLI's, and `wo serve`'s in local mode)
    /// starts a call (default 10): answers go first, and a model on this
    /// machine answers one request at a time.
    pub pause_seconds: Option<u64>,
}

/// Seconds with no answer in progress before a background interpreter
/// call starts (the CLI's, and `wo serve`'s in local mode), when
/// `[interpreter] pause_seconds` is not
/// set: longer than the moment between one `wo ask` and the next in a
/// script, so questions asked one after the other are never held up.
pub const DEFAULT_INTERPRETER_PAUSE_SECONDS: u64 = 10;

impl InterpreterConfig {
    /// How long no answer must have been in progress before a background
    /// interpreter call starts.
    pub fn pause(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.pause_seconds
                .unwrap_or(DEFAULT_INTERPRETER_PAUSE_SECONDS),
        )
    }
}

/// `[memory]`: what happens to memory over time (product §7).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Days an entry with `expires` may go unused before it is archived
    /// (leaves retrieval, kept and searchable on request); 0: never.
    /// Default [`DEFAULT_ARCHIVE_AFTER_DAYS`].
    pub archive_after_days: Option<u32>,
    /// The most tokens memory adds to one question — memory entries,
    /// recalled earlier messages and file chunks together — whatever the
    /// model's window (default: the engine's, 4,000).
    pub recall_tokens: Option<usize>,
}

/// Days an entry with `expires` may go unused before it is archived, when
/// `[memory] archive_after_days` is not set.
pub const DEFAULT_ARCHIVE_AFTER_DAYS: u32 = 90;

impl MemoryConfig {
    /// The age in days after which unused expiring entries are archived;
    /// `None`: never.
    pub fn archive_after_days(&self) -> Option<u32> {
        match self
            .archive_after_days
            .unwrap_or(DEFAULT_ARCHIVE_AFTER_DAYS)
        {
            0 => None,
            n => Some(n),
        }
    }
}

/// When the memory interpreter runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InterpreterMode {
    /// Never.
    Off,
    /// After each answer, before the command ends.
    After,
    /// After each answer without holding up the next (the CLI still waits
    /// for it before exiting; a server runs it off the request path).
    Background,
}

/// `[providers.NAME]`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Protocol.
    pub kind: ProviderKind,
    /// Base URL (HTTP kinds). Defaults: OpenAI's and Anthropic's public APIs;
    /// required for `nanochat` and `wikioracle`.
    pub base_url: Option<String>,
    /// Model used when the request names none.
    pub model: Option<String>,
    /// Name of the environment variable that holds the key.
    pub api_key_env: Option<String>,
    /// The key itself (config file only).
    pub api_key: Option<Secret>,
    /// Context window in tokens.
    pub context_window: Option<usize>,
    /// Bounds the wait for the first byte and between frames (seconds).
    pub timeout_secs: Option<u64>,
    /// GGUF file (`local` only; `~` expanded, relative to the config file).
    pub model_path: Option<PathBuf>,
    /// Proxy for this provider's requests (HTTP kinds); see [`crate::proxy`].
    pub proxy: Option<String>,
    /// Cap on one answer's size in bytes (overrides `[defaults]`).
    pub max_answer_bytes: Option<usize>,
    /// Cap on one answer's duration in seconds (overrides `[defaults]`).
    pub max_answer_secs: Option<u64>,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url.as_deref().map(redact_url))
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key) // Secret prints ***
            .field("context_window", &self.context_window)
            .field("timeout_secs", &self.timeout_secs)
            .field("model_path", &self.model_path)
            .field("proxy", &self.proxy.as_deref().map(redact_url))
            .field("max_answer_bytes", &self.max_answer_bytes)
            .field("max_answer_secs", &self.max_answer_secs)
            .finish()
    }
}

fn redact_url(u: &str) -> String {
    reqwest::Url::parse(u)
        .map(|u| http::display_url(&u))
        .unwrap_or_else(|_| "<invalid url>".into())
}

impl ProviderConfig {
    /// An entry of this kind with everything else unset.
    pub fn new(kind: ProviderKind) -> Self {
        Self {
            kind,
            base_url: None,
            model: None,
            api_key_env: None,
            api_key: None,
            context_window: None,
            timeout_secs: None,
            model_path: None,
            proxy: None,
            max_answer_bytes: None,
            max_answer_secs: None,
        }
    }
    // Which env var holds the key when the entry does not say.
    fn key_env(&self) -> Option<&str> {
        if let Some(v) = &self.api_key_env {
            return Some(v);
        }
        match self.kind {
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Openai if self.base_url.is_none() => Some("OPENAI_API_KEY"),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: Defaults,
    #[serde(default)]
    interpreter: InterpreterConfig,
    #[serde(default)]
    memory: MemoryConfig,
    #[serde(default)]
    providers: BTreeMap<String, toml::Spanned<ProviderConfig>>,
}

/// A problem with the config file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read the config file: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Bad TOML, or a value of the wrong type, or an unknown key.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// Valid TOML with a meaning we cannot accept.
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the offending table or key.
        line: usize,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// `$WO_CONFIG` names a file that does not exist.
    #[error("{path}: WO_CONFIG names this config file but it does not exist")]
    Missing {
        /// The file.
        path: PathBuf,
    },
}

impl From<ConfigError> for ProviderError {
    fn from(e: ConfigError) -> Self {
        ProviderError::config("config", e.to_string())
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Whether `t` is a sampling temperature every provider takes (0–2): the
/// one range check, used for `[defaults]` here and for each turn's value by
/// the engine's request builder.
pub fn temperature_in_range(t: f32) -> bool {
    (0.0..=2.0).contains(&t)
}

/// The loaded configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `[defaults]`.
    pub defaults: Defaults,
    /// `[interpreter]`.
    pub interpreter: InterpreterConfig,
    /// `[memory]`.
    pub memory: MemoryConfig,
    /// Providers by name: built-ins plus the file's entries.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// The file read, or `None` when only built-ins are in use.
    pub source: Option<PathBuf>,
    /// Things worth telling the user (e.g. a key in a world-readable file).
    pub warnings: Vec<String>,
    env: Env,
}

impl Config {
    /// The built-in providers only.
    pub fn builtin(env: Env) -> Self {
        let mut providers = BTreeMap::new();
        providers.insert("local".to_owned(), ProviderConfig::new(ProviderKind::Local));
        let mut o = ProviderConfig::new(ProviderKind::Openai);
        o.api_key_env = Some("OPENAI_API_KEY".into());
        providers.insert("openai".to_owned(), o);
        let mut a = ProviderConfig::new(ProviderKind::Anthropic);
        a.api_key_env = Some("ANTHROPIC_API_KEY".into());
        providers.insert("anthropic".to_owned(), a);
        Self {
            defaults: Defaults::default(),
            interpreter: InterpreterConfig::default(),
            memory: MemoryConfig::default(),
            providers,
            source: None,
            warnings: Vec::new(),
            env,
        }
    }

    /// Load from the standard location using the process environment.
    pub fn load() -> Result<Self, ConfigError> {
        Self::load_with(Env::process())
    }

    /// Load from the standard location using `env`.
    pub fn load_with(env: Env) -> Result<Self, ConfigError> {
        let explicit = env.get("WO_CONFIG").is_some();
        let Some(path) = config_path(&env) else {
            return Ok(Self::builtin(env));
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let mut cfg = Self::from_toml(&text, &path, env)?;
                cfg.check_permissions(&path);
                Ok(cfg)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if explicit {
                    Err(ConfigError::Missing { path })
                } else {
                    Ok(Self::builtin(env))
                }
            }
            Err(source) => Err(ConfigError::Io { path, source }),
        }
    }

    /// Parse config text (`path` is used in messages and to resolve
    /// relative `model_path`s).
    pub fn from_toml(text: &str, path: &Path, env: Env) -> Result<Self, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
            ConfigError::Parse {
                path: path.to_owned(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })?;
        let mut cfg = Self::builtin(env);
        cfg.source = Some(path.to_owned());
        let base_dir = path.parent().unwrap_or(Path::new("."));
        for (name, spanned) in raw.providers {
            let line = line_col(text, spanned.span().start).0;
            let invalid = |message: String| ConfigError::Invalid {
                path: path.to_owned(),
                line,
                message,
            };
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(invalid(format!(
                    "provider name {name:?} may use only letters, digits, '-', '_' and '.'"
                )));
            }
            let mut p = spanned.into_inner();
            match p.kind {
                ProviderKind::Nanochat | ProviderKind::Wikioracle if p.base_url.is_none() => {
                    return Err(invalid(format!(
                        "[providers.{name}]: kind = \"{}\" needs a base_url",
                        p.kind
                    )));
                }
                _ => {}
            }
            if let Some(u) = &p.base_url
                && let Err(m) = http::join(u, "x")
            {
                return Err(invalid(format!("[providers.{name}]: {m}")));
            }
            if p.kind != ProviderKind::Local && p.model_path.is_some() {
                return Err(invalid(format!(
                    "[providers.{name}]: model_path is only for kind = \"local\""
                )));
            }
            if p.context_window == Some(0)
                || p.timeout_secs == Some(0)
                || p.max_answer_bytes == Some(0)
                || p.max_answer_secs == Some(0)
            {
                return Err(invalid(format!(
                    "[providers.{name}]: context_window, timeout_secs, max_answer_bytes and \
                     max_answer_secs must be positive"
                )));
            }
            if let Some(proxy) = &p.proxy {
                if p.kind == ProviderKind::Local {
                    return Err(invalid(format!(
                        "[providers.{name}]: proxy is only for HTTP kinds, not kind = \"local\""
                    )));
                }
                let base = p
                    .base_url
                    .as_deref()
                    .or(p.kind.default_base_url())
                    .unwrap_or("https://x");
                let has_key = p.api_key.is_some() || p.key_env().is_some();
                if let Err(m) = crate::proxy::check(proxy, base, has_key) {
                    return Err(invalid(format!("[providers.{name}]: {m}")));
                }
            }
            if let Some(mp) = p.model_path.take() {
                let mp = cfg.expand(&mp);
                p.model_path = Some(if mp.is_relative() {
                    base_dir.join(mp)
                } else {
                    mp
                });
            }
            cfg.providers.insert(name, p);
        }
        cfg.defaults = raw.defaults;
        cfg.interpreter = raw.interpreter;
        cfg.memory = raw.memory;
        if let Some(p) = &cfg.interpreter.provider
            && !cfg.providers.contains_key(p)
        {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                line: find_line(text, "[interpreter]"),
                message: format!(
                    "[interpreter] provider = {p:?} is not defined; known providers: {}",
                    cfg.providers.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        }
        if let Some(t) = cfg.defaults.temperature
            && !temperature_in_range(t)
        {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                line: find_line(text, "temperature"),
                message: format!("[defaults] temperature = {t} is outside 0–2"),
            });
        }
        if let Some(p) = &cfg.defaults.provider
            && !cfg.providers.contains_key(p)
        {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                line: find_line(text, "provider"),
                message: format!(
                    "[defaults] provider = {p:?} is not defined; known providers: {}",
                    cfg.providers.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        }
        if cfg.defaults.max_answer_bytes == Some(0) || cfg.defaults.max_answer_secs == Some(0) {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                line: find_line(text, "max_answer_bytes").max(find_line(text, "max_answer_secs")),
                message: "[defaults] max_answer_bytes and max_answer_secs must be positive".into(),
            });
        }
        if let Some(sp) = cfg.defaults.save_path.take() {
            cfg.defaults.save_path = Some(cfg.expand(&sp));
        }
        Ok(cfg)
    }

    fn check_permissions(&mut self, path: &Path) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let has_key = self.providers.values().any(|p| p.api_key.is_some());
            if has_key
                && let Ok(meta) = std::fs::metadata(path)
                && meta.permissions().mode() & 0o077 != 0
            {
                self.warnings.push(format!(
                    "{} holds an api_key and is readable by other users; run: chmod 600 {}",
                    path.display(),
                    path.display()
                ));
            }
        }
        #[cfg(not(unix))]
        let _ = path;
    }

    /// `~/x` → `$HOME/x`.
    fn expand(&self, p: &Path) -> PathBuf {
        match (p.strip_prefix("~"), self.env.home()) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => p.to_owned(),
        }
    }

    /// When the memory interpreter runs: as configured, else after each
    /// answer where a config file is in use (product §7: on by default
    /// where a provider is configured), else off.
    pub fn interpreter_mode(&self) -> InterpreterMode {
        match (self.interpreter.mode, &self.source) {
            (Some(m), _) => m,
            (None, Some(_)) => InterpreterMode::After,
            (None, None) => InterpreterMode::Off,
        }
    }

    /// When the memory interpreter runs on `provider` (the configured
    /// `[interpreter] provider`, else the one that answered): as configured;
    /// unset, off where the interpreter would be the built-in offline model
    /// (measured: the 135M model does not produce usable operations — see
    /// [`SMALL_MODEL_INTERPRETER_NOTE`]), else [`Config::interpreter_mode`].
    pub fn interpreter_mode_for(&self, provider: &str) -> InterpreterMode {
        match self.interpreter.mode {
            Some(m) => m,
            None if self.is_builtin_small_model(provider) => InterpreterMode::Off,
            None => self.interpreter_mode(),
        }
    }

    /// The context window of provider `name` (configured as `p`): its
    /// `context_window`, else [`BUILTIN_MODEL_WINDOW`] for the built-in
    /// offline model, else what its kind usually has (for `local`, the
    /// model file's training context when it is read).
    pub fn context_window_of(&self, name: &str, p: &ProviderConfig) -> Option<usize> {
        p.context_window.or_else(|| {
            self.is_builtin_small_model(name)
                .then_some(BUILTIN_MODEL_WINDOW)
        })
    }

    /// Whether the configured provider `name` runs the built-in offline
    /// model (the `local` kind with [`DEFAULT_MODEL_FILE`]).
    pub fn is_builtin_small_model(&self, name: &str) -> bool {
        self.providers.get(name).is_some_and(|p| {
            p.kind == ProviderKind::Local
                && self.local_model_path(p).is_some_and(|m| {
                    m.file_name() == Some(std::ffi::OsStr::new(DEFAULT_MODEL_FILE))
                })
        })
    }

    /// The provider used when none is named.
    pub fn default_provider(&self) -> &str {
        self.defaults
            .provider
            .as_deref()
            .unwrap_or(DEFAULT_PROVIDER)
    }

    /// The environment this config resolves keys and paths with.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The model `name` will use when a request names none.
    pub fn model_for(&self, name: &str) -> Option<String> {
        let p = self.providers.get(name)?;
        if let Some(m) = &p.model {
            return Some(m.clone());
        }
        if name == self.default_provider()
            && let Some(m) = &self.defaults.model
        {
            return Some(m.clone());
        }
        if p.kind == ProviderKind::Local
            && let Some(path) = self.local_model_path(p)
            && let Some(stem) = path.file_stem()
        {
            return Some(stem.to_string_lossy().into_owned());
        }
        Some(p.kind.default_model().to_owned())
    }

    /// The base URL an HTTP entry uses: its `base_url`, else (for
    /// `openai` and `anthropic`) `$OPENAI_BASE_URL` / `$ANTHROPIC_BASE_URL`
    /// as every client of those APIs honours them, else the public API.
    /// `Err` names the variable when its value is not an http(s) URL.
    pub fn base_url_for(&self, p: &ProviderConfig) -> Result<Option<String>, String> {
        if let Some(u) = &p.base_url {
            return Ok(Some(u.clone()));
        }
        let var = match p.kind {
            ProviderKind::Openai => OPENAI_BASE_URL,
            ProviderKind::Anthropic => ANTHROPIC_BASE_URL,
            _ => return Ok(None),
        };
        let Some(v) = self.env.get(var) else {
            return Ok(p.kind.default_base_url().map(str::to_owned));
        };
        let v = v
            .into_string()
            .map_err(|_| format!("${var} is not valid UTF-8"))?;
        let mut url = v.trim().trim_end_matches('/').to_owned();
        // Anthropic's SDKs take the bare host and add `/v1` themselves; our
        // base URLs include the version, like OpenAI's.
        if p.kind == ProviderKind::Anthropic && !url.ends_with("/v1") {
            url.push_str("/v1");
        }
        http::join(&url, "x").map_err(|m| format!("${var}: {m}"))?;
        Ok(Some(url))
    }

    /// The answer caps for an entry: its own, else `[defaults]`, else the
    /// built-in defaults.
    pub fn limits_for(&self, p: &ProviderConfig) -> AnswerLimits {
        let d = AnswerLimits::default();
        AnswerLimits {
            max_bytes: p
                .max_answer_bytes
                .or(self.defaults.max_answer_bytes)
                .unwrap_or(d.max_bytes),
            max_duration: p
                .max_answer_secs
                .or(self.defaults.max_answer_secs)
                .map_or(d.max_duration, std::time::Duration::from_secs),
        }
    }

    /// The GGUF file a `local` entry uses.
    pub fn local_model_path(&self, p: &ProviderConfig) -> Option<PathBuf> {
        p.model_path
            .clone()
            .or_else(|| default_model_path(&self.env))
    }

    /// Resolve a provider's key and say where it came from.
    fn key_for(&self, name: &str, p: &ProviderConfig) -> (Option<Secret>, KeyStatus) {
        if let Some(k) = &p.api_key {
            return (Some(k.clone()), KeyStatus::FromConfig);
        }
        match p.key_env() {
            Some(var) => match self.env.get(var) {
                Some(v) => match v.into_string() {
                    Ok(s) => (
                        Some(Secret::new(s.trim())),
                        KeyStatus::FromEnv { var: var.into() },
                    ),
                    Err(_) => (
                        None,
                        KeyStatus::Missing {
                            var: Some(var.into()),
                        },
                    ),
                },
                None => (
                    None,
                    KeyStatus::Missing {
                        var: Some(var.into()),
                    },
                ),
            },
            None => {
                let _ = name;
                (None, KeyStatus::NotNeeded)
            }
        }
    }
}

fn find_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.starts_with(key) && l[key.len()..].trim_start().starts_with('=')
        })
        .map_or(1, |i| i + 1)
}

/// Where a provider's key comes from. Never holds the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum KeyStatus {
    /// The provider needs no key (or none is configured and it is optional).
    NotNeeded,
    /// Read from this environment variable.
    FromEnv {
        /// Variable name.
        var: String,
    },
    /// Set as `api_key` in the config file.
    FromConfig,
    /// Expected in this variable, which is unset.
    Missing {
        /// Variable name, if any.
        var: Option<String>,
    },
}

impl fmt::Display for KeyStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyStatus::NotNeeded => f.write_str("no key"),
            KeyStatus::FromEnv { var } => write!(f, "key from ${var}"),
            KeyStatus::FromConfig => f.write_str("key in config file"),
            KeyStatus::Missing { var: Some(v) } => write!(f, "key missing (set ${v})"),
            KeyStatus::Missing { var: None } => f.write_str("key missing"),
        }
    }
}

impl KeyStatus {
    fn source_hint(&self) -> String {
        match self {
            KeyStatus::NotNeeded => "no key configured".into(),
            KeyStatus::FromEnv { var } => format!("env {var}"),
            KeyStatus::FromConfig => "api_key in config.toml".into(),
            KeyStatus::Missing { var: Some(v) } => format!("env {v} is not set"),
            KeyStatus::Missing { var: None } => "no key configured".into(),
        }
    }
}

/// One row of `wo providers`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderInfo {
    /// Entry name.
    pub name: String,
    /// Protocol.
    pub kind: ProviderKind,
    /// Model used by default.
    pub model: String,
    /// Base URL without credentials (HTTP kinds).
    pub base_url: Option<String>,
    /// GGUF file (`local`).
    pub model_path: Option<PathBuf>,
    /// Context window in tokens.
    pub context_window: usize,
    /// Where the key comes from.
    pub key: KeyStatus,
    /// Whether this is the default provider.
    pub is_default: bool,
}

fn info(cfg: &Config, name: &str, p: &ProviderConfig) -> ProviderInfo {
    ProviderInfo {
        name: name.to_owned(),
        kind: p.kind,
        model: cfg.model_for(name).unwrap_or_default(),
        base_url: cfg
            .base_url_for(p)
            .unwrap_or_else(|_| p.base_url.clone())
            .as_deref()
            .map(redact_url),
        model_path: (p.kind == ProviderKind::Local)
            .then(|| cfg.local_model_path(p))
            .flatten(),
        context_window: cfg
            .context_window_of(name, p)
            .unwrap_or_else(|| p.kind.default_context_window()),
        key: cfg.key_for(name, p).1,
        is_default: name == cfg.default_provider(),
    }
}

/// Every configured provider, sorted by name (no network access).
pub fn list(cfg: &Config) -> Vec<ProviderInfo> {
    cfg.providers
        .iter()
        .map(|(name, p)| info(cfg, name, p))
        .collect()
}

/// [`list`] plus a reachability check of each, run concurrently.
pub async fn list_with_reachability(cfg: &Config) -> Vec<(ProviderInfo, Reachability)> {
    let checks = list(cfg).into_iter().map(|i| async move {
        let r = match build(&i.name, cfg) {
            Ok(p) => p.check().await,
            Err(e) => Reachability::NotConfigured {
                reason: match e {
                    ProviderError::Config { message, .. } => message,
                    other => other.to_string(),
                },
            },
        };
        (i, r)
    });
    futures::future::join_all(checks).await
}

/// [`list`] (only `only`, when given) plus each provider's models
/// ([`Provider::models`]: its own model list where it has one, else its
/// configured model), asked concurrently; a provider that cannot be built
/// or reached has the reason instead. `local` lists its configured model
/// without loading it.
pub async fn list_with_models(
    cfg: &Config,
    only: Option<&str>,
) -> Vec<(ProviderInfo, Result<crate::ModelList, crate::ModelsError>)> {
    let asks = list(cfg)
        .into_iter()
        .filter(|i| only.is_none_or(|o| o == i.name))
        .map(|i| async move {
            if i.kind == ProviderKind::Local {
                let m = crate::ModelList::configured(&i.model);
                return (i, Ok(m));
            }
            let r = match build(&i.name, cfg) {
                Ok(p) => p.models().await,
                Err(ProviderError::Config { message, .. }) => {
                    Err(crate::ModelsError::NotConfigured(message))
                }
                Err(other) => Err(crate::ModelsError::Failed(other.to_string())),
            };
            (i, r)
        });
    futures::future::join_all(asks).await
}

/// Construct the provider called `name`.
///
/// Fails with [`ProviderError::Config`] for an unknown name, an invalid
/// `base_url`, or (for `local`) a missing model file; a missing API key is
/// reported when streaming, so `wo providers` can still list the entry.
pub fn build(name: &str, cfg: &Config) -> Result<Arc<dyn Provider>, ProviderError> {
    let Some(p) = cfg.providers.get(name) else {
        return Err(ProviderError::config(
            name,
            format!(
                "no provider named {name:?}; configured: {}",
                cfg.providers.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    };
    let model = cfg
        .model_for(name)
        .unwrap_or_else(|| p.kind.default_model().to_owned());
    let context_window = p
        .context_window
        .unwrap_or_else(|| p.kind.default_context_window());
    if p.kind == ProviderKind::Local {
        return build_local(name, cfg, p, model);
    }
    let (key, status) = cfg.key_for(name, p);
    let base_url = cfg
        .base_url_for(p)
        .map_err(|m| ProviderError::config(name, m))?
        .ok_or_else(|| ProviderError::config(name, "base_url is required for this kind"))?;
    let proxy = crate::proxy::resolve(&base_url, p.proxy.as_deref(), &cfg.env)
        .map_err(|m| ProviderError::config(name, m))?;
    let mut rc = RemoteConfig::new(name, base_url, model, context_window);
    rc.key_source = status.source_hint();
    rc.api_key = key;
    rc.proxy = proxy;
    rc.limits = cfg.limits_for(p);
    if let Some(t) = p.timeout_secs {
        rc.http = HttpSettings::with_timeout(t);
    }
    Ok(match p.kind {
        ProviderKind::Openai => Arc::new(openai::OpenAiProvider::new(rc)?),
        ProviderKind::Anthropic => Arc::new(anthropic::AnthropicProvider::new(rc)?),
        ProviderKind::Nanochat => Arc::new(nanochat::NanoChatProvider::new(rc)?),
        ProviderKind::Wikioracle => Arc::new(wikioracle::WikiOracleProvider::new(rc)?),
        ProviderKind::Local => unreachable!("handled above"),
    })
}

#[cfg(feature = "local")]
fn build_local(
    name: &str,
    cfg: &Config,
    p: &ProviderConfig,
    model: String,
) -> Result<Arc<dyn Provider>, ProviderError> {
    let path = cfg.local_model_path(p).ok_or_else(|| {
        ProviderError::config(
            name,
            "cannot locate the model: set WO_MODEL or HOME, or model_path in config.toml",
        )
    })?;
    let lc = crate::local::LocalConfig {
        name: name.to_owned(),
        model_path: path,
        model_name: model,
        context_window: cfg.context_window_of(name, p),
        threads: None,
        limits: cfg.limits_for(p),
    };
    Ok(Arc::new(crate::local::LocalProvider::new(lc)?))
}

#[cfg(not(feature = "local"))]
fn build_local(
    name: &str,
    _cfg: &Config,
    _p: &ProviderConfig,
    _model: String,
) -> Result<Arc<dyn Provider>, ProviderError> {
    Err(ProviderError::config(
        name,
        "this build has no embedded model support (cargo feature `local` is off)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env::from_pairs([("HOME", "/home/u")])
    }

    #[test]
    fn paths_follow_xdg_and_overrides() {
        let e = env();
        assert_eq!(
            config_path(&e).unwrap(),
            PathBuf::from("/home/u/.config/wikioracle/config.toml")
        );
        assert_eq!(
            default_model_path(&e).unwrap(),
            PathBuf::from("/home/u/.local/share/wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        );
        let e = Env::from_pairs([
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "/cfg"),
            ("XDG_DATA_HOME", "/data"),
        ]);
        assert_eq!(
            config_path(&e).unwrap(),
            PathBuf::from("/cfg/wikioracle/config.toml")
        );
        assert_eq!(
            default_model_path(&e).unwrap(),
            PathBuf::from("/data/wikioracle/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        );
        let e = Env::from_pairs([
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "rel"),
            ("WO_MODEL", "/m.gguf"),
        ]);
        assert_eq!(
            config_path(&e).unwrap(),
            PathBuf::from("/h/.config/wikioracle/config.toml")
        );
        assert_eq!(default_model_path(&e).unwrap(), PathBuf::from("/m.gguf"));
        let e = Env::from_pairs([("WO_CONFIG", "/x.toml")]);
        assert_eq!(config_path(&e).unwrap(), PathBuf::from("/x.toml"));
    }

    #[test]
    fn parse_errors_have_line_and_column() {
        let text =
            "[defaults]\nprovider = \"local\"\n\n[providers.x]\nkind = \"openai\"\nbase_url = 3\n";
        let e = Config::from_toml(text, Path::new("/c.toml"), env()).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("/c.toml:6:12: "), "{s}");
        let e = Config::from_toml(
            "[providers.x]\nkind = \"gpt\"\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("/c.toml:2:"), "{e}");
        let e = Config::from_toml("[defaults]\nmodle = \"x\"\n", Path::new("/c.toml"), env())
            .unwrap_err();
        assert!(e.to_string().contains("modle"), "{e}");
        let e = Config::from_toml("x = [", Path::new("/c.toml"), env()).unwrap_err();
        assert!(e.to_string().starts_with("/c.toml:1:"), "{e}");
    }

    #[test]
    fn semantic_errors_name_the_line() {
        let e = Config::from_toml(
            "[defaults]\nprovider = \"nope\"\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("/c.toml:2: "), "{e}");
        assert!(e.to_string().contains("anthropic, local, openai"), "{e}");
        let e = Config::from_toml(
            "\n\n[providers.nc]\nkind = \"nanochat\"\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("needs a base_url"), "{e}");
        let e = Config::from_toml(
            "[providers.o]\nkind = \"openai\"\nbase_url = \"ftp://x\"\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("http or https"), "{e}");
    }

    #[test]
    fn file_entries_extend_and_replace_builtins_and_keys_resolve() {
        let text = r#"
[defaults]
provider = "llama"
model = "m-default"
temperature = 0.5

[providers.llama]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"

[providers.openai]
kind = "openai"
api_key = "sk-from-file-0123456789"
model = "gpt-x"

[providers.mine]
kind = "local"
model_path = "models/a.gguf"
"#;
        let e = Env::from_pairs([("HOME", "/home/u"), ("ANTHROPIC_API_KEY", "ak-0123456789")]);
        let cfg = Config::from_toml(text, Path::new("/etc/wo/config.toml"), e).unwrap();
        assert_eq!(cfg.default_provider(), "llama");
        assert_eq!(cfg.model_for("llama").unwrap(), "m-default");
        assert_eq!(cfg.model_for("openai").unwrap(), "gpt-x");
        let rows = list(&cfg);
        let names: Vec<_> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["anthropic", "llama", "local", "mine", "openai"]);
        let by = |n: &str| rows.iter().find(|r| r.name == n).unwrap().clone();
        assert_eq!(by("openai").key, KeyStatus::FromConfig);
        assert_eq!(
            by("anthropic").key,
            KeyStatus::FromEnv {
                var: "ANTHROPIC_API_KEY".into()
            }
        );
        assert_eq!(by("llama").key, KeyStatus::NotNeeded);
        assert!(by("llama").is_default);
        assert_eq!(
            by("mine").model_path.unwrap(),
            PathBuf::from("/etc/wo/models/a.gguf")
        );
        assert_eq!(by("mine").model, "a");
        // Keys never show in Debug output.
        let dbg = format!("{cfg:?}");
        assert!(!dbg.contains("sk-from-file"), "{dbg}");
        assert!(dbg.contains("Secret(***)"));
        let json = serde_json::to_string(&rows).unwrap();
        assert!(!json.contains("sk-from") && !json.contains("ak-0123"));
    }

    #[test]
    fn builtins_without_a_file() {
        let cfg = Config::builtin(env());
        assert_eq!(cfg.default_provider(), "local");
        let rows = list(&cfg);
        assert_eq!(rows.len(), 3);
        let openai = rows.iter().find(|r| r.name == "openai").unwrap();
        assert_eq!(
            openai.key,
            KeyStatus::Missing {
                var: Some("OPENAI_API_KEY".into())
            }
        );
        assert_eq!(
            openai.base_url.as_deref(),
            Some("https://api.openai.com/v1")
        );
        let local = rows.iter().find(|r| r.name == "local").unwrap();
        assert_eq!(local.model, "SmolLM2-135M-Instruct.Q4_1");
        assert!(build("nope", &cfg).is_err());
    }

    #[test]
    fn the_built_in_model_gets_a_smaller_window_unless_configured() {
        let cfg = Config::builtin(env());
        let local = |cfg: &Config| {
            let row = list(cfg).into_iter().find(|r| r.name == "local").unwrap();
            (
                cfg.context_window_of("local", &cfg.providers["local"]),
                row.context_window,
            )
        };
        assert_eq!(
            local(&cfg),
            (Some(BUILTIN_MODEL_WINDOW), BUILTIN_MODEL_WINDOW),
            "the built-in model file"
        );
        let path = Path::new("/x/config.toml");
        let set = Config::from_toml(
            "[providers.local]\nkind = \"local\"\ncontext_window = 8192\n",
            path,
            env(),
        )
        .unwrap();
        assert_eq!(local(&set), (Some(8192), 8192), "configured");
        let other = Config::from_toml(
            "[providers.local]\nkind = \"local\"\nmodel_path = \"/models/qwen-7b.gguf\"\n",
            path,
            env(),
        )
        .unwrap();
        assert_eq!(
            local(&other).0,
            None,
            "another model: its own training context, read from the file"
        );
    }

    #[test]
    fn explicit_missing_file_is_an_error_default_missing_is_not() {
        let dir = std::env::temp_dir().join(format!("wo-cfg-{}", std::process::id()));
        let e = Env::from_pairs([("WO_CONFIG", dir.join("none.toml"))]);
        assert!(matches!(
            Config::load_with(e),
            Err(ConfigError::Missing { .. })
        ));
        let e = Env::from_pairs([("HOME", dir.as_os_str())]);
        assert!(Config::load_with(e).unwrap().source.is_none());
    }

    #[test]
    fn interpreter_section_sets_mode_and_provider_and_defaults_to_after_with_a_file() {
        let c = Config::builtin(env());
        assert_eq!(c.interpreter_mode(), InterpreterMode::Off);
        let c = Config::from_toml("", Path::new("/c.toml"), env()).unwrap();
        assert_eq!(c.interpreter_mode(), InterpreterMode::After);
        let c = Config::from_toml(
            "[interpreter]\nmode = \"background\"\nprovider = \"local\"\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap();
        assert_eq!(c.interpreter_mode(), InterpreterMode::Background);
        assert_eq!(c.interpreter.provider.as_deref(), Some("local"));
        let e = Config::from_toml(
            "[interpreter]\nprovider = \"nope\"\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("[interpreter] provider") && e.contains("c.toml:1:"),
            "{e}"
        );
        let e = Config::from_toml(
            "[interpreter]\nmode = \"sometimes\"\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("sometimes") || e.contains("mode"), "{e}");
    }

    #[test]
    fn the_interpreter_is_off_by_default_on_the_built_in_small_model_only() {
        let text = "[providers.big]\nkind = \"local\"\nmodel_path = \"/m/qwen2.5-7b.gguf\"\n\n\
                    [providers.api]\nkind = \"openai\"\nmodel = \"m\"\n";
        let c = Config::from_toml(text, Path::new("/c.toml"), env()).unwrap();
        assert!(c.is_builtin_small_model("local"));
        assert!(!c.is_builtin_small_model("big") && !c.is_builtin_small_model("api"));
        assert_eq!(c.interpreter_mode_for("local"), InterpreterMode::Off);
        assert_eq!(c.interpreter_mode_for("big"), InterpreterMode::After);
        assert_eq!(c.interpreter_mode_for("api"), InterpreterMode::After);
        // Asked for, it runs on the small model too.
        let c = Config::from_toml(
            "[interpreter]\nmode = \"after\"\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap();
        assert_eq!(c.interpreter_mode_for("local"), InterpreterMode::After);
    }

    #[test]
    fn memory_section_sets_the_archive_age() {
        let c = Config::from_toml("", Path::new("/c.toml"), env()).unwrap();
        assert_eq!(
            c.memory.archive_after_days(),
            Some(DEFAULT_ARCHIVE_AFTER_DAYS)
        );
        let c = Config::from_toml(
            "[memory]\narchive_after_days = 30\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap();
        assert_eq!(c.memory.archive_after_days(), Some(30));
        let c = Config::from_toml(
            "[memory]\narchive_after_days = 0\n",
            Path::new("/c.toml"),
            env(),
        )
        .unwrap();
        assert_eq!(c.memory.archive_after_days(), None, "0 = never");
        for bad in [
            "[memory]\narchive_after_days = -1\n",
            "[memory]\narchive_after_days = \"soon\"\n",
            "[memory]\narchive_after = 3\n",
        ] {
            let e = Config::from_toml(bad, Path::new("/c.toml"), env())
                .unwrap_err()
                .to_string();
            // Named by key, or by where it is (file:line:column).
            assert!(
                e.contains("archive_after") || e.contains("c.toml:2:"),
                "{bad}: {e}"
            );
        }
    }
}

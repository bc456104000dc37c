//! Where WikiOracle looks on this machine: the environment (injectable, so
//! tests need not mutate the process's), the config file's path and the
//! data directory. Below every other module: errors and the proxy rules
//! read it too, so it depends on nothing of this crate.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

/// Environment lookups, injectable so tests need not mutate the process
/// environment (which is `unsafe` and racy under the parallel test runner).
/// `Debug` shows variable names only: values may be keys.
#[derive(Clone, Default)]
pub struct Env {
    // `None` = the real process environment.
    vars: Option<HashMap<String, OsString>>,
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.vars {
            None => f.write_str("Env(process)"),
            Some(m) => {
                let mut names: Vec<&String> = m.keys().collect();
                names.sort();
                f.debug_tuple("Env").field(&names).finish()
            }
        }
    }
}

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Self { vars: None }
    }
    /// A fixed set of variables (everything else unset).
    pub fn from_pairs<K: Into<String>, V: Into<OsString>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            vars: Some(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
        }
    }
    /// A variable's value; empty counts as unset.
    pub fn get(&self, key: &str) -> Option<OsString> {
        let v = match &self.vars {
            None => std::env::var_os(key),
            Some(m) => m.get(key).cloned(),
        };
        v.filter(|v| !v.is_empty())
    }
    fn abs_dir(&self, key: &str) -> Option<PathBuf> {
        // XDG: relative values are invalid and must be ignored.
        self.get(key).map(PathBuf::from).filter(|p| p.is_absolute())
    }
    /// `$HOME`, when set.
    pub(crate) fn home(&self) -> Option<PathBuf> {
        self.get("HOME").map(PathBuf::from)
    }
}

/// Where the config file is looked for (see module docs).
pub fn config_path(env: &Env) -> Option<PathBuf> {
    if let Some(p) = env.get("WO_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let base = env
        .abs_dir("XDG_CONFIG_HOME")
        .or_else(|| env.home().map(|h| h.join(".config")))?;
    Some(base.join("wikioracle").join("config.toml"))
}

/// The config file's path as hints should name it: where this process
/// looks ([`config_path`]: `WO_CONFIG`, `XDG_CONFIG_HOME`, then `~/.config`).
pub fn config_path_for_hints() -> String {
    config_path(&Env::process())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "~/.config/wikioracle/config.toml".into())
}

/// WikiOracle's data directory: `$XDG_DATA_HOME/wikioracle`, else
/// `~/.local/share/wikioracle`.
pub fn data_dir(env: &Env) -> Option<PathBuf> {
    let base = env
        .abs_dir("XDG_DATA_HOME")
        .or_else(|| env.home().map(|h| h.join(".local").join("share")))?;
    Some(base.join("wikioracle"))
}

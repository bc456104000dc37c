//! `--persist`: writing flags into the user config's `[defaults]`, keeping
//! the file's comments and layout (toml_edit).

use std::path::PathBuf;

use anyhow::{Context as _, Result, anyhow};
use wo_providers::config::{Defaults, Env, config_path};

/// Sets the given (`Some`) fields of `[defaults]` in the user config file,
/// creating it (0600) if needed, and returns its path.
pub fn persist_defaults(d: &Defaults) -> Result<PathBuf> {
    let path = config_path(&Env::process()).ok_or_else(|| {
        anyhow!("cannot tell where the config lives: set HOME, XDG_CONFIG_HOME or WO_CONFIG")
    })?;
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("{}: cannot read", path.display())),
    };
    let mut doc: toml_edit::DocumentMut = text.parse().with_context(|| {
        format!(
            "{}: not valid TOML; fix it before --persist",
            path.display()
        )
    })?;
    let table = doc
        .entry("defaults")
        .or_insert(toml_edit::table())
        .as_table_mut()
        .ok_or_else(|| anyhow!("{}: `defaults` is not a table", path.display()))?;
    if let Some(v) = &d.provider {
        table["provider"] = toml_edit::value(v.as_str());
    }
    if let Some(v) = &d.model {
        table["model"] = toml_edit::value(v.as_str());
    }
    if let Some(v) = d.temperature {
        // Via the f32's shortest decimal, so 0.4 is written 0.4, not 0.4000000059604645.
        let shortest: f64 = v.to_string().parse().unwrap_or(f64::from(v));
        table["temperature"] = toml_edit::value(shortest);
    }
    if let Some(v) = d.max_tokens {
        table["max_tokens"] = toml_edit::value(i64::from(v));
    }
    if let Some(v) = &d.save_path {
        table["save_path"] = toml_edit::value(v.to_string_lossy().as_ref());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
    }
    wo_store::write_atomic(&path, &[doc.to_string().as_bytes()])
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(path)
}

//! `wo models`: what each configured provider offers
//! (`wo_providers::config::list_with_models`), for `-m PROVIDER/MODEL`.

use std::process::ExitCode;

use anyhow::{Result, bail};
use wo_providers::{Config, ModelsError};

use super::session::runtime;
use crate::cli::ModelsArgs;

pub fn run(args: ModelsArgs) -> Result<ExitCode> {
    let cfg = Config::load()?;
    for w in &cfg.warnings {
        eoutln!("warning: {w}");
    }
    if let Some(name) = &args.provider
        && let Some(unknown) = wo_engine::request::unknown_provider(&cfg, name)
    {
        bail!("--provider: {unknown}");
    }
    let rows = runtime()?.block_on(wo_providers::config::list_with_models(
        &cfg,
        args.provider.as_deref(),
    ));
    let mut failed = false;
    for (info, models) in &rows {
        if args.json {
            let mut v = serde_json::json!({
                "provider": info.name, "kind": info.kind.as_str(),
                "configured_model": info.model, "default": info.is_default,
            });
            match models {
                Ok(list) => {
                    v["models"] = serde_json::to_value(&list.models)?;
                    v["source"] = list.source.clone().into();
                }
                Err(ModelsError::NotConfigured(why)) => v["not_configured"] = why.clone().into(),
                Err(ModelsError::Failed(e)) => {
                    v["error"] = e.clone().into();
                    failed = true;
                }
            }
            outln!("{}", crate::render::json(&v)?);
            continue;
        }
        let default = if info.is_default { " (default)" } else { "" };
        match models {
            Ok(list) => {
                outln!(
                    "{}{default} — {} ({})",
                    info.name,
                    info.kind.as_str(),
                    if list.source == "config" {
                        "no model list: the configured model".to_owned()
                    } else {
                        format!("from {}", list.source)
                    }
                );
                let mut names = list.models.clone();
                if !names.contains(&info.model) && list.source == "config" {
                    names.push(info.model.clone());
                }
                for m in &names {
                    let mark = if *m == info.model { "*" } else { " " };
                    outln!("  {mark} {}/{m}", info.name);
                }
                if names.is_empty() {
                    outln!("    (the list is empty)");
                }
            }
            // Not set up (a built-in without its key): a note, not a failure.
            Err(ModelsError::NotConfigured(why)) => {
                outln!(
                    "{}{default} — {} (not configured: {why})",
                    info.name,
                    info.kind.as_str()
                );
            }
            Err(ModelsError::Failed(e)) => {
                failed = true;
                outln!("{}{default} — {}", info.name, info.kind.as_str());
                eoutln!("error: {}: cannot list models: {e}", info.name);
            }
        }
    }
    Ok(if failed {
        ExitCode::from(crate::EXIT_USAGE)
    } else {
        ExitCode::SUCCESS
    })
}

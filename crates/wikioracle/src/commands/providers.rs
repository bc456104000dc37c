//! `wo providers`: what is configured and whether it answers.

use std::process::ExitCode;

use anyhow::Result;
use wo_providers::{Config, Reachability};

use super::session::runtime;
use crate::cli::ProvidersArgs;

pub fn run(args: ProvidersArgs) -> Result<ExitCode> {
    let cfg = Config::load()?;
    for w in &cfg.warnings {
        eoutln!("warning: {w}");
    }
    let rows: Vec<(wo_providers::ProviderInfo, Option<Reachability>)> = if args.no_check {
        wo_providers::list(&cfg)
            .into_iter()
            .map(|i| (i, None))
            .collect()
    } else {
        runtime()?
            .block_on(wo_providers::config::list_with_reachability(&cfg))
            .into_iter()
            .map(|(i, r)| (i, Some(r)))
            .collect()
    };
    for (info, check) in &rows {
        if args.json {
            let mut v = serde_json::to_value(info)?;
            if let Some(c) = check {
                v["check"] = serde_json::to_value(c)?;
            }
            outln!("{}", crate::render::json(&v)?);
            continue;
        }
        let status = match check {
            None => String::new(),
            Some(Reachability::Reachable { detail }) => format!("ok — {detail}"),
            Some(Reachability::Unreachable { reason }) => format!("unreachable — {reason}"),
            Some(Reachability::NotConfigured { reason }) => format!("not configured — {reason}"),
        };
        outln!(
            "{}{:<12} {:<10} {:<28} {}",
            if info.is_default { "* " } else { "  " },
            info.name,
            info.kind.as_str(),
            info.model,
            status
        );
    }
    if let Some(src) = &cfg.source {
        eoutln!("(from {})", src.display());
    } else {
        eoutln!(
            "(built-in providers; configure more in {})",
            wo_providers::config::config_path_for_hints()
        );
    }
    Ok(ExitCode::SUCCESS)
}

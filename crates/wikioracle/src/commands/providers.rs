//! `wo providers`: what is configured and whether it answers.

use std::process::ExitCode;

use anyhow::Result;
use wo_providers::{Config, Reachability};

use super::session::runtime;
use crate::cli::ProvidersArgs;

pub fn run(args: ProvidersArgs) -> Result<ExitCode> {
    let cfg = Config::load()?;
    for w in &cfg.warnings {
        eprintln!("warning: {w}");
    }
    let infos = wo_providers::list(&cfg);
    let checks: Vec<Option<Reachability>> = if args.no_check {
        vec![None; infos.len()]
    } else {
        let rt = runtime()?;
        rt.block_on(async {
            let futures = infos.iter().map(|info| {
                let cfg = &cfg;
                async move {
                    match wo_providers::build(&info.name, cfg) {
                        Ok(p) => Some(p.check().await),
                        Err(e) => Some(Reachability::NotConfigured {
                            reason: e.to_string(),
                        }),
                    }
                }
            });
            futures::future::join_all(futures).await
        })
    };
    for (info, check) in infos.iter().zip(checks) {
        if args.json {
            let mut v = serde_json::to_value(info)?;
            if let Some(c) = &check {
                v["check"] = serde_json::to_value(c)?;
            }
            println!("{v}");
            continue;
        }
        let status = match &check {
            None => String::new(),
            Some(Reachability::Reachable { detail }) => format!("ok — {detail}"),
            Some(Reachability::Unreachable { reason }) => format!("unreachable — {reason}"),
            Some(Reachability::NotConfigured { reason }) => format!("not configured — {reason}"),
        };
        println!(
            "{}{:<12} {:<10} {:<28} {}",
            if info.is_default { "* " } else { "  " },
            info.name,
            info.kind.as_str(),
            info.model,
            status
        );
    }
    if let Some(src) = &cfg.source {
        eprintln!("(from {})", src.display());
    } else {
        eprintln!("(built-in providers; configure more in ~/.config/wikioracle/config.toml)");
    }
    Ok(ExitCode::SUCCESS)
}

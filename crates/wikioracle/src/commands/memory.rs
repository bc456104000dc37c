//! `wo memory list|show|undo` and `wo prompts`: the faces of
//! `wo_engine::memory` (product §7). Logic lives in the engine.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use wo_engine::memory::{PROMPTS, PromptSource, prompt_in_effect, read_log, undo};
use wo_format::{EffortStatus, Timestamp, TruthKind};

use super::{open_store, state_path};
use crate::cli::{GlobalOpts, KindArg, MemoryCommand, PromptsArgs, StatusArg};
use crate::render;

pub fn run(g: &GlobalOpts, cmd: MemoryCommand) -> Result<ExitCode> {
    match cmd {
        MemoryCommand::List {
            kind,
            status,
            tag,
            json,
        } => {
            let store = open_store(g)?;
            let kind = kind.map(|k| match k {
                KindArg::Fact => TruthKind::Fact,
                KindArg::Effort => TruthKind::Effort,
                KindArg::Event => TruthKind::Event,
                KindArg::Note => TruthKind::Note,
            });
            let status = status.map(|s| match s {
                StatusArg::Open => EffortStatus::Open,
                StatusArg::Resolved => EffortStatus::Resolved,
            });
            let mut learned: Vec<_> = store
                .state()
                .truth
                .trust
                .iter()
                .filter(|t| t.provenance.is_some())
                .filter(|t| kind.is_none_or(|k| t.kind == Some(k)))
                .filter(|t| status.is_none_or(|s| t.status == Some(s)))
                .filter(|t| {
                    tag.as_ref()
                        .is_none_or(|g| t.tags.as_ref().is_some_and(|v| v.contains(g)))
                })
                .collect();
            learned.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then(a.id.cmp(&b.id)));
            for t in learned {
                if json {
                    outln!("{}", render::json(t)?);
                } else {
                    outln!("{}", render::truth_line(t));
                }
            }
        }
        MemoryCommand::Show { exchange, json } => {
            let store = open_store(g)?;
            let log = read_log(store.state());
            let matching: Vec<_> = log
                .iter()
                .filter(|r| r.exchange.starts_with(&exchange))
                .collect();
            if matching.is_empty() {
                bail!(
                    "{exchange:?}: no memory operations recorded for that exchange\nhint: `wo memory list` shows what was learned; ids are answers' message ids (`wo log`)"
                );
            }
            for r in matching {
                if json {
                    outln!("{}", render::json(r)?);
                } else {
                    let undone = r
                        .undone
                        .as_ref()
                        .map(|t| format!(" (undone {t})"))
                        .unwrap_or_default();
                    outln!("{}  {}  by {}{undone}", r.exchange, r.at, r.by);
                    for op in &r.ops {
                        outln!("  {}", serde_json::to_string(op)?);
                    }
                }
            }
        }
        MemoryCommand::Undo { exchange } => {
            let mut store = open_store(g)?;
            let log = read_log(store.state());
            let target = match &exchange {
                Some(p) => {
                    let ids: std::collections::BTreeSet<_> = log
                        .iter()
                        .filter(|r| r.exchange.starts_with(p.as_str()) && r.undone.is_none())
                        .map(|r| r.exchange.clone())
                        .collect();
                    match ids.len() {
                        1 => ids.into_iter().next().unwrap_or_default(),
                        0 => bail!("{p:?}: no memory operations of that exchange to undo"),
                        n => bail!("{p:?} matches {n} exchanges; give more of the id"),
                    }
                }
                None => match log.iter().rev().find(|r| r.undone.is_none()) {
                    Some(r) => r.exchange.clone(),
                    None => bail!("nothing to undo: no memory operations recorded"),
                },
            };
            let (done, _) = store.transact(|s| undo(s, &target, Timestamp::now()))?;
            let done = done?;
            outln!(
                "undid {target}: {} removed, {} reopened, {} uses taken back",
                done.removed.len(),
                done.reopened.len(),
                done.untouched.len()
            );
            if !done.kept.is_empty() {
                eoutln!("kept (edited since): {}", done.kept.join(", "));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn user_config_dir() -> Option<PathBuf> {
    let env = wo_providers::config::Env::process();
    wo_providers::config::config_path(&env).and_then(|p| p.parent().map(PathBuf::from))
}

pub fn prompts(g: &GlobalOpts, args: PromptsArgs) -> Result<ExitCode> {
    let project = state_path(g)?
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let user = user_config_dir();
    if let Some(name) = args.write {
        let Some((_, text)) = PROMPTS.iter().find(|(n, _)| *n == name) else {
            let names: Vec<_> = PROMPTS.iter().map(|(n, _)| *n).collect();
            bail!(
                "--write {name:?}: no such prompt (known: {})",
                names.join(", ")
            );
        };
        let dir = if args.user {
            user.context("--user: no config directory (set HOME or XDG_CONFIG_HOME)")?
        } else {
            project
        };
        let path = dir.join("prompts").join(format!("{name}.md"));
        if path.exists() {
            bail!(
                "{}: exists; edit it, or remove it to write the default again",
                path.display()
            );
        }
        std::fs::create_dir_all(path.parent().unwrap_or(&dir))
            .with_context(|| format!("{}: cannot create the directory", dir.display()))?;
        wo_store::write_atomic(&path, &[text.as_bytes()])
            .with_context(|| format!("{}: cannot write", path.display()))?;
        outln!("wrote {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    for (name, _) in PROMPTS {
        let (src, _) = prompt_in_effect(name, Some(&project), user.as_deref())?;
        let from = match src {
            PromptSource::Project(p) => format!("{} (project)", p.display()),
            PromptSource::User(p) => format!("{} (user)", p.display()),
            PromptSource::Builtin => "built-in".to_owned(),
        };
        outln!("{name}  {from}");
    }
    Ok(ExitCode::SUCCESS)
}

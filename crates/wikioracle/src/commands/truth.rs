//! `wo memory add|edit|rm` and its alias `wo truth list|add|edit|rm` (the
//! entries are kept under `truth` in llm.json).

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use wo_format::query::{find_by_prefix, truth_by_certainty};
use wo_format::{Timestamp, TruthEdit, TruthEntry, TruthKind};

use super::{check_certainty, open_store, read_content};
use crate::cli::{GlobalOpts, KindArg, TruthCommand};
use crate::render;

pub fn run(g: &GlobalOpts, cmd: TruthCommand) -> Result<ExitCode> {
    match cmd {
        TruthCommand::List {
            min_certainty,
            json,
        } => {
            let store = open_store(g)?;
            let floor = min_certainty.unwrap_or(0.0);
            let listed: Vec<_> = truth_by_certainty(&store.state().truth.trust)
                .into_iter()
                .filter(|t| t.certainty >= floor)
                .collect();
            if json {
                outln!("{}", crate::render::json(&listed)?);
            } else if listed.is_empty() {
                eoutln!(
                    "{}",
                    super::memory::nothing_listed(min_certainty.is_some(), false)
                );
            } else {
                for t in listed {
                    outln!("{}", render::truth_line(t));
                }
            }
        }
        TruthCommand::Add(args) => add(g, args)?,
        TruthCommand::Edit(args) => edit(g, args)?,
        TruthCommand::Rm { id } => rm(g, &id)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `wo memory add`: one entry made by hand.
pub fn add(g: &GlobalOpts, args: crate::cli::TruthAddArgs) -> Result<()> {
    let certainty = check_certainty("--certainty", args.certainty)?;
    // At a terminal with neither --content nor --file, `wo memory add "The build server is
    // hopper"` means that sentence: reading standard input there would wait without a word.
    let inline = match (&args.input.content, &args.input.file) {
        (None, None) if std::io::stdin().is_terminal() => Some(args.title.as_str()),
        (content, _) => content.as_deref(),
    };
    let content = read_content(inline, args.input.file.as_deref(), args.input.format)?;
    let mut entry = TruthEntry::new(args.title, Timestamp::now(), certainty, content);
    entry.kind = args.kind.map(|k| match k {
        KindArg::Fact => TruthKind::Fact,
        KindArg::Effort => TruthKind::Effort,
        KindArg::Event => TruthKind::Event,
        KindArg::Note => TruthKind::Note,
    });
    if entry.kind == Some(TruthKind::Effort) {
        entry.status = Some(wo_format::EffortStatus::Open);
    }
    if !args.tags.is_empty() {
        entry.tags = Some(args.tags);
    }
    let id = entry.id.clone();
    let mut store = open_store(g)?;
    store.transact(|s| s.add_truth(entry))?;
    outln!("added {id}");
    Ok(())
}

/// `wo memory edit`: a change stamped to win over the version changed.
pub fn edit(g: &GlobalOpts, args: crate::cli::TruthEditArgs) -> Result<()> {
    if args.title.is_none()
        && args.content.is_none()
        && args.file.is_none()
        && args.certainty.is_none()
    {
        return Err(anyhow!(
            "nothing to change\nhint: pass --title, --content, --file or --certainty"
        ));
    }
    let certainty = args
        .certainty
        .map(|c| check_certainty("--certainty", c))
        .transpose()?;
    let content = match (&args.content, &args.file) {
        (None, None) => None,
        (c, f) => Some(read_content(c.as_deref(), f.as_deref(), args.format)?),
    };
    let mut store = open_store(g)?;
    let edit = TruthEdit {
        title: args.title,
        content,
        certainty,
    };
    let (id, _) = store.try_transact(|s| -> Result<String> {
        let id = find_by_prefix(&s.truth.trust, |t| &t.id, &args.id)
            .map_err(|e| anyhow!("memory entry: {e}"))?
            .id
            .clone();
        s.edit_truth(&id, edit, Timestamp::now());
        Ok(id)
    })??;
    outln!("updated {id}");
    Ok(())
}

/// `wo memory rm`: removed, with a tombstone.
pub fn rm(g: &GlobalOpts, id: &str) -> Result<()> {
    let mut store = open_store(g)?;
    let (id, _) = store.try_transact(|s| -> Result<String> {
        let id = find_by_prefix(&s.truth.trust, |t| &t.id, id)
            .map_err(|e| anyhow!("memory entry: {e}"))?
            .id
            .clone();
        s.delete_truth(&id, Timestamp::now());
        Ok(id)
    })??;
    outln!("deleted {id}");
    Ok(())
}

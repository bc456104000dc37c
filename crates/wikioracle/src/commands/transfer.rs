//! `wo export` and `wo import`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use wo_interop::{ImportOptions, Imported, openai_cli, profiles};
use wo_store::exports::{merge_files, write_export};

use super::open_store;
use crate::cli::{ExportArgs, ExportLayout, GlobalOpts, ImportArgs, ImportFormat};
use crate::render;

pub fn export(g: &GlobalOpts, args: ExportArgs) -> Result<ExitCode> {
    let store = open_store(g)?;
    match args.layout {
        ExportLayout::Llm => {
            let dir = match &args.dir {
                Some(d) => d.clone(),
                None => std::env::current_dir()?,
            };
            let path = write_export(store.state(), &dir)?;
            outln!("exported {}", path.display());
        }
        ExportLayout::Profiles => {
            let out = args.out.as_deref().expect("clap requires --out");
            let opts = profiles::ExportOptions {
                overwrite: args.overwrite,
                copy_files_from: args.copy_files_from.clone(),
                ..Default::default()
            };
            let report = profiles::export(store.state(), out, &opts)?;
            for w in &report.warnings {
                eoutln!("warning: {w}");
            }
            outln!(
                "exported {} messages in {} chats of {} profiles to {}",
                report.messages,
                report.chats,
                report.profiles,
                out.display()
            );
            if let Some((p, c)) = &report.new_chat {
                outln!("  messages from elsewhere went to profile {p}, chat {c}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Decides the format of an import source from its shape.
fn detect(source: &Path) -> Result<ImportFormat> {
    if source.is_dir() {
        let is_tree = source.join("profiles").is_dir()
            || std::fs::read_dir(source)?
                .flatten()
                .any(|e| e.path().join("chats").is_dir());
        if is_tree {
            return Ok(ImportFormat::Profiles);
        }
        if source.join(".ai/openai.json").is_file() {
            return Ok(ImportFormat::OpenaiCli);
        }
        anyhow::bail!(
            "{}: a directory, but neither a profiles/ tree nor a project with .ai/openai.json\nhint: name the file, or pass --format",
            source.display()
        );
    }
    let bytes =
        std::fs::read(source).with_context(|| format!("{}: cannot read", source.display()))?;
    let looks_like_cli = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .is_some_and(|v| v.get("conversation").is_some() && v.get("messages").is_none());
    Ok(if looks_like_cli {
        ImportFormat::OpenaiCli
    } else {
        ImportFormat::Llm
    })
}

pub fn import(g: &GlobalOpts, args: ImportArgs) -> Result<ExitCode> {
    let format = match args.format {
        ImportFormat::Auto => detect(&args.source)?,
        f => f,
    };
    let mut store = open_store(g)?;
    let verb = if args.dry_run {
        "would import"
    } else {
        "imported"
    };
    let imported: Imported = match format {
        ImportFormat::Auto | ImportFormat::Llm => {
            let outcomes = merge_files(
                &mut store,
                std::slice::from_ref(&args.source),
                args.dry_run,
                false,
            )?;
            for o in outcomes {
                let report = o.result?;
                for pointer in &o.sanitised {
                    eoutln!(
                        "warning: {}: {pointer}: not valid XHTML, sanitised",
                        o.path.display()
                    );
                }
                outln!(
                    "{verb} {}: {}",
                    o.path.display(),
                    render::merge_report(&report)
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        ImportFormat::OpenaiCli | ImportFormat::Profiles => {
            let mut opts = ImportOptions::default();
            if let Some(u) = &args.username {
                opts.username = u.clone();
            }
            if format == ImportFormat::OpenaiCli {
                openai_cli::import_with(&args.source, &opts)?
            } else {
                profiles::import_with(&args.source, &opts)?
            }
        }
    };
    for w in &imported.warnings {
        eoutln!("warning: {w}");
    }
    // The one gate for outside data: what passes is written and re-opens.
    let imported = imported
        .admit()
        .map_err(|issues| wo_store::StoreError::Invalid {
            path: args.source.clone(),
            issues,
        })?;
    for pointer in &imported.sanitised {
        eoutln!(
            "warning: {}: {pointer} (as imported): not valid XHTML, sanitised",
            args.source.display()
        );
    }
    let imported = imported.imported;
    let adopt_context = imported
        .suggested_context
        .clone()
        .filter(|_| store.state().context.trim().is_empty());
    let report = if args.dry_run {
        store.refresh()?;
        let mut scratch = store.state().clone();
        imported.merge_into(&mut scratch)
    } else {
        let (report, _) = store.transact(|s| {
            let report = imported.merge_into(s);
            if let Some(ctx) = &adopt_context {
                s.context = ctx.clone();
            }
            report
        })?;
        report
    };
    outln!(
        "{verb} {}: {}",
        args.source.display(),
        render::merge_report(&report)
    );
    match (&imported.suggested_context, &adopt_context) {
        (Some(_), Some(_)) => outln!(
            "  the context was empty: {} it to the file's system prompt",
            if args.dry_run { "would set" } else { "set" }
        ),
        (Some(_), None) => outln!(
            "  the file's system prompt was not applied (llm.json has a context); see `wo context edit`"
        ),
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}

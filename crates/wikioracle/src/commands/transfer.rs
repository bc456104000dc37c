//! `wo export` and `wo import`: flags → `wo_interop` / `wo_store` → a
//! summary. Formats, detection and conversion live in `wo_interop`; the
//! write is one store transaction.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use wo_interop::detect::{self, Format};
use wo_interop::{ImportOptions, Imported, Progress, Step, X_IMPORT_KEY, profiles};
use wo_store::exports::{merge_files, write_export};

use super::open_store;
use crate::cli::{ExportArgs, ExportFormat, ExportLayout, GlobalOpts, ImportArgs};
use crate::render;

pub fn export(g: &GlobalOpts, args: ExportArgs) -> Result<ExitCode> {
    let format = match (args.format, args.layout) {
        (Some(f), _) => f,
        (None, Some(ExportLayout::Profiles)) => ExportFormat::Profiles,
        (None, _) => ExportFormat::Llm,
    };
    if args.split && format != ExportFormat::Markdown {
        bail!("--split goes with --format markdown");
    }
    let store = open_store(g)?;
    match format {
        ExportFormat::Llm => {
            let dir = match &args.dir {
                Some(d) => d.clone(),
                None => std::env::current_dir()?,
            };
            let path = write_export(store.state(), &dir)?;
            outln!("exported {}", path.display());
        }
        ExportFormat::Profiles => {
            let out = args
                .out
                .as_deref()
                .ok_or_else(|| anyhow!("--format profiles needs --out DIR"))?;
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
        ExportFormat::Markdown if args.split => {
            let dir = args
                .out
                .as_deref()
                .ok_or_else(|| anyhow!("--split needs --out DIR (one file per conversation)"))?;
            let files = wo_interop::export::markdown_files(store.state());
            write_files(dir, &files, args.overwrite)?;
            outln!(
                "exported {} conversation(s) as Markdown files in {}",
                files.len(),
                dir.display()
            );
        }
        ExportFormat::Markdown => {
            let doc = wo_interop::export::markdown_document(store.state());
            emit(args.out.as_deref(), doc.as_bytes(), args.overwrite, false)?;
        }
        ExportFormat::Jsonl => {
            let lines = wo_interop::export::jsonl(store.state());
            emit(args.out.as_deref(), lines.as_bytes(), args.overwrite, true)?;
        }
        ExportFormat::Chatgpt => {
            let value = wo_interop::chatgpt::export(store.state());
            let text = serde_json::to_string(&value)? + "\n";
            emit(args.out.as_deref(), text.as_bytes(), args.overwrite, true)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to `out` (atomically; an existing file only with
/// `overwrite`), or to standard output made safe for a terminal.
fn emit(out: Option<&Path>, bytes: &[u8], overwrite: bool, json_lines: bool) -> Result<()> {
    match out {
        Some(path) => {
            refuse_existing(path, overwrite)?;
            wo_store::write_atomic(path, &[bytes])
                .with_context(|| format!("{}: cannot write", path.display()))?;
            eoutln!("exported {}", path.display());
        }
        None => {
            let text = String::from_utf8_lossy(bytes);
            if json_lines {
                // Each line re-encoded so DEL and C1 controls are escapes.
                for line in text.lines() {
                    let v: serde_json::Value = serde_json::from_str(line)?;
                    out!("{}\n", render::json(&v)?);
                }
            } else {
                out!("{text}");
            }
        }
    }
    Ok(())
}

fn refuse_existing(path: &Path, overwrite: bool) -> Result<()> {
    if !overwrite && path.symlink_metadata().is_ok() {
        bail!(
            "{}: exists; nothing was written\nhint: choose another name",
            path.display()
        );
    }
    Ok(())
}

/// Writes each `(name, text)` into `dir` (created if missing). Existing
/// files are refused, all before anything is written, unless `overwrite`.
fn write_files(dir: &Path, files: &[(String, String)], overwrite: bool) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let clashes: Vec<PathBuf> = files
        .iter()
        .map(|(n, _)| dir.join(n))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    if !overwrite && !clashes.is_empty() {
        bail!(
            "{}: {} of the files exist already (first: {}); nothing was written\nhint: choose a new or empty directory",
            dir.display(),
            clashes.len(),
            clashes[0].display()
        );
    }
    for (name, text) in files {
        let path = dir.join(name);
        wo_store::write_atomic(&path, &[text.as_bytes()])
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    Ok(())
}

/// Inputs at least this large get a progress bar (on a terminal).
const BAR_FROM_BYTES: u64 = 8 << 20;
/// Warnings printed one by one; past this, a count.
const MAX_WARNINGS: usize = 20;

fn input_size(path: &Path) -> u64 {
    if path.is_dir() {
        walk_size(path, 3)
    } else {
        path.metadata().map(|m| m.len()).unwrap_or(0)
    }
}

fn walk_size(dir: &Path, depth: u32) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() && depth > 0 => walk_size(&e.path(), depth - 1),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A bar on standard error for large inputs; hidden otherwise (indicatif
/// also hides it when standard error is not a terminal).
fn progress_bar(source: &Path) -> ProgressBar {
    if input_size(source) < BAR_FROM_BYTES {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix:>10} [{bar:30}] {pos}/{len} {wide_msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

pub fn import(g: &GlobalOpts, args: ImportArgs) -> Result<ExitCode> {
    // The state file first: a missing or invalid one stops before a long
    // conversion.
    let mut store = open_store(g)?;
    let bar = progress_bar(&args.source);
    let mut opts = ImportOptions::default();
    if let Some(u) = &args.username {
        opts.username = u.clone();
    }
    if let Some(a) = &args.assistant_name {
        opts.assistant_name = a.clone();
    }
    let b = bar.clone();
    opts.progress = Progress::new(move |step| match step {
        Step::Reading => b.set_prefix("reading"),
        Step::Parsing => b.set_prefix("parsing"),
        Step::Converting { done, total } => {
            b.set_prefix("converting");
            b.set_length(*total);
            b.set_position(*done);
            b.set_message("conversations");
        }
    });
    let verb = if args.dry_run {
        "would import"
    } else {
        "imported"
    };
    // Detect first (a JSON file is parsed once: the value goes on to the
    // importer); an llm.json is merged by the store.
    let forced = args.format.0;
    let detected = match forced {
        Some(f) => detect::Detected {
            format: f,
            value: None,
        },
        None => detect::detect(&args.source, &opts)?,
    };
    if detected.format == Format::Llm {
        bar.finish_and_clear();
        let outcomes = merge_files(
            &mut store,
            std::slice::from_ref(&args.source),
            args.dry_run,
            false,
        )?;
        for o in outcomes {
            let report = o.result?;
            super::merge::print_merged(verb, &o.path, &o.sanitised, &report);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let format = detected.format;
    let imported = import_detected(&args.source, detected, &opts)?;
    bar.set_prefix("checking");
    bar.set_message("");
    bar.suspend(|| print_warnings(&imported));
    // The one gate for outside data: what passes is written and re-opens.
    let imported = imported.admit().map_err(|issues| {
        let list: Vec<String> = issues.iter().take(10).map(|i| format!("  {i}")).collect();
        anyhow!(
            "{}: imported as {}, the result would not be a valid llm.json; nothing was written:\n{}{}",
            args.source.display(),
            format.describe(),
            list.join("\n"),
            if issues.len() > 10 {
                format!("\n  … and {} more", issues.len() - 10)
            } else {
                String::new()
            }
        )
    })?;
    bar.suspend(|| {
        for pointer in &imported.sanitised {
            eoutln!(
                "warning: {}: {pointer} (as imported): not valid XHTML, sanitised",
                args.source.display()
            );
        }
    });
    let imported = imported.imported;
    check_sizes(&args.source, &imported, store.limits().max_message_bytes)?;
    let adopt_context = imported
        .suggested_context
        .clone()
        .filter(|_| store.state().context.trim().is_empty());
    bar.set_prefix(if args.dry_run { "comparing" } else { "writing" });
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
    bar.finish_and_clear();
    outln!(
        "{verb} {} ({}): {}",
        args.source.display(),
        format.describe(),
        render::merge_report(&report)
    );
    if args.dry_run {
        print_new_conversations(&imported, &report);
    }
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

fn import_detected(
    source: &Path,
    detected: detect::Detected,
    opts: &ImportOptions,
) -> Result<Imported> {
    let format = detected.format;
    let imported = match detected.value {
        Some((value, shown)) => match format {
            Format::Chatgpt => wo_interop::chatgpt::import_value(value, &shown, opts)?,
            Format::Claude => wo_interop::claude::import_value(value, &shown, opts)?,
            Format::OpenWebui => wo_interop::openwebui::import_value(value, &shown, opts)?,
            Format::Librechat => wo_interop::librechat::import_value(value, &shown, opts)?,
            _ => detect::import(source, Some(format), opts)?.1,
        },
        None => detect::import(source, Some(format), opts)?.1,
    };
    Ok(imported)
}

/// Refuses, before any write, a message over the per-message limit,
/// naming it as the source knows it (the store would name only its place
/// in llm.json). Nothing is cut short: the limit can be raised.
fn check_sizes(source: &Path, imported: &Imported, limit: usize) -> Result<()> {
    let Some(m) = imported
        .state
        .messages()
        .iter()
        .find(|m| m.content.len() > limit)
    else {
        return Ok(());
    };
    let x = m.extra.get(X_IMPORT_KEY).map(|x| x.to_value());
    let field = |k: &str| {
        x.as_ref()
            .and_then(|x| x.get(k))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let which = match (field("id"), field("conversation")) {
        (Some(id), Some(c)) => format!("message {id:?} of conversation {c:?}"),
        (Some(id), None) => format!("message {id:?}"),
        _ => format!("the message of {} titled {:?}", m.timestamp, m.title),
    };
    bail!(
        "{}: {which} is {} bytes as XHTML, over the limit of {limit} bytes for one message; nothing was written\nhint: raise the limit with {}=BYTES",
        source.display(),
        m.content.len(),
        wo_store::MAX_MESSAGE_BYTES_ENV
    )
}

fn print_warnings(imported: &Imported) {
    let n = imported.warnings.len();
    for w in imported.warnings.iter().take(MAX_WARNINGS) {
        eoutln!("warning: {w}");
    }
    if n > MAX_WARNINGS {
        eoutln!("warning: … and {} more warnings", n - MAX_WARNINGS);
    }
}

/// Under `--dry-run`: the conversations that would gain messages, by title.
fn print_new_conversations(imported: &Imported, report: &wo_format::merge::MergeReport) {
    use std::collections::BTreeMap;
    let added: std::collections::HashSet<&str> =
        report.messages_added.iter().map(String::as_str).collect();
    // conversation id → (title, new messages)
    let mut convs: BTreeMap<String, (Option<String>, usize)> = BTreeMap::new();
    for m in imported.state.messages() {
        // Only the chat apps' imports know their conversations.
        let Some(x) = m.extra.get(X_IMPORT_KEY).map(|x| x.to_value()) else {
            continue;
        };
        let conv = x
            .get("conversation")
            .and_then(|c| c.as_str())
            .unwrap_or("")
            .to_owned();
        let entry = convs.entry(conv).or_default();
        if let Some(t) = x.get("title").and_then(|t| t.as_str()) {
            entry.0 = Some(t.to_owned());
        }
        if added.contains(m.id.as_str()) {
            entry.1 += 1;
        }
    }
    let gaining: Vec<_> = convs.into_iter().filter(|(_, (_, n))| *n > 0).collect();
    if gaining.is_empty() {
        return;
    }
    outln!("  {} conversation(s) would gain messages:", gaining.len());
    for (id, (title, n)) in gaining.iter().take(20) {
        let name = title
            .clone()
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| id.clone());
        outln!("    {name}  (+{n})");
    }
    if gaining.len() > 20 {
        outln!("    … and {} more", gaining.len() - 20);
    }
}

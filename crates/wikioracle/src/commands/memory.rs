//! `wo memory list|search|show|undo|status|cancel|run` and `wo prompts`:
//! the faces of `wo_engine::memory` and `wo_engine::memory_jobs` (product
//! §7); `add|edit|rm` are in `truth.rs`. Logic lives in the engine.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use wo_engine::archive::{Archived, search};
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
            archived,
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
                // Every entry however it was made (by hand, by the
                // interpreter, by an MCP client): archived ones on request.
                .filter(|t| t.archived.is_some() == archived)
                .filter(|t| kind.is_none_or(|k| t.kind == Some(k)))
                .filter(|t| status.is_none_or(|s| t.status == Some(s)))
                .filter(|t| {
                    tag.as_ref()
                        .is_none_or(|g| t.tags.as_ref().is_some_and(|v| v.contains(g)))
                })
                .collect();
            learned.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then(a.id.cmp(&b.id)));
            if json {
                outln!("{}", render::json(&learned)?);
            } else if learned.is_empty() {
                let filtered = kind.is_some() || status.is_some() || tag.is_some();
                eoutln!("{}", nothing_listed(filtered, archived));
            } else {
                for t in learned {
                    outln!("{}", entry_line(t));
                }
            }
        }
        MemoryCommand::Add(args) => super::truth::add(g, args)?,
        MemoryCommand::Edit(args) => super::truth::edit(g, args)?,
        MemoryCommand::Rm { id } => super::truth::rm(g, &id)?,
        MemoryCommand::Status { json } => return status(g, json),
        MemoryCommand::Cancel { exchange } => {
            let store_path = state_path(g)?;
            let queue = wo_engine::memory_jobs::Queue::of(&store_path);
            let cancelled = queue.cancel(exchange.as_deref())?;
            if cancelled.is_empty() {
                outln!("nothing to cancel: no exchange is waiting for the interpreter");
            } else {
                outln!(
                    "cancelled {} exchange(s): {}",
                    cancelled.len(),
                    cancelled.join(", ")
                );
            }
        }
        MemoryCommand::Run { timeout, quiet } => return run_queue(g, timeout, quiet),
        MemoryCommand::Search {
            query,
            archived,
            limit,
            json,
        } => {
            let store = open_store(g)?;
            let which = if archived {
                Archived::Only
            } else {
                Archived::Exclude
            };
            let hits = search(store.state(), &query.join(" "), which);
            if json {
                let hits: Vec<_> = hits
                    .into_iter()
                    .take(limit)
                    .map(|(score, t)| serde_json::json!({"score": score, "entry": t}))
                    .collect();
                outln!("{}", render::json(&hits)?);
                return Ok(ExitCode::SUCCESS);
            }
            if hits.is_empty() {
                eoutln!(
                    "nothing matches{}",
                    if archived {
                        " among archived entries"
                    } else {
                        "\nhint: archived entries are searched with --archived"
                    }
                );
            }
            for (score, t) in hits.into_iter().take(limit) {
                outln!("{:.3}  {}", score, entry_line(t));
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
            if json {
                outln!("{}", render::json(&matching)?);
                return Ok(ExitCode::SUCCESS);
            }
            for r in matching {
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
        MemoryCommand::Rebuild {
            since,
            dry_run,
            yes,
            provider,
        } => return rebuild(g, since, dry_run, yes, provider),
        MemoryCommand::Accept { id } => {
            let mut store = open_store(g)?;
            let full = wo_format::query::find_by_prefix(&store.state().truth.trust, |t| &t.id, &id)
                .map_err(|e| anyhow::anyhow!("{id:?}: {e}"))?
                .id
                .clone();
            // A refused accept writes nothing.
            let (replaced, _) = store
                .try_transact(|s| wo_engine::memory::accept_suggestion(s, &full, Timestamp::now()))?
                .map_err(|e| anyhow::anyhow!("{id:?}: {}", e.reason))?;
            outln!("accepted {full}: it now replaces {replaced}");
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

/// One entry as `wo memory list`/`search` print it: the truth line, and
/// when it was archived.
/// What `wo memory list` says (on standard error, so standard output stays
/// empty for scripts) when it lists nothing: which list was empty, and how
/// to fill it or widen it.
pub(super) fn nothing_listed(filtered: bool, archived: bool) -> &'static str {
    match (filtered, archived) {
        (true, _) => {
            "no memory entry matches these filters\nhint: `wo memory list` without them lists every entry"
        }
        (false, true) => "no archived memory entries",
        (false, false) => {
            "no memory entries yet\nhint: `wo memory add \"The build server is named hopper\"` adds one by hand; with a provider configured, the interpreter adds what each exchange teaches (`wo memory status`)"
        }
    }
}

fn entry_line(t: &wo_format::TruthEntry) -> String {
    let line = match &t.archived {
        Some(at) => format!("{}  (archived {at})", render::truth_line(t)),
        None => render::truth_line(t),
    };
    match wo_engine::retrieve::suggested_supersede(t) {
        Some(old) => format!(
            "{line}  (suggests replacing your entry {old}; not used until `wo memory accept {}`)",
            t.id
        ),
        None => line,
    }
}

/// `wo memory rebuild`: the engine's `unremembered` exchanges, each
/// interpreted by `remember` (one call, one transaction), with the cost
/// shown first and a progress bar.
fn rebuild(
    g: &GlobalOpts,
    since: Option<String>,
    dry_run: bool,
    yes: bool,
    provider: Option<String>,
) -> Result<ExitCode> {
    use std::io::IsTerminal;
    let since = super::log::date_flag("--since", since.as_deref())?;
    let cfg = wo_providers::Config::load()?;
    let name = provider
        .or_else(|| cfg.interpreter.provider.clone())
        .unwrap_or_else(|| cfg.default_provider().to_owned());
    if let Some(unknown) = wo_engine::request::unknown_provider(&cfg, &name) {
        bail!("--provider: {unknown}");
    }
    let mut store = open_store(g)?;
    let known = wo_engine::chat::configured_models(&cfg);
    let todo = wo_engine::memory::unremembered(store.state(), since.as_ref(), &known);
    if todo.is_empty() {
        outln!("nothing to rebuild: every exchange has a memory record");
        return Ok(ExitCode::SUCCESS);
    }
    let project = store.path().parent().map(PathBuf::from);
    let (_, prompt) = prompt_in_effect(
        "interpreter",
        project.as_deref(),
        user_config_dir().as_deref(),
    )?;
    let (calls, tokens) = wo_engine::memory::rebuild_estimate(store.state(), &todo, &prompt);
    outln!(
        "{calls} exchange(s) to interpret with {name}: {calls} call(s), about {tokens} prompt tokens (plus the answers, and a retry where a reply is rejected)"
    );
    if dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            bail!(
                "not starting without confirmation\nhint: add --yes to start, or --dry-run to see the cost only"
            );
        }
        eout!("start? [y/N] ");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            outln!("nothing done");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let interpreter = wo_providers::build(&name, &cfg)?;
    let by = format!("{}/{}", interpreter.name(), interpreter.default_model());
    let rt = super::session::runtime()?;
    let bar = indicatif::ProgressBar::new(todo.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} exchanges, {eta} left")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let (mut recorded, mut operations, mut failed, mut skipped) = (0usize, 0usize, 0usize, 0usize);
    for exchange in &todo {
        let result = rt.block_on(wo_engine::memory::remember(
            &mut store,
            interpreter.as_ref(),
            exchange,
            &prompt,
            &by,
        ));
        match result {
            Ok(rec) => {
                recorded += 1;
                operations += rec.ops.len();
            }
            // A store failure stops the run (the next exchange would fail
            // the same way); what was recorded so far stays.
            // Another process (a second rebuild) recorded it first.
            Err(wo_engine::memory::RememberError::AlreadyRecorded) => skipped += 1,
            Err(wo_engine::memory::RememberError::Store(e)) => {
                bar.abandon();
                return Err(e.into());
            }
            Err(e) => {
                failed += 1;
                // In plain words, as `wo memory status` says it: never a
                // parser's message.
                let why = wo_engine::memory_jobs::plain_reason(&e);
                bar.suspend(|| eoutln!("note: {}: nothing remembered: {why}", exchange.answer_id));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    outln!(
        "interpreted {recorded} exchange(s): {operations} operation(s); {failed} without a valid reply (run again to retry them)"
    );
    if skipped > 0 {
        outln!("{skipped} exchange(s) skipped: another process remembered them meanwhile");
    }
    Ok(ExitCode::SUCCESS)
}

/// `wo memory status`: whether the interpreter is on (and why not), then
/// the queue, oldest first, each job with its state and reason.
fn status(g: &GlobalOpts, json: bool) -> Result<ExitCode> {
    use wo_engine::memory_jobs::{JobStatus, Queue};
    let path = state_path(g)?;
    let queue = Queue::of(&path);
    let jobs = queue.jobs();
    let active = queue.runner_active();
    for refused in queue.refused_files() {
        eoutln!("note: memory: {refused}");
    }
    let cfg = wo_providers::Config::load()?;
    let interpreter = super::session::interpreter_state(&cfg, None);
    // Pending jobs wait for a pause in answers (`wo_engine::memory_jobs`).
    let pause = cfg.interpreter.pause();
    let waiting = (active && !queue.answers_quiet(pause)).then(|| waiting_for_a_pause(pause));
    // A job left running with no runner alive was interrupted; the next
    // `wo ask` or `wo memory run` tries it again.
    let shown = |s: JobStatus| match (s, active) {
        (JobStatus::Running, false) => "interrupted",
        (JobStatus::Pending, _) => "pending",
        (JobStatus::Running, true) => "running",
        (JobStatus::Done, _) => "done",
        (JobStatus::Failed, _) => "failed",
        (JobStatus::Cancelled, _) => "cancelled",
    };
    if json {
        let jobs: Vec<_> = jobs
            .iter()
            .map(|j| {
                let mut v = serde_json::to_value(j).unwrap_or_default();
                v["status"] = shown(j.status).into();
                if let (JobStatus::Pending, Some(w)) = (j.status, &waiting) {
                    v["reason"] = w.as_str().into();
                }
                v
            })
            .collect();
        outln!(
            "{}",
            render::json(&serde_json::json!({"interpreter": interpreter, "jobs": jobs}))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!("interpreter: {interpreter}");
    if jobs.is_empty() {
        outln!("no exchanges queued for the interpreter");
    }
    for j in &jobs {
        let when = j
            .finished
            .as_ref()
            .or(j.started.as_ref())
            .unwrap_or(&j.queued);
        let reason = match (j.status, &waiting) {
            (JobStatus::Pending, Some(w)) => Some(w.as_str()),
            _ => j.reason.as_deref(),
        }
        .map(|r| format!("  {r}"))
        .unwrap_or_default();
        outln!("{:<11} {}  {when}{reason}", shown(j.status), j.exchange);
    }
    Ok(ExitCode::SUCCESS)
}

/// What pending jobs wait for while answers keep coming
/// (`wo_engine::memory_jobs`: answers go first).
fn waiting_for_a_pause(pause: std::time::Duration) -> String {
    format!(
        "waiting for a pause: answers go first, and the interpreter starts once none has been \
         in progress for {} s",
        pause.as_secs()
    )
}

/// `wo memory run`: the queue, in this process, until nothing is pending.
fn run_queue(g: &GlobalOpts, timeout: u64, quiet: bool) -> Result<ExitCode> {
    use wo_engine::memory_jobs::{JobStatus, RunContext};
    let cfg = wo_providers::Config::load()?;
    let mut store = open_store(g)?;
    let project = store.path().parent().map(PathBuf::from);
    let (_, prompt) = prompt_in_effect(
        "interpreter",
        project.as_deref(),
        user_config_dir().as_deref(),
    )?;
    let build = |name: &str| wo_providers::build(name, &cfg).map_err(|e| e.to_string());
    let ctx = RunContext {
        provider: &build,
        prompt: &prompt,
        job_timeout: std::time::Duration::from_secs(timeout),
        answers_quiet: cfg.interpreter.pause(),
    };
    let rt = super::session::runtime()?;
    let queue = wo_engine::memory_jobs::Queue::of(store.path());
    let pending = queue.jobs().iter().any(|j| j.status == JobStatus::Pending);
    if !quiet && pending && !queue.answers_quiet(ctx.answers_quiet) {
        outln!(
            "{} ([interpreter] pause_seconds)",
            waiting_for_a_pause(ctx.answers_quiet)
        );
    }
    match rt.block_on(wo_engine::memory_jobs::run_queue(&mut store, &ctx))? {
        None if !quiet => outln!("another process is running the interpreter's queue"),
        Some(ran) if !quiet => {
            if ran.is_empty() {
                outln!("nothing queued for the interpreter");
            }
            let jobs = wo_engine::memory_jobs::Queue::of(store.path()).jobs();
            for (job, _) in ran {
                if let Some(j) = jobs.iter().rev().find(|j| j.exchange == job.exchange) {
                    let reason = j.reason.as_deref().unwrap_or_default();
                    outln!("{:<9} {}  {reason}", j.status.as_str(), j.exchange);
                }
            }
        }
        _ => {}
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
        if path.symlink_metadata().is_ok() {
            bail!(
                "{}: exists; edit it, or remove it to write the default again",
                path.display()
            );
        }
        // `prompts/` made or checked without following a link out of the
        // folder.
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("{}: cannot create the directory", dir.display()))?;
        wo_durable::project::ensure_project_dir(&dir, std::path::Path::new("prompts"))
            .map_err(|e| anyhow::anyhow!("{e}\nnothing was written"))?;
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

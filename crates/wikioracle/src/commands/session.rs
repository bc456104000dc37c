//! What `wo ask` and `wo chat` share: opening the state (creating it when
//! missing, merging exports beside it), choosing the provider, retrieving
//! file chunks, and rendering the assembled context.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use wo_engine::Assembled;
use wo_engine::chat::TurnRequest;
use wo_engine::request::TurnParams;
use wo_providers::{Config, Provider};
use wo_store::Store;

use super::{open_options, state_path};
use crate::cli::{GlobalOpts, ModelOpts};

/// Opens the state for chatting: created with defaults if missing (seed
/// 001), after merging any `llm_*.json` exports found beside it (product §3).
pub fn open_for_chat(g: &GlobalOpts) -> Result<Store> {
    let path = state_path(g)?;
    let mut opts = open_options(g);
    opts.create_if_missing = true;
    let existed = path.exists();
    let mut store = Store::open(&path, opts)?;
    if !existed {
        // Say exactly where: a relative `llm.json` does not tell a person
        // which folder now holds their conversations.
        let shown = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
        eoutln!(
            "created {} (no llm.json here or in a parent folder; this one keeps this folder's conversations and memory)",
            shown.display()
        );
    }
    for merged in wo_store::exports::auto_merge(&mut store, false)? {
        match merged.result {
            Ok(report) => eoutln!(
                "merged {}: {}",
                merged.path.display(),
                crate::render::merge_report(&report)
            ),
            Err(e) => eoutln!("warning: not merged {}: {e}", merged.path.display()),
        }
    }
    Ok(store)
}

/// Loads the user config and builds the provider to use. `-m
/// PROVIDER/MODEL` is split into `opts` here (see
/// `wo_engine::request::split_provider_model`).
pub fn provider(opts: &mut ModelOpts) -> Result<(Config, Arc<dyn Provider>)> {
    let cfg = Config::load()?;
    for w in &cfg.warnings {
        eoutln!("warning: {w}");
    }
    if opts.provider.is_none()
        && let Some((p, m)) = opts
            .model
            .as_deref()
            .and_then(|m| wo_engine::request::split_provider_model(&cfg, m))
    {
        opts.provider = Some(p);
        opts.model = Some(m);
    }
    let name = opts
        .provider
        .clone()
        .unwrap_or_else(|| cfg.default_provider().to_owned());
    if let Some(unknown) = wo_engine::request::unknown_provider(&cfg, &name) {
        return Err(anyhow!(
            "--provider: {unknown}\nhint: add [providers.{name}] to {}",
            cfg.source
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(wo_providers::config::config_path_for_hints)
        ));
    }
    let provider = wo_providers::build(&name, &cfg)?;
    Ok((cfg, provider))
}

/// The request for one turn from the command-line options, validated by the
/// engine's one builder (with the config's `[defaults]`); a bad value is
/// named by its flag.
pub fn turn_request(
    cfg: &Config,
    opts: &ModelOpts,
    prompt: String,
    place: &Placement,
    regenerate: Option<wo_engine::request::Regenerating>,
) -> Result<TurnRequest> {
    let mut params = TurnParams {
        message: prompt,
        username: opts.username.clone(),
        system: opts.system.clone(),
        provider_named: opts.provider.is_some(),
        model: opts.model.clone(),
        temperature: opts.temperature,
        max_tokens: opts.max_tokens,
        parent: place.parent.clone(),
        new_conversation: place.new,
        rag: !opts.no_rag,
        url_fetch: opts.url_fetch,
        ..TurnParams::default()
    };
    if let Some(again) = regenerate {
        again.apply(&mut params);
    }
    params
        .build(cfg, wo_interop::default_username)
        .map_err(|e| anyhow!(e.for_cli()))
}

/// The directory index at `--index` (or the nearest indexed directory
/// above the state file), when there is one and the turn sends file chunks
/// (not `--no-rag`); the turn's set-up searches it.
pub fn open_index(opts: &ModelOpts, state_file: &Path) -> Result<Option<wo_index::Index>> {
    if opts.no_rag {
        return Ok(None);
    }
    let Some(root) = wo_engine::files::index_root_for(state_file, opts.index.as_deref()) else {
        return Ok(None);
    };
    let index = wo_index::Index::open(&root)
        .with_context(|| format!("cannot open the directory index of {}", root.display()))?;
    Ok(Some(index))
}

/// The turn's set-up for `wo ask` / `wo chat` ([`wo_engine::setup`]):
/// Ctrl-C keeps what the model said so far (marked incomplete); the memory
/// step is never run here but queued ([`queue_memory`]).
pub fn set_up(
    req: &mut TurnRequest,
    index: Option<&wo_index::Index>,
    dense: wo_engine::setup::Dense<'_>,
) {
    wo_engine::setup::TurnSetup {
        index,
        client_chunks: Vec::new(),
        memory: None,
        keep_partial: true,
        dense,
    }
    .apply(req);
}

/// The `--show-context` report: the prompt as sent, its parts (kind, ids,
/// referenced ids, tokens), then what was left out — the renderer `wo
/// context explain` uses.
pub fn render_context(state: &wo_format::State, a: &Assembled) -> String {
    wo_engine::explain::render_text(&wo_engine::explain::explain(state, a))
}

/// A multi-threaded runtime for provider I/O.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Cancels `cancel` on Ctrl-C (SIGINT) until the returned task is aborted.
/// Called inside the runtime, before the turn starts. On Unix the listener
/// is registered here, not when the task first runs: a task spawned on a
/// busy two-core machine could still be waiting for its first poll when
/// the first words arrived and the person pressed Ctrl-C, and the signal
/// was then lost (ignored, when the shell started wo with SIGINT ignored)
/// — the answer ran on to its timeout instead of stopping.
pub fn cancel_on_ctrl_c(cancel: wo_providers::Cancel) -> tokio::task::JoinHandle<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut sigint) = signal(SignalKind::interrupt()) {
            return tokio::spawn(async move {
                if sigint.recv().await.is_some() {
                    cancel.cancel();
                }
            });
        }
    }
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    })
}

/// The memory step (product §7) a turn answered by `answered_by` is
/// followed by, as `[interpreter]` says (`off`, `after`, `background`: the
/// CLI never runs it itself — [`queue_memory`] hands it to a background
/// process). A step that cannot be set up is a note on stderr; the turn
/// goes on. With the built-in offline model and no `[interpreter] mode`,
/// the interpreter is off, and the first time that is said (once per
/// machine) with the lines that turn it on.
pub fn memory_step(
    cfg: &Config,
    answered_by: &Arc<dyn Provider>,
    state_file: &Path,
) -> Option<wo_engine::chat::MemoryStep> {
    let name = wo_engine::memory::interpreter_name(cfg, answered_by.as_ref());
    if cfg.interpreter_mode_for(name) == wo_providers::config::InterpreterMode::Off {
        if cfg.interpreter.mode.is_none()
            && cfg.source.is_some()
            && cfg.is_builtin_small_model(name)
        {
            say_once(
                "small-model-interpreter",
                wo_providers::config::SMALL_MODEL_INTERPRETER_NOTE,
            );
        }
        return None;
    }
    let interpreter = match &cfg.interpreter.provider {
        Some(name) => wo_providers::build(name, cfg)
            .map(Some)
            .map_err(|e| e.to_string()),
        None => Ok(None),
    };
    let (step, note) =
        wo_engine::setup::memory_step(cfg, answered_by, interpreter, state_file.parent());
    if let Some(note) = note {
        eoutln!("note: {note}");
    }
    step
}

/// Whether the interpreter runs after answers from `provider` (default: the
/// default provider), and why not, in words (`wo memory status`).
pub fn interpreter_state(cfg: &Config, provider: Option<&str>) -> String {
    use wo_providers::config::InterpreterMode;
    let name = cfg
        .interpreter
        .provider
        .as_deref()
        .or(provider)
        .unwrap_or(cfg.default_provider());
    match (cfg.interpreter_mode_for(name), cfg.interpreter.mode) {
        (InterpreterMode::Off, Some(_)) => "off ([interpreter] mode = \"off\")".into(),
        // `wo init` writes no config file: say where one goes.
        (InterpreterMode::Off, None) if cfg.source.is_none() => format!(
            "off (no config file: add a provider to {} and it runs with that provider after each answer)",
            wo_providers::config::config_path_for_hints()
        ),
        // Off only because the default is the built-in model: the other
        // providers' answers are still interpreted (a queued or running job
        // beside "off" would read as a contradiction).
        (InterpreterMode::Off, None)
            if cfg.interpreter.provider.is_none() && provider.is_none() =>
        {
            format!(
                "{SMALL_MODEL_OFF} (provider {name}); an answer from another configured provider (`wo ask -p NAME`) is interpreted in the background after it"
            )
        }
        (InterpreterMode::Off, None) => format!("{SMALL_MODEL_OFF} (provider {name})"),
        _ => format!("on: {name} interprets each exchange in the background, after the answer"),
    }
}

const SMALL_MODEL_OFF: &str = "off with the built-in offline model (SmolLM2-135M does not produce usable memory operations); to turn it on anyway, add `[interpreter]` with `mode = \"after\"` to config.toml, and `[providers.local]` with `kind = \"local\"` and `context_window = 8192` (its request is longer than the 2048 tokens it is given by default)";

/// Prints `note` on stderr the first time on this machine (a marker under
/// `$XDG_STATE_HOME/wikioracle/notices/`); where no marker can be kept, every
/// time.
pub(crate) fn say_once(key: &str, note: &str) {
    let marker = state_home().map(|d| d.join("wikioracle/notices").join(key));
    if marker.as_ref().is_some_and(|m| m.exists()) {
        return;
    }
    eoutln!("note: {note}");
    if let Some(m) = marker {
        let _ = m
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&m, b""));
    }
}

fn state_home() -> Option<std::path::PathBuf> {
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".local/state"))
        })
}

/// Hands a saved turn's memory step to the background: the exchange is
/// queued beside the state file and a detached `wo memory run` is started
/// (stdio closed, its own process group: the terminal returns now, and
/// Ctrl-C there does not reach it). A runner already at work takes the job
/// instead. Failures of earlier jobs not yet shown are reported first, once.
pub fn queue_memory(
    g: &crate::cli::GlobalOpts,
    state_file: &Path,
    step: Option<wo_engine::chat::MemoryStep>,
    outcome: &wo_engine::chat::TurnOutcome,
) {
    use wo_engine::memory_jobs::{Job, Queue};
    let queue = Queue::of(state_file);
    if let Ok(failed) = queue.take_unreported_failures() {
        // One line per reason: ten exchanges that failed alike (a model
        // that cannot do the job) are one note, not ten.
        let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
        for j in &failed {
            let reason = j.reason.as_deref().unwrap_or("no reason recorded");
            match reasons.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, ids)) => ids.push(&j.exchange),
                None => reasons.push((reason, vec![&j.exchange])),
            }
        }
        for (reason, ids) in reasons {
            match ids.as_slice() {
                [one] => eoutln!(
                    "note: memory: exchange {one} was not remembered: {reason} (wo memory status)"
                ),
                many => eoutln!(
                    "note: memory: {} exchanges were not remembered: {reason} (wo memory status)",
                    many.len()
                ),
            }
        }
    }
    let Some(step) = step else { return };
    if outcome.stopped() {
        return;
    }
    let exchange = wo_engine::memory::Exchange {
        question_id: outcome.user_id.clone(),
        answer_id: outcome.assistant_id.clone(),
    };
    if let Err(e) = queue.push(Job::new(&exchange, step.provider.name())) {
        eoutln!("note: memory: cannot queue the exchange for the interpreter: {e}");
        return;
    }
    match spawn_runner(g, state_file) {
        Ok(()) => eoutln!("memory: interpreting in the background (wo memory status)"),
        Err(e) => eoutln!(
            "note: memory: cannot start the background interpreter ({e}); `wo memory run` runs it"
        ),
    }
}

/// Starts `wo memory run --quiet` on `state_file`, detached.
fn spawn_runner(g: &crate::cli::GlobalOpts, state_file: &Path) -> std::io::Result<()> {
    spawn_detached(g, state_file, &["memory", "run", "--quiet"])
}

/// Starts `wo --state STATE_FILE ARGS` (with this process's state-file
/// options) detached: stdio closed, its own process group, so the terminal
/// returns now and Ctrl-C there does not reach it. A thread of this process
/// waits for it, so a long session (`wo chat`) leaves no zombie behind each
/// turn; a process that exits first (`wo ask`) leaves it to the system,
/// which reaps it.
pub fn spawn_detached(
    g: &crate::cli::GlobalOpts,
    state_file: &Path,
    args: &[&str],
) -> std::io::Result<()> {
    use std::process::Stdio;
    let exe = std::env::current_exe()?;
    // Absolute, not canonical: the queue and sidecars live beside the path
    // this process used (a symbolic link stays one), and the child opens
    // the file as this process did.
    let state = std::path::absolute(state_file)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("--state")
        .arg(state)
        .arg("--max-state-bytes")
        .arg(g.max_state_bytes.to_string());
    if g.allow_symlink {
        cmd.arg("--allow-symlink");
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn()?;
    std::thread::Builder::new()
        .name("detached-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        })
        .map(drop)
}

/// One line on stderr for what the memory step did (never fails the
/// command: the turn is saved; a rejected call changed nothing).
pub fn report_memory(remembered: &wo_engine::chat::Remembered) {
    match &remembered.result {
        Ok(rec) if !rec.ops.is_empty() => eoutln!(
            "memory: {} operation(s) from this exchange (wo memory show {})",
            rec.ops.len(),
            rec.exchange
        ),
        Ok(_) => {}
        Err(e) => eoutln!("note: memory: nothing remembered: {e}"),
    }
}

/// Where a question goes: the parent it follows and whether it starts a
/// new conversation, from `--new` / `--conversation` / `--parent`, else
/// the conversation this machine last used ([`wo_format::conversation::continue_from`]).
pub struct Placement {
    /// The message the question follows (`None` with `new`, or on an empty file).
    pub parent: Option<String>,
    /// It starts a new conversation.
    pub new: bool,
}

/// Resolves where the next question goes (see [`Placement`]); a
/// `--conversation` that names nothing, or more than one, is an error
/// naming the flag.
pub fn placement(
    store: &Store,
    conv: &crate::cli::ConversationOpts,
    parent: Option<&str>,
) -> Result<Placement> {
    let state = store.state();
    if conv.new {
        return Ok(Placement {
            parent: None,
            new: true,
        });
    }
    if let Some(p) = parent {
        return Ok(Placement {
            parent: Some(p.to_owned()),
            new: false,
        });
    }
    if let Some(prefix) = &conv.conversation {
        let root = wo_format::conversation::find(state, prefix).map_err(|e| {
            anyhow!("--conversation: {e}\nhint: `wo log --conversations` lists them")
        })?;
        let latest = wo_format::conversation::latest_of(state, root)
            .map(|m| m.id.clone())
            .ok_or_else(|| anyhow!("--conversation: {root} is not in the file"))?;
        return Ok(Placement {
            parent: Some(latest),
            new: false,
        });
    }
    let current = read_current(store.path());
    Ok(Placement {
        parent: wo_format::conversation::continue_from(state, current.as_deref())
            .map(|m| m.id.clone()),
        new: false,
    })
}

/// The file that remembers, for one state file, the conversation this
/// machine last asked in: `$XDG_STATE_HOME/wikioracle/conversations/<hash>`
/// (default `~/.local/state`), the hash of the state file's canonical
/// path. Kept outside llm.json on purpose: it is this machine's choice, and
/// must not travel with the file to another one.
fn current_file(state_file: &Path) -> Option<std::path::PathBuf> {
    use sha2::Digest;
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".local/state"))
        })?;
    let canonical = std::fs::canonicalize(state_file).unwrap_or_else(|_| state_file.to_owned());
    let digest = sha2::Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    let name: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    Some(base.join("wikioracle/conversations").join(name))
}

/// The root id of the conversation this machine last asked in, if recorded.
fn read_current(state_file: &Path) -> Option<String> {
    // A regular file of one id, never through a link nor from a FIFO; a
    // larger file is not one wo wrote.
    let text = wo_durable::project::read_regular_string(&current_file(state_file)?, 4096).ok()?;
    let id = text.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// Records the conversation of message `id` as this machine's current one.
/// A failure is a note: the turn is saved either way.
pub fn remember_current(store: &Store, id: &str) {
    let Some(root) = wo_format::conversation::root_of(store.state(), id) else {
        return;
    };
    let Some(file) = current_file(store.path()) else {
        return;
    };
    let written = file
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| wo_durable::write_atomic(&file, &[root.as_bytes(), b"\n"]).map(|_| ()));
    if let Err(e) = written {
        eoutln!(
            "note: cannot remember the current conversation in {}: {e}",
            file.display()
        );
    }
}

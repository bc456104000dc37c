//! What `wo ask` and `wo chat` share: opening the state (creating it when
//! missing, merging exports beside it), choosing the provider, retrieving
//! file chunks, and rendering the assembled context.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use wo_engine::Assembled;
use wo_engine::assemble::ChunkCandidate;
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
        eoutln!("created {}", path.display());
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

/// Loads the user config and builds the provider to use.
pub fn provider(opts: &ModelOpts) -> Result<(Config, Arc<dyn Provider>)> {
    let cfg = Config::load()?;
    for w in &cfg.warnings {
        eoutln!("warning: {w}");
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
                .unwrap_or_else(|| "~/.config/wikioracle/config.toml".into())
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
    parent: Option<String>,
) -> Result<TurnRequest> {
    TurnParams {
        message: prompt,
        username: opts.username.clone(),
        system: opts.system.clone(),
        provider_named: opts.provider.is_some(),
        model: opts.model.clone(),
        temperature: opts.temperature,
        max_tokens: opts.max_tokens,
        parent,
        rag: !opts.no_rag,
        url_fetch: opts.url_fetch,
        ..TurnParams::default()
    }
    .build(cfg, wo_interop::default_username)
    .map_err(|e| anyhow!(e.for_cli()))
}

/// File chunks relevant to `query` from the directory index at `--index`
/// (or the nearest indexed directory above the state file), when there is one.
pub fn retrieve_chunks(
    opts: &ModelOpts,
    state_file: &Path,
    query: &str,
) -> Result<Vec<ChunkCandidate>> {
    if opts.no_rag {
        return Ok(Vec::new());
    }
    let Some(root) = wo_engine::files::index_root_for(state_file, opts.index.as_deref()) else {
        return Ok(Vec::new());
    };
    let index = wo_index::Index::open(&root)
        .with_context(|| format!("cannot open the directory index of {}", root.display()))?;
    Ok(wo_engine::files::relevant_chunks(&index, query))
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

/// The memory step (product §7) a turn answered by `answered_by` runs after
/// its commit, as `[interpreter]` says (`off`, `after`, `background`: the
/// CLI exits only when it is done either way, the answer already shown).
/// A step that cannot be set up is a note on stderr; the turn goes on.
pub fn memory_step(
    cfg: &Config,
    answered_by: &Arc<dyn Provider>,
    state_file: &Path,
) -> Option<wo_engine::chat::MemoryStep> {
    if cfg.interpreter_mode() == wo_providers::config::InterpreterMode::Off {
        return None;
    }
    let interpreter = match &cfg.interpreter.provider {
        Some(name) => match wo_providers::build(name, cfg) {
            Ok(p) => Some(p),
            Err(e) => {
                eoutln!("note: memory: [interpreter] provider {name:?}: {e}");
                return None;
            }
        },
        None => None,
    };
    wo_engine::memory::step_for(cfg, answered_by, interpreter, state_file.parent()).unwrap_or_else(
        |e| {
            eoutln!("note: memory: {e}");
            None
        },
    )
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

//! `wo context show|edit|explain`.

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use wo_format::xhtml::{sanitize_html, to_plain_text};

use super::{open_store, read_content};
use crate::cli::{ContextCommand, ExplainArgs, GlobalOpts};

pub fn run(g: &GlobalOpts, cmd: ContextCommand) -> Result<ExitCode> {
    match cmd {
        ContextCommand::Show { text, xhtml } => {
            let store = open_store(g)?;
            let ctx = &store.state().context;
            if text {
                outln!("{}", to_plain_text(ctx));
            } else if xhtml {
                outln!("{ctx}");
            } else {
                // As it was written: text typed as text comes back exactly,
                // anything else as Markdown, never as markup.
                outln!("{}", wo_interop::markdown::message_markdown(ctx));
            }
        }
        ContextCommand::Explain(args) => return explain(g, args),
        ContextCommand::Embed { quiet } => {
            let store = open_store(g)?;
            super::dense::embed_all(store.path(), store.state(), quiet)?;
            return Ok(ExitCode::SUCCESS);
        }
        ContextCommand::Edit { set, file, format } => {
            let mut store = open_store(g)?;
            let new = if set.is_some() || file.is_some() {
                read_content(set.as_deref(), file.as_deref(), format)?
            } else {
                edit_in_editor(&store.state().context)?
            };
            if new == store.state().context {
                outln!("context unchanged");
                return Ok(ExitCode::SUCCESS);
            }
            store.transact(|s| s.context = new)?;
            outln!("context updated ({} bytes)", store.state().context.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens `$VISUAL`/`$EDITOR` on the XHTML and returns the sanitised result.
fn edit_in_editor(current: &str) -> Result<String> {
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .map_err(|_| {
            anyhow::anyhow!("no editor: set $EDITOR, or pass --set TEXT or --file PATH")
        })?;
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let path = dir.path().join("context.xhtml");
    std::fs::write(&path, current).context("cannot write the temporary file")?;
    // The editor string may carry arguments (`code -w`), as git allows.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("wo-editor")
        .arg(&path)
        .status()
        .with_context(|| format!("cannot start the editor {editor:?}"))?;
    if !status.success() {
        bail!("the editor exited with {status}; context unchanged");
    }
    let edited = std::fs::read_to_string(&path).context("cannot read the edited context")?;
    Ok(sanitize_html(&edited))
}

/// `wo context explain`: assembles the prompt `wo ask` would send for each
/// question, with the same engine, and prints its parts.
fn explain(g: &GlobalOpts, args: ExplainArgs) -> Result<ExitCode> {
    use std::io::Write as _;
    use wo_engine::assemble::{AssemblyOptions, assemble, estimate_tokens};
    use wo_engine::explain::{explain, render_text};

    let queries: Vec<String> = match (&args.query, &args.queries) {
        (Some(q), _) => vec![q.clone()],
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("--queries {}: cannot read the file", path.display()))?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect(),
        (None, None) => bail!("no question\nhint: wo context explain \"your question\""),
    };
    if args.budget == 0 {
        bail!("--budget 0: the prompt needs at least room for the question");
    }
    let store = open_store(g)?;
    let state = store.state();
    if let Some(parent) = &args.parent
        && state.message(parent).is_none()
    {
        bail!("--parent {parent:?}: no such message\nhint: `wo log` shows message ids");
    }
    let index = if args.no_rag {
        None
    } else {
        match wo_engine::files::index_root_for(store.path(), args.index.as_deref()) {
            Some(root) => Some(wo_index::Index::open(&root).with_context(|| {
                format!("cannot open the directory index of {}", root.display())
            })?),
            None => None,
        }
    };
    let mut opts = AssemblyOptions::new(state, args.budget, 0);
    // The config is read only when the flag does not say.
    let recall_tokens = match args.recall_tokens {
        Some(n) => Some(n),
        None => wo_providers::Config::load()?.memory.recall_tokens,
    };
    if let Some(n) = recall_tokens {
        opts.recall_tokens = n;
    }
    opts.leaf = args.parent.clone();
    opts.rag = !args.no_rag;
    if let Some(part) = args.relevance_floor {
        opts.relevance_floor.part = part;
    }
    if let Some(question) = args.relevance_gate {
        opts.relevance_floor.question = question;
    }
    // Dense recall as `wo ask` has it: the vectors the embeddings sidecar
    // holds (`wo context embed` fills it; messages without one are found
    // by BM25 alone).
    if let Some(embedder) = super::dense::embedder(super::dense::Note::Always) {
        let sidecar = wo_engine::embed_file::sidecar_path(store.path());
        let (mut dense, prepared) = wo_engine::embed_file::prepare(
            embedder,
            &sidecar,
            state.messages(),
            Some(std::time::Instant::now()),
        );
        if prepared.missing > 0 {
            eoutln!(
                "note: {} messages are not embedded yet: recall finds them by their words only \
                 (`wo context embed` embeds them)",
                prepared.missing
            );
        }
        if let Ok(tuning) = std::env::var("WO_DENSE_PARAMS") {
            dense.params = dense_params(&tuning, dense.params)?;
        }
        opts.dense = Some(dense);
    }
    let mut out = std::io::stdout().lock();
    for q in &queries {
        let q = q.trim_end();
        let started = std::time::Instant::now();
        let chunks = index
            .as_ref()
            .map(|i| wo_engine::files::relevant_chunks(i, q))
            .unwrap_or_default();
        let a = assemble(state, q, &opts, &estimate_tokens, &chunks)
            .map_err(|e| anyhow::anyhow!("{q:?}: {e}"))?;
        let e = explain(state, &a);
        let seconds = started.elapsed().as_secs_f64();
        if args.json {
            let mut v = serde_json::to_value(&e).context("cannot write the explanation as JSON")?;
            v["query"] = serde_json::Value::String(q.to_owned());
            v["seconds"] = serde_json::json!(seconds);
            if queries.len() > 1 {
                writeln!(out, "{v}")?;
            } else {
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            }
        } else {
            if queries.len() > 1 {
                writeln!(out, "══ {q} ══")?;
            }
            write!(out, "{}", render_text(&e))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `WO_DENSE_PARAMS="part=0.3,question=0.55,depth=100,k=60,weight=1"`: the
/// dense recall's knobs, for measurement (bench/locomo).
fn dense_params(
    spec: &str,
    mut p: wo_engine::dense::DenseParams,
) -> Result<wo_engine::dense::DenseParams> {
    for item in spec.split(',').filter(|s| !s.trim().is_empty()) {
        let (k, v) = item
            .split_once('=')
            .with_context(|| format!("WO_DENSE_PARAMS: {item:?} is not key=value"))?;
        let n: f64 = v
            .trim()
            .parse()
            .with_context(|| format!("WO_DENSE_PARAMS: {item:?}: not a number"))?;
        match k.trim() {
            "part" => p.part = n as f32,
            "question" => p.question = n as f32,
            "depth" => p.depth = n as usize,
            "k" => p.k = n,
            "weight" => p.weight = n,
            "hop" => p.hop = n as f32,
            "hop_from" => p.hop_from = n as usize,
            "entities" => p.entities = n,
            "neighbours" if n > 0.0 && n < 1.0 => p.neighbours = n,
            other => bail!(
                "WO_DENSE_PARAMS: unknown knob {other:?} (part, question, depth, k, weight, hop, hop_from, entities, neighbours in (0, 1))"
            ),
        }
    }
    Ok(p)
}

//! `wo ask`: one turn (the CLI chat format's (product §9) lifecycle).

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use wo_engine::chat::{FnSink, StoreTurn, TurnError, TurnEvent, run_turn};
use wo_providers::{Cancel, ErrorKind};

use super::session::{
    open_for_chat, open_index, placement, provider, remember_current, render_context, runtime,
    set_up, turn_request,
};
use crate::cli::{AskArgs, GlobalOpts};

/// What `--regenerate [ID]` asks again: ID's question, or without one the
/// question of the latest answer where this machine would ask next.
fn regenerate_target(
    store: &wo_store::Store,
    id: &str,
    place: &super::session::Placement,
) -> Result<wo_engine::request::Regenerating> {
    let id = match (id.trim(), &place.parent) {
        ("", Some(latest)) => latest.as_str(),
        ("", None) => bail!("--regenerate: there is no answer to ask again yet"),
        (id, _) => id,
    };
    wo_engine::request::regenerating(store.state(), id).map_err(|e| anyhow::anyhow!(e.for_cli()))
}

/// Exit code after Ctrl-C (128 + SIGINT), as shells expect.
pub const EXIT_INTERRUPTED: u8 = 130;

pub fn run(g: &GlobalOpts, mut args: AskArgs) -> Result<ExitCode> {
    // Text piped in is part of the question, after the prompt
    // (`git diff | wo ask "Review this"`); on a terminal nothing is read.
    let piped = if std::io::stdin().is_terminal() {
        None
    } else {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the question from standard input")?;
        Some(s)
    };
    let files = args
        .files
        .iter()
        .map(|f| wo_engine::input::read_attachment(f, wo_engine::input::MAX_ATTACHMENT_BYTES))
        .collect::<Result<Vec<_>, _>>()?;
    let composed = wo_engine::input::compose(args.prompt.as_deref(), piped.as_deref(), &files);
    let prompt = match (composed, &args.regenerate) {
        (Some(prompt), _) => prompt,
        // Regenerate asks the stored question: its text comes from the file.
        (None, Some(_)) => String::new(),
        (None, None) => bail!(
            "no question\nhint: wo ask \"your question\", or pipe it in: echo question | wo ask"
        ),
    };
    let (cfg, provider) = provider(&mut args.model)?;
    // Dense recall is prepared on another thread while the state file is
    // read (the question embedded, the vectors loaded); without the
    // embedding model, recall is BM25's alone.
    let note = if args.show_context {
        super::dense::Note::Always
    } else {
        super::dense::Note::Once
    };
    let state_path = super::state_path(g)?;
    let dense = super::dense::start(&state_path, &prompt, note);
    // Recall's sidecar is read and checked meanwhile too (it is matched to
    // the transcript once the state is read).
    let sidecar = wo_engine::recall_file::sidecar_path(&state_path);
    let prefetch = {
        let sidecar = sidecar.clone();
        std::thread::spawn(move || wo_engine::recall_file::read(&sidecar))
    };
    let mut store = open_for_chat(g)?;
    // Checked before asking: a question too large to store would otherwise
    // fail only after the model had answered.
    store.limits().check_message(
        store.path(),
        "the question (prompt, piped text and --file attachments)",
        wo_format::xhtml::question_to_xhtml(&prompt).len(),
    )?;
    let place = placement(&store, &args.conv, args.parent.as_deref())?;
    let again = match &args.regenerate {
        Some(id) => Some(regenerate_target(&store, id, &place)?),
        None => None,
    };
    let mut req = turn_request(&cfg, &args.model, prompt, &place, again)?;
    let index = open_index(&args.model, store.path())?;
    let dense = dense.wait();
    set_up(
        &mut req,
        index.as_ref(),
        dense.as_ref().map_or(wo_engine::setup::Dense::Off, |d| {
            wo_engine::setup::Dense::Ready(d.dense.clone())
        }),
    );

    let (provider_name, window_setting) = (provider.name().to_owned(), provider.context_window());
    let rt = runtime()?;
    let cancel = Cancel::new();
    let stream = !args.no_stream;
    let show_context = args.show_context;
    // The state as the prompt is assembled from it, to name what each part
    // references (the turn borrows the store while it runs).
    let before = show_context.then(|| store.state().clone());
    // Never run here: queued after the answer is saved, for a background
    // process (the next prompt is never held up by memory).
    let memory = super::session::memory_step(&cfg, &provider, store.path());
    // Recall reads the transcript's postings from the sidecar beside the
    // file (rebuilt when missing or stale) instead of tokenising it all.
    // The sidecar read beside the load is the opened file's unless the path
    // was a link the store resolved (`--allow-symlink`): then it is read
    // beside the file it leads to.
    let read_early = prefetch.join().ok();
    let sidecar_of_file = wo_engine::recall_file::sidecar_path(store.path());
    let read = match read_early {
        Some(read) if sidecar_of_file == sidecar => read,
        _ => wo_engine::recall_file::read(&sidecar_of_file),
    };
    let sidecar = sidecar_of_file;
    let (mut recall, loaded) = read.index(store.state());
    // What reached standard output, so a failure or a stop ends the line
    // only when one was begun.
    let mut printed = crate::render::LineEnd::default();
    let spinner = crate::render::Spinner::new(provider.name());
    // A background interpreter on this file holds its calls back meanwhile
    // (a model on this machine answers one request at a time).
    let answering = wo_engine::memory_jobs::Queue::of(store.path()).answering();
    let outcome = rt.block_on(async {
        super::session::cancel_on_ctrl_c(cancel.clone());
        let mut stdout = std::io::stdout();
        let mut md = crate::render::Markdown::for_stdout();
        run_turn(
            StoreTurn(&mut store, Some(&mut recall)),
            provider,
            req,
            cancel.clone(),
            FnSink::new(|event| match event {
                TurnEvent::Assembled(a) => {
                    if let Some(state) = &before {
                        eout!("{}", render_context(state, a));
                        eoutln!("── answer ──");
                    }
                    spinner.start(a.tokens);
                }
                TurnEvent::Delta(text) => {
                    spinner.stop();
                    if stream {
                        // Each delta on its own: `term` needs no state, so an
                        // escape sequence split across deltas is caught too.
                        let shown = md.push(text);
                        printed.saw(&shown);
                        let _ = crate::render::write_raw(&mut stdout, &shown);
                    }
                }
                // The answer is complete before the memory step runs.
                TurnEvent::Done(outcome) => {
                    spinner.stop();
                    if !stream {
                        let shown = md.push(&outcome.answer) + &md.finish();
                        let _ = crate::render::write_raw(
                            &mut stdout,
                            &format!("{}\n", shown.trim_end()),
                        );
                    } else {
                        let rest = md.finish();
                        printed.saw(&rest);
                        let _ = crate::render::write_raw(&mut stdout, &rest);
                        if printed.open() {
                            outln!();
                        }
                    }
                }
                TurnEvent::Remembered(r) => super::session::report_memory(r),
                // Reported below, from the result.
                TurnEvent::Failed(_) => spinner.stop(),
            }),
        )
        .await
    });
    drop(answering);
    // A cache: a failure to write it (a read-only directory) only means the
    // next run rebuilds it; a link or a FIFO at its name is said once.
    let saved = wo_engine::recall_file::save(&sidecar, &mut recall, store.state(), &loaded);
    if let Some(note) = wo_engine::recall_file::refused_note(&saved) {
        eoutln!("note: {note}");
    }
    if let Some(dense) = dense {
        super::dense::finish(g, dense, store.state(), store.path());
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            // End a begun line only: a failure before any answer prints
            // nothing on standard output.
            if printed.open() {
                outln!();
            }
            if let TurnError::Provider(p) = &e
                && p.kind() == ErrorKind::Cancelled
            {
                eoutln!("interrupted; nothing was saved");
                return Ok(ExitCode::from(EXIT_INTERRUPTED));
            }
            match &e {
                TurnError::Field(field) => eoutln!("error: {}", field.for_cli()),
                _ => eoutln!("error: {e}"),
            }
            return Ok(ExitCode::from(e.exit_code()));
        }
    };
    remember_current(&store, &outcome.user_id);
    super::session::queue_memory(g, store.path(), memory, &outcome);
    // The turn is saved and nothing reads the state after this: the process
    // exits soon, and the person should not wait while it frees it.
    store.close_for_exit();
    if outcome.stopped() {
        eoutln!(
            "interrupted; {}, marked incomplete (wo log shows them)",
            crate::render::stopped_note(&outcome)
        );
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if outcome.finish_reason.as_deref() == Some("length") {
        eoutln!("note: the answer was cut at --max-tokens");
    }
    if let Some(note) = crate::render::truncation_note(outcome.usage.as_ref()) {
        eoutln!("{note}");
    }
    if let Some(note) =
        crate::render::fitted_note(&provider_name, window_setting, outcome.fitted_to_window)
    {
        eoutln!("{note}");
    }
    let save = args.save.clone().or_else(|| cfg.defaults.save_path.clone());
    if let Some(path) = save {
        std::fs::write(&path, &outcome.answer).with_context(|| {
            format!(
                "{}: cannot save the answer (the turn is in llm.json)",
                path.display()
            )
        })?;
    }
    if args.persist {
        let path = crate::commands::persist::persist_defaults(&wo_providers::config::Defaults {
            provider: args.model.provider.clone(),
            model: args.model.model.clone(),
            temperature: args.model.temperature,
            max_tokens: args.model.max_tokens,
            save_path: args.save.clone(),
            ..Default::default()
        })?;
        eoutln!("saved these flags as defaults in {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

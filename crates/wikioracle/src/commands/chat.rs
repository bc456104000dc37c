//! `wo chat`: an interactive REPL on the same machinery as `wo ask`.

use std::process::ExitCode;

use anyhow::Result;
use rustyline::error::ReadlineError;
use wo_engine::Assembled;
use wo_engine::chat::{FnSink, StoreTurn, TurnEvent, TurnOutcome, run_turn};
use wo_providers::{Cancel, ErrorKind};

use super::session::{
    Placement, open_for_chat, open_index, placement, provider, remember_current, render_context,
    runtime, set_up, turn_request,
};
use crate::cli::{ChatArgs, GlobalOpts};

const HELP: &str = "commands:
  /sources      what the last answer drew on (memory entries, messages, file chunks)
  /context      exactly what was sent for the last answer, and what was dropped
  /branch ID    continue from an earlier message (see `wo log`); /branch alone: from the latest
  /new          start a new conversation
  /help         this list
  /exit         leave (or Ctrl-D)
end a line with \\ to continue it on the next line; Ctrl-C stops an answer (what arrived is kept)";

pub fn run(g: &GlobalOpts, mut args: ChatArgs) -> Result<ExitCode> {
    let (cfg, provider) = provider(&mut args.model)?;
    let mut store = open_for_chat(g)?;
    // The transcript's postings, from the recall sidecar, kept across turns.
    let sidecar = wo_engine::recall_file::sidecar_path(store.path());
    let (mut recall, loaded) = wo_engine::recall_file::load(&sidecar, store.state());
    // Recall by meaning, as `wo ask` and `wo serve` do: the model and the
    // embeddings sidecar open while the first question is typed.
    let mut dense = super::dense::session(store.path());
    // Where the first question goes; each answer then moves it on.
    let mut place = placement(&store, &args.conv, None)?;
    let rt = runtime()?;
    let mut editor = rustyline::DefaultEditor::new()?;
    let history = history_path();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eoutln!(
        "wo chat — {} ({}), saving to {}. /help for commands.",
        provider.name(),
        args.model
            .model
            .clone()
            .unwrap_or_else(|| provider.default_model().to_owned()),
        store.path().display()
    );
    // Say which conversation the first question goes to.
    match place.parent.as_deref().and_then(|p| {
        let root = wo_format::conversation::root_of(store.state(), p)?;
        store.state().message(root)
    }) {
        _ if place.new => eoutln!("a new conversation (/new starts another)"),
        Some(root) => eoutln!(
            "continuing {} \"{}\" (/new starts a new conversation)",
            root.id,
            root.title
        ),
        None => {}
    }
    let mut last: Option<(TurnOutcome, Assembled)> = None;
    // Windows servers say they hold (smaller than their settings): later
    // turns are fitted to them from the start.
    let said_windows = std::sync::Arc::new(wo_engine::window::SaidWindows::default());
    loop {
        let prompt = match read_entry(&mut editor) {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(e) => return Err(e.into()),
        };
        let text = prompt.trim();
        if text.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(text);
        if let Some(cmd) = text.strip_prefix('/') {
            let (name, arg) = cmd.split_once(' ').unwrap_or((cmd, ""));
            match name {
                "exit" | "quit" => break,
                "help" => outln!("{HELP}"),
                "sources" => match &last {
                    Some((o, _)) if !o.sources.is_empty() => {
                        for id in &o.sources {
                            let state = store.state();
                            let label = state
                                .truth_entry(id)
                                .map(|t| format!("memory: {}", t.title))
                                .or_else(|| {
                                    state
                                        .message(id)
                                        .map(|m| format!("message by {}: {}", m.username, m.title))
                                })
                                .unwrap_or_else(|| "file chunk".into());
                            outln!("  {id}  {label}");
                        }
                    }
                    Some(_) => outln!("  the last answer used no stored sources"),
                    None => outln!("  no answer yet"),
                },
                "context" => match &last {
                    Some((_, a)) => out!("{}", render_context(store.state(), a)),
                    None => outln!("  no answer yet"),
                },
                "branch" => {
                    let arg = arg.trim();
                    if arg.is_empty() {
                        place = placement(&store, &Default::default(), None)?;
                        outln!("  continuing from the latest message of this conversation");
                    } else {
                        match wo_format::query::find_by_prefix(
                            store.state().messages(),
                            |m| &m.id,
                            arg,
                        ) {
                            Ok(m) => {
                                outln!("  continuing after {} ({}: {})", m.id, m.username, m.title);
                                place = Placement {
                                    parent: Some(m.id.clone()),
                                    new: false,
                                };
                            }
                            Err(e) => outln!("  {e}"),
                        }
                    }
                }
                "new" => {
                    place = Placement {
                        parent: None,
                        new: true,
                    };
                    outln!("  the next question starts a new conversation");
                }
                other => outln!("  unknown command /{other}; /help lists them"),
            }
            continue;
        }
        let mut req = match turn_request(&cfg, &args.model, text.to_owned(), &place, None) {
            Ok(req) => req,
            Err(e) => {
                eoutln!("error: {e}");
                continue;
            }
        };
        let index = match open_index(&args.model, store.path()) {
            Ok(index) => index,
            Err(e) => {
                eoutln!("warning: {e:#}");
                None
            }
        };
        req.said_windows = Some(said_windows.clone());
        set_up(&mut req, index.as_ref(), dense.dense());
        // Queued after the answer is saved, for a background process.
        let memory = super::session::memory_step(&cfg, &provider, store.path());
        let cancel = Cancel::new();
        let mut assembled = None;
        let spinner = crate::render::Spinner::new(provider.name());
        let mut printed = crate::render::LineEnd::default();
        // A background interpreter on this file holds its calls back
        // meanwhile (a model on this machine answers one request at a time).
        let answering = wo_engine::memory_jobs::Queue::of(store.path()).answering();
        let result = rt.block_on(async {
            let ctrl_c = super::session::cancel_on_ctrl_c(cancel.clone());
            let mut out = std::io::stdout();
            let mut md = crate::render::Markdown::for_stdout();
            let r = run_turn(
                StoreTurn(&mut store, Some(&mut recall)),
                provider.clone(),
                req,
                cancel.clone(),
                FnSink::new(|e| match e {
                    TurnEvent::Assembled(a) => {
                        spinner.start(a.tokens);
                        assembled = Some(a.clone());
                    }
                    TurnEvent::Delta(t) => {
                        spinner.stop();
                        let shown = md.push(t);
                        printed.saw(&shown);
                        let _ = crate::render::write_raw(&mut out, &shown);
                    }
                    // The answer ends its line before the memory step's note.
                    TurnEvent::Done(_) => {
                        spinner.stop();
                        let rest = md.finish();
                        printed.saw(&rest);
                        let _ = crate::render::write_raw(&mut out, &rest);
                        if printed.open() {
                            outln!();
                        }
                    }
                    TurnEvent::Remembered(r) => super::session::report_memory(r),
                    TurnEvent::Failed(_) => spinner.stop(),
                }),
            )
            .await;
            ctrl_c.abort();
            r
        });
        drop(answering);
        if result.is_err() && printed.open() {
            outln!();
        }
        match result {
            Ok(outcome) => {
                remember_current(&store, &outcome.user_id);
                dense.saved(
                    [&outcome.user_id, &outcome.assistant_id]
                        .into_iter()
                        .filter_map(|id| store.state().message(id).cloned())
                        .collect(),
                );
                super::session::queue_memory(g, store.path(), memory, &outcome);
                if outcome.stopped() {
                    eoutln!(
                        "(stopped; {}, marked incomplete)",
                        crate::render::stopped_note(&outcome)
                    );
                } else if let Some(note) = crate::render::truncation_note(outcome.usage.as_ref()) {
                    eoutln!("{note}");
                }
                if let Some(note) = crate::render::fitted_note(
                    provider.name(),
                    provider.context_window(),
                    outcome.fitted_to_window,
                ) {
                    eoutln!("{note}");
                }
                // The next turn follows this answer on the same branch.
                place = Placement {
                    parent: Some(outcome.assistant_id.clone()),
                    new: false,
                };
                last = assembled.map(|a| (outcome, a));
            }
            Err(wo_engine::chat::TurnError::Provider(p)) if p.kind() == ErrorKind::Cancelled => {
                eoutln!("(stopped; nothing saved)");
            }
            Err(e @ wo_engine::chat::TurnError::Store(_)) => {
                eoutln!("error: {e}");
                return Ok(ExitCode::from(e.exit_code()));
            }
            Err(e) => eoutln!("error: {e}"),
        }
    }
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(h);
    }
    // A cache: failing to write it only means the next run rebuilds it; a
    // link or a FIFO at its name is said once.
    let saved = wo_engine::recall_file::save(&sidecar, &mut recall, store.state(), &loaded);
    if let Some(note) = wo_engine::recall_file::refused_note(&saved) {
        eoutln!("note: {note}");
    }
    dense.finish(g, store.state(), store.path());
    Ok(ExitCode::SUCCESS)
}

/// Reads one entry; a trailing backslash continues it on the next line.
fn read_entry(editor: &mut rustyline::DefaultEditor) -> Result<Option<String>, ReadlineError> {
    let mut entry = String::new();
    let mut prompt = "you> ";
    loop {
        match editor.readline(prompt) {
            Ok(line) => {
                if let Some(head) = line.strip_suffix('\\') {
                    entry.push_str(head);
                    entry.push('\n');
                    prompt = "...> ";
                    continue;
                }
                entry.push_str(&line);
                return Ok(Some(entry));
            }
            Err(ReadlineError::Interrupted) => {
                entry.clear();
                prompt = "you> ";
            }
            Err(ReadlineError::Eof) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// `$XDG_DATA_HOME/wikioracle/chat_history` (or ~/.local/share/…).
fn history_path() -> Option<std::path::PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".local/share"))
        })?;
    Some(data.join("wikioracle/chat_history"))
}

//! `wo ask`: one turn (the CLI chat format's (product §9) lifecycle).

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use wo_engine::chat::{FnSink, StoreTurn, TurnError, TurnEvent, run_turn};
use wo_providers::{Cancel, ErrorKind};

use super::session::{
    open_for_chat, provider, render_context, retrieve_chunks, runtime, turn_request,
};
use crate::cli::{AskArgs, GlobalOpts};

/// Exit code after Ctrl-C (128 + SIGINT), as shells expect.
pub const EXIT_INTERRUPTED: u8 = 130;

pub fn run(g: &GlobalOpts, args: AskArgs) -> Result<ExitCode> {
    let prompt = match &args.prompt {
        Some(p) => p.clone(),
        None if std::io::stdin().is_terminal() => bail!(
            "no question\nhint: wo ask \"your question\", or pipe it in: echo question | wo ask"
        ),
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("cannot read the question from standard input")?;
            s
        }
    };
    let (cfg, provider) = provider(&args.model)?;
    let mut req = turn_request(&cfg, &args.model, prompt, args.parent.clone())?;
    let mut store = open_for_chat(g)?;
    req.chunks = retrieve_chunks(&args.model, store.path(), &req.prompt)?;

    let rt = runtime()?;
    let cancel = Cancel::new();
    let stream = !args.no_stream;
    let show_context = args.show_context;
    // The state as the prompt is assembled from it, to name what each part
    // references (the turn borrows the store while it runs).
    let before = show_context.then(|| store.state().clone());
    req.memory = super::session::memory_step(&cfg, &provider, store.path());
    let outcome = rt.block_on(async {
        let watcher = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                watcher.cancel();
            }
        });
        let mut stdout = std::io::stdout();
        run_turn(
            StoreTurn(&mut store),
            provider,
            req,
            cancel.clone(),
            FnSink::new(|event| match event {
                TurnEvent::Assembled(a) => {
                    if let Some(state) = &before {
                        eout!("{}", render_context(state, a));
                        eoutln!("── answer ──");
                    }
                }
                TurnEvent::Delta(text) => {
                    if stream {
                        // Each delta on its own: `term` needs no state, so an
                        // escape sequence split across deltas is caught too.
                        let _ = crate::render::write_safe(&mut stdout, text);
                    }
                }
                // The answer is complete before the memory step runs.
                TurnEvent::Done(outcome) => {
                    if !stream {
                        outln!("{}", outcome.answer.trim_end());
                    } else if !outcome.answer.ends_with('\n') {
                        outln!();
                    }
                }
                TurnEvent::Remembered(r) => super::session::report_memory(r),
                // Reported below, from the result.
                TurnEvent::Failed(_) => {}
            }),
        )
        .await
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            if stream {
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
    if outcome.finish_reason.as_deref() == Some("length") {
        eoutln!("note: the answer was cut at --max-tokens");
    }
    if let Some(note) = crate::render::truncation_note(outcome.usage.as_ref()) {
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

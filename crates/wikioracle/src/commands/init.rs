//! `wo init`.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use wo_format::xhtml::text_to_xhtml;
use wo_format::{State, Timestamp};
use wo_store::{Store, StoreError};

use super::open_options;
use crate::cli::{GlobalOpts, InitArgs};

pub fn run(g: &GlobalOpts, args: InitArgs) -> Result<ExitCode> {
    let path = match (&g.state, &args.dir) {
        (Some(p), None) => p.clone(),
        (_, Some(dir)) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("{}: cannot create directory", dir.display()))?;
            dir.join(wo_store::STATE_FILE_NAME)
        }
        (None, None) => std::env::current_dir()?.join(wo_store::STATE_FILE_NAME),
    };
    let mut state = State::new(Timestamp::now());
    let dir = crate::commands::state_dir(&path);
    if args.index {
        super::index::index(crate::cli::IndexArgs {
            dir: Some(dir.clone()),
            full: false,
            hidden: false,
            follow_symlinks: false,
            max_file_bytes: None,
            max_total_bytes: None,
            json: false,
        })?;
    }
    let synopsis = match wo_index::Index::open(&dir) {
        Ok(index) => wo_index::render_catalog(&index)
            .ok()
            .and_then(|c| wo_engine::synopsis::synopsis_from_catalog(&c)),
        Err(_) => None,
    };
    let mut context = String::new();
    if let Some(ctx) = &args.context {
        context.push_str(&text_to_xhtml(ctx));
    }
    if let Some(s) = &synopsis {
        context.push_str(s);
    }
    if !context.is_empty() {
        state.context = format!("<div>{context}</div>");
    }
    let opts = open_options(g);
    match Store::open(&path, opts.clone()) {
        // Already there and valid: the goal of `wo init` holds, so this is
        // success (scripts run it unconditionally); nothing is touched.
        Ok(_) => {
            outln!(
                "{}: already exists and is valid; nothing to do (`wo context edit` changes its context)",
                path.display()
            );
        }
        Err(StoreError::NotFound { .. }) => {
            Store::create(&path, state, opts)?;
            outln!("created {}", path.display());
            if synopsis.is_some() {
                outln!(
                    "drafted the context's synopsis from the directory index (see `wo context show`)"
                );
            }
        }
        Err(err @ StoreError::Invalid { .. }) if !args.force => return Err(err.into()),
        Err(StoreError::Invalid { .. }) => {
            let backup = wo_store::backup_invalid(&path)
                .with_context(|| format!("{}: cannot back up the invalid file", path.display()))?;
            Store::replace(&path, state, opts)?;
            outln!(
                "{} was invalid: backed it up to {} and started fresh",
                path.display(),
                backup.display()
            );
        }
        Err(other) => return Err(other.into()),
    }
    Ok(ExitCode::SUCCESS)
}

//! `wo context show|edit`.

use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use wo_format::xhtml::{sanitize_html, to_plain_text};

use super::{open_store, read_content};
use crate::cli::{ContextCommand, GlobalOpts};

pub fn run(g: &GlobalOpts, cmd: ContextCommand) -> Result<ExitCode> {
    match cmd {
        ContextCommand::Show { text } => {
            let store = open_store(g)?;
            let ctx = &store.state().context;
            if text {
                outln!("{}", to_plain_text(ctx));
            } else {
                outln!("{ctx}");
            }
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

//! `wo mcp` (the MCP face in `wo-mcp`, over stdio) and `wo agents-md`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use wo_mcp::config::{Client, install, install_path, snippet, update_agents_md};

use super::{open_options, state_dir, state_path};
use crate::cli::{AgentsMdArgs, GlobalOpts, McpArgs, McpClient};

pub fn run(g: &GlobalOpts, args: McpArgs) -> Result<ExitCode> {
    if let Some(client) = args.print_config {
        let client = match client {
            McpClient::Claude => Client::Claude,
            McpClient::Codex => Client::Codex,
            McpClient::Cursor => Client::Cursor,
            McpClient::Vscode => Client::Vscode,
        };
        // The absolute paths of this `wo` and of the state file `wo mcp`
        // would serve here: a client starts the server from a directory of
        // its own (a global config from anywhere), so nothing may depend on
        // its working directory or PATH.
        let exe = std::env::current_exe()
            .ok()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "wo".to_owned());
        let state = state_path(g)?;
        let state = std::path::absolute(&state).unwrap_or(state);
        if args.install {
            return install_config(client, &exe, &state, args.allow_write);
        }
        eoutln!("# {}", client.file());
        for step in client.next_steps(&exe, Some(&state), args.allow_write) {
            eoutln!("# {step}");
        }
        if !state.exists() {
            eoutln!(
                "# note: {} does not exist yet; `wo init` creates it",
                state.display()
            );
        }
        out!("{}", snippet(client, &exe, Some(&state), args.allow_write));
        return Ok(ExitCode::SUCCESS);
    }
    let opts = wo_mcp::McpOptions {
        state: state_path(g)?,
        open: open_options(g),
        allow_write: args.allow_write,
        index: args.index,
    };
    // stdout is the protocol channel: nothing else may be printed there.
    let rt = super::session::runtime()?;
    rt.block_on(wo_mcp::serve_stdio(opts))?;
    Ok(ExitCode::SUCCESS)
}

/// `--print-config CLIENT --install`: the snippet merged into the client's
/// own file; the file's other servers and settings are kept, and a file
/// that cannot be read as the client reads it is left alone.
fn install_config(client: Client, exe: &str, state: &Path, allow_write: bool) -> Result<ExitCode> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let project = state_dir(state);
    let path = match (client, home) {
        (Client::Codex | Client::Cursor, None) => {
            anyhow::bail!(
                "HOME is not set, so the global configuration file is unknown\nhint: leave out --install and paste the snippet yourself"
            )
        }
        (_, home) => install_path(client, &project, &home.unwrap_or_default()),
    };
    // Never through a link: a link to a file elsewhere would be replaced
    // by a regular file.
    let existing =
        match wo_durable::project::read_regular_string(&path, super::MAX_PROJECT_TEXT_BYTES) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => anyhow::bail!(
                "{}: cannot read it: {e}\nnothing was written",
                path.display()
            ),
        };
    let updated = install(client, &existing, exe, Some(state), allow_write).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e}\nnothing was written; fix the file (the client reads it the same way), or leave out --install and paste the snippet yourself",
            path.display()
        )
    })?;
    if updated == existing {
        outln!("{} is up to date", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create it", dir.display()))?;
    }
    wo_store::durable::write_atomic(&path, &[updated.as_bytes()])
        .with_context(|| format!("{}: cannot write", path.display()))?;
    outln!(
        "{} the wikioracle server in {} — {}; restart the client",
        if existing.is_empty() { "added" } else { "set" },
        path.display(),
        client.file()
    );
    // The same steps --print-config names, minus the other scope's line.
    if let Some(step) = client.next_steps(exe, Some(state), allow_write).first() {
        outln!("{step}");
    }
    if !state.exists() {
        eoutln!(
            "note: {} does not exist yet; `wo init` creates it",
            state.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn agents_md(args: AgentsMdArgs) -> Result<ExitCode> {
    let path = &args.file;
    // Never through a link: one to a file outside the project would be read
    // and replaced by a regular file holding its text (then committed).
    let existing =
        match wo_durable::project::read_regular_string(path, super::MAX_PROJECT_TEXT_BYTES) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(anyhow::anyhow!("cannot read it: {e}\nnothing was written")),
        };
    let updated =
        update_agents_md(&existing).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if updated == existing {
        outln!("{} is up to date", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    wo_store::durable::write_atomic(path, &[updated.as_bytes()])
        .with_context(|| format!("{}: cannot write", path.display()))?;
    outln!(
        "{} {}",
        if existing.is_empty() {
            "wrote"
        } else {
            "updated"
        },
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

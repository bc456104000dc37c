//! The text `wo` gives other tools: each MCP client's configuration snippet
//! (`wo mcp --print-config`) and the `AGENTS.md` / `CLAUDE.md` block
//! (`wo agents-md`), kept between markers so it is updated in place.

use std::path::Path;

/// The MCP clients whose configuration `wo mcp --print-config` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// Claude Code: `.mcp.json` (project scope), `{"mcpServers": {…}}`.
    Claude,
    /// OpenAI Codex CLI: `~/.codex/config.toml`, `[mcp_servers.<name>]`.
    Codex,
    /// Cursor: `.cursor/mcp.json`, `{"mcpServers": {…}}`.
    Cursor,
    /// VS Code (Copilot agent mode): `.vscode/mcp.json`, `{"servers": {…}}`.
    Vscode,
}

impl Client {
    /// The client named `s` as `--print-config` takes it (`claude`, `codex`,
    /// `cursor`, `vscode`); `None` for any other name.
    pub fn parse(s: &str) -> Option<Client> {
        Some(match s {
            "claude" => Client::Claude,
            "codex" => Client::Codex,
            "cursor" => Client::Cursor,
            "vscode" => Client::Vscode,
            _ => return None,
        })
    }

    /// Where the snippet goes, and for which projects it works (the
    /// snippet names the state file by its absolute path, so a global
    /// config serves this memory from whatever directory the client
    /// starts in).
    pub fn file(self) -> &'static str {
        match self {
            Client::Claude => {
                "the project's .mcp.json (project scope); for every project: `claude mcp add --scope user wikioracle -- <command> <args>` with the command and args below"
            }
            Client::Codex => "~/.codex/config.toml (global: every project Codex opens)",
            Client::Cursor => {
                "the project's .cursor/mcp.json (project scope) or ~/.cursor/mcp.json (global: every project)"
            }
            Client::Vscode => "the workspace's .vscode/mcp.json (workspace scope)",
        }
    }
}

/// Where `--install` writes `client`'s configuration: the project's file
/// for Claude Code (`.mcp.json`) and VS Code (`.vscode/mcp.json`), the
/// global one for Codex (`~/.codex/config.toml`) and Cursor
/// (`~/.cursor/mcp.json`).
pub fn install_path(client: Client, project: &Path, home: &Path) -> std::path::PathBuf {
    match client {
        Client::Claude => project.join(".mcp.json"),
        Client::Vscode => project.join(".vscode/mcp.json"),
        Client::Codex => home.join(".codex/config.toml"),
        Client::Cursor => home.join(".cursor/mcp.json"),
    }
}

/// `existing` (the text of `client`'s configuration file; empty when there
/// is none) with its `wikioracle` server set to what [`snippet`] prints;
/// every other server and setting is kept as it was (TOML with its
/// comments and order; JSON re-serialised, its keys sorted, as
/// `serde_json` writes them here). Errors, naming what
/// is wrong, when the file is not what the client reads (nothing is
/// guessed).
pub fn install(
    client: Client,
    existing: &str,
    command: &str,
    state: Option<&Path>,
    allow_write: bool,
) -> Result<String, String> {
    let wanted = snippet(client, command, state, allow_write);
    if client == Client::Codex {
        let mut doc: toml_edit::DocumentMut =
            existing.parse().map_err(|e| format!("not TOML: {e}"))?;
        let ours: toml_edit::DocumentMut = wanted
            .parse()
            .map_err(|e| format!("internal: the snippet is not TOML: {e}"))?;
        let servers = doc
            .entry("mcp_servers")
            .or_insert_with(|| {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                toml_edit::Item::Table(t)
            })
            .as_table_mut()
            .ok_or("`mcp_servers` is not a table")?;
        servers.insert("wikioracle", ours["mcp_servers"]["wikioracle"].clone());
        return Ok(doc.to_string());
    }
    let mut doc: serde_json::Value = if existing.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(existing).map_err(|e| format!("not JSON: {e}"))?
    };
    let key = if client == Client::Vscode {
        "servers"
    } else {
        "mcpServers"
    };
    let ours: serde_json::Value = serde_json::from_str(&wanted)
        .map_err(|e| format!("internal: the snippet is not JSON: {e}"))?;
    let root = doc.as_object_mut().ok_or("the file is not a JSON object")?;
    let servers = root
        .entry(key)
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .ok_or_else(|| format!("`{key}` is not an object"))?;
    servers.insert("wikioracle".into(), ours[key]["wikioracle"].clone());
    Ok(format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    ))
}

/// The command line a client should start: `wo mcp [--state PATH] [--allow-write]`.
fn args(state: Option<&Path>, allow_write: bool) -> Vec<String> {
    let mut a = vec!["mcp".to_owned()];
    if let Some(p) = state {
        a.push("--state".into());
        a.push(p.display().to_string());
    }
    if allow_write {
        a.push("--allow-write".into());
    }
    a
}

fn toml_string(s: &str) -> String {
    // A TOML basic string has JSON's escapes for what we may meet in a path.
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The configuration snippet for `client`, starting `command` (the `wo`
/// executable) on `state`.
pub fn snippet(client: Client, command: &str, state: Option<&Path>, allow_write: bool) -> String {
    let args = args(state, allow_write);
    match client {
        Client::Claude | Client::Cursor => {
            let v = serde_json::json!({"mcpServers": {"wikioracle": {
                "command": command, "args": args}}});
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        Client::Vscode => {
            let v = serde_json::json!({"servers": {"wikioracle": {
                "type": "stdio", "command": command, "args": args}}});
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        Client::Codex => {
            let list: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            format!(
                "[mcp_servers.wikioracle]\ncommand = {}\nargs = [{}]\n",
                toml_string(command),
                list.join(", ")
            )
        }
    }
}

/// Opens the block `wo agents-md` owns in `AGENTS.md`/`CLAUDE.md`; what lies
/// between it and [`END`] is replaced on each run, the rest is left alone.
pub const BEGIN: &str = "<!-- wikioracle:begin (kept up to date by `wo agents-md`) -->";
/// Closes the block [`BEGIN`] opens.
pub const END: &str = "<!-- wikioracle:end -->";

/// The block telling a coding agent how to use the memory and the index.
pub fn agents_block() -> String {
    format!(
        "{BEGIN}\n\
## Memory and project index (WikiOracle)\n\
\n\
This project keeps a portable memory in `llm.json` (what the person knows, decided and is working\n\
on, and past conversations) and a searchable index of its files. Use them:\n\
\n\
- Through MCP (server `wikioracle`, started as `wo mcp`): call `context` with the question before\n\
  answering anything about the person or the project; `search` (truth, messages, chunks) and `read`\n\
  an id for the full text; `recent` for what happened lately.\n\
- Saving (only if the server runs with `--allow-write`): `remember` a durable fact, decision, event\n\
  or note (only `content` is needed; kind, certainty 0..1, tags optional), open an `effort` for\n\
  unfinished work and `resolve` it when done; `log_exchange` a question and answer worth keeping.\n\
  Do not save secrets.\n\
- Without MCP, from a shell: `wo context explain \"question\"`, `wo search \"words\"`, `wo log`,\n\
  `wo truth list`, `wo truth add --title T --content C --kind fact --certainty 0.8`.\n\
- Never edit `llm.json` by hand while tools run; `wo validate llm.json` checks it.\n\
{END}\n"
    )
}

/// `existing` with the block inserted or replaced between the markers; the
/// rest of the file is kept byte for byte. Errors when the markers are
/// unbalanced (a half-deleted block), so nothing is guessed.
pub fn update_agents_md(existing: &str) -> Result<String, String> {
    let block = agents_block();
    match (existing.find(BEGIN), existing.find(END)) {
        (None, None) => {
            let mut out = existing.to_owned();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&block);
            Ok(out)
        }
        (Some(b), Some(e)) if b < e => {
            let mut end = e + END.len();
            if existing[end..].starts_with('\n') {
                end += 1;
            }
            Ok(format!("{}{block}{}", &existing[..b], &existing[end..]))
        }
        _ => Err(format!(
            "the WikiOracle markers are unbalanced (need {BEGIN:?} before {END:?}); fix or remove them by hand"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_is_inserted_then_replaced_in_place() {
        let first = update_agents_md("# Agents\n\nBuild with make.").unwrap();
        assert!(first.starts_with("# Agents\n\nBuild with make.\n\n"));
        assert!(first.contains(BEGIN) && first.contains(END));
        let old = first.replace("portable memory", "OLD TEXT");
        let mut edited = old.clone();
        edited.push_str("\nafter\n");
        let second = update_agents_md(&edited).unwrap();
        assert_eq!(second.matches(BEGIN).count(), 1);
        assert!(!second.contains("OLD TEXT"));
        assert!(second.ends_with("\nafter\n"));
        assert_eq!(update_agents_md(&second).unwrap(), second);
    }

    #[test]
    fn unbalanced_markers_are_refused() {
        assert!(update_agents_md(&format!("x\n{BEGIN}\ny\n")).is_err());
        assert!(update_agents_md(&format!("{END}\n{BEGIN}\n")).is_err());
    }

    #[test]
    fn install_keeps_every_other_server_and_setting() {
        let state = Path::new("/p/llm.json");
        let cursor = r#"{"mcpServers": {"other": {"command": "x"}}, "theme": "dark"}"#;
        let out = install(Client::Cursor, cursor, "/bin/wo", Some(state), false).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["theme"], "dark");
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        assert_eq!(v["mcpServers"]["wikioracle"]["args"][2], "/p/llm.json");
        // Again: the same file (installing twice changes nothing).
        assert_eq!(
            install(Client::Cursor, &out, "/bin/wo", Some(state), false).unwrap(),
            out
        );
        let v: serde_json::Value = serde_json::from_str(
            &install(Client::Vscode, "", "/bin/wo", Some(state), true).unwrap(),
        )
        .unwrap();
        assert_eq!(v["servers"]["wikioracle"]["type"], "stdio");

        let codex = "model = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
        let out = install(Client::Codex, codex, "/bin/wo", Some(state), false).unwrap();
        assert!(out.starts_with("model = \"o3\""), "{out}");
        assert!(
            out.contains("[mcp_servers.other]\ncommand = \"x\""),
            "{out}"
        );
        let doc: toml_edit::DocumentMut = out.parse().unwrap();
        assert_eq!(
            doc["mcp_servers"]["wikioracle"]["args"][2].as_str(),
            Some("/p/llm.json")
        );
        assert_eq!(
            install(Client::Codex, &out, "/bin/wo", Some(state), false).unwrap(),
            out
        );
    }

    #[test]
    fn install_refuses_a_file_it_cannot_read() {
        for (client, text, says) in [
            (Client::Claude, "{not json", "not JSON"),
            (Client::Claude, "[1]", "not a JSON object"),
            (
                Client::Cursor,
                r#"{"mcpServers": 3}"#,
                "`mcpServers` is not an object",
            ),
            (
                Client::Codex,
                "mcp_servers = 3",
                "`mcp_servers` is not a table",
            ),
            (Client::Codex, "[[[", "not TOML"),
        ] {
            let e = install(client, text, "/bin/wo", None, false).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn json_snippets_parse_and_start_wo_mcp() {
        for c in [Client::Claude, Client::Cursor, Client::Vscode] {
            let s = snippet(c, "/usr/bin/wo", Some(Path::new("/p/llm \"x\".json")), true);
            let v: serde_json::Value = serde_json::from_str(&s).unwrap();
            let server = if c == Client::Vscode {
                &v["servers"]["wikioracle"]
            } else {
                &v["mcpServers"]["wikioracle"]
            };
            assert_eq!(server["command"], "/usr/bin/wo");
            assert_eq!(
                server["args"],
                serde_json::json!(["mcp", "--state", "/p/llm \"x\".json", "--allow-write"])
            );
        }
    }
}

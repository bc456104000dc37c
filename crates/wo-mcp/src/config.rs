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
            Client::Claude => "the project's .mcp.json (project scope)",
            Client::Codex => "~/.codex/config.toml (global: every project Codex opens)",
            Client::Cursor => {
                "the project's .cursor/mcp.json (project scope) or ~/.cursor/mcp.json (global: every project)"
            }
            Client::Vscode => "the workspace's .vscode/mcp.json (workspace scope)",
        }
    }

    /// What the user still has to do in the client once the snippet is in
    /// its file, and the other ways to set it up; one line each.
    pub fn next_steps(self, command: &str, state: Option<&Path>, allow_write: bool) -> Vec<String> {
        match self {
            Client::Claude => {
                let line: Vec<String> = std::iter::once(command.to_owned())
                    .chain(args(state, allow_write))
                    .map(|a| {
                        shlex::try_quote(&a)
                            .map(|q| q.into_owned())
                            .unwrap_or(a)
                    })
                    .collect();
                vec![
                    "Claude Code asks once to approve a project's .mcp.json server: start `claude` in the project and accept it (or approve it in /mcp); `claude mcp list` then says Connected".to_owned(),
                    format!(
                        "for every project instead: claude mcp add --scope user wikioracle -- {}",
                        line.join(" ")
                    ),
                ]
            }
            Client::Codex => vec!["`codex mcp list` shows it; Codex starts it with its next session".to_owned()],
            Client::Cursor => vec![
                "Cursor lists it with its MCP servers (its settings), where it is switched on or off".to_owned(),
            ],
            Client::Vscode => vec![
                "VS Code starts it for agent mode (`MCP: List Servers` shows it); confirm that you trust it when asked".to_owned(),
            ],
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

/// The name of our entry in each client's list of servers.
const SERVER_NAME: &str = "wikioracle";

/// Keys of a server entry that name a transport other than stdio (a URL
/// server's): dropped when the entry is turned into ours, since a client
/// reading both would not know which to use.
const OTHER_TRANSPORT_KEYS: &[&str] = &[
    "url",
    "headers",
    "http_headers",
    "env_http_headers",
    "bearer_token_env_var",
];

/// `existing` (the text of `client`'s configuration file; empty when there
/// is none) with its `wikioracle` server set to what [`snippet`] prints.
/// The file is edited, not rewritten: every other server and setting, the
/// comments, the order and the layout stay as they were, and so do the
/// other settings of an existing `wikioracle` entry (`env`, timeouts,
/// `disabled`…) — only its command, arguments and transport change.
/// Errors, naming what is wrong and where, when the file is not what the
/// client reads: Claude Code's and Cursor's files are JSON; VS Code's is
/// JSON with comments and trailing commas; Codex's is TOML. Nothing is
/// guessed.
pub fn install(
    client: Client,
    existing: &str,
    command: &str,
    state: Option<&Path>,
    allow_write: bool,
) -> Result<String, String> {
    let args = args(state, allow_write);
    if client == Client::Codex {
        install_toml(existing, command, &args)
    } else {
        install_json(client, existing, command, &args)
    }
}

fn install_toml(existing: &str, command: &str, args: &[String]) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = existing.parse().map_err(|e| format!("not TOML: {e}"))?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or("`mcp_servers` is not a table")?;
    let list: toml_edit::Array = args.iter().map(String::as_str).collect();
    match servers
        .get_mut(SERVER_NAME)
        .and_then(|e| e.as_table_like_mut())
    {
        Some(entry) => {
            for key in OTHER_TRANSPORT_KEYS {
                entry.remove(key);
            }
            entry.insert("command", toml_edit::value(command));
            entry.insert("args", toml_edit::value(list));
        }
        None => {
            let mut entry = toml_edit::Table::new();
            entry.insert("command", toml_edit::value(command));
            entry.insert("args", toml_edit::value(list));
            servers.insert(SERVER_NAME, toml_edit::Item::Table(entry));
        }
    }
    Ok(doc.to_string())
}

/// How each client reads its JSON file: VS Code's `mcp.json` is JSONC
/// (comments and trailing commas); Claude Code's and Cursor's are JSON.
fn json_options(client: Client) -> jsonc_parser::ParseOptions {
    let jsonc = client == Client::Vscode;
    jsonc_parser::ParseOptions {
        allow_comments: jsonc,
        allow_trailing_commas: jsonc,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

fn install_json(
    client: Client,
    existing: &str,
    command: &str,
    args: &[String],
) -> Result<String, String> {
    use jsonc_parser::cst::{CstInputValue, CstRootNode};
    let (key, format) = match client {
        Client::Vscode => ("servers", "JSON with comments"),
        _ => ("mcpServers", "JSON"),
    };
    let text = if existing.trim().is_empty() {
        "{}\n"
    } else {
        existing
    };
    // Checked as the client reads it first: the editing parser accepts
    // comments whatever it is told.
    jsonc_parser::parse_to_serde_value::<serde_json::Value>(text, &json_options(client))
        .map_err(|e| format!("not {format}: {e}"))?;
    let root = CstRootNode::parse(text, &json_options(client))
        .map_err(|e| format!("not {format}: {e}"))?;
    let top = root.object_value().ok_or("the file is not a JSON object")?;
    let servers = match top.get(key) {
        Some(prop) => prop
            .object_value()
            .ok_or_else(|| format!("`{key}` is not an object"))?,
        None => top
            .append(key, CstInputValue::Object(Vec::new()))
            .object_value_or_set(),
    };
    let args = CstInputValue::Array(args.iter().map(|a| a.as_str().into()).collect());
    match servers.get(SERVER_NAME).and_then(|p| p.object_value()) {
        Some(entry) => {
            for k in OTHER_TRANSPORT_KEYS {
                if let Some(p) = entry.get(k) {
                    p.remove();
                }
            }
            set_prop(&entry, "command", command.into());
            set_prop(&entry, "args", args);
            if client == Client::Vscode {
                set_prop(&entry, "type", "stdio".into());
            } else if entry.get("type").is_some() {
                // Claude Code reads "stdio" there; any other value names
                // the transport just removed.
                set_prop(&entry, "type", "stdio".into());
            }
        }
        None => {
            if let Some(p) = servers.get(SERVER_NAME) {
                p.remove();
            }
            let mut fields = Vec::new();
            if client == Client::Vscode {
                fields.push(("type".to_owned(), "stdio".into()));
            }
            fields.push(("command".to_owned(), command.into()));
            fields.push(("args".to_owned(), args));
            servers.append(SERVER_NAME, CstInputValue::Object(fields));
        }
    }
    let mut out = root.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// Sets `name` on `object` to `value`, in place when it is there.
fn set_prop(
    object: &jsonc_parser::cst::CstObject,
    name: &str,
    value: jsonc_parser::cst::CstInputValue,
) {
    match object.get(name) {
        Some(p) => p.set_value(value),
        None => {
            object.append(name, value);
        }
    }
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
        // The file `--install` would write into an empty one.
        Client::Claude | Client::Cursor | Client::Vscode => {
            install_json(client, "", command, &args)
                .unwrap_or_else(|e| format!("internal error: {e}\n"))
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
  answering anything about the person or the project; `search` (memory, messages, file chunks) and\n\
  `read` an id for the full text; `recent` for what happened lately.\n\
- Saving (only if the server runs with `--allow-write`): `remember` a durable fact, decision, event\n\
  or note (only `content` is needed; kind, certainty 0..1, tags optional), open an `effort` for\n\
  unfinished work and `resolve` it when done; `log_exchange` a question and answer worth keeping.\n\
  Do not save secrets.\n\
- Without MCP, from a shell: `wo context explain \"question\"`, `wo memory search \"words\"`,\n\
  `wo search \"words\"` (the project's files), `wo log -n 20`, `wo memory list`,\n\
  `wo memory add \"Title\" --content \"text\" --kind fact --certainty 0.8`.\n\
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

    /// A JSON file is edited, not rewritten: VS Code's comments and
    /// trailing commas, the other servers' order and layout, and the
    /// settings of an existing `wikioracle` entry (`env`) all stay; only
    /// its command, arguments and transport change (a URL entry's `url`
    /// and `headers` go: a client reading both would not know which to use).
    #[test]
    fn install_edits_a_json_file_in_place() {
        let vscode = r#"{
  // servers I use everywhere
  "servers": {
    "zeta": {"type": "stdio", "command": "z"}, // last alphabetically, first here
    "wikioracle": {
      "type": "http",
      "url": "http://127.0.0.1:8787/mcp",
      "headers": {"Authorization": "Bearer x"},
      "env": {"WO_X": "1"},
    },
  },
  "inputs": [],
}
"#;
        let out = install(
            Client::Vscode,
            vscode,
            "/bin/wo",
            Some(Path::new("/p/llm.json")),
            false,
        )
        .unwrap();
        assert!(out.contains("// servers I use everywhere"), "{out}");
        assert!(out.contains("// last alphabetically, first here"), "{out}");
        assert!(
            out.find("\"zeta\"").unwrap() < out.find("\"wikioracle\"").unwrap(),
            "{out}"
        );
        let v: serde_json::Value =
            jsonc_parser::parse_to_serde_value(&out, &json_options(Client::Vscode)).unwrap();
        let ours = &v["servers"]["wikioracle"];
        assert_eq!(ours["type"], "stdio");
        assert_eq!(ours["command"], "/bin/wo");
        assert_eq!(
            ours["args"],
            serde_json::json!(["mcp", "--state", "/p/llm.json"])
        );
        assert_eq!(ours["env"]["WO_X"], "1");
        assert!(
            ours.get("url").is_none() && ours.get("headers").is_none(),
            "{out}"
        );
        assert_eq!(v["servers"]["zeta"]["command"], "z");
        assert_eq!(v["inputs"], serde_json::json!([]));
        // Installing again changes nothing.
        assert_eq!(
            install(
                Client::Vscode,
                &out,
                "/bin/wo",
                Some(Path::new("/p/llm.json")),
                false
            )
            .unwrap(),
            out
        );
        // An empty file gets exactly the printed snippet, in each format.
        for c in [
            Client::Claude,
            Client::Cursor,
            Client::Vscode,
            Client::Codex,
        ] {
            assert_eq!(
                install(c, "", "/bin/wo", None, true).unwrap(),
                snippet(c, "/bin/wo", None, true),
                "{c:?}"
            );
        }
    }

    /// Codex's TOML keeps its comments, its blank lines and the other
    /// settings of an existing entry (`env`, timeouts).
    #[test]
    fn install_edits_codex_toml_in_place() {
        let codex = "# mine\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n\n# our memory\n[mcp_servers.wikioracle]\ncommand = \"/old/wo\"\nargs = [\"mcp\"]\nstartup_timeout_sec = 30\n\n[mcp_servers.wikioracle.env]\nWO_X = \"1\"\n";
        let out = install(
            Client::Codex,
            codex,
            "/bin/wo",
            Some(Path::new("/p/llm.json")),
            true,
        )
        .unwrap();
        assert_eq!(
            out,
            "# mine\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n\n# our memory\n[mcp_servers.wikioracle]\ncommand = \"/bin/wo\"\nargs = [\"mcp\", \"--state\", \"/p/llm.json\", \"--allow-write\"]\nstartup_timeout_sec = 30\n\n[mcp_servers.wikioracle.env]\nWO_X = \"1\"\n"
        );
        // An inline entry is edited as well.
        let inline = "[mcp_servers]\nwikioracle = { command = \"/old\", env = { A = \"1\" } }\n";
        let out = install(Client::Codex, inline, "/bin/wo", None, false).unwrap();
        let doc: toml_edit::DocumentMut = out.parse().unwrap();
        assert_eq!(
            doc["mcp_servers"]["wikioracle"]["command"].as_str(),
            Some("/bin/wo")
        );
        assert_eq!(
            doc["mcp_servers"]["wikioracle"]["env"]["A"].as_str(),
            Some("1")
        );
    }

    /// The `claude mcp add` line for every project is quoted for a shell.
    #[test]
    fn claude_user_scope_line_is_quoted_for_a_shell() {
        let steps = Client::Claude.next_steps(
            "/opt/my wo/wo",
            Some(Path::new("/p/it's $HOME/llm.json")),
            true,
        );
        let line = steps
            .iter()
            .find_map(|s| s.strip_prefix("for every project instead: "))
            .unwrap_or_else(|| panic!("{steps:?}"));
        // A shell splits it back into exactly these words.
        assert_eq!(
            shlex::split(line).unwrap(),
            [
                "claude",
                "mcp",
                "add",
                "--scope",
                "user",
                "wikioracle",
                "--",
                "/opt/my wo/wo",
                "mcp",
                "--state",
                "/p/it's $HOME/llm.json",
                "--allow-write"
            ]
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
            // Claude Code and Cursor read plain JSON: no comments, no
            // trailing commas (VS Code's file allows both).
            (
                Client::Claude,
                "{\"mcpServers\": {} // mine\n}",
                "not JSON: Comments are not allowed",
            ),
            (Client::Cursor, "{\"mcpServers\": {},}", "not JSON"),
            (
                Client::Vscode,
                "{\"servers\": {} /* open",
                "not JSON with comments",
            ),
            (
                Client::Vscode,
                "{\"servers\": []}",
                "`servers` is not an object",
            ),
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

//! A project folder set up by someone else: symbolic links out of it, links
//! to `/dev/zero`, FIFOs, at every name wo reads or writes — `AGENTS.md`,
//! `CLAUDE.md`, `.gitattributes`, `.gitignore`, `prompts/interpreter.md`,
//! `.wo-index`, `.wo-pack` (and its `llm.md`, served over MCP). Each is
//! refused with an error naming the path and why, at once, nothing outside
//! the project read or written, the link left as it was. Also `wo log` on a
//! message nested 100,000 deep (once a stack overflow), and `wo mcp` over
//! stdio answering garbage, batches, deep lines and unknown methods and
//! living on.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Project;
use serde_json::{Value, json};
use wo_format::{Message, State, Timestamp};

const SECRET: &str = "the secret in another folder";

/// A project in `<tmp>/project` beside `<tmp>/outside/secret`; `wo init`
/// done.
struct Hostile {
    p: Project,
    root: PathBuf,
    outside: PathBuf,
}

impl Hostile {
    fn new() -> Self {
        let p = Project::new();
        let root = p.path().join("project");
        let outside = p.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), SECRET).unwrap();
        let h = Hostile { p, root, outside };
        h.ok(&["init", "."]);
        h
    }

    fn run(&self, args: &[&str]) -> common::Run {
        let mut cmd = self.p.cmd(args);
        cmd.current_dir(&self.root);
        common::to_run(cmd.output().unwrap())
    }

    fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args);
        assert_eq!(r.code, 0, "wo {args:?}: {}{}", r.stdout, r.stderr);
        r.stdout
    }

    /// `wo args` fails within a few seconds, saying each of `says`.
    fn refused(&self, args: &[&str], says: &[&str]) -> common::Run {
        let start = Instant::now();
        let r = self.run(args);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "wo {args:?} hung"
        );
        assert_ne!(r.code, 0, "wo {args:?} succeeded: {}", r.stdout);
        r.says(says);
        assert!(!r.stdout.contains(SECRET) && !r.stderr.contains(SECRET));
        r
    }

    /// Outside is as it was: the secret unchanged and nothing else there.
    fn outside_untouched(&self) {
        assert_eq!(
            std::fs::read_to_string(self.outside.join("secret")).unwrap(),
            SECRET
        );
        let names: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["secret"], "something was written outside");
    }

    fn link(&self, target: &Path, name: &str) {
        let at = self.root.join(name);
        if let Some(dir) = at.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        symlink(target, at).unwrap();
    }

    fn is_link(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.root.join(name))
            .unwrap()
            .file_type()
            .is_symlink()
    }

    fn fifo(&self, name: &str) {
        let at = self.root.join(name);
        if let Some(dir) = at.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        let ok = std::process::Command::new("mkfifo")
            .arg(&at)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

#[test]
fn agents_md_never_follows_a_link_nor_reads_a_device_or_fifo() {
    for file in ["AGENTS.md", "CLAUDE.md"] {
        let h = Hostile::new();
        h.link(&h.outside.join("secret"), file);
        let r = h.refused(
            &["agents-md", "--file", file],
            &[file, "is a symbolic link", "nothing was written"],
        );
        assert!(h.is_link(file), "{}", r.stderr);
        h.outside_untouched();

        let h = Hostile::new();
        h.link(Path::new("/dev/zero"), file);
        h.refused(&["agents-md", "--file", file], &["is a symbolic link"]);
        assert!(h.is_link(file));

        let h = Hostile::new();
        h.fifo(file);
        h.refused(&["agents-md", "--file", file], &["is not a regular file"]);
    }
}

#[test]
fn git_setup_never_follows_a_link() {
    for file in [".gitattributes", ".gitignore"] {
        let h = Hostile::new();
        let git = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&h.root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap();
        assert!(git.success());
        h.link(&h.outside.join("secret"), file);
        h.refused(&["git-setup"], &[file, "is a symbolic link"]);
        assert!(h.is_link(file));
        h.outside_untouched();
    }
}

#[test]
fn a_prompt_linked_out_of_the_project_is_never_read() {
    let h = Hostile::new();
    h.link(&h.outside.join("secret"), "prompts/interpreter.md");
    h.refused(&["prompts"], &["interpreter.md", "is a symbolic link"]);
    // A linked prompts/ folder: refused at the folder, and `--write` makes
    // nothing through it.
    let h = Hostile::new();
    h.link(&h.outside, "prompts");
    h.refused(&["prompts"], &["prompts: is a symbolic link"]);
    h.refused(
        &["prompts", "--write", "interpreter"],
        &["prompts: is a symbolic link"],
    );
    h.outside_untouched();
    let h = Hostile::new();
    h.fifo("prompts/interpreter.md");
    h.refused(&["prompts"], &["is not a regular file"]);
}

fn write_notes(root: &Path) {
    std::fs::write(root.join("notes.md"), "# Notes\n\nKangaroos hop.\n").unwrap();
}

#[test]
fn index_and_pack_never_write_through_a_link() {
    let h = Hostile::new();
    write_notes(&h.root);
    h.link(&h.outside, ".wo-index");
    h.refused(&["index"], &[".wo-index: is a symbolic link"]);
    h.outside_untouched();

    let h = Hostile::new();
    write_notes(&h.root);
    h.ok(&["index"]);
    let empty = h.p.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    h.link(&empty, ".wo-pack");
    h.refused(&["pack"], &[".wo-pack: is a symbolic link"]);
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    // A link planted inside a previous pack is replaced, never written
    // through.
    std::fs::remove_file(h.root.join(".wo-pack")).unwrap();
    h.ok(&["pack"]);
    let chunk = std::fs::read_dir(h.root.join(".wo-pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".md") && n != "llm.md");
    if let Some(name) = chunk {
        std::fs::remove_file(h.root.join(".wo-pack").join(&name)).unwrap();
        h.link(&h.outside.join("secret"), &format!(".wo-pack/{name}"));
        let r = h.run(&["pack"]);
        assert!(r.code != 0 || !h.is_link(&format!(".wo-pack/{name}")));
        h.outside_untouched();
    }
}

#[test]
fn the_index_file_linked_to_a_device_is_refused_at_once() {
    let h = Hostile::new();
    write_notes(&h.root);
    h.ok(&["index"]);
    std::fs::remove_file(h.root.join(".wo-index/index.json")).unwrap();
    h.link(Path::new("/dev/zero"), ".wo-index/index.json");
    // Not taken for an index (or refused as a link): either way at once.
    h.refused(&["search", "kangaroo"], &["index"]);
}

/// `wo mcp` over stdio, driven line by line.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// What was sent last, for the failure message.
    last_sent: String,
}

impl Mcp {
    fn start(cmd: &mut std::process::Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Mcp {
            child,
            stdin,
            lines,
            last_sent: String::new(),
        }
    }

    fn send(&mut self, line: &str) {
        self.last_sent = line.to_owned();
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next line `wo mcp` writes, as JSON; a lost answer fails,
    /// naming the line sent last.
    fn answer(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| {
                let status = self.child.try_wait();
                let last: String = self.last_sent.chars().take(100).collect();
                panic!("no answer ({e}) to {last:?}; wo mcp: {status:?}")
            });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn handshake(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string(),
        );
        let init = self.answer();
        assert_eq!(init["id"], 0, "{init}");
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn error_code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"))
}

#[test]
fn mcp_stdio_answers_malformed_lines_and_lives_on() {
    let h = Hostile::new();
    let mut mcp = Mcp::start(h.p.cmd(&["mcp"]).current_dir(&h.root));
    // Before the handshake: answered, not fatal (a request without the
    // handshake or 2026-07-28's per-request metadata is invalid).
    mcp.send("garbage before anything");
    assert_eq!(error_code(&mcp.answer()), -32700);
    mcp.send(r#"{"jsonrpc":"2.0","id":"early","method":"tools/list"}"#);
    let early = mcp.answer();
    assert_eq!(
        (early["id"].clone(), error_code(&early)),
        (json!("early"), -32602),
        "{early}"
    );
    mcp.handshake();
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    let deep_object = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{}1{}}}",
        "{\"a\":".repeat(200_000),
        "}".repeat(200_000)
    );
    for (line, code) in [
        ("this is not JSON", -32700),
        ("{\"jsonrpc\":\"2.0\",", -32700),
        (deep.as_str(), -32700),
        (deep_object.as_str(), -32700),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
            -32600,
        ),
        ("[]", -32600),
        ("\"a string\"", -32600),
        (r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#, -32600),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"no/such/method"}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"nonsense"}"#,
            -32602,
        ),
    ] {
        mcp.send(line);
        let a = mcp.answer();
        assert_eq!(error_code(&a), code, "{}: {a}", &line[..line.len().min(80)]);
    }
    // An unknown notification is never answered; the next request is.
    mcp.send(r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#);
    mcp.send(r#"{"jsonrpc":"2.0","id":"last","method":"tools/list"}"#);
    let tools = mcp.answer();
    assert_eq!(tools["id"], "last", "{tools}");
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{tools}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"search"), "{names:?}");
    assert!(mcp.child.try_wait().unwrap().is_none(), "wo mcp exited");
}

#[test]
fn a_linked_pack_is_never_served_over_mcp() {
    let h = Hostile::new();
    write_notes(&h.root);
    h.ok(&["index"]);
    h.link(&h.outside.join("secret"), ".wo-pack/llm.md");
    let mut mcp = Mcp::start(h.p.cmd(&["mcp"]).current_dir(&h.root));
    mcp.handshake();
    mcp.send(
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"wikioracle://llm.md"}}"#,
    );
    let a = mcp.answer();
    let text = a.to_string();
    assert!(!text.contains(SECRET), "{text}");
    assert!(text.contains("llm.md: is a symbolic link"), "{text}");
}

#[test]
fn log_renders_a_message_nested_100k_deep() {
    let h = Hostile::new();
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    let depth = 100_000;
    let content = format!(
        "<p>{}deep inside{}</p>",
        "<em>".repeat(depth),
        "</em>".repeat(depth)
    );
    s.push_message(Message::new(
        "alec",
        Timestamp::from_unix(1_800_000_001),
        "Deep",
        content,
    ));
    std::fs::write(h.root.join("llm.json"), wo_format::to_canonical_vec(&s)).unwrap();
    let out = h.ok(&["log"]);
    assert!(
        out.contains("deep inside"),
        "{}",
        &out[..out.len().min(500)]
    );
    let json = h.ok(&["log", "--json"]);
    assert!(json.contains("deep inside"));
}

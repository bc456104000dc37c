//! A project folder set up by someone else: symbolic links out of it, links
//! to `/dev/zero`, FIFOs, at every name wo reads or writes — `AGENTS.md`,
//! `CLAUDE.md`, `.gitattributes`, `.gitignore`, `prompts/interpreter.md`,
//! `.wo-index`, `.wo-pack` (and its `llm.md`, served over MCP). Each is
//! refused with an error naming the path and why, at once, nothing outside
//! the project read or written, the link left as it was. So are wo's own
//! files beside `llm.json` — the memory queue and its two locks, the recall
//! and embeddings sidecars, the embedding lock — and this machine's record
//! of the current conversation: each command that opens one is run with a
//! link to `/dev/zero`, a dangling link out of the project, a FIFO and a
//! link to a file outside at its name, under a timeout. Also `wo log` on a
//! message nested 100,000 deep (once a stack overflow), and `wo mcp` over
//! stdio answering garbage, batches, deep lines and unknown methods and
//! living on.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, symlink};
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

/// What is planted at a name wo opens beside `llm.json`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Plant {
    /// A symbolic link to `/dev/zero`: read, it never ends.
    DevZero,
    /// A symbolic link to a missing file outside the project: opened with
    /// "create", it makes that file.
    Dangling,
    /// A FIFO: opened, it waits for a writer for ever.
    Fifo,
    /// A symbolic link to a real file outside, whose bytes must stay.
    LinkedFile,
}

const PLANTS: [Plant; 4] = [
    Plant::DevZero,
    Plant::Dangling,
    Plant::Fifo,
    Plant::LinkedFile,
];

/// How long a command may take before it counts as hung.
const HANG: Duration = Duration::from_secs(30);

impl Plant {
    /// The words wo's message uses for it.
    fn words(self) -> &'static str {
        match self {
            Plant::Fifo => "is not a regular file",
            _ => "is a symbolic link",
        }
    }
}

impl Hostile {
    fn plant_at(&self, at: &Path, what: Plant) {
        if let Some(dir) = at.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        match what {
            Plant::DevZero => symlink("/dev/zero", at).unwrap(),
            Plant::Dangling => symlink(self.outside.join("made-by-wo"), at).unwrap(),
            Plant::LinkedFile => symlink(self.outside.join("secret"), at).unwrap(),
            Plant::Fifo => {
                let ok = std::process::Command::new("mkfifo")
                    .arg(at)
                    .status()
                    .unwrap();
                assert!(ok.success());
            }
        }
    }

    fn plant(&self, name: &str, what: Plant) {
        self.plant_at(&self.root.join(name), what);
    }

    /// What was planted at `name` is still there, as it was.
    fn still_planted(&self, name: &str, what: Plant) {
        let t = std::fs::symlink_metadata(self.root.join(name))
            .unwrap_or_else(|e| panic!("{name} ({what:?}) is gone: {e}"))
            .file_type();
        match what {
            Plant::Fifo => assert!(t.is_fifo(), "{name} is no longer the FIFO"),
            _ => assert!(t.is_symlink(), "{name} ({what:?}) was replaced"),
        }
    }

    /// Runs `cmd` (in the project) and fails the test when it takes more
    /// than [`HANG`] (the process is killed first).
    fn timed(&self, mut cmd: std::process::Command, what: &str) -> common::Run {
        cmd.current_dir(&self.root)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > HANG {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} hung: killed after {HANG:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let r = common::Run {
            code: status.code().unwrap_or(-1),
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        };
        assert!(
            !r.stdout.contains(SECRET) && !r.stderr.contains(SECRET),
            "{what} showed the file outside: {}{}",
            r.stdout,
            r.stderr
        );
        r
    }

    /// `wo args` with the config `cfg`, under the timeout.
    fn wo(&self, cfg: &Path, args: &[&str]) -> common::Run {
        let mut cmd = self.p.cmd(args);
        cmd.env("WO_CONFIG", cfg);
        self.timed(cmd, &format!("wo {args:?}"))
    }

    /// `wo ask` (a provider on loopback answering "Paris."): the answer is
    /// shown and saved however the files beside `llm.json` are.
    fn ask(&self, cfg: &Path) -> common::Run {
        let before = self.state_messages();
        let r = self.wo(cfg, &["ask", "--provider", "test", "Capital of France?"]);
        assert_eq!(r.code, 0, "wo ask: {}", r.stderr);
        assert!(r.stdout.contains("Paris."), "{}", r.stdout);
        assert_eq!(self.state_messages(), before + 2, "the turn is saved");
        r
    }

    fn state_messages(&self) -> usize {
        let bytes = std::fs::read(self.root.join("llm.json")).unwrap();
        wo_format::parse(&bytes).unwrap().messages().len()
    }

    /// A config whose provider `test` answers every request with "Paris."
    /// (the interpreter's call too: it then fails, in the background).
    fn answering_config(&self) -> PathBuf {
        let answer = {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": "Paris."}, "finish_reason": null}]});
            let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {chunk}\n\ndata: {end}\n\ndata: [DONE]\n\n"
            )
        };
        let port = common::connection_server(move |mut stream| {
            if common::read_request(&stream).is_some() {
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        self.p.openai_config(port)
    }
}

/// The memory queue (`.llm.json.memory-jobs`) and its two locks: whatever
/// is planted there, `wo memory status` answers at once with one note
/// naming it, `wo ask` answers and saves the turn and says in one note that
/// the exchange was not queued, `wo memory run` and `wo memory cancel` fail
/// naming it; nothing is followed, created or changed outside, nothing
/// planted is replaced.
#[test]
fn the_memory_queue_and_its_locks_are_never_followed_nor_waited_on() {
    for name in [
        ".llm.json.memory-jobs",
        ".llm.json.memory-jobs.lock",
        ".llm.json.memory-run.lock",
    ] {
        for what in PLANTS {
            let h = Hostile::new();
            let cfg = h.answering_config();
            h.plant(name, what);
            let says = [name, what.words()];

            let r = h.wo(&cfg, &["memory", "status"]);
            assert_eq!(r.code, 0, "{name} {what:?}: {}", r.stderr);
            r.says(&says);
            r.says(&["note: memory:"]);
            assert_eq!(r.stderr.matches(name).count(), 1, "{}", r.stderr);

            let r = h.ask(&cfg);
            r.says(&says);
            r.says(&["cannot queue the exchange"]);
            assert!(!r.stderr.contains("interpreting in the background"));

            let r = h.wo(&cfg, &["memory", "run"]);
            assert_ne!(r.code, 0, "{name} {what:?}: {}", r.stdout);
            r.says(&says);
            let r = h.wo(&cfg, &["memory", "cancel"]);
            if name == ".llm.json.memory-jobs" {
                assert_ne!(r.code, 0, "{name} {what:?}: {}", r.stdout);
                r.says(&says);
            } else {
                assert_eq!(r.code, 0, "{name} {what:?}: {}", r.stderr);
            }

            h.still_planted(name, what);
            h.outside_untouched();
        }
    }
}

/// The recall sidecar (`.llm.json.recall`): a cache, so `wo ask` recalls
/// without it and says once that it neither follows nor replaces it.
#[test]
fn the_recall_sidecar_is_never_followed_nor_replaced() {
    let name = ".llm.json.recall";
    for what in PLANTS {
        let h = Hostile::new();
        let cfg = h.answering_config();
        h.plant(name, what);
        let r = h.ask(&cfg);
        r.says(&[name, what.words(), "recalls without this cache"]);
        assert_eq!(r.stderr.matches(name).count(), 1, "{}", r.stderr);
        h.still_planted(name, what);
        h.outside_untouched();
    }
}

/// The lock `wo ask` holds while the model answers, for the background
/// interpreter to give way (`.llm.json.memory-answering.lock`): whatever is
/// planted there, `wo ask` answers and saves at once, `wo memory run` ends
/// without waiting on it, and nothing is followed, created outside or
/// replaced.
#[test]
fn the_answering_lock_is_never_followed_nor_waited_on() {
    let name = ".llm.json.memory-answering.lock";
    for what in PLANTS {
        let h = Hostile::new();
        let cfg = h.answering_config();
        h.plant(name, what);
        h.ask(&cfg);
        let r = h.wo(&cfg, &["memory", "run"]);
        assert_eq!(r.code, 0, "{what:?}: {}", r.stderr);
        h.still_planted(name, what);
        h.outside_untouched();
    }
}

/// This machine's record of the current conversation (under
/// `$XDG_STATE_HOME`) replaced by a link or a FIFO: `wo ask` still
/// answers at once, reading nothing through it.
#[test]
fn the_current_conversation_record_is_read_only_from_a_regular_file() {
    for what in PLANTS {
        let h = Hostile::new();
        let cfg = h.answering_config();
        h.ask(&cfg);
        let dir = h.p.state_home.path().join("wikioracle/conversations");
        let record = std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .expect("wo ask records the current conversation")
            .unwrap()
            .path();
        std::fs::remove_file(&record).unwrap();
        h.plant_at(&record, what);
        h.ask(&cfg);
        h.outside_untouched();
    }
}

/// Heavy (the embedding model): the embeddings sidecar (`.llm.json.embed`)
/// and the lock of `wo context embed` (`.llm.json.embed.lock`). `wo context
/// embed`, whose one job is to write them, fails naming the file; `wo ask`
/// answers and says once that the sidecar is left alone.
#[test]
fn the_embeddings_sidecar_and_its_lock_are_never_followed_nor_replaced() {
    use wo_testkit::{Need, heavy};
    if !heavy(&[Need::EmbeddingModel]) {
        return;
    }
    let model = wo_testkit::embedding_model_path();
    for name in [".llm.json.embed", ".llm.json.embed.lock"] {
        for what in PLANTS {
            let h = Hostile::new();
            let cfg = h.answering_config();
            h.plant(name, what);
            let with_model = |args: &[&str]| {
                let mut cmd = h.p.cmd(args);
                cmd.env("WO_CONFIG", &cfg).env("WO_EMBEDDING_MODEL", &model);
                h.timed(cmd, &format!("wo {args:?}"))
            };
            let r = with_model(&["context", "embed"]);
            assert_ne!(r.code, 0, "{name} {what:?}: {}", r.stderr);
            r.says(&[name, what.words()]);
            if name == ".llm.json.embed" {
                let before = h.state_messages();
                let r = with_model(&["ask", "--provider", "test", "Capital of France?"]);
                assert_eq!(r.code, 0, "{}", r.stderr);
                assert_eq!(h.state_messages(), before + 2);
                r.says(&[name, what.words(), "recalls without this cache"]);
            }
            h.still_planted(name, what);
            h.outside_untouched();
        }
    }
}

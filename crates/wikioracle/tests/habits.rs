//! The CLI's everyday habits through the real `wo` binary:
//! conversations, input (piped text + prompt, `--file`), output (Markdown
//! and a spinner on a terminal, plain on a pipe, usage totals, relative
//! dates, completions, man page, closed pipes, quiet failures), Ctrl-C
//! keeping the partial answer, `-m provider/model` and `wo models`, and
//! `llm.json` as a git merge driver. A loopback fake OpenAI-compatible
//! server records what each request sent.

// Tests report with println!; clippy.toml forbids it only for the binary's
// own output, which must go through render::term.
#![allow(clippy::disallowed_macros)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Project, Run};
use serde_json::Value;
use wo_format::{Message, State, Timestamp};

/// How the fake server answers a chat request.
#[derive(Clone, Copy)]
enum Answer {
    /// `text` in two deltas, then `stop`; the first after `delay`.
    Full { text: &'static str, delay_ms: u64 },
    /// One delta of `text`, then nothing until the client hangs up.
    Hang { text: &'static str },
}

/// A request the fake server received.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    body: String,
}

/// A loopback OpenAI-compatible server: `GET …/models` lists `models`,
/// `POST …/chat/completions` streams `answer`. Records every request.
struct Fake {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    fn start(answer: Answer, models: &'static [&'static str]) -> Fake {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let port = common::connection_server(move |s| serve(s, answer, models, log.clone()));
        Fake { port, seen }
    }

    fn chat_bodies(&self) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.method == "POST")
            .map(|s| serde_json::from_str(&s.body).unwrap())
            .collect()
    }
}

fn serve(
    stream: TcpStream,
    answer: Answer,
    models: &'static [&'static str],
    log: Arc<Mutex<Vec<Seen>>>,
) {
    let Some((request_line, body)) = common::read_request(&stream) else {
        return;
    };
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    log.lock().unwrap().push(Seen {
        method: method.clone(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let mut stream = stream;
    if method == "GET" && path.ends_with("/models") {
        let list = serde_json::json!({
            "object": "list",
            "data": models.iter().map(|m| serde_json::json!({"id": m, "object": "model"})).collect::<Vec<_>>(),
        })
        .to_string();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{list}",
            list.len()
        );
        return;
    }
    let frame = |text: &str| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        )
    };
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n");
    let _ = stream.flush();
    match answer {
        Answer::Full { text, delay_ms } => {
            std::thread::sleep(Duration::from_millis(delay_ms));
            let (a, b) = text.split_at(text.len() / 2);
            let _ = stream.write_all(frame(a).as_bytes());
            let _ = stream.write_all(frame(b).as_bytes());
            // Usage as OpenAI sends it with stream_options.include_usage.
            let _ = stream.write_all(
                b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
                  data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\n\n\
                  data: [DONE]\n\n",
            );
        }
        Answer::Hang { text } => {
            let _ = stream.write_all(frame(text).as_bytes());
            let _ = stream.flush();
            // Hold the connection open until the client goes away.
            let mut buf = [0u8; 64];
            let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
            let _ = stream.read(&mut buf);
        }
    }
}

/// A config with the fake as provider `test` (and `extra` TOML after it).
/// A fake provider answering `text` at once, and a project configured to
/// use it.
fn answering(text: &'static str) -> (Fake, Project, PathBuf) {
    let fake = Fake::start(Answer::Full { text, delay_ms: 0 }, &[]);
    let p = Project::new();
    let cfg = config(&p, fake.port, "");
    (fake, p, cfg)
}

fn config(p: &Project, port: u16, extra: &str) -> PathBuf {
    let path = p.path().join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[defaults]\nprovider = \"test\"\n\n[interpreter]\nmode = \"off\"\n\n[providers.test]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\napi_key = \"sk-test-not-a-real-key\"\ntimeout_secs = 5\n{extra}"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    path
}

/// `wo` in the project with the config, and this machine's state
/// (the current-conversation record) inside the project's temp dir.
fn wo(p: &Project, cfg: &Path, args: &[&str]) -> Command {
    let mut c = p.cmd(args);
    c.env("WO_CONFIG", cfg)
        .env("XDG_STATE_HOME", p.state_home.path())
        .env("XDG_DATA_HOME", p.path().join("data-home"))
        .env_remove("NO_COLOR");
    c
}

fn run(mut c: Command) -> Run {
    common::to_run(c.output().unwrap())
}

/// Reads `child`'s stdout until it has said `marker`, then sends it a real
/// SIGINT (Ctrl-C) mid-answer; what it read.
fn interrupt_after(child: &std::process::Child, stdout: &mut impl Read, marker: &str) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&got).contains(marker) {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "stdout closed early");
        got.extend_from_slice(&buf[..n]);
    }
    // SAFETY: kill(2) with a live child's pid and a valid signal number.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    got
}

fn run_in(mut c: Command, input: &str) -> Run {
    common::to_run(common::feed(&mut c, input.as_bytes()))
}

fn ok(r: &Run) {
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
}

/// The user messages' plain text sent in a chat request, in order.
fn sent_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn conversations_start_continue_list_and_resist_merged_messages() {
    let (fake, p, cfg) = answering("Noted, noted.");
    ok(&run(wo(&p, &cfg, &["ask", "kilns fire hot"])));
    ok(&run(wo(&p, &cfg, &["ask", "--new", "glazes are glassy"])));
    ok(&run(wo(&p, &cfg, &["ask", "and the glaze colours?"])));
    let s = p.state();
    let ids: Vec<&Message> = s.messages().iter().collect();
    assert_eq!(ids.len(), 6);
    // The --new question is a root, marked; the next one follows its answer.
    assert!(ids[2].starts_conversation() && ids[2].parent.is_none());
    assert_eq!(ids[4].parent.as_deref(), Some(ids[3].id.as_str()));
    // Its window held the glaze conversation only.
    let bodies = fake.chat_bodies();
    let third = sent_texts(&bodies[2]).join("\n");
    assert!(third.contains("glazes are glassy"), "{third}");
    assert!(!third.contains("kilns fire hot"), "{third}");
    // --conversation with a prefix of the first root continues it.
    let kiln_root = ids[0].id.clone();
    ok(&run(wo(
        &p,
        &cfg,
        &[
            "ask",
            "--conversation",
            &kiln_root[..10],
            "how hot exactly?",
        ],
    )));
    let fourth = sent_texts(&fake.chat_bodies()[3]).join("\n");
    assert!(fourth.contains("kilns fire hot"), "{fourth}");
    assert!(!fourth.contains("glazes"), "{fourth}");
    let s = p.state();
    let q = s
        .messages()
        .iter()
        .find(|m| m.content == "<p>how hot exactly?</p>")
        .unwrap();
    assert_eq!(q.parent.as_deref(), Some(ids[1].id.as_str()));
    // Bad ids are named clearly, and nothing is asked.
    let r = run(wo(&p, &cfg, &["ask", "--conversation", "m_zzzz", "x"]));
    assert_eq!(r.code, 1);
    r.says(&["--conversation", "no conversation"]);
    let r = run(wo(&p, &cfg, &["ask", "--conversation", "m_", "x"]));
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("ambiguous"), "{}", r.stderr);
    assert_eq!(fake.chat_bodies().len(), 4);
    let r = run(wo(&p, &cfg, &["ask", "--new", "--conversation", "m_", "x"]));
    assert_eq!(r.code, 1, "--new and --conversation conflict");

    // Another machine's conversation, newer than everything here, merged in.
    let mut other = p.state();
    let mut root = Message::new(
        "bob",
        Timestamp::now_after(&other.messages().last().unwrap().timestamp),
        "bob's roses",
        "<p>roses need sun</p>",
    );
    root.mark_new_conversation();
    other.push_message(root);
    p.write_state("llm_2030.01.01.0000.json", &other);
    // The next plain ask merges it (export beside llm.json) and still
    // continues this machine's conversation (the kiln one, last used).
    let r = run(wo(&p, &cfg, &["ask", "and cooling?"]));
    ok(&r);
    assert!(r.stderr.contains("merged"), "{}", r.stderr);
    let fifth = sent_texts(&fake.chat_bodies()[4]).join("\n");
    assert!(fifth.contains("how hot exactly?"), "{fifth}");
    assert!(!fifth.contains("roses"), "{fifth}");

    // wo log --conversations: one line each, newest first (as the web
    // app's sidebar), with counts.
    let r = run(wo(&p, &cfg, &["log", "--conversations"]));
    ok(&r);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert!(
        lines[2].contains("glazes are glassy") && lines[2].contains("4 msg"),
        "{}",
        r.stdout
    );
    assert!(
        lines[1].contains("bob's roses") && lines[1].contains("1 msg"),
        "{}",
        r.stdout
    );
    assert!(
        lines[0].starts_with(&kiln_root) && lines[0].contains("6 msg"),
        "{}",
        r.stdout
    );
    let r = run(wo(
        &p,
        &cfg,
        &["log", "--conversations", "--json", "-n", "1"],
    ));
    ok(&r);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["id"], kiln_root.as_str());
    assert_eq!(v["messages"], 6);
    // The roses conversation can be continued by any id in it.
    let roses = p
        .state()
        .messages()
        .iter()
        .find(|m| m.username == "bob")
        .unwrap()
        .id
        .clone();
    ok(&run(wo(&p, &cfg, &["ask", "-c", &roses, "which roses?"])));
    let sixth = sent_texts(&fake.chat_bodies()[5]).join("\n");
    assert!(
        sixth.contains("roses need sun") && !sixth.contains("kiln"),
        "{sixth}"
    );
}

#[test]
fn importing_older_history_keeps_the_first_conversation() {
    let (_fake, p, cfg) = answering("A kiln is an oven for firing pottery.");
    ok(&run(wo(
        &p,
        &cfg,
        &["ask", "In one sentence, what is a kiln"],
    )));
    let s = p.state();
    let question = s.messages()[0].clone();
    // wo never writes an unlinked question: the first one starts its
    // conversation explicitly.
    assert!(question.starts_conversation(), "{question:?}");
    let claude = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wo-interop/tests/fixtures/claude/conversations.json");
    ok(&run(wo(&p, &cfg, &["import", claude.to_str().unwrap()])));
    let s = p.state();
    assert!(s.messages().len() > 2);
    let kiln = wo_format::conversation::list(&s)
        .into_iter()
        .find(|c| c.root.id == question.id)
        .expect("the kiln conversation is still listed");
    assert_eq!(kiln.count, 2);
    let r = run(wo(&p, &cfg, &["log", "--conversations"]));
    ok(&r);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with(&question.id))
        .unwrap_or_else(|| panic!("no kiln line in:\n{}", r.stdout));
    assert!(line.contains("2 msg"), "{line}");
    // The next plain ask continues the kiln conversation, not an imported one.
    ok(&run(wo(&p, &cfg, &["ask", "and how hot does it get?"])));
    let s = p.state();
    let follow = s
        .messages()
        .iter()
        .find(|m| m.content == "<p>and how hot does it get?</p>")
        .unwrap();
    assert_eq!(s.branch(&follow.id)[0].id, question.id);
}

#[test]
fn chat_starts_new_conversations_and_continues_given_ones() {
    let (fake, p, cfg) = answering("Okay then.");
    ok(&run(wo(&p, &cfg, &["ask", "first topic"])));
    let r = run_in(
        wo(&p, &cfg, &["chat", "--new"]),
        "second topic\n/new\nthird topic\n/exit\n",
    );
    ok(&r);
    let s = p.state();
    let roots: Vec<&Message> = s
        .messages()
        .iter()
        .filter(|m| m.starts_conversation())
        .collect();
    assert_eq!(
        roots.len(),
        3,
        "the first question (an empty file), --new and /new each start one"
    );
    let bodies = fake.chat_bodies();
    assert_eq!(sent_texts(&bodies[1]), ["second topic"]);
    assert_eq!(sent_texts(&bodies[2]), ["third topic"]);
    // --conversation continues the first one.
    let first = s.messages()[0].id.clone();
    let r = run_in(
        wo(&p, &cfg, &["chat", "--conversation", &first]),
        "more on it\n",
    );
    ok(&r);
    assert!(
        r.stderr
            .contains(&format!("continuing {first} \"first topic\"")),
        "{}",
        r.stderr
    );
    let body = fake.chat_bodies().pop().unwrap();
    assert_eq!(sent_texts(&body)[0], "first topic");
}

#[test]
fn piped_text_and_files_join_the_prompt() {
    let (fake, p, cfg) = answering("Looks fine.");
    std::fs::write(p.path().join("notes.md"), "# Notes\n```\ncode\n```\n").unwrap();
    let r = run_in(
        wo(&p, &cfg, &["ask", "Review this", "-f", "notes.md"]),
        "diff --git a/x b/x\n+added line\n",
    );
    ok(&r);
    let sent = sent_texts(&fake.chat_bodies()[0]).pop().unwrap();
    assert!(
        sent.starts_with("Review this\n\n```diff\ndiff --git a/x b/x\n+added line\n```"),
        "{sent}"
    );
    assert!(
        sent.contains("File: notes.md\n\n````markdown\n# Notes\n```\ncode\n```\n````"),
        "{sent}"
    );
    let stored = wo_format::xhtml::to_plain_text(&p.state().messages()[0].content);
    assert!(
        stored.contains("+added line") && stored.contains("File: notes.md"),
        "{stored}"
    );
    // Only a prompt from a pipe still works.
    ok(&run_in(wo(&p, &cfg, &["ask"]), "piped question only"));
    assert_eq!(
        sent_texts(&fake.chat_bodies()[1]).pop().unwrap(),
        "piped question only"
    );

    // Refusals name the file and the cap; nothing is asked or saved.
    let before = std::fs::read(p.state_path()).unwrap();
    std::fs::write(p.path().join("big.txt"), "x".repeat(300 * 1024)).unwrap();
    let r = run(wo(&p, &cfg, &["ask", "-f", "big.txt", "too big?"]));
    assert_eq!(r.code, 1);
    r.says(&["big.txt", "cap of 262144 bytes"]);
    std::fs::write(p.path().join("a.out"), b"\x7fELF\x02\x01\x00\x00binary").unwrap();
    let r = run(wo(&p, &cfg, &["ask", "--file", "a.out", "what is it?"]));
    assert_eq!(r.code, 1);
    r.says(&["a.out", "not a text file"]);
    let r = run(wo(&p, &cfg, &["ask", "-f", "missing.txt", "q"]));
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("missing.txt"), "{}", r.stderr);
    // A question over the message cap is refused before asking.
    let mut big = wo(&p, &cfg, &["ask", "-f", "notes.md", "big"]);
    big.env("WO_MAX_MESSAGE_BYTES", "20");
    let r = run(big);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("over the limit"), "{}", r.stderr);
    assert_eq!(fake.chat_bodies().len(), 2);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
}

#[test]
fn a_piped_diff_comes_back_byte_for_byte() {
    let (_fake, p, cfg) = answering("Looks fine.");
    let diff = "diff --git a/src/x.rs b/src/x.rs\n--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1,4 +1,4 @@\n fn main() {\n-    let a = 1;\n+    let a = 2;\n \tprintln!(\"{a} <&> `tick`\");\n }\n";
    ok(&run_in(wo(&p, &cfg, &["ask", "Review this change"]), diff));
    let s = p.state();
    let question = &s.messages()[0];
    // Stored as code, indentation and all: the web app shows it monospace.
    assert!(
        question
            .content
            .starts_with("<p>Review this change</p><pre><code class=\"language-diff\">diff --git"),
        "{}",
        question.content
    );
    let code = diff.trim_end();
    assert_eq!(
        wo_interop::recover_text(&question.content).unwrap(),
        format!("Review this change\n\n```diff\n{code}\n```")
    );
    // Markdown export fences it, so `-` lines stay a diff, not a list.
    let r = run(wo(&p, &cfg, &["export", "--format", "markdown"]));
    ok(&r);
    assert!(
        r.stdout.contains(&format!("```diff\n{code}\n```")),
        "{}",
        r.stdout
    );
    // JSONL: the text is the question as composed, byte for byte.
    let r = run(wo(&p, &cfg, &["export", "--format", "jsonl"]));
    ok(&r);
    let first: Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["text"].as_str().unwrap(),
        format!("Review this change\n\n```diff\n{code}\n```")
    );
}

#[test]
fn urls_in_the_question_follow_the_fetch_rules() {
    let (_fake, p, cfg) = answering("Fetched.");
    // A loopback page: must never be fetched, and is reported as refused.
    let page = TcpListener::bind("127.0.0.1:0").unwrap();
    let page_port = page.local_addr().unwrap().port();
    let question = format!("What does http://127.0.0.1:{page_port}/secret say?");
    let r = run(wo(
        &p,
        &cfg,
        &["ask", "--url-fetch", "--show-context", &question],
    ));
    ok(&r);
    assert!(
        r.stderr
            .lines()
            .any(|l| l.contains("not fetched") && l.contains(&format!("127.0.0.1:{page_port}"))),
        "{}",
        r.stderr
    );
    page.set_nonblocking(true).unwrap();
    assert!(page.accept().is_err(), "the loopback page was contacted");
    // Without --url-fetch, nothing is fetched or reported.
    let r = run(wo(&p, &cfg, &["ask", "--show-context", &question]));
    ok(&r);
    assert!(!r.stderr.contains("not fetched"), "{}", r.stderr);
}

/// Runs `wo` under `script`, so its stdin, stdout and stderr are a pty.
fn in_pty(p: &Project, cfg: &Path, args: &str) -> String {
    let wo = common::wo_bin();
    let line = format!("{} {args}", wo.display());
    let out = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .current_dir(p.path())
        .env("WO_CONFIG", cfg)
        .env("XDG_STATE_HOME", p.state_home.path())
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("WO_STATE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_terminal_gets_markdown_and_a_spinner_a_pipe_gets_plain_text() {
    let fake = Fake::start(
        Answer::Full {
            text: "Paris is **the** capital, see `x`.",
            delay_ms: 700,
        },
        &[],
    );
    let p = Project::new();
    let cfg = config(&p, fake.port, "");
    let tty = in_pty(&p, &cfg, "ask --provider test 'capital?'");
    assert!(
        tty.contains("\x1b[1mthe\x1b[0m"),
        "bold on a terminal: {tty:?}"
    );
    assert!(
        tty.contains("\x1b[36mx\x1b[0m"),
        "code on a terminal: {tty:?}"
    );
    assert!(
        tty.contains("waiting for test (reading a "),
        "a spinner until the first token, saying what the model reads: {tty:?}"
    );
    assert!(tty.contains("-token prompt)…"), "{tty:?}");
    // Piped: the answer exactly as the model wrote it, no escapes, no spinner.
    let r = run(wo(&p, &cfg, &["ask", "capital?"]));
    ok(&r);
    assert_eq!(r.stdout, "Paris is **the** capital, see `x`.\n");
    assert!(!r.stderr.contains("waiting for"), "{}", r.stderr);
    assert!(!r.stdout.contains('\x1b') && !r.stderr.contains('\x1b'));
    // NO_COLOR turns the styling off on a terminal too.
    let wo = common::wo_bin();
    let out = Command::new("script")
        .args([
            "-qfec",
            &format!("{} ask 'capital?'", wo.display()),
            "/dev/null",
        ])
        .current_dir(p.path())
        .env("WO_CONFIG", &cfg)
        .env("XDG_STATE_HOME", p.state_home.path())
        .env("NO_COLOR", "1")
        .env_remove("WO_STATE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Paris is **the** capital"), "{text:?}");
}

#[test]
fn ctrl_c_keeps_the_question_and_the_partial_answer() {
    let fake = Fake::start(
        Answer::Hang {
            text: "The first half of a long ",
        },
        &[],
    );
    let p = Project::new();
    let cfg = config(&p, fake.port, "");
    let mut child = wo(&p, &cfg, &["ask", "tell me everything"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first words on stdout, then a real SIGINT.
    let mut stdout = child.stdout.take().unwrap();
    let mut got = interrupt_after(&child, &mut stdout, "first half");
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted") && stderr.contains("marked incomplete"),
        "{stderr}"
    );
    got.extend_from_slice(&rest);
    assert_eq!(String::from_utf8_lossy(&got), "The first half of a long \n");
    let s = p.state();
    assert_eq!(s.messages().len(), 2);
    let answer = &s.messages()[1];
    assert_eq!(answer.parent.as_deref(), Some(s.messages()[0].id.as_str()));
    assert_eq!(answer.content, "<p>The first half of a long</p>");
    let usage = answer.usage.as_ref().unwrap();
    assert_eq!(
        usage.extra.get("truncated").unwrap().to_value()["reason"],
        "stopped"
    );

    // wo chat: the answer is kept, the chat goes on, and the next question
    // follows the kept answer.
    let mut child = wo(&p, &cfg, &["chat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go on\n").unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = interrupt_after(&child, &mut stdout, "first half");
    // Give the chat a moment to save, then leave.
    std::thread::sleep(Duration::from_millis(500));
    drop(stdin);
    let _ = stdout.read_to_end(&mut got);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("stopped; the question and the answer so far were saved"),
        "{stderr}"
    );
    let s = p.state();
    assert_eq!(s.messages().len(), 4);
    assert_eq!(
        s.messages()[2].parent.as_deref(),
        Some(s.messages()[1].id.as_str())
    );
}

#[test]
fn models_are_listed_per_provider_and_chosen_with_provider_slash_model() {
    let fake = Fake::start(
        Answer::Full {
            text: "From the big one.",
            delay_ms: 0,
        },
        &["m", "big-model", "tiny-model"],
    );
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let p = Project::new();
    let cfg = config(
        &p,
        fake.port,
        &format!(
            "\n[providers.gone]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{dead_port}/v1\"\nmodel = \"x\"\napi_key = \"sk-x\"\n"
        ),
    );
    let r = run(wo(&p, &cfg, &["models"]));
    assert_eq!(r.code, 1, "a provider could not be reached: {}", r.stderr);
    assert!(r.stdout.contains("* test/m"), "{}", r.stdout);
    assert!(r.stdout.contains("test/big-model") && r.stdout.contains("test/tiny-model"));
    r.says(&["gone: cannot list models", &dead_port.to_string()]);
    let r = run(wo(&p, &cfg, &["models", "-p", "test", "--json"]));
    ok(&r);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(
        v["models"],
        serde_json::json!(["m", "big-model", "tiny-model"])
    );
    assert!(v["source"].as_str().unwrap().ends_with("/v1/models"));
    let r = run(wo(&p, &cfg, &["models", "-p", "nope"]));
    assert_eq!(r.code, 1);
    r.says(&["--provider", "nope"]);

    // -m provider/model: that provider, that model, recorded as such.
    ok(&run(wo(&p, &cfg, &["ask", "-m", "test/big-model", "hi"])));
    assert_eq!(fake.chat_bodies()[0]["model"], "big-model");
    let s = p.state();
    let a = &s.messages()[1];
    assert_eq!(a.provider.as_deref(), Some("test"));
    assert_eq!(a.model.as_deref(), Some("big-model"));
    // A model name with a slash of its own is not split.
    ok(&run(wo(
        &p,
        &cfg,
        &["ask", "-p", "test", "-m", "meta-llama/Llama-3", "hi again"],
    )));
    assert_eq!(fake.chat_bodies()[1]["model"], "meta-llama/Llama-3");
}

#[test]
fn usage_totals_per_model_from_what_providers_reported() {
    let p = Project::new();
    let mut s = State::new(Timestamp::from_unix(1_800_000_000));
    let mut add = |secs: i64, model: &str, usage: Option<(u64, u64)>| {
        let mut m = Message::new(
            model,
            Timestamp::from_unix(1_800_000_000 + secs),
            "answer",
            format!("<p>answer {secs}</p>"),
        );
        m.role = Some(wo_format::Role::Assistant);
        m.provider = Some("p".into());
        m.model = Some(model.into());
        m.usage = usage.map(|(a, b)| wo_format::Usage {
            prompt_tokens: Some(a),
            completion_tokens: Some(b),
            extra: Default::default(),
        });
        s.push_message(m);
    };
    add(0, "alpha", Some((100, 20)));
    add(10, "alpha", Some((50, 5)));
    add(20, "beta", None);
    add(30, "beta", Some((7, 3)));
    p.write_state("llm.json", &s);
    let r = p.run(&["log", "--usage"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let row = |name: &str| -> Vec<String> {
        r.stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row: {}", r.stdout))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(row("p/alpha"), ["p/alpha", "2", "150", "25", "175"]);
    assert_eq!(row("p/beta"), ["p/beta", "2", "7", "3", "10"]);
    assert_eq!(row("all"), ["all", "4", "157", "28", "185"]);
    assert!(
        r.stdout.contains("1 answer(s) came with no token counts"),
        "{}",
        r.stdout
    );
    // --since narrows it (dates are 2027): nothing since yesterday.
    let r = p.run(&["log", "--usage", "--since", "2030-01-01"]);
    assert_eq!(r.stdout.trim(), "no answers in range");
    let r = p.run(&["log", "--usage", "--json"]);
    let first: Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["model"], "p/alpha");
    assert_eq!(first["total_tokens"], 175);
}

#[test]
fn usage_the_provider_reported_is_stored_and_totalled() {
    let (_fake, p, cfg) = answering("Counted.");
    ok(&run(wo(&p, &cfg, &["ask", "one"])));
    ok(&run(wo(&p, &cfg, &["ask", "-m", "test/other", "two"])));
    let r = run(wo(&p, &cfg, &["log", "--usage", "--since", "1h"]));
    ok(&r);
    let rows: Vec<Vec<&str>> = r
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.contains(&vec!["test/m", "1", "12", "3", "15"]),
        "{}",
        r.stdout
    );
    assert!(
        rows.contains(&vec!["test/other", "1", "12", "3", "15"]),
        "{}",
        r.stdout
    );
    assert!(
        rows.contains(&vec!["all", "2", "24", "6", "30"]),
        "{}",
        r.stdout
    );
}

#[test]
fn since_takes_relative_times_everywhere_it_exists() {
    let p = Project::new();
    let now = Timestamp::now().unix_seconds();
    let mut s = State::new(Timestamp::from_unix(now - 10 * 86_400));
    for (ago, text) in [(5 * 86_400, "five days ago"), (3_600, "an hour ago")] {
        s.push_message(Message::new(
            "ann",
            Timestamp::from_unix(now - ago),
            text,
            format!("<p>{text}</p>"),
        ));
    }
    p.write_state("llm.json", &s);
    let shown = |since: &str| {
        let r = p.run(&["log", "--since", since]);
        assert_eq!(r.code, 0, "{since}: {}", r.stderr);
        // One header line per message: its time, id and who wrote it.
        r.stdout.lines().filter(|l| l.contains("  ann")).count()
    };
    assert_eq!(shown("2d"), 1);
    assert_eq!(shown("3h"), 1);
    assert_eq!(shown("1w"), 2);
    assert_eq!(shown("10m"), 0);
    assert_eq!(shown("6 days ago"), 2);
    let r = p.run(&["log", "--until", "2d"]);
    assert_eq!(
        r.stdout.lines().filter(|l| l.contains("  ann")).count(),
        1,
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("five days ago"));
    // Each message's role is said once, and a title that only repeats the
    // text's first words is not printed.
    assert!(!r.stdout.contains("# five days ago"), "{}", r.stdout);
    let r = p.run(&["log", "--since", "soonish"]);
    assert_eq!(r.code, 1);
    r.says(&["--since \"soonish\"", "2d"]);
    // wo memory rebuild --since takes the same forms.
    let r = p.run(&["memory", "rebuild", "--since", "yesterday", "--dry-run"]);
    assert!(!r.stderr.contains("is not a time"), "{}", r.stderr);
    let r = p.run(&["memory", "rebuild", "--since", "nope", "--dry-run"]);
    assert_eq!(r.code, 1);
    r.says(&["--since \"nope\" is not a time"]);
}

#[test]
fn completions_and_man_page() {
    let p = Project::new();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef wo"),
        ("fish", "complete -c wo"),
    ] {
        let r = p.run(&["completions", shell]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            r.stdout.contains(marker),
            "{shell}: {}",
            &r.stdout[..200.min(r.stdout.len())]
        );
        assert!(
            r.stdout.contains("conversations"),
            "{shell} completes flags"
        );
    }
    let r = p.run(&["completions", "tcsh"]);
    assert_eq!(r.code, 1);
    let r = p.run(&["man"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.starts_with(".ie") || r.stdout.contains(".TH wo"),
        "{}",
        &r.stdout[..100]
    );
    assert!(r.stdout.contains("merge\\-driver") || r.stdout.contains("merge-driver"));
    // One page per command, for packagers and `man wo-ask`.
    let r = p.run(&["man", "--out-dir", "man1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let page = std::fs::read_to_string(p.path().join("man1/wo-ask.1")).unwrap();
    assert!(
        page.contains(".TH WO-ASK") && page.contains("\\-\\-conversation"),
        "{page}"
    );
    assert!(p.path().join("man1/wo-truth-add.1").exists());
    assert!(p.path().join("man1/wo.1").exists());
    assert!(!p.path().join("man1/wo-help.1").exists());
}

/// Runs `wo args`, reads one line of its output, then closes the pipe.
fn read_one_line_then_close(p: &Project, args: &[&str]) -> (i32, String) {
    let mut child = p
        .cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!line.is_empty(), "wo {args:?} printed nothing: {err}");
    (status.code().unwrap_or(-1), err)
}

#[test]
fn closed_pipes_end_quietly() {
    let p = Project::new();
    // Enough output that the pipe closes while wo is still writing.
    p.write_state(
        "llm.json",
        &common::state_with_messages("ann", 0, 3000, &"lorem ipsum ".repeat(20)),
    );
    for i in 0..400 {
        std::fs::write(
            p.path().join(format!("f{i}.md")),
            format!("# Heading {i}\nlorem ipsum dolor {i}\n"),
        )
        .unwrap();
    }
    let r = p.run(&["index"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for args in [
        &["log"][..],
        &["log", "--json"],
        &["search", "lorem", "-n", "400"],
        &["search", "--outline"],
        &["completions", "bash"],
        &["man"],
        &["export", "--format", "markdown"],
    ] {
        let (code, err) = read_one_line_then_close(&p, args);
        assert_eq!(code, 0, "wo {args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "wo {args:?}: {err}"
        );
    }
}

#[test]
fn a_failed_ask_prints_nothing_on_stdout() {
    let p = Project::new();
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let cfg = config(&p, port, "");
    let r = run(wo(&p, &cfg, &["ask", "anyone there?"]));
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "", "not even a newline");
    assert!(r.stderr.contains("error:"), "{}", r.stderr);
}

#[test]
fn init_on_a_valid_file_says_so_and_succeeds() {
    let p = Project::new();
    p.ok(&["init", "--context", "Garden notes"]);
    let before = std::fs::read(p.state_path()).unwrap();
    let r = p.run(&["init"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("already exists and is valid"),
        "{}",
        r.stdout
    );
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    // An invalid file is still refused without --force, and kept.
    std::fs::write(p.state_path(), b"{not json").unwrap();
    let r = p.run(&["init"]);
    assert_eq!(r.code, 1);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), b"{not json");
}

#[test]
fn the_index_size_cap_is_one_summary_line() {
    let p = Project::new();
    for i in 0..40 {
        std::fs::write(p.path().join(format!("doc{i:02}.txt")), "words ".repeat(50)).unwrap();
    }
    let r = p.run(&["index", "--max-total-bytes", "1000"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let capped: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("max_total_bytes"))
        .collect();
    assert_eq!(capped.len(), 1, "{}", r.stderr);
    assert!(
        capped[0].contains("37 file(s) not indexed"),
        "{}",
        capped[0]
    );
    assert!(r.stderr.contains("--max-total-bytes"), "{}", r.stderr);
}

/// `git` in `dir` with a fixed identity and no user config.
fn git(dir: &Path, home: &Path, args: &[&str]) -> Run {
    common::to_run(
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.org")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.org")
            .output()
            .unwrap(),
    )
}

fn with_message(mut s: State, user: &str, secs: i64, text: &str) -> State {
    s.push_message(Message::new(
        user,
        Timestamp::from_unix(1_800_000_000 + secs),
        text,
        format!("<p>{text}</p>"),
    ));
    s
}

#[test]
fn git_merges_llm_json_with_the_merge_driver() {
    let p = Project::new();
    let home = p.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let repo = p.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let g = |args: &[&str]| {
        let r = git(&repo, &home, args);
        assert_eq!(r.code, 0, "git {args:?}: {}{}", r.stdout, r.stderr);
        r
    };
    g(&["init", "-q", "-b", "main"]);
    let base = with_message(
        State::new(Timestamp::from_unix(1_800_000_000)),
        "ann",
        0,
        "shared start",
    );
    std::fs::write(repo.join("llm.json"), wo_format::to_canonical_vec(&base)).unwrap();
    let setup = |repo: &Path| {
        common::to_run(
            Command::new(common::wo_bin())
                .arg("git-setup")
                .current_dir(repo)
                .env("HOME", &home)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env_remove("WO_STATE")
                .output()
                .unwrap(),
        )
    };
    let r = setup(&repo);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("added `llm.json merge=wikioracle`"),
        "{}",
        r.stdout
    );
    // Idempotent: run again, nothing changes.
    let attrs = std::fs::read(repo.join(".gitattributes")).unwrap();
    let r = setup(&repo);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("already has") && r.stdout.contains("already set"),
        "{}",
        r.stdout
    );
    assert_eq!(std::fs::read(repo.join(".gitattributes")).unwrap(), attrs);
    let driver = g(&["config", "--get", "merge.wikioracle.driver"]).stdout;
    assert!(driver.contains("merge-driver %O %A %B"), "{driver}");
    // The recall sidecar (a cache of this machine) and its temp files are
    // ignored: `git add .` leaves them out, and status stays clean below.
    let ignore = std::fs::read_to_string(repo.join(".gitignore")).unwrap();
    assert_eq!(
        ignore.lines().collect::<Vec<_>>(),
        [
            ".llm.json.recall",
            ".llm.json.embed",
            ".llm.json.embed.lock",
            "llm.json.lock",
            ".llm.json.memory-jobs",
            ".llm.json.memory-jobs.lock",
            ".llm.json.memory-run.lock",
            ".llm.json.memory-answering.lock",
            ".recall-*.tmp"
        ]
    );
    std::fs::write(repo.join(".llm.json.recall"), b"cache").unwrap();
    std::fs::write(repo.join(".llm.json.embed"), b"cache").unwrap();
    std::fs::write(repo.join(".llm.json.embed.lock"), b"").unwrap();
    std::fs::write(repo.join(".recall-x1.tmp"), b"cache").unwrap();
    std::fs::write(repo.join(".llm.json.memory-jobs"), b"{\"jobs\":[]}").unwrap();
    std::fs::write(repo.join(".llm.json.memory-run.lock"), b"").unwrap();
    g(&["add", "."]);
    let tracked = g(&["ls-files"]).stdout;
    assert!(!tracked.contains("recall"), "{tracked}");
    assert!(!tracked.contains("embed"), "{tracked}");
    assert!(!tracked.contains("memory-"), "{tracked}");
    assert!(!tracked.contains("llm.json.lock"), "{tracked}");
    g(&["commit", "-q", "-m", "base"]);
    // Two machines each add messages on their own branch.
    g(&["checkout", "-q", "-b", "laptop"]);
    let laptop = with_message(base.clone(), "ann", 10, "from the laptop");
    std::fs::write(repo.join("llm.json"), wo_format::to_canonical_vec(&laptop)).unwrap();
    g(&["commit", "-q", "-am", "laptop"]);
    g(&["checkout", "-q", "main"]);
    let desk = with_message(
        with_message(base.clone(), "ann", 20, "from the desk"),
        "bob",
        30,
        "desk again",
    );
    std::fs::write(repo.join("llm.json"), wo_format::to_canonical_vec(&desk)).unwrap();
    g(&["commit", "-q", "-am", "desk"]);
    let r = g(&["merge", "--no-edit", "laptop"]);
    assert!(!r.stdout.contains("CONFLICT"), "{}", r.stdout);
    let merged = wo_format::parse(&std::fs::read(repo.join("llm.json")).unwrap()).unwrap();
    let titles: Vec<&str> = merged.messages().iter().map(|m| m.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "shared start",
            "from the laptop",
            "from the desk",
            "desk again"
        ]
    );
    // Without the driver git's line merge of the same change conflicts:
    // the driver is what made it succeed.
    assert!(g(&["status", "--porcelain"]).stdout.trim().is_empty());

    // A side that is not valid JSON: exit 1, %A untouched, a clear message.
    let dir = p.path();
    let ours = dir.join("ours.json");
    std::fs::write(&ours, wo_format::to_canonical_vec(&laptop)).unwrap();
    let ours_before = std::fs::read(&ours).unwrap();
    std::fs::write(dir.join("theirs.json"), b"{\"version\": 1, \"messages\": [").unwrap();
    std::fs::write(dir.join("base.json"), wo_format::to_canonical_vec(&base)).unwrap();
    let r = p.run(&["merge-driver", "base.json", "ours.json", "theirs.json"]);
    assert_eq!(r.code, 1);
    r.says(&["theirs (%B)", "not a valid llm.json"]);
    assert_eq!(std::fs::read(&ours).unwrap(), ours_before);
    // An empty base (both sides added the file) is fine.
    std::fs::write(dir.join("theirs.json"), wo_format::to_canonical_vec(&desk)).unwrap();
    std::fs::write(dir.join("empty"), b"").unwrap();
    let r = p.run(&["merge-driver", "empty", "ours.json", "theirs.json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let merged = wo_format::parse(&std::fs::read(&ours).unwrap()).unwrap();
    assert_eq!(merged.messages().len(), 4);
    // Outside a repository, git-setup says so.
    let outside = tempfile::tempdir().unwrap();
    let r = setup(outside.path());
    assert_eq!(r.code, 1);
    r.says(&["not inside a git repository"]);
}

/// A loopback server answering GETs by path: `routes` maps a path to a
/// JSON body (200); any other path is a 404. Records each request's path
/// and headers (lowercased).
fn json_routes(routes: &'static [(&'static str, &'static str)]) -> (u16, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let port = common::connection_server(move |mut stream| {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
            head.push_str(&line.to_ascii_lowercase());
        }
        let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
        log.lock().unwrap().push(head.clone());
        let (status, body) = match routes.iter().find(|(p, _)| *p == path) {
            Some((_, body)) => ("200 OK", *body),
            None => ("404 Not Found", "{\"error\":\"not found\"}"),
        };
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    (port, seen)
}

#[test]
fn models_come_from_anthropic_and_ollama_lists_too() {
    let (ant_port, ant_seen) = json_routes(&[(
        "/v1/models",
        r#"{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5"},{"type":"model","id":"claude-haiku-4-5"}],"has_more":false}"#,
    )]);
    // An Ollama without /v1/models: its own /api/tags answers.
    let (ollama_port, _) = json_routes(&[(
        "/api/tags",
        r#"{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest"},{"name":"qwen2.5:7b"}]}"#,
    )]);
    let p = Project::new();
    let cfg = p.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{ant_port}/v1\"\nmodel = \"claude-haiku-4-5\"\napi_key = \"sk-ant-test\"\n\n\
             [providers.ollama]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{ollama_port}/v1\"\nmodel = \"llama3.2:latest\"\n\n\
             [providers.nano]\nkind = \"nanochat\"\nbase_url = \"http://127.0.0.1:9\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cfg, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let r = run(wo(&p, &cfg, &["models"]));
    ok(&r);
    for line in [
        "  claude/claude-sonnet-4-5",
        "* claude/claude-haiku-4-5",
        "* ollama/llama3.2:latest",
        "  ollama/qwen2.5:7b",
    ] {
        assert!(r.stdout.contains(line), "{line:?} in:\n{}", r.stdout);
    }
    // NanoChat has no model list: its configured model, said so.
    assert!(r.stdout.contains("no model list"), "{}", r.stdout);
    // Anthropic was asked with its key and version headers.
    let head = ant_seen.lock().unwrap()[0].clone();
    assert!(head.starts_with("get /v1/models"), "{head}");
    assert!(
        head.contains("x-api-key: sk-ant-test") && head.contains("anthropic-version:"),
        "{head}"
    );
    // An Anthropic entry without a key: a clear error, the others listed.
    let r = run({
        let mut c = wo(&p, &cfg, &["models", "--json"]);
        c.env_remove("ANTHROPIC_API_KEY");
        std::fs::write(
            &cfg,
            std::fs::read_to_string(&cfg)
                .unwrap()
                .replace("api_key = \"sk-ant-test\"\n", ""),
        )
        .unwrap();
        c
    });
    assert_eq!(
        r.code, 0,
        "a provider without its key is a note: {}",
        r.stderr
    );
    let claude: Value = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["provider"] == "claude")
        .unwrap();
    assert!(
        claude["not_configured"]
            .as_str()
            .unwrap()
            .contains("no API key"),
        "{claude}"
    );
}

#[test]
fn archived_conversations_are_hidden_listed_apart_and_restored() {
    let (_fake, p, cfg) = answering("Noted.");
    ok(&run(wo(&p, &cfg, &["ask", "kilns fire hot"])));
    ok(&run(wo(&p, &cfg, &["ask", "--new", "glazes are glassy"])));
    let kiln = p.state().messages()[0].id.clone();
    let before = p.state().messages().len();
    // Any message id of the conversation names it.
    let answer = p.state().messages()[1].id.clone();
    let r = run(wo(&p, &cfg, &["archive", &answer[..12]]));
    ok(&r);
    assert!(
        r.stdout.contains(&format!("archived {kiln}")),
        "{}",
        r.stdout
    );
    assert_eq!(p.state().messages().len(), before, "nothing is deleted");
    let r = run(wo(&p, &cfg, &["log", "--conversations"]));
    ok(&r);
    assert!(!r.stdout.contains(&kiln), "{}", r.stdout);
    assert!(r.stdout.contains("glazes are glassy"), "{}", r.stdout);
    let r = run(wo(&p, &cfg, &["log", "--conversations", "--archived"]));
    ok(&r);
    assert!(
        r.stdout.starts_with(&kiln) && r.stdout.lines().count() == 1,
        "{}",
        r.stdout
    );
    ok(&run(wo(&p, &cfg, &["archive", "--restore", &kiln])));
    let r = run(wo(&p, &cfg, &["log", "--conversations"]));
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
    // An id that names nothing changes nothing and says how to find one.
    let file = std::fs::read(p.state_path()).unwrap();
    let r = run(wo(&p, &cfg, &["archive", "m_nothing"]));
    assert_ne!(r.code, 0);
    r.says(&["m_nothing", "wo log --conversations"]);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), file);
}

/// simonw/llm against `wo serve`'s /v1: each `llm "…"` is a conversation of
/// its own, `llm -c` continues it, and neither lands in the conversation
/// the file (or the browser) had last.
#[test]
fn simonw_llm_prompts_get_their_own_threads() {
    if !wo_testkit::heavy(&[wo_testkit::Need::PythonLlm]) {
        return;
    }
    let (_fake, p, cfg) = answering("Slowly: about 100 degrees an hour.");
    ok(&run(wo(&p, &cfg, &["ask", "Browser question"])));
    let server = common::Serving::start(&p, &cfg, &[]);
    let home = p.path().join("llm-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("extra-openai-models.yaml"),
        format!(
            "- model_id: wikioracle\n  model_name: test\n  api_base: \"{}/v1\"\n  api_key_name: wikioracle\n",
            server.base()
        ),
    )
    .unwrap();
    std::fs::write(
        home.join("keys.json"),
        serde_json::json!({"wikioracle": server.token}).to_string(),
    )
    .unwrap();
    let llm = |args: &[&str]| {
        let out = Command::new(wo_testkit::python())
            .args(["-m", "llm"])
            .args(args)
            .env("LLM_USER_PATH", &home)
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "llm {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let answer = llm(&["-m", "wikioracle", "How slow should I cool my kiln?"]);
    assert!(answer.contains("100 degrees"), "{answer}");
    llm(&["-c", "And for stoneware?"]);
    llm(&["-m", "wikioracle", "Name a glaze"]);
    let s = p.state();
    let root_of = |text: &str| {
        let m = s
            .messages()
            .iter()
            .find(|m| m.content == format!("<p>{text}</p>"))
            .unwrap_or_else(|| panic!("{text:?} not stored"));
        wo_format::xhtml::to_plain_text(&s.branch(&m.id)[0].content)
    };
    assert_eq!(root_of("Browser question"), "Browser question");
    assert_eq!(
        root_of("How slow should I cool my kiln?"),
        "How slow should I cool my kiln?"
    );
    assert_eq!(
        root_of("And for stoneware?"),
        "How slow should I cool my kiln?"
    );
    assert_eq!(root_of("Name a glaze"), "Name a glaze");
    assert!(s.messages().iter().all(|m| !m.is_unlinked()));
}

/// `wo log --context ID` shows, from the file alone, what `--show-context`
/// showed when the answer was written: the memory entry sent (by title),
/// the token totals, and what was left out.
#[test]
fn log_context_shows_what_an_answer_was_sent_after_the_fact() {
    let (_fake, p, cfg) = answering("It is Paris.");
    ok(&run(wo(&p, &cfg, &["init"])));
    ok(&run(wo(
        &p,
        &cfg,
        &[
            "memory",
            "add",
            "Capital of France",
            "--content",
            "Paris is the capital of France.",
        ],
    )));
    let r = run(wo(
        &p,
        &cfg,
        &["ask", "--show-context", "what is the capital of France?"],
    ));
    ok(&r);
    let live_total = r
        .stderr
        .lines()
        .find(|l| l.contains("── context sent ("))
        .map(|l| {
            l.split(" tokens")
                .next()
                .unwrap()
                .rsplit('(')
                .next()
                .unwrap()
                .to_owned()
        })
        .unwrap_or_else(|| panic!("{}", r.stderr));
    let state: State =
        wo_format::parse(&std::fs::read(p.path().join("llm.json")).unwrap()).unwrap();
    let answer = state.messages().last().unwrap().id.clone();
    let question = state.messages()[state.messages().len() - 2].id.clone();

    for by in [&answer[..8], &question[..]] {
        let r = run(wo(&p, &cfg, &["log", "--context", by]));
        ok(&r);
        assert!(
            r.stdout.contains(&format!("answer {answer}")),
            "{}",
            r.stdout
        );
        assert!(
            r.stdout
                .contains(&format!("── context sent ({live_total} tokens")),
            "the totals shown live ({live_total}) are kept: {}",
            r.stdout
        );
        assert!(
            r.stdout
                .lines()
                .any(|l| l.contains("memory") && l.contains("Capital of France")),
            "{}",
            r.stdout
        );
    }
    let r = run(wo(&p, &cfg, &["log", "--context", &answer, "--json"]));
    ok(&r);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["answer"], answer.as_str());
    assert!(
        v["context_used"]["sent"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == "memory")
    );

    let r = run(wo(&p, &cfg, &["log", "--context", "m_ffffffff"]));
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--context m_ffffffff: no message has an id"),
        "{}",
        r.stderr
    );
}

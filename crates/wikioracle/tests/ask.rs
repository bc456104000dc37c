//! `wo ask` end to end: the local model answering in-process, and every
//! provider kind failing in the ways servers fail — each failure exits 1 and
//! leaves llm.json byte-for-byte unchanged.

// Tests report with println!; clippy.toml forbids it only for the binary's
// own output, which must go through render::term.
#![allow(clippy::disallowed_macros)]

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;

use common::Project;

/// A loopback HTTP server that answers every request with `response`
/// (raw bytes, written verbatim), then closes the connection.
fn canned_server(response: &'static [u8]) -> u16 {
    common::loopback_server(move |mut stream| {
        let _ = stream.write_all(response);
    })
}

fn config(p: &Project, kind: &str, port: u16) -> std::path::PathBuf {
    let base = match kind {
        "openai" => format!("http://127.0.0.1:{port}/v1"),
        _ => format!("http://127.0.0.1:{port}"),
    };
    p.write_config(&format!("[providers.test]\nkind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"m\"\napi_key = \"sk-test-not-a-real-key\"\ntimeout_secs = 5\n"))
}

fn ask(p: &Project, cfg: &std::path::Path, extra: &[&str]) -> common::Run {
    ask_about(p, cfg, extra, "hello there")
}

/// `wo ask` with `question`: memory is sent only when it relates to it.
fn ask_about(p: &Project, cfg: &std::path::Path, extra: &[&str], question: &str) -> common::Run {
    let mut args = vec!["ask", "--provider", "test"];
    args.extend_from_slice(extra);
    args.push(question);
    p.run_with(cfg, &args)
}

#[test]
fn provider_failures_exit_1_and_change_nothing() {
    let cases: &[(&str, &'static [u8], &str)] = &[
        ("openai", b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 27\r\n\r\n{\"error\":{\"message\":\"no\"}}", "401"),
        ("anthropic", b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 82\r\n\r\n{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}}", "401"),
        ("nanochat", b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 27\r\n\r\n{\"detail\":\"bad temperature\"}", "400"),
        ("wikioracle", b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", "403"),
        // A stream that starts, then is malformed.
        ("openai", b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {not json\n\n", "malformed"),
        // A stream dropped mid-answer (no [DONE]).
        ("openai", b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n", "drop"),
        ("nanochat", b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"token\":\"Hel\",\"gpu\":0}\n\n", "drop"),
        // 500 after retries.
        ("anthropic", b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n", "500"),
    ];
    for (kind, response, what) in cases {
        let p = Project::new();
        p.ok(&["init"]);
        let before = std::fs::read(p.state_path()).unwrap();
        let port = canned_server(response);
        let cfg = config(&p, kind, port);
        let r = ask(&p, &cfg, &[]);
        assert_eq!(r.code, 1, "{kind}/{what}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("error:"), "{kind}/{what}: {}", r.stderr);
        assert!(
            r.stderr.contains("test"),
            "{kind}/{what}: names the provider: {}",
            r.stderr
        );
        assert!(
            !r.stderr.contains("sk-test-not-a-real-key"),
            "{kind}/{what}: key leaked"
        );
        assert_eq!(
            std::fs::read(p.state_path()).unwrap(),
            before,
            "{kind}/{what}: state changed"
        );
    }
}

#[test]
fn unreachable_provider_exits_1() {
    let p = Project::new();
    p.ok(&["init"]);
    let before = std::fs::read(p.state_path()).unwrap();
    // A port nobody listens on.
    let port = common::dead_port();
    let cfg = config(&p, "openai", port);
    let r = ask(&p, &cfg, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    // An unknown provider name is a usage error naming the known ones.
    let out = p
        .cmd(&["ask", "--provider", "nope", "hi"])
        .env("WO_CONFIG", &cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("known: "));
}

#[test]
fn a_streamed_answer_lands_in_llm_json() {
    // An OpenAI-compatible stream, byte for byte as llama.cpp's server sends it.
    let response: &'static [u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Paris\"},\"finish_reason\":null}]}\n\n\
: ping - 2026-01-01\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" is **the** capital.\"},\"finish_reason\":null}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
data: [DONE]\n\n";
    let p = Project::new();
    p.ok(&["init", "--context", "Geography notes"]);
    p.ok(&[
        "truth",
        "add",
        "Capital",
        "--content",
        "The capital of France is Paris",
        "--certainty",
        "0.9",
    ]);
    let port = canned_server(response);
    let cfg = config(&p, "openai", port);
    let r = ask_about(
        &p,
        &cfg,
        &[
            "--show-context",
            "--save",
            "answer.md",
            "--username",
            "alec",
        ],
        "what is the capital of France",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "Paris is **the** capital.");
    r.says(&["── context sent", "Geography notes"]);
    r.says(&["Capital (certainty 0.90)"]);
    // The parts as `wo context explain` lists them (one renderer).
    r.says(&["── parts ──", "+ memory"]);
    assert_eq!(
        std::fs::read_to_string(p.path().join("answer.md")).unwrap(),
        "Paris is **the** capital."
    );
    let s = p.state();
    assert_eq!(s.messages().len(), 2);
    let (q, a) = (&s.messages()[0], &s.messages()[1]);
    assert_eq!(q.username, "alec");
    assert_eq!(q.content, "<p>what is the capital of France</p>");
    assert_eq!(a.username, "m");
    assert_eq!(a.content, "<p>Paris is <strong>the</strong> capital.</p>");
    assert_eq!(a.parent.as_deref(), Some(q.id.as_str()));
    assert_eq!(a.provider.as_deref(), Some("test"));
    let truth_id = &s.truth.trust[0].id;
    assert!(
        a.sources.as_ref().unwrap().contains(truth_id),
        "sources record the truth entry"
    );
    assert_eq!(s.truth.trust[0].refs, Some(1));
    // --no-stream prints once, at the end; stdin carries the prompt.
    let out = p
        .cmd(&["ask", "--provider", "test", "--no-stream"])
        .env("WO_CONFIG", &cfg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"from stdin")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Paris is **the** capital."
    );
    assert!(
        p.state()
            .messages()
            .iter()
            .any(|m| m.content == "<p>from stdin</p>")
    );
}

/// `wo ask` keeps the recall sidecar beside llm.json: written (private) on
/// the first run, and a damaged one is rebuilt — the question still answered
/// and saved.
#[test]
fn ask_keeps_the_recall_sidecar_and_rebuilds_a_damaged_one() {
    let response: &'static [u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Cone 10.\"},\"finish_reason\":null}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
data: [DONE]\n\n";
    let p = Project::new();
    p.ok(&["init"]);
    let port = canned_server(response);
    let cfg = config(&p, "openai", port);
    let sidecar = p.path().join(".llm.json.recall");
    let r = ask(&p, &cfg, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let first = std::fs::read(&sidecar).expect("the first ask writes the sidecar");
    assert!(first.starts_with(wo_engine::recall_file::MAGIC));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&sidecar).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Damaged: the next ask answers as before and writes a good one.
    std::fs::write(&sidecar, b"WORECAL1 not really").unwrap();
    let r = ask(&p, &cfg, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(p.state().messages().len(), 4);
    let rebuilt = std::fs::read(&sidecar).unwrap();
    assert!(rebuilt.starts_with(wo_engine::recall_file::MAGIC));
    assert_ne!(rebuilt, b"WORECAL1 not really");
    // A run that appends only reads it: no rewrite for two messages.
    let r = ask(&p, &cfg, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(&sidecar).unwrap(), rebuilt);
    // Nothing else is left beside the file (no temp files).
    let names = wo_testkit::sorted_names(p.path());
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
}

#[test]
fn ask_creates_the_state_file_and_merges_exports_beside_it() {
    let response: &'static [u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let p = Project::new();
    let phone = common::state_with_messages("phone", 0, 2, "from the phone");
    p.write_state("llm_2026.02.22.2241.json", &phone);
    let port = canned_server(response);
    let cfg = config(&p, "openai", port);
    let r = ask(&p, &cfg, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.says(&["created", "merged"]);
    assert_eq!(p.state().messages().len(), 4);
    assert!(p.path().join("llm_2026.02.22.2241.json.merged").exists());
}

#[test]
fn the_local_model_answers_in_process() {
    // Uses the offline default: SmolLM2 installed by scripts/install-model.sh.
    if !wo_testkit::heavy(&[wo_testkit::Need::Model]) {
        return;
    }
    let p = Project::new();
    let out = p
        .cmd(&[
            "ask",
            "--provider",
            "local",
            "-t",
            "0",
            "--max-tokens",
            "24",
            "What is the capital of France?",
        ])
        .env_remove("WO_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the local model failed (run scripts/install-model.sh first): {stderr}"
    );
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(answer.contains("Paris"), "{answer}");
    let s = p.state();
    assert_eq!(s.messages().len(), 2);
    assert!(
        s.messages()[1].username.contains("SmolLM2"),
        "{}",
        s.messages()[1].username
    );
}

#[test]
fn chat_repl_runs_turns_and_commands_from_a_pipe() {
    let response: &'static [u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"Noted.\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let p = Project::new();
    p.ok(&["init"]);
    p.ok(&[
        "truth",
        "add",
        "Kiln",
        "--content",
        "The kiln fires to cone 10",
        "--certainty",
        "0.9",
    ]);
    let port = canned_server(response);
    let cfg = config(&p, "openai", port);
    let out = common::feed(
        p.cmd(&["chat", "--provider", "test", "--username", "alec"])
            .env("WO_CONFIG", &cfg)
            .env("XDG_DATA_HOME", p.path().join("data")),
        b"what about the kiln?\n/sources\n/context\nsecond \\\nline\n/branch nope\n/exit\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    common::assert_success(&out);
    assert!(stdout.matches("Noted.").count() >= 2, "{stdout}");
    assert!(
        stdout.contains("memory: Kiln"),
        "/sources names the memory entry: {stdout}"
    );
    assert!(
        stdout.contains("── context sent"),
        "/context prints the prompt: {stdout}"
    );
    assert!(
        stdout.contains("no entry has an id starting with"),
        "{stdout}"
    );
    let s = p.state();
    assert_eq!(s.messages().len(), 4);
    // The multi-line entry arrived as one message, and the second turn
    // follows the first answer on the same branch.
    assert_eq!(s.messages()[2].content, "<p>second <br/>line</p>");
    assert_eq!(
        s.messages()[2].parent.as_deref(),
        Some(s.messages()[1].id.as_str())
    );
}

const CANNED_ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"Noted.\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

/// Without the embedding model (`Project` points `WO_EMBEDDING_MODEL` at a
/// file that does not exist), a `wo chat` session recalls by words and
/// says so once, however many turns it runs.
#[test]
fn chat_without_the_embedding_model_says_so_once() {
    let p = Project::new();
    common::pottery_transcript(&p);
    let cfg = config(&p, "openai", canned_server(CANNED_ANSWER));
    let out = common::feed(
        p.cmd(&["chat", "--provider", "test"])
            .env("WO_CONFIG", &cfg)
            .env("XDG_DATA_HOME", p.path().join("data")),
        b"When is the ceramics course?\nand the weather?\n/exit\n",
    );
    common::assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let notes = stderr
        .lines()
        .filter(|l| l.contains("recall uses words only (BM25)"))
        .count();
    assert_eq!(notes, 1, "one note for the whole session: {stderr}");
    assert_eq!(p.state().messages().len(), 84, "{stderr}");
    assert!(!p.path().join(".llm.json.embed").exists());
}

/// Without the embedding model, `wo ask` says that recall is by words
/// alone the first time on this machine, not on every question; asked to
/// show what is sent (`--show-context`), it says so every time.
#[test]
fn ask_without_the_embedding_model_says_so_once_per_machine() {
    let p = Project::new();
    common::pottery_transcript(&p);
    let cfg = config(&p, "openai", canned_server(CANNED_ANSWER));
    let notes = |r: &common::Run| {
        r.stderr
            .lines()
            .filter(|l| l.contains("recall uses words only (BM25)"))
            .count()
    };
    for (i, extra) in [&[][..], &[], &["--show-context"], &["--show-context"], &[]]
        .into_iter()
        .enumerate()
    {
        let r = ask_about(&p, &cfg, extra, "When is the ceramics course?");
        assert_eq!(r.code, 0, "{}", r.stderr);
        let expected = match i {
            0 | 2 | 3 => 1,
            _ => 0,
        };
        assert_eq!(notes(&r), expected, "run {i} {extra:?}: {}", r.stderr);
    }
}

/// A project holding the pottery transcript, embedded by `wo context embed`
/// with the real model: the project, the model and the sidecar's path.
fn embedded_pottery() -> (Project, std::path::PathBuf, std::path::PathBuf) {
    let p = Project::new();
    common::pottery_transcript(&p);
    let model = wo_testkit::embedding_model_path();
    let embed = common::to_run(
        p.cmd(&["context", "embed"])
            .env("WO_EMBEDDING_MODEL", &model)
            .output()
            .unwrap(),
    );
    assert_eq!(embed.code, 0, "{}", embed.stderr);
    let sidecar = p.path().join(".llm.json.embed");
    (p, model, sidecar)
}

/// Heavy (the embedding model, `scripts/install-model.sh`): `wo chat`
/// recalls by meaning as `wo ask` and `wo serve` do — a question worded
/// unlike its answer has that message sent — and the session's own
/// messages are embedded into the sidecar by the time it ends.
#[test]
fn chat_recalls_by_meaning_with_the_embedding_model() {
    use wo_testkit::{Need, heavy};
    if !heavy(&[Need::EmbeddingModel]) {
        return;
    }
    let (p, model, sidecar) = embedded_pottery();
    let vectors = || {
        let b = std::fs::read(&sidecar).unwrap();
        let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        word(8 + 4 + word(8) + 4)
    };
    assert_eq!(vectors(), 80);
    let cfg = config(&p, "openai", canned_server(CANNED_ANSWER));
    let chat = |model: &std::path::Path| {
        let out = common::feed(
            // A new conversation: the transcript is not the recent window,
            // so the message reaches the prompt only if recall finds it.
            p.cmd(&["chat", "--new", "--provider", "test"])
                .env("WO_CONFIG", &cfg)
                .env("WO_EMBEDDING_MODEL", model)
                .env("XDG_DATA_HOME", p.path().join("data")),
            b"When is the ceramics course?\n/context\n/exit\n",
        );
        common::assert_success(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let by_meaning = chat(model.as_path());
    assert!(
        by_meaning.contains("pottery classes"),
        "the message found by meaning is sent: {by_meaning}"
    );
    // The turn's question and answer were embedded before the session
    // ended.
    assert_eq!(vectors(), 82);
    // By words alone the same question does not find it.
    let by_words = chat(p.path().join("no-such-model.gguf").as_path());
    assert!(!by_words.contains("pottery classes"), "{by_words}");
}

/// Heavy (the embedding model): `wo ask` recalls by meaning — the question
/// embedded beside the state's load — and at its end appends the turn's two
/// vectors to the sidecar as one block, the vectors already there left as
/// they were.
#[test]
fn ask_recalls_by_meaning_and_appends_the_turns_vectors() {
    use wo_testkit::{Need, heavy};
    if !heavy(&[Need::EmbeddingModel]) {
        return;
    }
    let (p, model, sidecar) = embedded_pottery();
    let before = std::fs::read(&sidecar).unwrap();
    let cfg = config(&p, "openai", canned_server(CANNED_ANSWER));
    let out = common::to_run(
        p.cmd(&[
            "ask",
            "--new",
            "--provider",
            "test",
            "--show-context",
            "When is the ceramics course?",
        ])
        .env("WO_CONFIG", &cfg)
        .env("WO_EMBEDDING_MODEL", &model)
        .env("XDG_DATA_HOME", p.path().join("data"))
        .output()
        .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("pottery classes"),
        "the message found by meaning is sent: {}",
        out.stderr
    );
    let after = std::fs::read(&sidecar).unwrap();
    assert_eq!(after[..before.len()], before[..], "what was there is kept");
    assert_eq!(
        after.len(),
        before.len() + 8 + 2 * (12 + 384),
        "one block of two"
    );
}

#[test]
fn url_fetch_refuses_private_targets_and_says_so() {
    let response: &'static [u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n";
    let p = Project::new();
    p.ok(&["init"]);
    // A page on loopback that must never be fetched, and a private address.
    let page_port = canned_server(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 6\r\n\r\nsecret",
    );
    let html = format!(
        "<p>Kiln docs: <a href=\"http://127.0.0.1:{page_port}/kiln\">local</a> and <a href=\"http://10.0.0.1/admin\">lan</a></p>"
    );
    let r = p.run_stdin(
        &[
            "truth",
            "add",
            "Kiln links",
            "--format",
            "html",
            "--certainty",
            "0.9",
        ],
        &html,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let port = canned_server(response);
    let cfg = config(&p, "openai", port);
    let r = ask_about(
        &p,
        &cfg,
        &["--url-fetch", "--show-context"],
        "where are the kiln docs",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stderr.contains("secret"),
        "a loopback page reached the prompt: {}",
        r.stderr
    );
    let refused: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("not fetched"))
        .collect();
    assert_eq!(refused.len(), 2, "{}", r.stderr);
    assert!(
        refused.iter().any(|l| l.contains("127.0.0.1"))
            && refused.iter().any(|l| l.contains("10.0.0.1"))
    );
}

#[test]
fn ctrl_c_before_any_answer_keeps_the_question_marked_incomplete() {
    // A server that accepts and then never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let p = Project::new();
    p.ok(&["init"]);
    let before = std::fs::read(p.state_path()).unwrap();
    let cfg = config(&p, "openai", port);
    let child = p
        .cmd(&["ask", "--provider", "test", "hello"])
        .env("WO_CONFIG", &cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr
            .contains("interrupted; the question was saved, before any answer, marked incomplete"),
        "{stderr}"
    );
    // The question is never lost: it is kept with an empty
    // answer marked stopped.
    assert_ne!(std::fs::read(p.state_path()).unwrap(), before);
    let state = wo_format::parse(&std::fs::read(p.state_path()).unwrap()).unwrap();
    let msgs = state.messages();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0].content, "<p>hello</p>");
    assert_eq!(msgs[1].content, "");
    assert_eq!(msgs[1].parent.as_deref(), Some(msgs[0].id.as_str()));
    let mark = msgs[1].usage.as_ref().unwrap().extra["truncated"].to_value();
    assert_eq!(mark, serde_json::json!({"reason": "stopped"}));
}

#[test]
fn persist_writes_flags_into_the_config_and_only_then() {
    let response: &'static [u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n";
    let p = Project::new();
    p.ok(&["init"]);
    let port = canned_server(response);
    let cfg = config(&p, "openai", port);
    let original = std::fs::read_to_string(&cfg).unwrap();
    let r = ask(&p, &cfg, &["--temperature", "0.4", "--max-tokens", "64"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        original,
        "flags alone change nothing stored"
    );
    let r = ask(
        &p,
        &cfg,
        &["--temperature", "0.4", "--max-tokens", "64", "--persist"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.starts_with(&original),
        "the file's own lines are kept:\n{text}"
    );
    assert!(
        text.contains("[defaults]")
            && text.contains("temperature = 0.4\n")
            && text.contains("max_tokens = 64")
            && text.contains("provider = \"test\""),
        "{text}"
    );
    assert!(
        !p.state().extra.contains_key("defaults"),
        "nothing of the sort goes into llm.json"
    );
}

/// A loopback OpenAI-compatible server that never finishes its answer:
/// `delta` every `pause` until the client hangs up.
fn endless_server(delta: &'static str, pause: std::time::Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                if !common::drain_request(&stream) {
                    return;
                }
                let frame = format!(
                    "data: {}\n\n",
                    serde_json::json!({"choices": [{"delta": {"content": delta}}]})
                );
                if stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
                    .is_err()
                {
                    return;
                }
                while stream.write_all(frame.as_bytes()).is_ok() {
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                }
            });
        }
    });
    port
}

/// Runs `wo ask` and waits for it to end by itself (killing it after
/// `patience` so a regression fails instead of hanging the suite).
fn ask_bounded(
    p: &Project,
    cfg: &std::path::Path,
    patience: std::time::Duration,
) -> Option<common::Run> {
    let mut child = p
        .cmd(&[
            "ask",
            "--provider",
            "test",
            "--username",
            "alec",
            "tell me everything",
        ])
        .env("WO_CONFIG", cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drain the pipes while waiting, or a large answer blocks the child.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > patience {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stdout = o.join().unwrap();
    let stderr = e.join().unwrap();
    status.map(|s| common::Run {
        code: s.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

#[test]
fn endless_answers_are_capped_kept_and_marked() {
    let mut held = 0;
    let mut report = Vec::new();
    // (cap in config.toml, what the server sends, expected reason)
    let cases: [(&str, &'static str, std::time::Duration, &str); 2] = [
        (
            "[defaults]\nmax_answer_bytes = 20000\n",
            "0123456789abcdef ",
            std::time::Duration::ZERO,
            "size",
        ),
        (
            "max_answer_secs = 2\n",
            "tick ",
            std::time::Duration::from_millis(20),
            "time",
        ),
    ];
    for (cap, delta, pause, reason) in cases {
        let p = Project::new();
        p.ok(&["init"]);
        let port = endless_server(delta, pause);
        let path = p.path().join("config.toml");
        let provider = format!(
            "[providers.test]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m\"\ntimeout_secs = 5\n"
        );
        // A [defaults] cap goes before the providers; a per-provider cap
        // goes inside its entry.
        let text = if cap.starts_with("[defaults]") {
            format!("{cap}\n{provider}")
        } else {
            format!("{provider}{cap}")
        };
        std::fs::write(&path, text).unwrap();
        let Some(r) = ask_bounded(&p, &path, std::time::Duration::from_secs(120)) else {
            report.push(format!("{reason}: wo ask never finished"));
            continue;
        };
        let s = p.state();
        let answer = s.messages().iter().find(|m| m.username == "m");
        let mark = answer
            .and_then(|m| m.usage.as_ref())
            .and_then(|u| u.extra.get("truncated"))
            .map(|raw| raw.to_value());
        let ok = r.code == 0
            && r.stderr.contains("answer was cut off")
            && mark.as_ref().and_then(|m| m["reason"].as_str()) == Some(reason)
            && answer.is_some_and(|m| m.content.contains(delta.trim()))
            && (reason != "size" || r.stdout.len() <= 20_001);
        if ok {
            held += 1;
        } else {
            report.push(format!(
                "{reason}: exit {}, mark {mark:?}, {} bytes out, stderr {}",
                r.code,
                r.stdout.len(),
                r.stderr
            ));
        }
    }
    println!("item 4: {held}/2 held");
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// The engine's one request builder checks a turn's inputs, and
/// the CLI names the field at fault by its flag; nothing is sent or saved.
#[test]
fn bad_turn_inputs_are_named_by_their_flag() {
    let p = Project::new();
    p.ok(&["init"]);
    let before = std::fs::read(p.state_path()).unwrap();
    // Nobody listens: a request that got this far would fail differently.
    let port = common::dead_port();
    let cfg = config(&p, "openai", port);
    for (extra, flag) in [
        (&["--temperature", "3"][..], "--temperature: "),
        (&["--max-tokens", "0"][..], "--max-tokens: "),
        (&["--parent", "m_nope"][..], "--parent: "),
    ] {
        let r = ask(&p, &cfg, extra);
        assert_eq!(r.code, 1, "{extra:?}: {}", r.stderr);
        assert!(r.stderr.contains(flag), "{extra:?}: {}", r.stderr);
        assert!(!r.stderr.contains("cannot reach"), "{}", r.stderr);
        assert_eq!(std::fs::read(p.state_path()).unwrap(), before);
    }
}

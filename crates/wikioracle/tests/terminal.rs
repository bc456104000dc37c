//! Hostile bytes in stored content, titles, usernames, truth,
//! context, file names, index chunks, parse errors and model answers must
//! never reach the terminal raw. Every human-readable output of the real
//! binary is checked for raw ESC, other C0 controls (but newline and tab),
//! DEL and C1 controls (U+0080–U+009F); `--json` output must stay valid JSON
//! that still carries the exact data.

// Tests report with println!; clippy.toml forbids it only for the binary's
// own output, which must go through render::term.
#![allow(clippy::disallowed_macros)]

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use common::Project;
use wo_format::{Message, State, Timestamp, TruthEntry};

/// Every trick at once: OSC 52 (clipboard write), CSI (clear screen,
/// colours), OSC 8 (a link), DCS, bell, carriage return, backspace, DEL,
/// and the C1 forms CSI (U+009B), DCS (U+0090), ST (U+009C), NEL (U+0085).
const EVIL: &str = "\u{1b}]52;c;aGFja2Vk\u{7}\u{1b}[2J\u{1b}[31mRED\u{1b}]8;;http://evil.example\u{1b}\\link\u{1b}]8;;\u{1b}\\\u{1b}P+q\u{1b}\\\rBS\u{8}\u{7f}\u{9b}31m\u{90}dcs\u{9c}\u{85}";

/// A short form for places with little room (file names: no `/`).
const EVIL_NAME: &str = "n\u{1b}[31m\u{1b}]52;c;eA==\u{7}\u{9b}2J";

/// Whether raw terminal controls are in `bytes`.
fn raw_controls(bytes: &[u8]) -> Option<String> {
    for (i, w) in bytes.windows(2).enumerate() {
        if w[0] == 0xc2 && (0x80..=0x9f).contains(&w[1]) {
            return Some(format!("C1 U+00{:02X} at byte {i}", w[1]));
        }
    }
    bytes
        .iter()
        .position(|&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
        .map(|i| format!("control 0x{:02x} at byte {i}", bytes[i]))
}

struct Out {
    name: &'static str,
    bytes: Vec<u8>,
}

/// A loopback OpenAI-compatible server whose every answer is `answer`,
/// split into deltas that cut escape sequences in half.
fn hostile_model() -> u16 {
    common::loopback_server(|mut stream| {
        let answer = format!("Answer {EVIL} end");
        let chars: Vec<char> = answer.chars().collect();
        let mut out = String::from("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n");
        for piece in chars.chunks(3) {
            let piece: String = piece.iter().collect();
            let frame = serde_json::json!({"choices": [{"delta": {"content": piece}}]});
            out.push_str(&format!("data: {frame}\n\n"));
        }
        out.push_str(
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        );
        let _ = stream.write_all(out.as_bytes());
    })
}

/// A loopback server that refuses every request with `EVIL` in its error.
fn hostile_error_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 65536];
            let _ = stream.read(&mut buf);
            let body =
                serde_json::json!({"error": {"message": format!("bad model {EVIL}")}}).to_string();
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    port
}

fn config(p: &Project, name: &str, port: u16) -> std::path::PathBuf {
    let path = p.path().join(name);
    std::fs::write(
        &path,
        format!("[providers.test]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"m{}\"\ntimeout_secs = 5\n", toml_escape(EVIL_NAME)),
    )
    .unwrap();
    path
}

/// `text` inside a TOML basic string: controls as `\uXXXX`.
fn toml_escape(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || c == '"' || c == '\\' {
                format!("\\u{:04X}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn hostile_state() -> State {
    let t0 = 1_800_000_000;
    let mut s = State::new(Timestamp::from_unix(t0));
    s.context = format!("<div><p>Context {}</p></div>", xml_text(EVIL));
    let first = Message::new(
        format!("mallory{EVIL}"),
        Timestamp::from_unix(t0 + 1),
        format!("Title {EVIL}"),
        format!("<p>Body {}</p>", xml_text(EVIL)),
    );
    s.push_message(first);
    s.add_truth(TruthEntry::new(
        format!("Kiln {EVIL}"),
        Timestamp::from_unix(t0 + 2),
        0.9,
        format!("<p>The kiln fires to cone 10 {}</p>", xml_text(EVIL)),
    ));
    s
}

/// `text` as XML character data (the controls stay: they are the attack).
fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;")
}

fn run(
    p: &Project,
    name: &'static str,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &Path)],
) -> [Out; 2] {
    let mut cmd = p.cmd(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = common::feed(
        cmd.env("XDG_DATA_HOME", p.path().join("data")),
        stdin.as_bytes(),
    );
    [
        Out {
            name,
            bytes: o.stdout,
        },
        Out {
            name,
            bytes: o.stderr,
        },
    ]
}

#[test]
fn no_raw_control_reaches_the_terminal() {
    let p = Project::new();
    std::fs::write(
        p.state_path(),
        wo_format::to_canonical_vec(&hostile_state()),
    )
    .unwrap();
    let port = hostile_model();
    let cfg = config(&p, "config.toml", port);
    let bad_cfg = config(&p, "bad.toml", hostile_error_server());
    let env = [("WO_CONFIG", cfg.as_path())];
    let bad_env = [("WO_CONFIG", bad_cfg.as_path())];

    // Files with hostile names and contents.
    let evil_file = format!("llm_{EVIL_NAME}.json");
    std::fs::write(
        p.path().join(&evil_file),
        wo_format::to_canonical_vec(&hostile_state()),
    )
    .unwrap();
    let invalid = format!("broken{EVIL_NAME}.json");
    std::fs::write(
        p.path().join(&invalid),
        serde_json::json!({"version": EVIL, "messages": [{"id": EVIL}]}).to_string(),
    )
    .unwrap();
    let docs = p.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(
        docs.join(format!("{EVIL_NAME}.md")),
        format!("# Heading {EVIL}\n\nGlaze recipes {EVIL} with cobalt.\n"),
    )
    .unwrap();
    let r = p.run(&["index", "docs"]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    let mut outs: Vec<[Out; 2]> = Vec::new();
    let ask = |name, extra: &[&str], env: &[(&str, &Path)]| {
        let mut args = vec!["ask", "--provider", "test", "--username", "u"];
        args.extend_from_slice(extra);
        args.push("kiln question");
        run(&p, name, &args, "", env)
    };
    outs.push(ask("ask (streamed answer)", &[], &env));
    outs.push(ask("ask --no-stream", &["--no-stream"], &env));
    outs.push(ask("ask --show-context", &["--show-context"], &env));
    outs.push(ask("ask (upstream error)", &[], &bad_env));
    let ids: Vec<String> = p.state().messages().iter().map(|m| m.id.clone()).collect();
    outs.push(run(
        &p,
        "chat (answer)",
        &["chat", "--provider", "test"],
        "tell me\n/exit\n",
        &env,
    ));
    outs.push(run(
        &p,
        "chat /sources",
        &["chat", "--provider", "test"],
        "kiln\n/sources\n/exit\n",
        &env,
    ));
    outs.push(run(
        &p,
        "chat /context",
        &["chat", "--provider", "test"],
        "kiln\n/context\n/exit\n",
        &env,
    ));
    let branch = format!("/branch {}\n/exit\n", &ids[0][..8]);
    outs.push(run(
        &p,
        "chat /branch",
        &["chat", "--provider", "test"],
        &branch,
        &env,
    ));
    outs.push(run(&p, "log", &["log"], "", &[]));
    outs.push(run(
        &p,
        "log (bad --since)",
        &["log", "--since", EVIL],
        "",
        &[],
    ));
    outs.push(run(&p, "truth list", &["truth", "list"], "", &[]));
    outs.push(run(&p, "context show", &["context", "show"], "", &[]));
    outs.push(run(
        &p,
        "context show --text",
        &["context", "show", "--text"],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "validate (invalid file)",
        &["validate", &invalid],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "validate (hostile state)",
        &["validate", "llm.json", &evil_file],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "validate (missing file)",
        &["validate", &format!("missing{EVIL_NAME}")],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "merge (names)",
        &["merge", "--dry-run", &evil_file],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "merge (skipped)",
        &["merge", "--dry-run", &invalid],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "search",
        &["search", "glaze", "--dir", "docs"],
        "",
        &[],
    ));
    let get = {
        let r = p.run(&["search", "glaze", "--dir", "docs", "--json"]);
        let hits: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        hits[0]["ref"]
            .as_str()
            .or(hits[0]["chunk_ref"].as_str())
            .unwrap()
            .to_owned()
    };
    outs.push(run(
        &p,
        "search --get",
        &["search", "--dir", "docs", "--get", &get],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "search --outline",
        &["search", "--dir", "docs", "--outline"],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "error naming a file",
        &["--state", &format!("none{EVIL_NAME}.json"), "log"],
        "",
        &[],
    ));
    outs.push(run(
        &p,
        "usage error",
        &["log", &format!("--bogus{EVIL_NAME}")],
        "",
        &[],
    ));

    let mut held = 0;
    let mut failures = Vec::new();
    let total = outs.len();
    for [stdout, stderr] in &outs {
        let bad: Vec<String> = [("stdout", stdout), ("stderr", stderr)]
            .iter()
            .filter_map(|(which, o)| raw_controls(&o.bytes).map(|why| format!("{which}: {why}")))
            .collect();
        if bad.is_empty() {
            held += 1;
        } else {
            failures.push(format!(
                "{}: {}\n{}",
                stdout.name,
                bad.join("; "),
                String::from_utf8_lossy(&stdout.bytes).escape_debug()
            ));
        }
    }
    println!("item 5: {held}/{total} held");
    // Most outputs showed the hostile data, made visible (the rest quote
    // it only in part, e.g. a file name the OS refused or a parse error).
    let visible: Vec<&str> = outs
        .iter()
        .filter(|[o, e]| {
            let both = [&o.bytes[..], &e.bytes[..]].concat();
            String::from_utf8_lossy(&both).contains("\\u{1b}")
        })
        .map(|[o, _]| o.name)
        .collect();
    println!("outputs showing escapes made visible: {visible:?}");
    assert!(visible.len() >= 20, "{visible:?}");
    // The outputs said something: the hostile data was shown, made visible.
    let shown = |i: usize| String::from_utf8_lossy(&outs[i][0].bytes).into_owned();
    assert!(
        shown(0).contains("Answer ") && shown(0).contains("\\u{1b}]52"),
        "{}",
        shown(0)
    );
    assert!(shown(8).contains("mallory\\u{1b}"), "{}", shown(8));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(total, 23);
}

#[test]
fn json_output_is_valid_and_exact() {
    let p = Project::new();
    std::fs::write(
        p.state_path(),
        wo_format::to_canonical_vec(&hostile_state()),
    )
    .unwrap();
    let docs = p.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("a.md"), format!("# H\n\nGlaze {EVIL} cobalt\n")).unwrap();
    p.ok(&["index", "docs"]);
    let mut checked = 0;
    for args in [
        vec!["log", "--json"],
        vec!["truth", "list", "--json"],
        vec!["search", "glaze", "--dir", "docs", "--json"],
        vec!["validate", "--json", "llm.json"],
    ] {
        let o = p.cmd(&args).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(raw_controls(&o.stdout), None, "{args:?}");
        let text = String::from_utf8(o.stdout).unwrap();
        let mut found = false;
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {line}"));
            // The data is exact: the hostile text comes back byte for byte.
            found |= contains_str(&v, EVIL);
        }
        // The index's snippets drop control characters themselves.
        let search = args[0] == "search" && text.contains("RED");
        assert!(found || search || args[0] == "validate", "{args:?}: {text}");
        checked += 1;
    }
    assert_eq!(checked, 4);
}

fn contains_str(v: &serde_json::Value, needle: &str) -> bool {
    match v {
        serde_json::Value::String(s) => s.contains(needle),
        serde_json::Value::Array(a) => a.iter().any(|x| contains_str(x, needle)),
        serde_json::Value::Object(o) => o.values().any(|x| contains_str(x, needle)),
        _ => false,
    }
}

//! `wo serve`'s OpenAI-compatible endpoint driven by the official `openai`
//! Python SDK (`tests/openai/client.py`) in front of the real llama.cpp
//! server (llama-cpp-python with SmolLM2): the model list, an answer
//! streamed and not, the memory reaching the model (a truth entry's
//! distinctive word is in the bytes the upstream received, and the answer's
//! `sources` name the entry), both exchanges in `llm.json`, and a wrong
//! token, an unknown model and a bad field refused in OpenAI's shape.
//! Also `wo ask` against that server left at its default window.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::{Project, Serving, state_with_messages};
use serde_json::Value;
use wo_testkit::{LlamaServer, Need, heavy, python};

/// A loopback TCP proxy to `upstream` that records every byte clients
/// send: what the model was actually given.
fn recording_proxy(upstream: u16) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                continue;
            };
            let (mut c_read, mut s_write) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut s_read, mut c_write) = (server, client);
            let record = record.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = c_read.read(&mut buf) {
                    if n == 0 || s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    record.lock().unwrap().extend_from_slice(&buf[..n]);
                }
                let _ = s_write.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_read, &mut c_write);
                let _ = c_write.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (port, seen)
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openai/client.py")
}

#[test]
fn the_openai_sdk_gets_answers_with_memory_and_they_are_recorded() {
    if !heavy(&[Need::LlamaServer, Need::PythonOpenai]) {
        return;
    }
    let llama = LlamaServer::start();
    let (proxy, seen) = recording_proxy(llama.port);

    let p = Project::new();
    p.ok(&["init", "."]);
    let fact = p.ok(&[
        "truth",
        "add",
        "The office cat",
        "--content",
        "The office cat is named Quillibrix and sleeps on the printer",
        "--certainty",
        "0.95",
        "--kind",
        "fact",
    ]);
    let fact = fact.trim().strip_prefix("added ").unwrap().to_owned();
    let cfg = p.write_config(&format!(
            "[defaults]\nprovider = \"llama\"\n\n[providers.llama]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{proxy}/v1\"\nmodel = \"{}\"\ncontext_window = 2048\ntimeout_secs = 120\n",
            wo_testkit::MODEL_ALIAS
        ));
    let server = Serving::start(&p, &cfg, &[]);

    let question = "What is the name of the office cat?";
    let out = Command::new(python())
        .arg(client_script())
        .arg(format!("{}/v1", server.base()))
        .arg(&server.token)
        .arg("llama")
        .arg(question)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        llama.log_tail()
    );
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    // The default provider first (the built-in `local` follows when its
    // model is installed).
    assert_eq!(v["models"][0], "llama", "{}", v["models"]);

    let plain = &v["plain"];
    assert_eq!(plain["object"], "chat.completion");
    assert_eq!(plain["role"], "assistant");
    assert_eq!(plain["model"], "llama/smollm2");
    assert!(plain["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert!(
        !plain["content"].as_str().unwrap().trim().is_empty(),
        "{plain}"
    );
    assert!(["stop", "length"].contains(&plain["finish_reason"].as_str().unwrap()));

    // The answer streamed: a role chunk, several content chunks, a finish.
    let chunks = v["stream"].as_array().unwrap();
    let with_content: Vec<&Value> = chunks
        .iter()
        .filter(|c| c["content"].as_str().is_some_and(|t| !t.is_empty()))
        .collect();
    assert!(with_content.len() >= 3, "too few chunks: {chunks:?}");
    assert_eq!(chunks[0]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert!(chunks.iter().all(|c| c["id"] == chunks[0]["id"]));
    assert!(
        chunks
            .iter()
            .any(|c| ["stop", "length"].contains(&c["finish_reason"].as_str().unwrap_or(""))),
        "{chunks:?}"
    );
    let streamed: String = with_content
        .iter()
        .map(|c| c["content"].as_str().unwrap())
        .collect();

    // Refusals, in OpenAI's shape.
    for (case, status, code) in [
        ("wrong_token", 401, "invalid_api_key"),
        ("wrong_token_chat", 401, "invalid_api_key"),
        ("unknown_model", 404, "model_not_found"),
        ("bad_temperature", 400, "bad_request"),
    ] {
        let r = &v[case];
        assert_eq!(r["refused"], true, "{case}: {r}");
        assert_eq!(r["status"], status, "{case}: {r}");
        // The SDK hands over the `error` object itself.
        let e = if r["body"]["error"].is_object() {
            &r["body"]["error"]
        } else {
            &r["body"]
        };
        assert_eq!(e["code"], code, "{case}: {r}");
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{case}: {r}"
        );
    }
    assert_eq!(v["bad_temperature"]["body"]["param"], "temperature");

    // The memory reached the model: the fact's distinctive word is in what
    // llama.cpp received, once per answered request.
    let sent = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    // The memory step's interpreter calls the same upstream after each
    // answer, asking for structured output: those are not answers.
    let requests: Vec<&str> = sent
        .split("POST ")
        .filter(|r| r.starts_with("/v1/chat/completions") && !r.contains("\"response_format\""))
        .collect();
    assert_eq!(requests.len(), 2, "one upstream request per answer");
    for r in &requests {
        assert!(
            r.contains("Quillibrix"),
            "the truth entry went to the model with each question: {r}"
        );
    }
    assert!(
        sent.contains("You answer in one short sentence."),
        "the client's system message"
    );
    assert!(
        sent.contains("Hello! How can I help?"),
        "the client's earlier turn"
    );

    // Both exchanges are in llm.json, the answers citing the fact.
    let s = p.state();
    let msgs = s.messages();
    assert_eq!(msgs.len(), 4, "two exchanges");
    let text = |i: usize| wo_format::xhtml::to_plain_text(&msgs[i].content);
    assert_eq!(text(0), question);
    assert_eq!(text(2), format!("{question} Say it again."));
    for answer in [&msgs[1], &msgs[3]] {
        assert!(
            answer.sources.as_ref().is_some_and(|s| s.contains(&fact)),
            "sources of {}: {:?}",
            answer.id,
            answer.sources
        );
    }
    assert_eq!(msgs[3].parent.as_deref(), Some(msgs[2].id.as_str()));
    // The streamed request's history ("Hello!" …) is not in the file: it is
    // a thread of its own, never a reply to the file's newest answer.
    assert_eq!(msgs[2].parent, None);
    assert!(msgs[2].starts_conversation());
    assert!(
        wo_format::xhtml::to_plain_text(&msgs[3].content)
            .contains(streamed.split_whitespace().next().unwrap()),
        "the streamed answer is the one recorded"
    );
}

#[test]
fn a_server_left_at_its_default_window_gets_prompts_fitted_to_it() {
    // llama-cpp-python at its default 2,048-token window, configured with
    // no `context_window`: wo assumes 128,000, so a long conversation's
    // prompt is refused (a streamed request gets a 200 with no body).
    if !heavy(&[Need::LlamaServer]) {
        return;
    }
    let llama = LlamaServer::start();
    let p = Project::new();
    let body =
        "The kiln cooled slowly overnight and the glaze crawled on the north shelf. ".repeat(20);
    p.write_state("llm.json", &state_with_messages("ann", 0, 12, &body));
    let cfg = p.write_config(&format!(
        "[providers.llama]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"{}\"\ntimeout_secs = 120\n",
        llama.port,
        wo_testkit::MODEL_ALIAS
    ));
    let before = p.state().messages().len();
    let r = p.run_with(
        &cfg,
        &[
            "ask",
            "-p",
            "llama",
            "--max-tokens",
            "24",
            "Why did the glaze crawl?",
        ],
    );
    assert_eq!(r.code, 0, "{}{}\n{}", r.stdout, r.stderr, llama.log_tail());
    assert!(!r.stdout.trim().is_empty(), "an answer: {}", r.stderr);
    r.says(&["2048 tokens", "context_window = 2048", "[providers.llama]"]);
    assert_eq!(
        p.state().messages().len(),
        before + 2,
        "the exchange is kept"
    );

    // A question longer than the window itself: said plainly, with the
    // window, never "try again"; nothing is kept.
    let long = "Why does glaze crawl on a bisque that was handled with oily hands? ".repeat(180);
    let r = p.run_with(&cfg, &["ask", "-p", "llama", &long]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    r.says(&["context window 2048"]);
    assert!(!r.stderr.contains("try again"), "{}", r.stderr);
    assert_eq!(p.state().messages().len(), before + 2);
}

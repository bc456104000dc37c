//! End to end: the `openai` provider against a real OpenAI-compatible
//! server — llama-cpp-python serving SmolLM2 on loopback, started here.
//!
//! Needs the model (`scripts/install-model.sh`) and the server
//! (`CMAKE_ARGS="-DGGML_NATIVE=OFF" python3 -m pip install "llama-cpp-python[server]"`).
//! Without them a plain `cargo test` reports the test as skipped, with the
//! reason; `bash .ci/run` installs both and requires it to run.

mod common;

use std::time::Instant;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use wo_providers::openai::OpenAiProvider;
use wo_providers::{ChatMessage, ChatRequest, ErrorKind, Provider, RemoteConfig, StreamEvent};

fn start_server() -> (wo_testkit::LlamaServer, String) {
    let server = wo_testkit::LlamaServer::start();
    let base = server.base_url.clone();
    (server, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_provider_against_real_llama_cpp_server() {
    if !wo_testkit::heavy(&[wo_testkit::Need::LlamaServer]) {
        return;
    }
    let (server, base) = start_server();
    let p = OpenAiProvider::new(RemoteConfig::new("llamacpp", base, "smollm2", 2048)).unwrap();
    assert!(p.check().await.is_reachable());

    // 1. A real streamed answer.
    let req = common::capital_question();
    let started = Instant::now();
    let mut s = p.stream(req, CancellationToken::new()).await.unwrap();
    let mut text = String::new();
    let mut deltas = 0;
    let mut done = None;
    while let Some(ev) = s.next().await {
        match ev.unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail())) {
            StreamEvent::Delta(t) => {
                deltas += 1;
                text.push_str(&t);
            }
            d @ StreamEvent::Done { .. } => done = Some(d),
        }
    }
    eprintln!(
        "llama-cpp-python answered in {:?} with {deltas} deltas: {text:?}",
        started.elapsed()
    );
    assert!(deltas >= 2, "streamed in pieces, got {deltas}");
    assert!(!text.trim().is_empty());
    assert!(text.to_lowercase().contains("paris"), "{text:?}");
    let Some(StreamEvent::Done { finish_reason, .. }) = done else {
        panic!("no Done")
    };
    assert_eq!(finish_reason.as_deref(), Some("stop"));

    // 2. max_tokens is respected and reported as `length`.
    let req = ChatRequest::new(vec![ChatMessage::user(
        "Write a long story about a dragon.",
    )])
    .with_max_tokens(5)
    .with_temperature(0.0);
    let events = common::all_events(&p, req).await;
    let last = events.last().unwrap().as_ref().unwrap();
    assert!(
        matches!(last, StreamEvent::Done { finish_reason: Some(r), .. } if r == "length"),
        "{last:?}"
    );
    assert!(events.len() <= 6 + 1, "{events:?}");

    // 3. Cancellation in the middle of a real generation.
    let req =
        ChatRequest::new(vec![ChatMessage::user("Count from 1 to 300.")]).with_max_tokens(400);
    let cancel = CancellationToken::new();
    let mut s = p.stream(req, cancel.clone()).await.unwrap();
    assert!(matches!(s.next().await, Some(Ok(StreamEvent::Delta(_)))));
    cancel.cancel();
    let e = s.next().await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    drop(s);

    // 4. The server still answers afterwards.
    let req = ChatRequest::new(vec![ChatMessage::user("Say hi.")]).with_max_tokens(8);
    let events = common::all_events(&p, req).await;
    assert!(matches!(events.last(), Some(Ok(StreamEvent::Done { .. }))));
    drop(server);
}

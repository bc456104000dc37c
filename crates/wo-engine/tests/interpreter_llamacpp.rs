//! The memory interpreter's structured output against a real
//! llama-cpp-python server (SmolLM2 on loopback, started here): the server
//! turns the operations schema into a grammar of its own, and a schema it
//! cannot convert crashed it — every later question to the user's server
//! then failed until they restarted it.
//!
//! Needs the model (`scripts/install-model.sh`) and the server
//! (`python3 -m pip install "llama-cpp-python[server]"`); without them a
//! plain `cargo test` reports the test as skipped, and `bash .ci/run`
//! requires it to run.

use futures::StreamExt;
use wo_engine::memory::{Exchange, interpreter_request};
use wo_format::{Message, State, Timestamp, TruthEntry, TruthKind};
use wo_providers::openai::OpenAiProvider;
use wo_providers::{
    CancellationToken, ChatMessage, ChatRequest, Provider, RemoteConfig, StreamEvent,
};

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// All of one streamed reply, or the first error.
async fn reply(p: &OpenAiProvider, req: ChatRequest) -> Result<String, String> {
    let mut stream = p
        .stream(req, CancellationToken::new())
        .await
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    while let Some(ev) = stream.next().await {
        match ev.map_err(|e| e.to_string())? {
            StreamEvent::Delta(d) => text.push_str(&d),
            StreamEvent::Done { .. } => return Ok(text),
        }
    }
    Err("the stream ended without Done".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interpreters_schema_leaves_a_llama_cpp_python_server_answering() {
    if !wo_testkit::heavy(&[wo_testkit::Need::LlamaServer]) {
        return;
    }
    let server = wo_testkit::LlamaServer::start();
    let p = OpenAiProvider::new(RemoteConfig::new(
        "llamacpp",
        server.base_url.clone(),
        "smollm2",
        2048,
    ))
    .unwrap();

    // An exchange, and an entry of every kind the schema can name.
    let mut state = State::new(ts("2026-03-01T10:00:00Z"));
    let q = Message::new(
        "alec",
        ts("2026-03-01T10:00:00Z"),
        "q",
        "<p>My kiln is a Skutt KM-818; I fire it on Saturdays.</p>",
    );
    let a = Message::new(
        "smollm2",
        ts("2026-03-01T10:00:05Z"),
        "a",
        "<p>Nice kiln.</p>",
    );
    let exchange = Exchange {
        question_id: q.id.clone(),
        answer_id: a.id.clone(),
    };
    state.push_message(q);
    state.push_message(a);
    let mut effort = TruthEntry::new(
        "Build a studio",
        ts("2026-02-01T10:00:00Z"),
        0.8,
        "<p>x</p>",
    );
    effort.kind = Some(TruthKind::Effort);
    effort.status = Some(wo_format::EffortStatus::Open);
    state.truth.trust.push(effort);
    state.truth.trust.push(TruthEntry::new(
        "Kiln",
        ts("2026-02-01T10:00:00Z"),
        0.9,
        "<p>A Skutt.</p>",
    ));

    // The request as the interpreter makes it — its schema — with a prompt
    // short enough for the test server's 2,048-token window.
    let mut req = interpreter_request(&state, &exchange, "Return memory operations.").unwrap();
    assert!(req.json_schema.is_some());
    req.messages = vec![
        ChatMessage::system("Return memory operations as one JSON object."),
        ChatMessage::user("alec: My kiln is a Skutt KM-818.\n\nsmollm2: Nice kiln."),
    ];
    req.max_tokens = Some(48);
    let first = reply(&p, req).await;
    assert!(
        first.is_ok(),
        "the structured call failed: {first:?}\n{}",
        server.log_tail()
    );
    assert!(
        first.as_deref().unwrap().trim_start().starts_with('{'),
        "the reply follows the grammar: {first:?}"
    );

    // And the server still answers the user's next question.
    let next = ChatRequest::new(vec![ChatMessage::user("Say hi.")]).with_max_tokens(8);
    let next = reply(&p, next).await;
    assert!(
        next.is_ok(),
        "the server no longer answers: {next:?}\n{}",
        server.log_tail()
    );
}

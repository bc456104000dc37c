//! Every HTTP provider against byte-faithful fake servers: the happy path
//! with each service's documented frames, and every failure path (401, 429
//! with Retry-After, 500, malformed SSE, dropped connection, timeouts,
//! cancellation) for every provider.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{End, FakeServer, Part, Reply};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use wo_providers::anthropic::AnthropicProvider;
use wo_providers::nanochat::NanoChatProvider;
use wo_providers::openai::OpenAiProvider;
use wo_providers::wikioracle::WikiOracleProvider;
use wo_providers::{
    ChatMessage, ChatRequest, ErrorKind, HttpSettings, Provider, ProviderError, RemoteConfig,
    RetryPolicy, Secret, StreamEvent, TimeoutPhase, Usage,
};
use wo_wire::{self as protocol, ServerEvent, StatelessChatRequest};

const KEY: &str = "sk-test-SECRET-0123456789abcdef";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    OpenAi,
    Anthropic,
    NanoChat,
    WikiOracle,
}

const ALL: [Kind; 4] = [
    Kind::OpenAi,
    Kind::Anthropic,
    Kind::NanoChat,
    Kind::WikiOracle,
];

fn fast() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(5),
        },
    }
}

fn provider(kind: Kind, url: &str, http: HttpSettings) -> Arc<dyn Provider> {
    let (name, base) = match kind {
        Kind::OpenAi => ("openai-test", format!("{url}/v1")),
        Kind::Anthropic => ("anthropic-test", format!("{url}/v1")),
        Kind::NanoChat => ("nanochat-test", url.to_string()),
        Kind::WikiOracle => ("wikioracle-test", url.to_string()),
    };
    let rc = RemoteConfig::new(name, base, "test-model", 4096)
        .with_key(Secret::new(KEY), "env TEST_KEY")
        .with_http(http);
    match kind {
        Kind::OpenAi => Arc::new(OpenAiProvider::new(rc).unwrap()),
        Kind::Anthropic => Arc::new(AnthropicProvider::new(rc).unwrap()),
        Kind::NanoChat => Arc::new(NanoChatProvider::new(rc).unwrap()),
        Kind::WikiOracle => Arc::new(WikiOracleProvider::new(rc).unwrap()),
    }
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("Capital of France?"),
    ])
    .with_temperature(0.2)
    .with_max_tokens(32)
}

// ---- each service's frames, exactly as its server writes them ----

/// llama.cpp / llama-cpp-python style (see MACHINE-NOTES): a role chunk,
/// content chunks, a keep-alive comment, the finish chunk, `[DONE]`.
const OPENAI_OK: &[&str] = &[
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Par\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    ": ping - 2026-01-01 00:00:00.000000\r\n\r\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"is.\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\r\n\r\n",
    "data: [DONE]\r\n\r\n",
];

/// Anthropic's documented stream for a short text answer.
const ANTHROPIC_OK: &[&str] = &[
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Par\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"is.\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
];

/// NanoChat's `chat_web.py`: `json.dumps(..., ensure_ascii=False)` with
/// Python's default separators, then `{"done": true}`.
const NANOCHAT_OK: &[&str] = &[
    "data: {\"token\": \"Par\", \"gpu\": 0}\n\n",
    "data: {\"token\": \"is.\", \"gpu\": 0}\n\n",
    "data: {\"done\": true}\n\n",
];

/// A WikiOracle stateless server.
fn wikioracle_ok() -> Vec<String> {
    let done = ServerEvent::Done(protocol::DoneEvent {
        user_message_id: "m_0000000000000001".into(),
        assistant_message_id: "m_0000000000000002".into(),
        sources: vec!["t_00000000000000aa".into()],
        state_patch: serde_json::json!({"date": "2026-01-01T00:00:00Z"}),
        finish_reason: Some("stop".into()),
        usage: Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 3,
        }),
        ..Default::default()
    });
    vec![
        "event: delta\ndata: {\"text\":\"Par\"}\n\n".into(),
        "event: delta\ndata: {\"text\":\"is.\"}\n\n".into(),
        done.to_sse_frame(),
    ]
}

fn ok_frames(kind: Kind) -> Vec<String> {
    match kind {
        Kind::OpenAi => OPENAI_OK.iter().map(|s| s.to_string()).collect(),
        Kind::Anthropic => ANTHROPIC_OK.iter().map(|s| s.to_string()).collect(),
        Kind::NanoChat => NANOCHAT_OK.iter().map(|s| s.to_string()).collect(),
        Kind::WikiOracle => wikioracle_ok(),
    }
}

/// The frames up to and including the first text delta.
fn first_delta_frames(kind: Kind) -> Vec<String> {
    let all = ok_frames(kind);
    let n = match kind {
        Kind::OpenAi => 2,
        Kind::Anthropic => 4,
        Kind::NanoChat | Kind::WikiOracle => 1,
    };
    all[..n].to_vec()
}

fn sse(frames: &[String], end: End) -> Reply {
    let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
    Reply::sse_with(&refs, end)
}

fn error_body(kind: Kind, kind_name: &str, msg: &str) -> String {
    match kind {
        Kind::Anthropic => format!(
            "{{\"type\":\"error\",\"error\":{{\"type\":\"{kind_name}\",\"message\":\"{msg}\"}}}}"
        ),
        Kind::NanoChat => format!("{{\"detail\":\"{msg}\"}}"),
        _ => format!("{{\"error\":{{\"message\":\"{msg}\",\"type\":\"{kind_name}\"}}}}"),
    }
}

/// A fake `kind` server answering "Paris." and the outcome of asking it
/// `req`.
async fn answered(kind: Kind, req: ChatRequest) -> (FakeServer, Outcome) {
    let srv = FakeServer::start(vec![sse(&ok_frames(kind), End::Clean)]).await;
    let p = provider(kind, &srv.url, fast());
    let out = run(p.as_ref(), req, CancellationToken::new())
        .await
        .unwrap();
    (srv, out)
}

/// The `Done` event a stream ends with.
fn done(finish_reason: Option<&str>, usage: Option<(u32, u32)>) -> Option<StreamEvent> {
    Some(StreamEvent::Done {
        finish_reason: finish_reason.map(str::to_owned),
        usage: usage.map(|(prompt_tokens, completion_tokens)| Usage {
            prompt_tokens,
            completion_tokens,
        }),
    })
}

#[derive(Debug)]
struct Outcome {
    text: String,
    done: Option<StreamEvent>,
    error: Option<ProviderError>,
    items_after_end: usize,
}

async fn run(
    p: &dyn Provider,
    req: ChatRequest,
    cancel: CancellationToken,
) -> Result<Outcome, ProviderError> {
    let mut s = p.stream(req, cancel).await?;
    let mut out = Outcome {
        text: String::new(),
        done: None,
        error: None,
        items_after_end: 0,
    };
    while let Some(item) = s.next().await {
        if out.done.is_some() || out.error.is_some() {
            out.items_after_end += 1;
            continue;
        }
        match item {
            Ok(StreamEvent::Delta(t)) => out.text.push_str(&t),
            Ok(done @ StreamEvent::Done { .. }) => out.done = Some(done),
            Err(e) => out.error = Some(e),
        }
    }
    Ok(out)
}

fn assert_clean_message(e: &ProviderError, name: &str) {
    let msg = e.to_string();
    assert!(msg.contains(name), "names the provider: {msg}");
    assert!(msg.contains("Hint:"), "has a hint: {msg}");
    assert!(!msg.contains(KEY), "never shows the key: {msg}");
    assert!(
        !format!("{e:?}").contains(KEY),
        "Debug never shows the key: {e:?}"
    );
}

// ---------------------------------------------------------------- happy paths

#[tokio::test]
async fn openai_streams_llamacpp_style_frames() {
    let (srv, out) = answered(Kind::OpenAi, request().with_top_k(5)).await;
    assert_eq!(out.text, "Paris.");
    assert_eq!(out.done, done(Some("stop"), Some((12, 3))));
    assert_eq!(out.items_after_end, 0);
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = r.json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 32);
    assert_eq!(body["top_k"], 5, "top_k goes to non-OpenAI servers");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["content"], "Capital of France?");
}

/// llama-cpp-python's server refuses `response_format` of type
/// `json_schema` (HTTP 500, "Input should be 'text' or 'json_object'") and
/// takes the schema as `{"type": "json_object", "schema": …}`: structured
/// output is asked that way once more, and answers. The refusal says the
/// request failed validation, so it is not retried first (each retry was
/// one more traceback in the server's log and seconds of backoff). A server
/// error about anything else is not asked in the other form.
#[tokio::test]
async fn openai_structured_output_falls_back_to_llama_cpp_pythons_json_object() {
    let refusal = r#"{"error":{"message":"1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}","type":"internal_server_error"}}"#;
    let schema = serde_json::json!({"type": "object", "properties": {"ops": {"type": "array"}}});
    let structured = || {
        let mut r = request();
        r.json_schema = Some(wo_providers::JsonSchema {
            name: "memory_ops".into(),
            schema: schema.clone(),
        });
        r
    };
    let script = vec![
        Reply::json(500, refusal),
        sse(&ok_frames(Kind::OpenAi), End::Clean),
    ];
    let srv = FakeServer::start(script).await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let out = run(p.as_ref(), structured(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text, "Paris.", "{out:?}");
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2, "the refusal is not retried");
    assert_eq!(reqs[0].json()["response_format"]["type"], "json_schema");
    let last = reqs[1].json();
    assert_eq!(last["response_format"]["type"], "json_object");
    assert_eq!(last["response_format"]["schema"], schema);
    assert_eq!(last["messages"], reqs[0].json()["messages"]);

    // Another server error: reported, not asked in the other form.
    let other = error_body(Kind::OpenAi, "server_error", "out of memory");
    let srv = FakeServer::start((0..3).map(|_| Reply::json(500, &other)).collect()).await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let e = match p.stream(structured(), CancellationToken::new()).await {
        Err(e) => e,
        Ok(_) => panic!("a failing server answered"),
    };
    assert_eq!(e.kind(), ErrorKind::Server);
    assert_eq!(srv.requests().len(), 3);
}

#[tokio::test]
async fn openai_accepts_a_stream_that_ends_after_finish_reason_without_done() {
    let frames: Vec<String> = ok_frames(Kind::OpenAi)[..5].to_vec();
    let srv = FakeServer::start(vec![sse(&frames, End::Clean)]).await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let out = run(p.as_ref(), request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text, "Paris.");
    assert!(
        matches!(out.done, Some(StreamEvent::Done { finish_reason: Some(ref r), .. }) if r == "stop")
    );
}

#[tokio::test]
async fn openai_reports_an_error_object_inside_the_stream() {
    let frames = vec![
        OPENAI_OK[1].to_string(),
        "data: {\"error\":{\"message\":\"model crashed\",\"type\":\"server_error\"}}\n\n"
            .to_string(),
    ];
    let srv = FakeServer::start(vec![sse(&frames, End::Clean)]).await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let out = run(p.as_ref(), request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text, "Par");
    let e = out.error.unwrap();
    assert_eq!(e.kind(), ErrorKind::Server);
    assert!(e.to_string().contains("model crashed"), "{e}");
}

#[tokio::test]
async fn anthropic_streams_documented_events_and_maps_roles() {
    let req = ChatRequest::new(vec![
        ChatMessage::system("You are terse."),
        ChatMessage::system("Context: geography."),
        ChatMessage::user("Hi."),
        ChatMessage::user("Capital of France?"),
    ])
    .with_temperature(1.7);
    let (srv, out) = answered(Kind::Anthropic, req).await;
    assert_eq!(out.text, "Paris.");
    assert_eq!(out.done, done(Some("end_turn"), Some((25, 15))));
    let r = &srv.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    let body = r.json();
    assert_eq!(body["system"], "You are terse.\n\nContext: geography.");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096, "required by the API; defaulted");
    assert_eq!(body["temperature"], 1.0, "clamped to Anthropic's 0–1");
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "consecutive user turns merged: {msgs:?}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[0]["content"], "Hi.\n\nCapital of France?");
}

#[tokio::test]
async fn anthropic_error_event_mid_stream() {
    let mut frames = first_delta_frames(Kind::Anthropic);
    frames.push(
        "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n"
            .into(),
    );
    let srv = FakeServer::start(vec![sse(&frames, End::Clean)]).await;
    let p = provider(Kind::Anthropic, &srv.url, fast());
    let out = run(p.as_ref(), request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text, "Par");
    let e = out.error.unwrap();
    assert_eq!(e.kind(), ErrorKind::Server);
    assert!(
        e.to_string().contains("overloaded_error: Overloaded"),
        "{e}"
    );
}

#[tokio::test]
async fn anthropic_without_a_key_is_a_config_error() {
    let rc = RemoteConfig::new("anthropic", "http://127.0.0.1:9/v1", "m", 1000);
    let p = AnthropicProvider::new(rc).unwrap();
    let e = p
        .stream(request(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(matches!(
        p.check().await,
        wo_providers::Reachability::NotConfigured { .. }
    ));
}

#[tokio::test]
async fn nanochat_streams_tokens_and_folds_system_into_first_user_turn() {
    let mut frames = ok_frames(Kind::NanoChat);
    frames.insert(
        2,
        "data: {\"token\": \" Très bien ✓\", \"gpu\": 0}\n\n".into(),
    );
    let srv = FakeServer::start(vec![sse(&frames, End::Clean)]).await;
    let p = provider(Kind::NanoChat, &srv.url, fast());
    let req = ChatRequest::new(vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("Hi"),
        ChatMessage::assistant("Hello"),
        ChatMessage::user("Capital of France?"),
    ])
    .with_temperature(3.0)
    .with_max_tokens(10_000)
    .with_top_k(500);
    let out = run(p.as_ref(), req, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text, "Paris. Très bien ✓");
    assert_eq!(out.done, done(None, None));
    let r = &srv.requests()[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/chat/completions")
    );
    let body = r.json();
    assert_eq!(
        body,
        serde_json::json!({
            "messages": [
                {"role": "user", "content": "You are terse.\n\nHi"},
                {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Capital of France?"}
            ],
            "temperature": 2.0,
            "max_tokens": 4096,
            "top_k": 200
        }),
        "no system role, no model, values within the server's ranges"
    );
}

#[tokio::test]
async fn nanochat_refuses_an_oversized_message_before_sending() {
    let srv = FakeServer::start(vec![sse(&ok_frames(Kind::NanoChat), End::Clean)]).await;
    let p = provider(Kind::NanoChat, &srv.url, fast());
    let req = ChatRequest::new(vec![ChatMessage::user("x".repeat(8_001))]);
    let e = p.stream(req, CancellationToken::new()).await.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::BadRequest);
    assert!(e.to_string().contains("8000"), "{e}");
    assert!(srv.requests().is_empty());
}

#[tokio::test]
async fn nanochat_health_check() {
    let srv = FakeServer::start(vec![Reply::json(200, common::NANO_READY)]).await;
    let p = provider(Kind::NanoChat, &srv.url, fast());
    let r = p.check().await;
    assert!(r.is_reachable(), "{r}");
    assert_eq!(srv.requests()[0].path, "/health");
    let srv = FakeServer::start(vec![Reply::json(
        200,
        r#"{"status":"ok","ready":false,"num_gpus":0,"available_workers":0}"#,
    )])
    .await;
    let p = provider(Kind::NanoChat, &srv.url, fast());
    assert!(!p.check().await.is_reachable());
}

#[tokio::test]
async fn wikioracle_provider_maps_an_assembled_prompt_to_the_stateless_protocol() {
    let req = ChatRequest::new(vec![
        ChatMessage::system("Rules & <context>"),
        ChatMessage::user("Hi"),
        ChatMessage::assistant("Hello"),
        ChatMessage::user("Capital of France?"),
    ])
    .with_temperature(0.3);
    let (srv, out) = answered(Kind::WikiOracle, req).await;
    assert_eq!(out.text, "Paris.");
    assert_eq!(out.done, done(Some("stop"), Some((12, 3))));
    let r = &srv.requests()[0];
    assert_eq!(r.path, protocol::STATELESS_CHAT_PATH);
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let sent: StatelessChatRequest = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(sent.message, "Capital of France?");
    assert_eq!(
        sent.context,
        "<div><p>Rules &amp; &lt;context&gt;</p></div>"
    );
    assert_eq!(sent.window.len(), 2);
    assert_eq!(sent.window[1].content, "<p>Hello</p>");
    assert_eq!(sent.params.model.as_deref(), Some("test-model"));
    assert_eq!(sent.params.temperature, Some(0.3));
}

#[tokio::test]
async fn wikioracle_chat_yields_the_done_event_with_state_patch() {
    let srv = FakeServer::start(vec![sse(&ok_frames(Kind::WikiOracle), End::Clean)]).await;
    let rc = RemoteConfig::new("wo", srv.url.clone(), "default", 1000).with_http(fast());
    let p = WikiOracleProvider::new(rc).unwrap();
    let req = StatelessChatRequest {
        message: "Capital of France?".into(),
        context: "<p>geo</p>".into(),
        ..Default::default()
    };
    let events: Vec<_> = p
        .chat(req, CancellationToken::new())
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(events.len(), 3);
    let Ok(ServerEvent::Done(done)) = &events[2] else {
        panic!("{events:?}")
    };
    assert_eq!(done.sources, ["t_00000000000000aa"]);
    let mut state = serde_json::json!({"version": 1, "date": "2025-01-01T00:00:00Z"});
    protocol::apply_merge_patch(&mut state, &done.state_patch);
    assert_eq!(state["date"], "2026-01-01T00:00:00Z");
    let sent = srv.requests()[0].json();
    assert!(
        sent["params"].get("model").is_none(),
        "`default` leaves the model to the server"
    );
}

#[tokio::test]
async fn wikioracle_error_event() {
    let frames = vec![
        "event: delta\ndata: {\"text\":\"Par\"}\n\n".to_string(),
        ServerEvent::Error(protocol::ErrorEvent {
            message: "upstream rate limited".into(),
            kind: Some("rate_limited".into()),
        })
        .to_sse_frame(),
    ];
    let srv = FakeServer::start(vec![sse(&frames, End::Clean)]).await;
    let p = provider(Kind::WikiOracle, &srv.url, fast());
    let out = run(p.as_ref(), request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text, "Par");
    assert_eq!(out.error.unwrap().kind(), ErrorKind::RateLimited);
}

// ---------------------------------------------------- failures, every provider

#[tokio::test]
async fn unauthorized_is_auth_error_without_the_key() {
    for kind in ALL {
        // The body echoes the key, as some services do: it must be scrubbed.
        let body = error_body(kind, "authentication_error", &format!("invalid key {KEY}"));
        let srv = FakeServer::start(vec![Reply::json(401, &body)]).await;
        let p = provider(kind, &srv.url, fast());
        let e = p
            .stream(request(), CancellationToken::new())
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::Auth, "{kind:?}: {e}");
        assert_clean_message(&e, p.name());
        let msg = e.to_string();
        assert!(msg.contains("401") && msg.contains(&srv.url), "{msg}");
        assert!(
            msg.contains("env TEST_KEY"),
            "says where the key comes from: {msg}"
        );
        assert_eq!(srv.requests().len(), 1, "{kind:?}: 401 is not retried");
    }
    // 403 too.
    let srv = FakeServer::start(vec![Reply::json(403, "{\"error\":\"forbidden\"}")]).await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let e = p
        .stream(request(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Auth);
}

#[tokio::test]
async fn rate_limit_retry_after_seconds_is_honoured_then_succeeds() {
    let jobs = ALL.map(|kind| async move {
        let body = error_body(kind, "rate_limit_error", "slow down");
        let srv = FakeServer::start(vec![
            Reply::json_with(429, &[("retry-after", "1")], &body),
            sse(&ok_frames(kind), End::Clean),
        ])
        .await;
        let p = provider(kind, &srv.url, fast());
        let out = run(p.as_ref(), request(), CancellationToken::new())
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(out.text, "Paris.", "{kind:?}");
        let reqs = srv.requests();
        assert_eq!(reqs.len(), 2, "{kind:?}: retried once");
        let gap = reqs[1].at - reqs[0].at;
        assert!(
            gap >= Duration::from_millis(950),
            "{kind:?}: waited {gap:?}, server asked for 1 s"
        );
        assert!(gap < Duration::from_secs(3), "{kind:?}: {gap:?}");
    });
    futures::future::join_all(jobs).await;
}

#[tokio::test]
async fn rate_limit_retry_after_http_date_is_honoured() {
    // An HTTP date has one-second resolution: ask for "now + 2 s", expect
    // a wait of more than 1 s.
    let when = std::time::SystemTime::now() + Duration::from_secs(2);
    let date = httpdate::fmt_http_date(when);
    let srv = FakeServer::start(vec![
        Reply::json_with(429, &[("retry-after", &date)], "{}"),
        sse(&ok_frames(Kind::OpenAi), End::Clean),
    ])
    .await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let out = run(p.as_ref(), request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text, "Paris.");
    let reqs = srv.requests();
    let gap = reqs[1].at - reqs[0].at;
    assert!(gap >= Duration::from_millis(1000), "{gap:?}");
}

#[tokio::test]
async fn rate_limit_exhausted_or_too_long_is_rate_limited_error() {
    for kind in ALL {
        let body = error_body(kind, "rate_limit_error", "slow down");
        let srv =
            FakeServer::start(vec![Reply::json_with(429, &[("retry-after", "0")], &body)]).await;
        let p = provider(kind, &srv.url, fast());
        let e = p
            .stream(request(), CancellationToken::new())
            .await
            .err()
            .unwrap();
        assert_clean_message(&e, p.name());
        match &e {
            ProviderError::RateLimited {
                retry_after,
                attempts,
                ..
            } => {
                assert_eq!(*attempts, 3, "{kind:?}");
                assert_eq!(*retry_after, Some(Duration::ZERO));
            }
            other => panic!("{kind:?}: {other}"),
        }
        assert_eq!(srv.requests().len(), 3, "{kind:?}");
        assert!(
            e.to_string().contains("429") && e.to_string().contains("slow down"),
            "{e}"
        );

        // A Retry-After beyond the policy's cap is not waited for.
        let srv = FakeServer::start(vec![Reply::json_with(
            429,
            &[("retry-after", "3600")],
            &body,
        )])
        .await;
        let p = provider(kind, &srv.url, fast());
        let started = Instant::now();
        let e = p
            .stream(request(), CancellationToken::new())
            .await
            .err()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            matches!(e, ProviderError::RateLimited { retry_after: Some(d), attempts: 1, .. } if d == Duration::from_secs(3600)),
            "{kind:?}: {e:?}"
        );
        assert!(e.to_string().contains("3600s"), "{e}");
    }
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    for kind in ALL {
        let body = error_body(kind, "api_error", "boom");
        // Fails twice, then works.
        let srv = FakeServer::start(vec![
            Reply::json(500, &body),
            Reply::json(503, &body),
            sse(&ok_frames(kind), End::Clean),
        ])
        .await;
        let p = provider(kind, &srv.url, fast());
        let out = run(p.as_ref(), request(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.text, "Paris.", "{kind:?}");
        let reqs = srv.requests();
        assert_eq!(reqs.len(), 3);
        assert!(
            reqs[1].at - reqs[0].at >= Duration::from_millis(10),
            "backoff"
        );

        // Always failing: Server error after the capped attempts.
        let srv = FakeServer::start(vec![Reply::json(500, &body)]).await;
        let p = provider(kind, &srv.url, fast());
        let e = p
            .stream(request(), CancellationToken::new())
            .await
            .err()
            .unwrap();
        assert!(
            matches!(
                e,
                ProviderError::Server {
                    status: Some(500),
                    attempts: 3,
                    ..
                }
            ),
            "{kind:?}: {e:?}"
        );
        assert_clean_message(&e, p.name());
        assert!(
            e.to_string().contains("boom") && e.to_string().contains("500"),
            "{e}"
        );
        assert_eq!(srv.requests().len(), 3);
    }
}

#[tokio::test]
async fn an_empty_200_before_the_first_byte_is_retried() {
    for kind in ALL {
        // Headers arrive, then the connection closes with no body at all.
        let srv =
            FakeServer::start(vec![sse(&[], End::Drop), sse(&ok_frames(kind), End::Clean)]).await;
        let p = provider(kind, &srv.url, fast());
        let out = run(p.as_ref(), request(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.text, "Paris.", "{kind:?}");
        assert_eq!(srv.requests().len(), 2, "{kind:?}");
    }
}

#[tokio::test]
async fn other_4xx_is_bad_request_and_not_retried() {
    for kind in ALL {
        let body = error_body(kind, "invalid_request_error", "Message 0 has empty content");
        let srv = FakeServer::start(vec![Reply::json(400, &body)]).await;
        let p = provider(kind, &srv.url, fast());
        let e = p
            .stream(request(), CancellationToken::new())
            .await
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::BadRequest, "{kind:?}");
        assert!(e.to_string().contains("empty content"), "{e}");
        assert_eq!(srv.requests().len(), 1);
    }
}

#[tokio::test]
async fn malformed_sse_is_malformed_error() {
    for kind in ALL {
        let mut frames = first_delta_frames(kind);
        frames.push(match kind {
            Kind::WikiOracle => "event: delta\ndata: {\"text\": 42}\n\n".into(),
            _ => "data: {\"choices\": [{\"delta\": {\"content\": \"x\"\n\n".into(),
        });
        let srv = FakeServer::start(vec![sse(&frames, End::Clean)]).await;
        let p = provider(kind, &srv.url, fast());
        let out = run(p.as_ref(), request(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.text, "Par", "{kind:?}");
        let e = out.error.unwrap_or_else(|| panic!("{kind:?}: no error"));
        assert_eq!(e.kind(), ErrorKind::Malformed, "{kind:?}: {e}");
        assert_clean_message(&e, p.name());
        assert_eq!(out.items_after_end, 0, "nothing after an error");
    }
    // A 200 that is not an event stream at all.
    let srv = FakeServer::start(vec![Reply::json(200, "{\"choices\":[]}")]).await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let e = p
        .stream(request(), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Malformed);
    assert!(e.to_string().contains("application/json"), "{e}");
}

#[tokio::test]
async fn connection_dropped_mid_stream() {
    for kind in ALL {
        let srv = FakeServer::start(vec![sse(&first_delta_frames(kind), End::Drop)]).await;
        let p = provider(kind, &srv.url, fast());
        let out = run(p.as_ref(), request(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(
            out.text, "Par",
            "{kind:?}: the delta before the drop arrives"
        );
        let e = out.error.unwrap_or_else(|| panic!("{kind:?}: no error"));
        assert_eq!(e.kind(), ErrorKind::ConnectionDropped, "{kind:?}: {e}");
        assert_clean_message(&e, p.name());
        assert_eq!(srv.requests().len(), 1, "not retried after the first byte");

        // Cut in the middle of a frame.
        let mut frames = first_delta_frames(kind);
        frames.push("data: {\"tok".into());
        let srv = FakeServer::start(vec![sse(&frames, End::Drop)]).await;
        let p = provider(kind, &srv.url, fast());
        let out = run(p.as_ref(), request(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(
            out.error.unwrap().kind(),
            ErrorKind::ConnectionDropped,
            "{kind:?}"
        );

        // A clean HTTP end but no end-of-answer frame is also a cut answer.
        let srv = FakeServer::start(vec![sse(&first_delta_frames(kind), End::Clean)]).await;
        let p = provider(kind, &srv.url, fast());
        let out = run(p.as_ref(), request(), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(
            out.error.unwrap().kind(),
            ErrorKind::ConnectionDropped,
            "{kind:?}"
        );
    }
}

#[tokio::test]
async fn connection_refused_is_retried_then_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    for kind in ALL {
        let p = provider(kind, &url, fast());
        let e = p
            .stream(request(), CancellationToken::new())
            .await
            .err()
            .unwrap();
        assert!(
            matches!(e, ProviderError::Unreachable { attempts: 3, .. }),
            "{kind:?}: {e:?}"
        );
        assert_clean_message(&e, p.name());
        assert!(!p.check().await.is_reachable());
    }
}

#[tokio::test]
async fn timeouts_first_byte_and_idle() {
    let mut http = fast();
    http.first_byte_timeout = Duration::from_millis(500);
    http.idle_timeout = Duration::from_millis(500);
    let jobs = ALL.map(|kind| {
        let http = http.clone();
        async move {
            // The server reads the request and never answers.
            let srv = FakeServer::start(vec![Reply::Silent]).await;
            let p = provider(kind, &srv.url, http.clone());
            let started = Instant::now();
            let e = p
                .stream(request(), CancellationToken::new())
                .await
                .err()
                .unwrap();
            assert!(
                matches!(
                    e,
                    ProviderError::Timeout {
                        phase: TimeoutPhase::FirstByte,
                        ..
                    }
                ),
                "{kind:?}: {e:?}"
            );
            assert!(started.elapsed() < Duration::from_secs(2));
            assert_clean_message(&e, p.name());
            assert!(e.to_string().contains("timeout_secs"), "{e}");

            // The answer starts, then the server goes silent.
            let srv = FakeServer::start(vec![sse(&first_delta_frames(kind), End::Hang)]).await;
            let p = provider(kind, &srv.url, http);
            let out = run(p.as_ref(), request(), CancellationToken::new())
                .await
                .unwrap();
            assert_eq!(out.text, "Par");
            let e = out.error.unwrap();
            assert!(
                matches!(
                    e,
                    ProviderError::Timeout {
                        phase: TimeoutPhase::Idle,
                        ..
                    }
                ),
                "{kind:?}: {e:?}"
            );
        }
    });
    futures::future::join_all(jobs).await;
}

#[tokio::test]
async fn cancellation_mid_stream_aborts_the_request() {
    let jobs = ALL.map(|kind| async move {
        let mut frames: Vec<Part> = first_delta_frames(kind)
            .into_iter()
            .map(|f| Part::Bytes(f.into_bytes()))
            .collect();
        frames.push(Part::Sleep(Duration::from_secs(30)));
        let srv = FakeServer::start(vec![Reply::Stream {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            parts: frames,
            end: End::Clean,
        }])
        .await;
        let p = provider(kind, &srv.url, fast());
        let cancel = CancellationToken::new();
        let mut s = p.stream(request(), cancel.clone()).await.unwrap();
        let first = s.next().await.unwrap().unwrap();
        assert_eq!(first, StreamEvent::Delta("Par".into()));
        let started = Instant::now();
        cancel.cancel();
        let e = s.next().await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled, "{kind:?}");
        assert!(s.next().await.is_none());
        drop(s);
        assert!(started.elapsed() < Duration::from_secs(1));
        // The server notices the client hung up.
        let deadline = Instant::now() + Duration::from_secs(3);
        while srv.closed_by_client() == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(srv.closed_by_client(), 1, "{kind:?}: connection closed");
    });
    futures::future::join_all(jobs).await;
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection_and_cancel_interrupts_retries() {
    let srv = FakeServer::start(vec![sse(&first_delta_frames(Kind::OpenAi), End::Hang)]).await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let mut s = p.stream(request(), CancellationToken::new()).await.unwrap();
    assert!(s.next().await.unwrap().is_ok());
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(3);
    while srv.closed_by_client() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(srv.closed_by_client(), 1);

    // Cancelling while waiting out a Retry-After returns at once.
    let srv = FakeServer::start(vec![Reply::json_with(429, &[("retry-after", "4")], "{}")]).await;
    let p = provider(Kind::Anthropic, &srv.url, fast());
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c2.cancel();
    });
    let started = Instant::now();
    let e = p.stream(request(), cancel).await.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// llama-cpp-python's refusal of a prompt longer than its window, as its
/// server writes it to a request that does not stream.
const LLAMA_CPP_PYTHON_TOO_LONG: &str = r#"{"error":{"message":"This model's maximum context length is 2048 tokens. However, you requested 2351 tokens (2331 in the messages, 20 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

/// What the OpenAI provider returns, before any answer, against `script`;
/// and the server, to read what it was asked.
async fn refused_by(script: Vec<Reply>) -> (ProviderError, FakeServer) {
    let srv = FakeServer::start(script).await;
    let p = provider(Kind::OpenAi, &srv.url, fast());
    let e = p
        .stream(request(), CancellationToken::new())
        .await
        .err()
        .expect("an error before any answer");
    (e, srv)
}

#[tokio::test]
async fn a_stream_closed_unanswered_for_a_prompt_too_long_says_so_and_names_the_window() {
    // llama-cpp-python answers a streamed request whose prompt exceeds its
    // window with a 200 and no body at all, asked twice (an empty answer
    // may be a hiccup) not four times; asked without streaming, it says why.
    let mut script: Vec<Reply> = (0..2).map(|_| sse(&[], End::Clean)).collect();
    script.push(Reply::json(400, LLAMA_CPP_PYTHON_TOO_LONG));
    let (e, srv) = refused_by(script).await;
    let ProviderError::TooLong { window, .. } = &e else {
        panic!("not TooLong: {e}");
    };
    assert_eq!(*window, Some(2048));
    assert_eq!(e.kind(), ErrorKind::BadRequest);
    let text = e.to_string();
    assert!(text.contains("context_window = 2048"), "{text}");
    assert!(text.contains("[providers.openai-test]"), "{text}");
    assert_clean_message(&e, "openai-test");
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 3);
    let probe = reqs[2].json();
    assert_eq!(probe["stream"], false);
    assert_eq!(probe["max_tokens"], 1);
    assert!(probe.get("stream_options").is_none(), "{probe}");
    assert!(probe.get("response_format").is_none(), "{probe}");
    assert_eq!(probe["messages"], reqs[0].json()["messages"]);

    // The same check answered: the dropped stream stands.
    let mut script: Vec<Reply> = (0..2).map(|_| sse(&[], End::Clean)).collect();
    script.push(Reply::json(
        200,
        r#"{"choices":[{"message":{"content":"P"}}]}"#,
    ));
    let (e, srv) = refused_by(script).await;
    assert_eq!(e.kind(), ErrorKind::ConnectionDropped, "{e}");
    assert_eq!(srv.requests().len(), 3);
}

#[tokio::test]
async fn a_refusal_as_too_long_names_the_window_for_every_server_wording() {
    let cases: [(&str, Option<usize>); 4] = [
        (LLAMA_CPP_PYTHON_TOO_LONG, Some(2048)),
        // llama.cpp's own server.
        (
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#,
            Some(4096),
        ),
        // OpenAI and vLLM.
        (
            r#"{"error":{"message":"This model's maximum context length is 128,000 tokens. However, your messages resulted in 130,512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            Some(128_000),
        ),
        // Anthropic.
        (
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            Some(200_000),
        ),
    ];
    for (body, want) in cases {
        let (e, srv) = refused_by(vec![Reply::json(400, body)]).await;
        match &e {
            ProviderError::TooLong { window, .. } => assert_eq!(*window, want, "{body}"),
            other => panic!("not TooLong for {body}: {other}"),
        }
        assert_eq!(srv.requests().len(), 1, "not retried");
    }
    // Another refusal stays a bad request.
    let body = error_body(Kind::OpenAi, "invalid_request_error", "unknown model");
    let (e, _) = refused_by(vec![Reply::json(400, &body)]).await;
    assert!(matches!(e, ProviderError::BadRequest { .. }), "{e}");
}

//! The OpenAI-compatible endpoint (`/v1/models`, `/v1/chat/completions`)
//! and `/mcp` from outside, against a fake upstream: the exact wire format
//! (streamed and not), what the upstream receives (the client's system
//! message and conversation with the person's memory around them), what is
//! recorded, the model → provider choice, and every refusal in OpenAI's
//! shape with `llm.json` left unchanged. The official SDKs drive the same
//! endpoints in `crates/wikioracle/tests/{openai,mcp}.rs`.

mod common;

use std::time::Duration;

use common::{Script, Served, TOKEN, serve, serve_with};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use wo_wire::openai::{OpenAiChatCompletion, OpenAiChunk, OpenAiError};

const CHAT: &str = "/v1/chat/completions";

/// A server whose llm.json holds one truth entry with a distinctive word.
async fn with_fact(script: Script) -> Served {
    let s = serve(script, false).await;
    let r = s.browser_json(Method::POST, "/api/truth", &json!({"title": "Office cat", "content": "The office cat is named Quillibrix", "certainty": 0.9})).await;
    assert_eq!(
        r.status(),
        StatusCode::CREATED,
        "{}",
        r.text().await.unwrap()
    );
    s
}

fn chat_body(stream: bool) -> Value {
    json!({
        "model": "fake",
        "messages": [
            {"role": "system", "content": "Answer like a pirate."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Ahoy!"},
            {"role": "user", "content": "What is the office cat called?"}
        ],
        "stream": stream,
        "temperature": 0.5,
        "max_completion_tokens": 40
    })
}

/// The `data:` payloads of an OpenAI stream, `[DONE]` included as text.
fn data_frames(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

fn messages(s: &Served) -> Vec<Value> {
    s.state_json()["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

async fn openai_error(r: reqwest::Response) -> OpenAiError {
    let text = r.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_carries_the_memory_and_is_recorded() {
    let s = with_fact(Script::says("Its name is Quillibrix.")).await;
    let r = s.program_json(Method::POST, CHAT, &chat_body(false)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let c: OpenAiChatCompletion = r.json().await.unwrap();
    assert_eq!(c.object, "chat.completion");
    assert!(c.id.starts_with("chatcmpl-"), "{}", c.id);
    assert_eq!(c.model, "fake/fake-1");
    assert_eq!(c.choices.len(), 1);
    assert_eq!(c.choices[0].message.role, "assistant");
    assert_eq!(c.choices[0].message.content, "Its name is Quillibrix.");
    assert_eq!(c.choices[0].finish_reason, "stop");
    let usage = c.usage.expect("the upstream reported usage");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (7, 4, 11)
    );

    // What the upstream was sent: the client's instructions with the
    // memory, the client's conversation, then the question.
    let sent = s.upstream.bodies.lock().unwrap()[0].clone();
    assert_eq!(sent["model"], "fake-1");
    assert_eq!(sent["temperature"], 0.5);
    assert_eq!(sent["max_tokens"], 40);
    let msgs = sent["messages"].as_array().unwrap();
    let system = msgs[0]["content"].as_str().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    assert!(system.starts_with("Answer like a pirate."), "{system}");
    assert!(system.contains("Quillibrix"), "the truth entry: {system}");
    let rest: Vec<(&str, &str)> = msgs[1..]
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rest,
        [
            ("user", "Hello"),
            ("assistant", "Ahoy!"),
            ("user", "What is the office cat called?")
        ]
    );

    // Recorded like a web turn, the answer citing the entry it was given.
    let stored = messages(&s);
    assert_eq!(stored.len(), 2);
    assert!(
        stored[0]["content"]
            .as_str()
            .unwrap()
            .contains("What is the office cat called?")
    );
    assert_eq!(stored[1]["parent"], stored[0]["id"]);
    assert_eq!(stored[1]["username"], "fake-1");
    let fact = s.state_json()["truth"]["trust"][0]["id"].clone();
    assert!(stored[1]["sources"].as_array().unwrap().contains(&fact));

    // The next request of the same conversation: the stored exchange is not
    // recalled a second time beside the client's own copy of it.
    let mut next = chat_body(false);
    next["messages"] = json!([
        {"role": "user", "content": "What is the office cat called?"},
        {"role": "assistant", "content": "Its name is Quillibrix."},
        {"role": "user", "content": "And where does the office cat sleep?"}
    ]);
    let r = s.program_json(Method::POST, CHAT, &next).await;
    assert_eq!(r.status(), StatusCode::OK);
    let sent = s.upstream.bodies.lock().unwrap()[1].clone();
    let system = sent["messages"][0]["content"].as_str().unwrap();
    assert!(!system.contains("Earlier messages"), "{system}");
    assert_eq!(messages(&s).len(), 4);
    assert_eq!(messages(&s)[2]["parent"], messages(&s)[1]["id"]);
}

/// Who a stored message follows, by content: the conversation root's text
/// for each stored question, in order.
fn roots_by_question(s: &Served) -> Vec<(String, String)> {
    let state = wo_format::parse(&s.state_bytes()).unwrap();
    state
        .messages()
        .iter()
        .filter(|m| m.role == Some(wo_format::Role::User))
        .map(|m| {
            let root = &state.branch(&m.id)[0];
            (
                wo_format::xhtml::to_plain_text(&m.content),
                wo_format::xhtml::to_plain_text(&root.content),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_thread_is_its_own_conversation() {
    let s = serve(
        Script::says(
            "Slowly, **about 100 °C an hour** — see [the guide](https://example.org/kilns).",
        ),
        false,
    )
    .await;
    // The browser's conversation, newest in the file.
    let r = s
        .browser_json(
            Method::POST,
            "/api/chat",
            &json!({"message": "Browser question"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let _ = r.text().await.unwrap();
    let ask = |messages: Value| {
        let body = json!({"model": "fake", "messages": messages});
        let s = &s;
        async move {
            let r = s.program_json(Method::POST, CHAT, &body).await;
            assert_eq!(r.status(), StatusCode::OK);
            r.json::<OpenAiChatCompletion>().await.unwrap().choices[0]
                .message
                .content
                .clone()
        }
    };
    // Two prompts from a client (`llm "…"` twice): two new conversations,
    // neither after the browser's.
    let first = ask(json!([{"role": "user", "content": "How slow should I cool my kiln?"}])).await;
    ask(json!([{"role": "user", "content": "Unrelated: name a glaze"}])).await;
    // A follow-up (`llm -c`) sends the thread so far: it continues the first.
    ask(json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "How slow should I cool my kiln?"},
        {"role": "assistant", "content": first},
        {"role": "user", "content": "And for stoneware?"}
    ]))
    .await;
    // History the file does not hold: a new conversation, not a guess.
    ask(json!([
        {"role": "user", "content": "How slow should I cool my kiln?"},
        {"role": "assistant", "content": "Something wo never said."},
        {"role": "user", "content": "Really?"}
    ]))
    .await;
    let roots = roots_by_question(&s);
    let root_of = |q: &str| {
        roots
            .iter()
            .find(|(text, _)| text == q)
            .unwrap_or_else(|| panic!("{q:?} not stored: {roots:?}"))
            .1
            .clone()
    };
    assert_eq!(root_of("Browser question"), "Browser question");
    assert_eq!(
        root_of("How slow should I cool my kiln?"),
        "How slow should I cool my kiln?"
    );
    assert_eq!(
        root_of("Unrelated: name a glaze"),
        "Unrelated: name a glaze"
    );
    assert_eq!(
        root_of("And for stoneware?"),
        "How slow should I cool my kiln?"
    );
    assert_eq!(root_of("Really?"), "Really?");
    // Every stored question has a parent or starts a conversation.
    let state = wo_format::parse(&s.state_bytes()).unwrap();
    assert!(state.messages().iter().all(|m| !m.is_unlinked()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_openai_s_chunk_format() {
    let s = with_fact(Script::says("Its name is Quillibrix.")).await;
    for include_usage in [false, true] {
        let mut body = chat_body(true);
        if include_usage {
            body["stream_options"] = json!({"include_usage": true});
        }
        let r = s.program_json(Method::POST, CHAT, &body).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        let frames = data_frames(&r.text().await.unwrap());
        assert_eq!(frames.last().unwrap(), "[DONE]");
        let chunks: Vec<OpenAiChunk> = frames[..frames.len() - 1]
            .iter()
            .map(|f| serde_json::from_str(f).unwrap_or_else(|e| panic!("{e}: {f}")))
            .collect();
        for c in &chunks {
            assert_eq!(c.object, "chat.completion.chunk");
            assert_eq!(c.id, chunks[0].id);
            assert_eq!(c.created, chunks[0].created);
            assert_eq!(c.model, "fake/fake-1");
        }
        assert_eq!(
            chunks[0].choices[0].delta.role.as_deref(),
            Some("assistant")
        );
        let text: String = chunks
            .iter()
            .filter_map(|c| c.choices.first()?.delta.content.clone())
            .collect();
        assert_eq!(text, "Its name is Quillibrix.");
        let content_chunks = chunks
            .iter()
            .filter(|c| {
                c.choices
                    .first()
                    .is_some_and(|ch| ch.delta.content.as_deref().is_some_and(|t| !t.is_empty()))
            })
            .count();
        assert_eq!(content_chunks, 4, "one chunk per upstream piece");
        let finished: Vec<&OpenAiChunk> = chunks
            .iter()
            .filter(|c| {
                c.choices
                    .first()
                    .is_some_and(|ch| ch.finish_reason.is_some())
            })
            .collect();
        assert_eq!(finished.len(), 1);
        assert_eq!(
            finished[0].choices[0].finish_reason.as_deref(),
            Some("stop")
        );
        let last = chunks.last().unwrap();
        if include_usage {
            assert!(last.choices.is_empty(), "the usage chunk has no choices");
            assert_eq!(last.usage.unwrap().total_tokens, 11);
        } else {
            assert!(chunks.iter().all(|c| c.usage.is_none()));
        }
    }
    assert_eq!(
        messages(&s).len(),
        4,
        "both streamed exchanges are recorded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_list_the_providers_and_choose_one() {
    // The memory step off (this is about choosing models): each chat is one
    // upstream call (the memory step's own is tested below).
    let s = serve_with(Script::says("ok"), false, |o| {
        let base = o.config.providers["fake"].base_url.clone().unwrap();
        let text = format!(
            "[defaults]\nprovider = \"fake\"\n\n[providers.another]\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"m2\"\n\n[providers.fake]\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"fake-1\"\n\n[providers.keyless]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m3\"\napi_key_env = \"WO_TEST_UNSET_KEY_VAR\"\n\n[interpreter]\nmode = \"off\"\n"
        );
        o.config = wo_providers::Config::from_toml(
            &text,
            std::path::Path::new("config.toml"),
            wo_providers::config::Env::from_pairs::<&str, &str>([]),
        )
        .unwrap();
    })
    .await;
    let list: Value = s.program_get("/v1/models").await;
    assert_eq!(list["object"], "list");
    let ids = list["data"].as_array().unwrap().iter().map(|m| &m["id"]);
    assert_eq!(
        ids.collect::<Vec<_>>(),
        ["fake", "another"],
        "default first; no key, not listed"
    );
    assert_eq!(list["data"][0]["object"], "model");
    assert_eq!(list["data"][0]["owned_by"], "wikioracle");

    // A provider's name, and PROVIDER/MODEL.
    for (model, upstream_model, answered_as) in [
        ("another", "m2", "another/m2"),
        ("fake/special-model", "special-model", "fake/special-model"),
    ] {
        let r = say_hi_to(&s, model).await;
        assert_eq!(r.status(), StatusCode::OK, "{model}");
        let c: OpenAiChatCompletion = r.json().await.unwrap();
        assert_eq!(c.model, answered_as);
        let sent = s.upstream.bodies.lock().unwrap().last().unwrap().clone();
        assert_eq!(sent["model"], upstream_model);
    }

    // Unknown models, and a provider that cannot answer: 404, nothing sent.
    let before = s.state_bytes();
    let calls = s
        .upstream
        .requests
        .load(std::sync::atomic::Ordering::SeqCst);
    for model in ["gpt-4o", "nope/m", "fake/", "keyless"] {
        let r = say_hi_to(&s, model).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{model}");
        let e = openai_error(r).await.error;
        assert_eq!(e.code.as_deref(), Some("model_not_found"), "{model}");
        assert_eq!(e.kind, "invalid_request_error");
        assert_eq!(e.param.as_deref(), Some("model"));
        assert!(
            e.message.contains(model.trim_end_matches('/')) || model == "keyless",
            "{}",
            e.message
        );
    }
    assert_eq!(s.state_bytes(), before);
    assert_eq!(
        s.upstream
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        calls
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_openai_errors_and_change_nothing() {
    let s = with_fact(Script::says("never sent")).await;
    let before = s.state_bytes();
    let good = chat_body(false);
    let post = |body: Value| s.program(Method::POST, CHAT).json(&body);

    // (request, status, code, param)
    let mut cases: Vec<(reqwest::RequestBuilder, u16, &str, Option<&str>)> = vec![
        (
            s.client.post(s.url(CHAT)).json(&good),
            401,
            "invalid_api_key",
            None,
        ),
        (
            s.client
                .post(s.url(CHAT))
                .bearer_auth("wrong-token-0123456789")
                .json(&good),
            401,
            "invalid_api_key",
            None,
        ),
        // The browser's session cookie is no key here.
        (
            s.client
                .post(s.url(CHAT))
                .header("cookie", s.cookie())
                .header("origin", &s.base)
                .json(&good),
            401,
            "invalid_api_key",
            None,
        ),
        (
            s.client.get(s.url("/v1/models")),
            401,
            "invalid_api_key",
            None,
        ),
        // A page of another origin holding the token is still refused.
        (
            post(good.clone()).header("origin", "http://evil.example"),
            403,
            "forbidden",
            None,
        ),
        (
            s.program(Method::POST, CHAT)
                .header("content-type", "text/plain")
                .body(good.to_string()),
            415,
            "unsupported_media_type",
            None,
        ),
    ];
    let mut with = |patch: Value, status: u16, code: &'static str, param: &'static str| {
        let mut body = good.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        cases.push((post(body), status, code, Some(param)));
    };
    with(json!({"temperature": 5}), 400, "bad_request", "temperature");
    with(
        json!({"max_completion_tokens": 0}),
        400,
        "bad_request",
        "max_completion_tokens",
    );
    with(json!({"max_tokens": -1}), 400, "bad_request", "max_tokens");
    with(json!({"n": 3}), 400, "bad_request", "n");
    with(
        json!({"tools": [{"type": "function", "function": {"name": "f"}}]}),
        400,
        "bad_request",
        "tools",
    );
    with(json!({"messages": []}), 400, "bad_request", "messages");
    with(
        json!({"messages": [{"role": "robot", "content": "x"}]}),
        400,
        "bad_request",
        "messages.[0].role",
    );
    with(
        json!({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}),
        400,
        "bad_request",
        "messages.[1].role",
    );
    with(
        json!({"messages": [{"role": "user", "content": "   "}]}),
        400,
        "bad_request",
        "messages.[0].content",
    );
    with(
        json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}),
        400,
        "bad_request",
        "messages.[0].content.[0].type",
    );
    with(json!({"model": 5}), 400, "bad_request", "model");
    for (i, (req, status, code, param)) in cases.into_iter().enumerate() {
        let r = req.send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "case {i}");
        let e = openai_error(r).await.error;
        assert_eq!(e.code.as_deref(), Some(code), "case {i}: {}", e.message);
        assert_eq!(e.param.as_deref(), param, "case {i}: {}", e.message);
        assert!(!e.message.is_empty());
        assert!(!e.message.contains(TOKEN), "case {i}: the token leaked");
    }
    assert_eq!(s.state_bytes(), before, "nothing recorded");
    assert_eq!(
        s.upstream
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_failure_is_an_error_and_records_nothing() {
    let s = with_fact(Script {
        fail_status: Some(400),
        ..Script::says("x")
    })
    .await;
    let before = s.state_bytes();
    for stream in [false, true] {
        let r = s.program_json(Method::POST, CHAT, &chat_body(stream)).await;
        // Nothing had streamed yet, so even a stream request gets a status.
        assert_eq!(r.status(), StatusCode::BAD_GATEWAY, "stream {stream}");
        let e = openai_error(r).await.error;
        assert_eq!(e.kind, "server_error");
        assert_eq!(e.code.as_deref(), Some("provider"));
        assert!(
            e.message.contains("fake"),
            "names the provider: {}",
            e.message
        );
    }
    assert_eq!(s.state_bytes(), before);
}

const REMEMBER_QUILLIBRIX: &str = r#"{"ops":[{"op":"add","kind":"fact","title":"Cat's bed","content":"Quillibrix sleeps on the server rack.","certainty":0.9}]}"#;

/// The interpreter's reply is held this long: the client's answer must
/// come well before it.
const INTERPRETER_DELAY: Duration = Duration::from_millis(1500);

/// The turn's memory step runs after the answer, in the background: the
/// completion (or the stream, read to its end) comes before the slow
/// interpreter has answered, and the exchange is remembered after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exchange_is_remembered_after_the_answer_is_returned() {
    for stream in [false, true] {
        let s = common::serve_with(
            Script {
                memory_delay: INTERPRETER_DELAY,
                ..Script::says("It sleeps on the rack.").remembering(REMEMBER_QUILLIBRIX)
            },
            false,
            |o| {
                o.config.interpreter.mode = Some(wo_providers::config::InterpreterMode::After);
                o.config.interpreter.pause_seconds = Some(0);
            },
        )
        .await;
        let started = std::time::Instant::now();
        let r = s.program_json(Method::POST, CHAT, &chat_body(stream)).await;
        assert_eq!(r.status(), StatusCode::OK);
        let text = r.text().await.unwrap();
        let answered = started.elapsed();
        if stream {
            let frames = data_frames(&text);
            assert_eq!(frames.last().map(String::as_str), Some("[DONE]"), "{text}");
        } else {
            let c: OpenAiChatCompletion = serde_json::from_str(&text).unwrap();
            assert_eq!(c.choices[0].message.content, "It sleeps on the rack.");
        }
        assert!(
            answered < INTERPRETER_DELAY,
            "stream {stream}: the answer waited for the interpreter ({answered:?})"
        );
        // The exchange is durable when the answer arrives …
        let stored = messages(&s);
        assert_eq!(stored.len(), 2, "stream {stream}");
        // … and the memory step lands after it.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let state = loop {
            let state = s.state_json();
            if state["memory_log"]
                .as_array()
                .is_some_and(|l| !l.is_empty())
            {
                break state;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "stream {stream}: nothing remembered: {state}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let fact = state["truth"]["trust"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["title"] == "Cat's bed")
            .unwrap_or_else(|| panic!("stream {stream}: {state}"))
            .clone();
        assert_eq!(
            fact["provenance"]["messages"],
            json!([stored[0]["id"], stored[1]["id"]]),
            "stream {stream}"
        );
        assert_eq!(state["memory_log"][0]["exchange"], stored[1]["id"]);
        // The interpreter asked for structured output.
        let bodies = s.upstream.bodies.lock().unwrap().clone();
        assert_eq!(bodies.len(), 2);
        assert_eq!(bodies[1]["response_format"]["type"], "json_schema");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_stream_cancels_the_turn() {
    let s = with_fact(Script {
        delay: Duration::from_millis(150),
        ..Script::says("one two three four five six seven eight nine ten")
    })
    .await;
    let before = s.state_bytes();
    let mut r = s.program_json(Method::POST, CHAT, &chat_body(true)).await;
    assert_eq!(r.status(), StatusCode::OK);
    // Read the first piece, then hang up.
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("chat.completion.chunk"));
    drop(r);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(s.state_bytes(), before, "a cancelled turn records nothing");
}

/// `/mcp` from outside: the bearer token only, rmcp's protocol behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_needs_the_bearer_token_and_answers_behind_it() {
    let s = serve(Script::says("x"), false).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"}}});
    let mcp = |req: reqwest::RequestBuilder| {
        req.header("accept", "application/json, text/event-stream")
            .json(&init)
    };
    // No token, a wrong one, the browser's cookie: 401 before MCP.
    for req in [
        s.client.post(s.url("/mcp")),
        s.client
            .post(s.url("/mcp"))
            .bearer_auth("wrong-token-0123456789"),
        s.client
            .post(s.url("/mcp"))
            .header("cookie", s.cookie())
            .header("origin", &s.base),
    ] {
        let r = mcp(req).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let e: wo_wire::ErrorBody = r.json().await.unwrap();
        assert!(e.error.message.contains("Bearer"), "{}", e.error.message);
    }
    // A foreign Origin, even with the token.
    let r = mcp(s
        .program(Method::POST, "/mcp")
        .header("origin", "http://evil.example"))
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // With it: a session, and the server's name in the answer.
    let r = mcp(s.program(Method::POST, "/mcp")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let text = r.text().await.unwrap();
    assert!(text.contains("\"wikioracle\""), "{text}");
    // The session ends with a bodiless DELETE (no Content-Type needed).
    let r = s
        .program(Method::DELETE, "/mcp")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    // A body over the limit is refused whole.
    let r = s
        .program(Method::POST, "/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(vec![b' '; 65 << 10])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_faces_are_local_mode_only() {
    let s = serve(Script::says("x"), true).await;
    for (method, path) in [
        (Method::GET, "/v1/models"),
        (Method::POST, CHAT),
        (Method::POST, "/mcp"),
    ] {
        let r = s
            .client
            .request(method, s.url(path))
            .header("content-type", "application/json")
            .body(chat_body(false).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut opts = common::options(dir.path(), &s.upstream, true);
    opts.mcp_allow_write = true;
    let e = wo_server::bind(opts).await.err().expect("refused");
    assert!(e.to_string().contains("--mcp-allow-write"), "{e}");
}

/// A one-message chat completion asking `model`.
async fn say_hi_to(s: &Served, model: &str) -> reqwest::Response {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    s.program_json(Method::POST, CHAT, &body).await
}

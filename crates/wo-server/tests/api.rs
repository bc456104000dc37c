//! The JSON API end to end over HTTP against a fake upstream that follows
//! the OpenAI streaming wire format: turns land in llm.json (or, stateless,
//! in the state_patch), failures save nothing, and every write path works.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Script, events, serve};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use wo_wire::api as wire;

async fn chat(s: &common::Served, body: Value) -> Vec<(String, Value)> {
    let r = s.program_json(Method::POST, "/api/chat", &body).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    events(r).await
}

/// The payload of the `name` event.
fn event<'a>(evs: &'a [(String, Value)], name: &str) -> &'a Value {
    &evs.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} event: {evs:?}"))
        .1
}

fn done(evs: &[(String, Value)]) -> &Value {
    event(evs, "done")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_and_lands_in_the_file() {
    let s = serve(Script::says("Paris is the capital."), false).await;
    let evs = chat(
        &s,
        json!({"message": "Capital of France?", "params": {"temperature": 0.3}}),
    )
    .await;
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"context"));
    assert_eq!(names.last(), Some(&"done"));
    let text: String = evs
        .iter()
        .filter(|(n, _)| n == "delta")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Paris is the capital.");
    let d = done(&evs);
    assert!(d.get("memory_follows").is_none(), "no memory step: {d}");
    let state = s.state_json();
    let msgs = state["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["id"], d["user_message_id"]);
    assert_eq!(msgs[0]["username"], "tester");
    assert_eq!(msgs[1]["id"], d["assistant_message_id"]);
    assert_eq!(msgs[1]["parent"], msgs[0]["id"]);
    assert_eq!(msgs[1]["content"], "<p>Paris is the capital.</p>");
    // The live `context` event's record is what the answer keeps.
    let live = &event(&evs, "context")["context_used"];
    assert!(
        live["sent"].as_array().is_some_and(|p| !p.is_empty()),
        "{live}"
    );
    assert_eq!(&msgs[1]["context_used"], live);
    assert_eq!(d["model"], "fake-1");
    // The parameters reached the upstream.
    assert_eq!(s.upstream.bodies.lock().unwrap()[0]["temperature"], 0.3);

    // A branch from the first question.
    let first_q = d["user_message_id"].as_str().unwrap().to_owned();
    let evs = chat(&s, json!({"message": "And of Italy?", "parent": first_q})).await;
    let d = done(&evs);
    let state = s.state_json();
    let new_q = state["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == d["user_message_id"])
        .unwrap();
    assert_eq!(new_q["parent"], first_q.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_turns_are_refused_with_a_pointer_and_save_nothing() {
    let s = serve(Script::says("x"), false).await;
    let cases = [
        (json!({"message": ""}), "/message"),
        (json!({"message": "hi", "parent": "m_nope"}), "/parent"),
        (
            json!({"message": "hi", "params": {"temperature": 9}}),
            "/params/temperature",
        ),
        (
            json!({"message": "hi", "params": {"temperature": "hot"}}),
            "/params/temperature",
        ),
        (
            json!({"message": "hi", "params": {"provider": "nobody"}}),
            "/params/provider",
        ),
        (json!({"message": 5}), "/message"),
    ];
    for (body, pointer) in cases {
        let r = s.program_json(Method::POST, "/api/chat", &body).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["pointer"], pointer, "{body}: {e}");
    }
    let r = s
        .program(Method::POST, "/api/chat")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(s.upstream.requests.load(Ordering::SeqCst), 0);
    assert!(s.state_json()["messages"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_provider_ends_the_stream_with_an_error_and_saves_nothing() {
    let s = serve(
        Script {
            fail_status: Some(401),
            ..Script::says("x")
        },
        false,
    )
    .await;
    let before = s.state_bytes();
    let evs = chat(&s, json!({"message": "hi"})).await;
    let (name, data) = evs.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(data["kind"], "auth");
    assert_eq!(s.state_bytes(), before);
}

/// Sends a chat, reads the stream until it has seen `until`, then goes
/// away as Stop (or a closed tab) does; returns once the server has kept
/// the turn (or after 5 s) with the messages in the file.
async fn leave_mid_turn(s: &common::Served, until: &str) -> Vec<Value> {
    let mut r = s
        .program_json(Method::POST, "/api/chat", &json!({"message": "talk"}))
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let mut seen = String::new();
    while !seen.contains(until) {
        let chunk = r.chunk().await.unwrap().expect("the stream ended early");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(r); // the browser's Stop button
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let messages = s.state_json()["messages"].as_array().unwrap().clone();
        if !messages.is_empty() || std::time::Instant::now() > deadline {
            return messages;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The kept exchange: the question, then an answer to it marked stopped.
fn assert_kept_stopped(messages: &[Value]) -> String {
    assert_eq!(messages.len(), 2, "{messages:?}");
    let (q, a) = (&messages[0], &messages[1]);
    assert_eq!(q["content"], "<p>talk</p>");
    assert_eq!(a["parent"], q["id"]);
    assert_eq!(a["role"], "assistant");
    assert_eq!(a["usage"]["truncated"], json!({"reason": "stopped"}), "{a}");
    a["content"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_mid_answer_keeps_the_question_and_the_answer_so_far() {
    // With the memory step on, to show it does not run for this exchange.
    let s = common::serve_with(
        Script {
            delay: Duration::from_millis(50),
            ..Script::says(&"word ".repeat(100)).remembering(REMEMBER_PARIS)
        },
        false,
        remembering,
    )
    .await;
    let messages = leave_mid_turn(&s, "event: delta").await;
    let answer = assert_kept_stopped(&messages);
    assert!(answer.starts_with("<p>word"), "{answer}");
    assert!(
        answer.matches("word").count() < 100,
        "only the words before the stop are kept: {answer}"
    );
    // It is durable: a fresh read of the file has it (state_json reads the
    // file), and the server is still fine.
    wo_format::parse(&s.state_bytes()).expect("the kept exchange is valid");
    let r = s.program(Method::GET, "/api/state").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // No interpretation of an exchange its reader stopped: the only call
    // upstream was the answer's.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.upstream.requests.load(Ordering::SeqCst), 1);
    let state = s.state_json();
    assert!(state.get("memory_log").is_none(), "{state}");
    assert!(state["truth"]["trust"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_before_the_first_word_keeps_the_question() {
    let s = serve(
        Script {
            first_delay: Duration::from_secs(30),
            ..Script::says("too late")
        },
        false,
    )
    .await;
    // The `context` event comes once the prompt is built; the model has
    // not said a word when the client goes.
    let messages = leave_mid_turn(&s, "event: context").await;
    let answer = assert_kept_stopped(&messages);
    assert_eq!(answer, "", "no word had come");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_chats_all_land() {
    let s = serve(Script::says("fine thanks"), false).await;
    let n = 20;
    let turns = (0..n).map(|i| {
        let req = s
            .program(Method::POST, "/api/chat")
            .json(&json!({"message": format!("question number {i}")}));
        async move { events(req.send().await.unwrap()).await }
    });
    let results = futures::future::join_all(turns).await;
    for evs in &results {
        assert_eq!(evs.last().unwrap().0, "done", "{evs:?}");
    }
    let state = s.state_json();
    let msgs = state["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2 * n);
    for i in 0..n {
        let q = msgs
            .iter()
            .find(|m| m["content"] == format!("<p>question number {i}</p>"))
            .unwrap();
        assert!(
            msgs.iter()
                .any(|m| m["parent"] == q["id"] && m["role"] == "assistant"),
            "answer to {i}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truth_entries_are_added_edited_and_deleted_with_a_tombstone() {
    let s = serve(Script::says("x"), false).await;
    let r = s
        .browser_json(
            Method::POST,
            "/api/truth",
            &wire::NewTruth {
                title: "Kiln".into(),
                content: "Cone 6 is **1222 °C**".into(),
                certainty: 0.8,
                kind: Some(wo_format::TruthKind::Fact),
            },
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let entry: wo_wire::TruthEntry = r.json().await.unwrap();
    let id = entry.id;
    assert_eq!(entry.content, "<p>Cone 6 is <strong>1222 °C</strong></p>");
    assert_eq!(entry.extra["kind"], "fact");
    let r = s
        .browser_json(
            Method::PATCH,
            &format!("/api/truth/{id}"),
            &wire::TruthEdit {
                certainty: Some(0.4),
                content: Some("<img src=x onerror=alert(1)>cone 6".into()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let state = s.state_json();
    let stored = &state["truth"]["trust"][0];
    assert_eq!(stored["certainty"], 0.4);
    assert!(
        !stored["content"].as_str().unwrap().contains("onerror"),
        "{stored}"
    );
    assert!(stored["updated"].is_string());
    let r = s
        .browser_json(
            Method::PATCH,
            &format!("/api/truth/{id}"),
            &json!({"certainty": 2}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = s
        .browser_json(
            Method::PATCH,
            "/api/truth/t_missing",
            &json!({"certainty": 1}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = s
        .browser_json(Method::DELETE, &format!("/api/truth/{id}"), &json!({}))
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let deleted: wire::TruthDeleted = r.json().await.unwrap();
    assert_eq!(deleted.deleted, id);
    let state = s.state_json();
    assert!(state["truth"]["trust"].as_array().unwrap().is_empty());
    assert_eq!(state["truth"]["deleted"][0]["id"], id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_and_prefs_patch() {
    let s = serve(Script::says("x"), false).await;
    let r = s.browser_json(Method::PATCH, "/api/state", &json!({"context": "A pottery studio.\n\nWe fire to cone 6.", "retrieval_prefs": {"max_entries": 3, "min_certainty": 0.5}})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let state = s.state_json();
    assert_eq!(
        state["context"],
        "<p>A pottery studio.</p>\n<p>We fire to cone 6.</p>"
    );
    assert_eq!(state["truth"]["retrieval_prefs"]["max_entries"], 3);
    let r = s
        .browser_json(
            Method::PATCH,
            "/api/state",
            &json!({"retrieval_prefs": {"min_certainty": -1}}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_then_merge_into_another_server_gives_the_same_state() {
    let a = serve(Script::says("an answer"), false).await;
    chat(&a, json!({"message": "first"})).await;
    a.browser_json(
        Method::POST,
        "/api/truth",
        &json!({"title": "T", "content": "c", "certainty": 1}),
    )
    .await;
    let r = a.program(Method::GET, "/api/export").send().await.unwrap();
    let cd = r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cd.starts_with("attachment; filename=\"llm_") && cd.ends_with(".json\""),
        "{cd}"
    );
    let exported = r.bytes().await.unwrap();
    assert_eq!(
        exported.as_ref(),
        a.state_bytes().as_slice(),
        "the export is the file"
    );

    let b = serve(Script::says("x"), false).await;
    let r = b
        .browser(Method::POST, "/api/merge")
        .header("content-type", "application/json")
        .body(exported.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let report: wire::MergeReport = r.json().await.unwrap();
    assert_eq!((report.messages_added, report.truth_added), (2, 1));
    let (sa, sb) = (a.state_json(), b.state_json());
    assert_eq!(sa["messages"], sb["messages"]);
    assert_eq!(sa["truth"]["trust"], sb["truth"]["trust"]);
    // Merging again changes nothing.
    let r = b
        .browser(Method::POST, "/api/merge")
        .header("content-type", "application/json")
        .body(exported)
        .send()
        .await
        .unwrap();
    let report: wire::MergeReport = r.json().await.unwrap();
    assert_eq!(report.messages_added, 0);
    // A broken upload is refused with the pointer of the problem.
    let before = b.state_bytes();
    let r = b.browser_json(Method::POST, "/api/merge", &json!({"version": 1, "schema": "x", "date": "2026-01-01T00:00:00Z", "context": "", "messages": [{"title": 5}], "truth": {"trust": []}})).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]["pointer"].as_str().unwrap().starts_with("/"),
        "{e}"
    );
    assert_eq!(b.state_bytes(), before);

    // An export nested deeper than any reader accepts is refused with its
    // pointer (it used to be stored, and then no command could open the file).
    let mut deep = json!("leaf");
    for _ in 0..130 {
        deep = json!({ "x": deep });
    }
    let r = b.browser_json(Method::POST, "/api/merge", 
            &json!({"version": 1, "schema": "wikioracle.llm_state", "date": "2026-01-01T00:00:00Z", "context": "",
            "messages": [{"id": "m_00000000000000aa", "title": "t", "username": "u",
                "timestamp": "2026-01-01T00:00:00Z", "content": "<p>deep</p>", "x_deep": deep}],
            "truth": {"trust": []}}),
        ).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(b.state_bytes(), before);

    // Hostile XHTML in an upload is sanitised on the way in (reported by
    // pointer), so the merged file still validates as wo's own.
    let r = b.browser_json(Method::POST, "/api/merge", 
            &json!({"version": 1, "schema": "wikioracle.llm_state", "date": "2026-01-01T00:00:00Z", "context": "",
            "messages": [{"id": "m_00000000000000bb", "title": "t", "username": "u",
                "timestamp": "2026-01-01T00:00:00Z",
                "content": "<p onclick=\"alert(1)\">hi<script>alert(2)</script></p>"}],
            "truth": {"trust": []}}),
        ).await;
    let report: wire::MergeReport = r.json().await.unwrap();
    assert_eq!(report.messages_added, 1, "{report:?}");
    assert_eq!(report.sanitised, ["/messages/0/content"], "{report:?}");
    let after = b.state_bytes();
    let text = String::from_utf8_lossy(&after);
    assert!(
        !text.contains("script") && !text.contains("onclick"),
        "{text}"
    );
    let (errors, _warnings) = wo_format::validate_bytes(&after);
    assert!(errors.is_empty(), "{errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_pages_and_search() {
    let s = serve(Script::says("glazes crawl when dusty"), false).await;
    for q in ["why do glazes crawl", "what is bisque", "kiln wash recipe"] {
        chat(&s, json!({"message": q})).await;
    }
    let r = s
        .program(Method::GET, "/api/state?limit=2")
        .send()
        .await
        .unwrap();
    let page: wire::StatePage = r.json().await.unwrap();
    assert_eq!((page.total_messages, page.offset), (6, 4));
    assert_eq!(page.messages.len(), 2);
    let r = s
        .program(Method::GET, "/api/state?offset=0&limit=1")
        .send()
        .await
        .unwrap();
    let page: wire::StatePage = r.json().await.unwrap();
    assert_eq!(page.messages[0].content, "<p>why do glazes crawl</p>");
    let r = s
        .program(Method::GET, "/api/state?limit=0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = s
        .program(Method::GET, "/api/search?q=bisque")
        .send()
        .await
        .unwrap();
    let hits: wire::SearchResults = r.json().await.unwrap();
    assert_eq!(hits.messages[0].title, "what is bisque");
    assert!(hits.chunks.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_update_drafts_shows_a_diff_and_applies_only_when_current() {
    let s = serve(Script::says("A pottery studio firing to cone 6."), false).await;
    s.browser_json(
        Method::PATCH,
        "/api/state",
        &json!({"context": "A pottery studio."}),
    )
    .await;
    let r = s
        .browser_json(Method::POST, "/api/context/draft", &json!({}))
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST, "no messages yet");
    chat(&s, json!({"message": "We fire to cone 6 now."})).await;
    let before = s.state_bytes();
    let r = s
        .browser_json(Method::POST, "/api/context/draft", &json!({}))
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let draft: Value = r.json().await.unwrap();
    assert_eq!(draft["new_messages"], 2);
    assert_eq!(draft["draft"], "<p>A pottery studio firing to cone 6.</p>");
    let ops: Vec<&str> = draft["diff"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["remove", "add"]);
    assert_eq!(s.state_bytes(), before, "a draft saves nothing");
    let prompt =
        s.upstream.bodies.lock().unwrap().last().unwrap()["messages"][1]["content"].clone();
    assert!(
        prompt.as_str().unwrap().contains("We fire to cone 6 now."),
        "{prompt}"
    );

    let r = s
        .browser_json(
            Method::POST,
            "/api/context/apply",
            &json!({"draft": draft["draft"], "current": "<p>stale</p>"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert_eq!(s.state_bytes(), before);
    let r = s
        .browser_json(
            Method::POST,
            "/api/context/apply",
            &json!({"draft": draft["draft"], "current": draft["current"]}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let state = s.state_json();
    assert_eq!(
        state["context"],
        "<p>A pottery studio firing to cone 6.</p>"
    );
    let audit = &state["truth"]["trust"][0];
    assert_eq!(audit["tags"], json!(["context-update"]));
    assert_eq!(audit["kind"], "event");
    let r = s
        .browser_json(Method::POST, "/api/context/draft", &json!({}))
        .await;
    assert_eq!(
        r.status(),
        StatusCode::BAD_REQUEST,
        "nothing new since the update"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_turns_end_with_a_patch_and_write_nothing() {
    let s = serve(Script::says("Lyon is not the capital."), true).await;
    let files_before: Vec<_> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut client_state = json!({
        "version": 1, "schema": wo_format::SCHEMA_URL, "date": "2026-01-01T00:00:00Z",
        "context": "<p>Geography quiz.</p>",
        "messages": [
            {"id": "m_aaaaaaaaaaaaaaaa", "title": "q", "username": "ann", "timestamp": "2026-01-01T00:00:00Z", "content": "<p>Is Lyon big?</p>", "role": "user"},
            {"id": "m_bbbbbbbbbbbbbbbb", "title": "a", "username": "fake-1", "timestamp": "2026-01-01T00:00:01Z", "content": "<p>Yes.</p>", "role": "assistant", "parent": "m_aaaaaaaaaaaaaaaa"}
        ],
        "truth": {"trust": [{"id": "t_aaaaaaaaaaaaaaaa", "title": "France", "timestamp": "2026-01-01T00:00:00Z", "certainty": 0.9, "content": "<p>Paris is the capital of France.</p>", "refs": 4}]}
    });
    let req = json!({
        "message": "What is the capital of France?",
        "username": "ann",
        "context": client_state["context"],
        "truth": client_state["truth"]["trust"],
        "window": client_state["messages"],
        "params": {}
    });
    let r = s
        .cookieless(Method::POST, "/api/stateless/chat", &req)
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let evs = events(r).await;
    let d = done(&evs).clone();
    assert!(
        d["sources"]
            .as_array()
            .unwrap()
            .contains(&json!("t_aaaaaaaaaaaaaaaa"))
    );
    wo_wire::apply_state_patch(&mut client_state, &d["state_patch"]);
    let msgs = client_state["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4, "history kept, two added");
    assert_eq!(msgs[2]["id"], d["user_message_id"]);
    assert_eq!(msgs[2]["parent"], "m_bbbbbbbbbbbbbbbb");
    assert_eq!(msgs[3]["content"], "<p>Lyon is not the capital.</p>");
    assert_eq!(client_state["truth"]["trust"][0]["refs"], 5);
    // The patched state is a valid llm.json.
    let bytes = serde_json::to_vec(&client_state).unwrap();
    wo_format::parse(&bytes).expect("valid after the patch");
    // Nothing was written, and local-only routes do not exist here.
    let files_after: Vec<_> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files_before, files_after);
    for path in ["/api/state", "/api/export", "/api/search?q=x"] {
        assert_eq!(
            s.client.get(s.url(path)).send().await.unwrap().status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    // A cross-site page cannot spend the operator's provider.
    let r = s
        .client
        .post(s.url("/api/stateless/chat"))
        .header("origin", "http://evil.example")
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // Caps.
    let mut big = req.clone();
    big["window"] = json!(vec![client_state["messages"][0].clone(); 201]);
    let r = s
        .client
        .post(s.url("/api/stateless/chat"))
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["pointer"], "/window");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wikioracle_provider_talks_to_a_stateless_server() {
    use futures::StreamExt;
    use wo_providers::Provider;
    let s = serve(Script::says("Bonjour."), true).await;
    let provider = wo_providers::wikioracle::WikiOracleProvider::new(
        wo_providers::RemoteConfig::new("hosted", s.base.clone(), "fake-1", 4096),
    )
    .unwrap();
    assert!(provider.check().await.is_reachable());
    let mut stream = provider
        .stream(
            wo_providers::ChatRequest {
                model: None,
                messages: vec![wo_providers::ChatMessage::user(String::from(
                    "Say hello in French",
                ))],
                temperature: None,
                max_tokens: Some(20),
                top_k: None,
                json_schema: None,
            },
            wo_providers::Cancel::new(),
        )
        .await
        .unwrap();
    let mut text = String::new();
    let mut finished = false;
    while let Some(ev) = stream.next().await {
        match ev.unwrap() {
            wo_providers::StreamEvent::Delta(t) => text.push_str(&t),
            wo_providers::StreamEvent::Done { finish_reason, .. } => {
                assert_eq!(finish_reason.as_deref(), Some("stop"));
                finished = true;
            }
        }
    }
    assert!(finished);
    assert_eq!(text, "Bonjour.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_and_chat_draw_on_the_directory_index() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("kiln.md"),
        "# Kiln\n\n## Firing schedule\n\nBisque to cone 04, then glaze to cone 6 with a slow cool.\n",
    )
    .unwrap();
    std::fs::write(
        project.path().join("retry.rs"),
        "/// Retries with exponential backoff.\npub fn retry_with_backoff(attempts: u32) -> u32 { attempts * 2 }\n",
    )
    .unwrap();
    wo_index::index_directory(project.path(), &wo_index::IndexOptions::default(), &|_| {}).unwrap();
    let root = project.path().to_path_buf();
    let s = common::serve_with(Script::says("Cone 6."), false, move |o| {
        o.index_root = Some(root)
    })
    .await;

    let hits: Value = s.program_get("/api/search?q=firing+schedule").await;
    let chunk = &hits["chunks"][0];
    assert_eq!(chunk["path"], "kiln.md", "{hits}");
    let r#ref = chunk["ref"].as_str().unwrap();
    let got: Value = s
        .program(Method::GET, &format!("/api/chunks/{ref}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        got["content"].as_str().unwrap().contains("cone 04"),
        "{got}"
    );
    let hits: Value = s.program_get("/api/search?q=backoff&kind=rust").await;
    assert_eq!(hits["chunks"][0]["path"], "retry.rs", "{hits}");
    let r = s
        .program(Method::GET, "/api/search?q=x&kind=cobol")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        s.program(Method::GET, "/api/chunks/c9999")
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );

    // The server keeps the loaded index, and reloads it when `wo index`
    // rewrites it.
    std::fs::write(
        project.path().join("glaze.md"),
        "# Glaze\n\nCeladon needs reduction.\n",
    )
    .unwrap();
    wo_index::index_directory(project.path(), &wo_index::IndexOptions::default(), &|_| {}).unwrap();
    let hits: Value = s.program_get("/api/search?q=celadon").await;
    assert_eq!(hits["chunks"][0]["path"], "glaze.md", "{hits}");

    // A turn cites the chunk it was given, and the model saw its text.
    let evs = chat(&s, json!({"message": "What is our firing schedule?"})).await;
    let d = done(&evs);
    assert!(
        d["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|id| id.as_str().unwrap().starts_with("chunk:")),
        "{d}"
    );
    let sent = s.upstream.bodies.lock().unwrap()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(sent.contains("cone 04"), "{sent}");
    let state = s.state_json();
    assert_eq!(state["messages"][1]["sources"], d["sources"]);
    // With the rag tool off, no chunk is sent.
    let evs = chat(
        &s,
        json!({"message": "What is our firing schedule?", "params": {"rag": false}}),
    )
    .await;
    let sources = done(&evs)["sources"].as_array().unwrap().clone();
    assert!(
        sources
            .iter()
            .all(|id| !id.as_str().unwrap().starts_with("chunk:")),
        "{sources:?}"
    );
}

/// `wo serve` honours `[defaults] temperature/max_tokens` as
/// `wo ask` does (the one request builder), a client's own values win, and
/// a bad one is named by its JSON pointer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_defaults_apply_to_served_turns() {
    let s = common::serve_with(Script::says("ok"), false, |o| {
        o.config.defaults.temperature = Some(0.5);
        o.config.defaults.max_tokens = Some(123);
    })
    .await;
    done(&chat(&s, json!({"message": "first"})).await);
    done(
        &chat(
            &s,
            json!({"message": "second", "params": {"temperature": 0.25, "max_tokens": 7}}),
        )
        .await,
    );
    {
        let bodies = s.upstream.bodies.lock().unwrap();
        assert_eq!(bodies[0]["temperature"], 0.5, "{}", bodies[0]);
        assert_eq!(bodies[0]["max_tokens"], 123, "{}", bodies[0]);
        assert_eq!(bodies[1]["temperature"], 0.25, "{}", bodies[1]);
        assert_eq!(bodies[1]["max_tokens"], 7, "{}", bodies[1]);
    }
    for (params, pointer) in [
        (json!({"max_tokens": 0}), "/params/max_tokens"),
        (json!({"min_certainty": 1.5}), "/params/min_certainty"),
    ] {
        let r = s
            .program_json(
                Method::POST,
                "/api/chat",
                &json!({"message": "hi", "params": params}),
            )
            .await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{params}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["pointer"], pointer, "{e}");
    }
    assert_eq!(s.state_json()["messages"].as_array().unwrap().len(), 4);
}

const REMEMBER_PARIS: &str = r#"{"ops":[{"op":"add","kind":"fact","title":"Capital of France","content":"Paris is the capital of France.","certainty":0.9}]}"#;

/// A stateless turn asking the capital of France with nothing sent along;
/// its events.
async fn stateless_capital_question(s: &common::Served) -> Vec<(String, Value)> {
    let body = json!({"message": "What is the capital of France?", "truth": [], "window": [], "params": {}});
    let r = s
        .cookieless(Method::POST, "/api/stateless/chat", &body)
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    events(r).await
}

fn remembering(o: &mut wo_server::ServeOptions) {
    o.config.interpreter.mode = Some(wo_providers::config::InterpreterMode::After);
    // At once after each answer: these tests read the memory event.
    o.config.interpreter.pause_seconds = Some(0);
}

fn memory_event(evs: &[(String, Value)]) -> &Value {
    event(evs, "memory")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_turn_is_remembered_after_done_and_can_be_undone() {
    let s = common::serve_with(
        Script::says("Paris.").remembering(REMEMBER_PARIS),
        false,
        remembering,
    )
    .await;
    let evs = chat(&s, json!({"message": "What is the capital of France?"})).await;
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    let (d, m) = (done(&evs).clone(), memory_event(&evs).clone());
    // The answer is complete before the interpreter runs.
    let at = |name| names.iter().position(|n| *n == name).unwrap();
    assert!(at("done") < at("memory"), "{names:?}");
    assert_eq!(
        d["memory_follows"], true,
        "done says a memory event follows"
    );
    assert_eq!(m["exchange"], d["assistant_message_id"]);
    let created = m["record"]["created"].as_array().unwrap().clone();
    assert_eq!(created.len(), 1, "{m}");
    // The interpreter asked for structured output with the ops schema.
    let bodies = s.upstream.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[1]["response_format"]["type"], "json_schema");
    // In the file: the fact with its provenance, and the journal.
    let state = s.state_json();
    let fact = &state["truth"]["trust"][0];
    assert_eq!(fact["id"], created[0]);
    assert_eq!(
        fact["provenance"]["messages"],
        json!([d["user_message_id"], d["assistant_message_id"]])
    );
    // The web client reads the journal with the state.
    let page: Value = s.program_get("/api/state").await;
    assert_eq!(page["memory_log"][0]["exchange"], d["assistant_message_id"]);
    // Undo: the fact goes (with a tombstone); a second undo finds nothing.
    let undo = |exchange: Value| {
        s.program(Method::POST, "/api/memory/undo")
            .json(&json!({ "exchange": exchange }))
            .send()
    };
    let r = undo(d["assistant_message_id"].clone()).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let undone: Value = r.json().await.unwrap();
    assert_eq!(undone["removed"], json!(created));
    let state = s.state_json();
    assert!(state["truth"]["trust"].as_array().unwrap().is_empty());
    assert_eq!(state["truth"]["deleted"][0]["id"], created[0]);
    let r = undo(d["assistant_message_id"].clone()).await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let before = std::fs::read(&s.state).unwrap();
    let r = undo(json!(42)).await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(std::fs::read(&s.state).unwrap(), before, "nothing written");
}

/// One person's server interprets an exchange only after a pause in their
/// questions: a question asked right after an answer goes to the model
/// before the interpreter's call (a model server on their machine answers
/// one request at a time), and each exchange is still remembered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interpreter_waits_for_a_pause_in_the_questions() {
    let s = common::serve_with(
        Script::says("Paris.").remembering(REMEMBER_PARIS),
        false,
        |o| {
            remembering(o);
            o.config.interpreter.pause_seconds = Some(2);
        },
    )
    .await;
    let s = std::sync::Arc::new(s);
    let started = std::time::Instant::now();
    let first = tokio::spawn({
        let s = s.clone();
        async move { chat(&s, json!({"message": "What is the capital of France?"})).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let second = chat(&s, json!({"message": "And of Italy?"})).await;
    let first = first.await.unwrap();
    // Both exchanges remembered, each reported after its answer.
    for evs in [&first, &second] {
        assert_eq!(done(evs)["memory_follows"], true);
        assert_eq!(
            memory_event(evs)["exchange"],
            done(evs)["assistant_message_id"]
        );
    }
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "the first exchange waited for the pause"
    );
    // The upstream saw both questions before any interpreter call.
    let bodies = s.upstream.bodies.lock().unwrap().clone();
    let asks_structured = |b: &Value| b.get("response_format").is_some();
    assert!(bodies.len() >= 4, "{}", bodies.len());
    assert!(
        !asks_structured(&bodies[0]) && !asks_structured(&bodies[1]),
        "{bodies:?}"
    );
    assert!(bodies[2..].iter().all(asks_structured));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_interpreter_output_is_a_note_and_changes_nothing() {
    let s = common::serve_with(
        Script::says("Paris.").remembering(r#"{"ops":[{"op":"delete_everything"}]}"#),
        false,
        remembering,
    )
    .await;
    let evs = chat(&s, json!({"message": "What is the capital of France?"})).await;
    let m = memory_event(&evs);
    assert!(m["record"].is_null(), "{m}");
    assert_eq!(done(&evs)["memory_follows"], true);
    assert!(
        m["note"]
            .as_str()
            .unwrap()
            .contains("not usable memory operations"),
        "{m}"
    );
    // The call was retried once: chat + two interpreter calls.
    assert_eq!(s.upstream.requests.load(Ordering::SeqCst), 3);
    let state = s.state_json();
    assert_eq!(state["messages"].as_array().unwrap().len(), 2);
    assert!(
        state["truth"]["trust"]
            .as_array()
            .is_none_or(|t| t.is_empty())
    );
    assert!(state.get("memory_log").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_turn_is_remembered_in_the_patch_and_undone_by_the_client() {
    let s = common::serve_with(
        Script::says("Paris.").remembering(REMEMBER_PARIS),
        true,
        remembering,
    )
    .await;
    let mut client_state = json!({
        "version": 1, "schema": wo_format::SCHEMA_URL, "date": "2026-01-01T00:00:00Z",
        "context": "", "messages": [], "truth": {"trust": []}
    });
    let evs = stateless_capital_question(&s).await;
    let (d, m) = (done(&evs).clone(), memory_event(&evs).clone());
    wo_wire::apply_state_patch(&mut client_state, &d["state_patch"]);
    wo_wire::apply_state_patch(&mut client_state, &m["state_patch"]);
    client_state["memory_log"] = json!([m["record"]]);
    let trust = client_state["truth"]["trust"].as_array().unwrap().clone();
    assert_eq!(trust.len(), 1, "{client_state}");
    assert_eq!(trust[0]["title"], "Capital of France");
    assert_eq!(
        trust[0]["provenance"]["messages"][1],
        d["assistant_message_id"]
    );
    // The client's undo: the server runs it on what the client sends.
    let body = json!({
        "exchange": m["exchange"],
        "memory_log": client_state["memory_log"],
        "truth": trust,
    });
    let r = s
        .cookieless(Method::POST, "/api/stateless/memory/undo", &body)
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let u: Value = r.json().await.unwrap();
    assert_eq!(u["undone"]["removed"], json!([trust[0]["id"]]));
    assert_eq!(u["deleted"][0]["id"], trust[0]["id"]);
    assert!(u["memory_log"][0]["undone"].is_string(), "{u}");
    // An exchange the journal does not have is named.
    let body = json!({"exchange": "m_nope", "memory_log": [], "truth": []});
    let r = s
        .cookieless(Method::POST, "/api/stateless/memory/undo", &body)
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["pointer"], "/exchange");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_server_interprets_with_the_operators_provider_even_if_clients_cannot_pick_it() {
    // Clients may pick only `fake`; the operator's interpreter is `scribe`.
    let scribe = common::upstream(Script::says("unused").remembering(REMEMBER_PARIS)).await;
    let scribe_addr = scribe.addr;
    let s = common::serve_with(Script::says("Paris."), true, move |o| {
        let path = o.config.source.clone().unwrap();
        let text = format!(
            "[defaults]\nprovider = \"fake\"\n\n[providers.fake]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-1\"\n\n[providers.scribe]\nkind = \"openai\"\nbase_url = \"http://{scribe_addr}/v1\"\nmodel = \"scribe-1\"\n\n[interpreter]\nmode = \"after\"\nprovider = \"scribe\"\npause_seconds = 0\n",
            o.config.providers["fake"].base_url.clone().unwrap(),
        );
        o.config = wo_providers::Config::from_toml(
            &text,
            &path,
            wo_providers::config::Env::from_pairs([(
                "HOME",
                path.parent().unwrap().as_os_str().to_owned(),
            )]),
        )
        .unwrap();
        o.hosted.allow_providers = vec!["fake".into()];
    })
    .await;
    let evs = stateless_capital_question(&s).await;
    let m = memory_event(&evs);
    assert_eq!(m["record"]["by"], "scribe/scribe-1", "{m}");
    assert_eq!(
        s.upstream.requests.load(Ordering::SeqCst),
        1,
        "the chat only"
    );
    assert_eq!(scribe.requests.load(Ordering::SeqCst), 1, "the interpreter");
    // A client still cannot choose the interpreter's provider for a turn.
    let body = json!({"message": "hi", "params": {"provider": "scribe"}});
    let r = s
        .cookieless(Method::POST, "/api/stateless/chat", &body)
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

/// The messages the upstream was sent in its last call (role, content).
fn last_prompt(s: &common::Served) -> Vec<(String, String)> {
    s.upstream.bodies.lock().unwrap().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                m["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_conversation_starts_a_root_that_follows_nothing() {
    let s = serve(Script::says("Noted."), false).await;
    chat(&s, json!({"message": "My cat is called Zorblax."})).await;
    // No parent: the turn continues from the latest message.
    let d = done(&chat(&s, json!({"message": "What colour is grass?"})).await).clone();
    let state = s.state_json();
    let msgs = state["messages"].as_array().unwrap();
    let q2 = msgs
        .iter()
        .find(|m| m["id"] == d["user_message_id"])
        .unwrap();
    assert_eq!(q2["parent"], msgs[1]["id"], "continues from the latest");
    assert!(q2.get("new_conversation").is_none());
    assert!(
        last_prompt(&s).iter().any(|(_, c)| c.contains("Zorblax")),
        "an ordinary turn carries the conversation"
    );

    // A new conversation: stored as a root, no earlier turn sent.
    let evs = chat(
        &s,
        json!({"message": "Name a river.", "new_conversation": true, "params": {"rag": false}}),
    )
    .await;
    let d = done(&evs).clone();
    let prompt = last_prompt(&s);
    let turns: Vec<&(String, String)> = prompt.iter().filter(|(r, _)| r != "system").collect();
    assert_eq!(turns.len(), 1, "only the new question: {prompt:?}");
    assert_eq!(turns[0].1, "Name a river.");
    let state = s.state_json();
    let root = state["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == d["user_message_id"])
        .unwrap()
        .clone();
    assert!(root.get("parent").is_none(), "{root}");
    assert_eq!(root["new_conversation"], true);

    // Its follow-up carries the new conversation and not the old one.
    chat(
        &s,
        json!({"message": "How long is it?", "parent": d["assistant_message_id"], "params": {"rag": false}}),
    )
    .await;
    let prompt = last_prompt(&s);
    assert!(
        prompt.iter().any(|(_, c)| c == "Name a river."),
        "{prompt:?}"
    );
    assert!(
        !prompt.iter().any(|(_, c)| c.contains("grass")),
        "the earlier conversation leaked into the new one: {prompt:?}"
    );

    // Both at once is refused, naming the field, and saves nothing.
    let before = s.state_bytes();
    let r = s
        .program_json(
            Method::POST,
            "/api/chat",
            &json!({"message": "hi", "parent": d["user_message_id"], "new_conversation": true}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["pointer"], "/parent", "{e}");
    let r = s
        .program_json(
            Method::POST,
            "/api/chat",
            &json!({"message": "hi", "new_conversation": "yes"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["pointer"], "/new_conversation", "{e}");
    assert_eq!(s.state_bytes(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_new_conversation_is_a_marked_root_and_needs_an_empty_window() {
    let s = serve(Script::says("The Tagus."), true).await;
    let post = |body: Value| {
        let s = &s;
        async move {
            s.cookieless(Method::POST, "/api/stateless/chat", &body)
                .await
        }
    };
    let r = post(json!({"message": "Name a river.", "new_conversation": true})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let evs = events(r).await;
    let d = done(&evs).clone();
    let patch = &d["state_patch"]["messages"];
    let q = patch
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == d["user_message_id"])
        .unwrap();
    assert!(q.get("parent").is_none(), "{q}");
    assert_eq!(q["new_conversation"], true);

    let window = json!([{"id": "m_aaaaaaaaaaaaaaaa", "title": "q", "username": "ann", "timestamp": "2026-01-01T00:00:00Z", "content": "<p>Earlier.</p>", "role": "user"}]);
    let r = post(json!({"message": "hi", "new_conversation": true, "window": window})).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["pointer"], "/window", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_renamed_by_its_roots_title_and_bad_titles_change_nothing() {
    let s = serve(Script::says("Cone 6 is 1222 °C."), false).await;
    let evs = chat(&s, json!({"message": "How hot is cone 6?"})).await;
    let root = done(&evs)["user_message_id"].as_str().unwrap().to_owned();
    let before = s.state_json();
    let content = before["messages"][0]["content"].clone();
    let rename = |id: String, body: Value| {
        s.browser(Method::PATCH, &format!("/api/messages/{id}"))
            .json(&body)
            .send()
    };
    let r = rename(root.clone(), json!({"title": "  Kiln\n temperatures "}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let out: wire::MessageRenamed = r.json().await.unwrap();
    assert_eq!(out.id, root);
    assert_eq!(out.title, "Kiln temperatures");
    let state = s.state_json();
    let msgs = state["messages"].as_array().unwrap();
    // The root's title only; its id and content are as they were, and the
    // answer keeps its own title.
    assert_eq!(msgs[0]["id"], root.as_str());
    assert_eq!(msgs[0]["title"], "Kiln temperatures");
    assert_eq!(msgs[0]["content"], content);
    assert_eq!(msgs[1]["title"], before["messages"][1]["title"]);

    // Markup is text: stored as typed (JSON-escaped), never as elements.
    let r = rename(
        root.clone(),
        json!({"title": "<img src=x onerror=alert(1)>"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        s.state_json()["messages"][0]["title"],
        "<img src=x onerror=alert(1)>"
    );

    // Refusals name the field and leave the file byte for byte.
    let kept = s.state_bytes();
    for (body, pointer, says) in [
        (json!({"title": " \n\t "}), "/title", "empty"),
        (
            json!({"title": "x".repeat(201)}),
            "/title",
            "201 characters",
        ),
        (json!({"title": 5}), "/title", ""),
        (json!({}), "", "title"),
    ] {
        let r = rename(root.clone(), body.clone()).await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["error"]["pointer"], pointer, "{body}: {err}");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(says),
            "{body}: {err}"
        );
    }
    let r = rename("m_0000000000000000".into(), json!({"title": "x"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(s.state_bytes(), kept);
    // Without the token: refused before the handler.
    let r = s
        .cookieless(
            Method::PATCH,
            &format!("/api/messages/{root}"),
            &json!({"title": "stolen"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(s.state_bytes(), kept);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_is_converted_and_sanitised_in_both_modes_and_saves_nothing() {
    for stateless in [false, true] {
        let s = serve(Script::says("x"), stateless).await;
        let before = s.state_bytes();
        let body = json!({"markdown": "# Studio\n\nWe fire to **cone 6**.\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1))"});
        let r = if stateless {
            s.cookieless(Method::POST, "/api/markdown", &body).await
        } else {
            s.browser_json(Method::POST, "/api/markdown", &body).await
        };
        assert_eq!(r.status(), StatusCode::OK, "stateless: {stateless}");
        let out: wire::MarkdownConverted = r.json().await.unwrap();
        assert!(
            out.xhtml
                .starts_with("<h1>Studio</h1>\n<p>We fire to <strong>cone 6</strong>.</p>"),
            "{}",
            out.xhtml
        );
        assert!(
            !out.xhtml.contains("script") && !out.xhtml.contains("javascript"),
            "{}",
            out.xhtml
        );
        let r = s
            .browser(Method::POST, "/api/markdown")
            .json(&json!({"markdown": ["not", "text"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["error"]["pointer"], "/markdown");
        assert_eq!(s.state_bytes(), before);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_keeps_a_stopped_turn_through_the_engine() {
    // Bodies up to 1 MiB: an answer over the provider's cap still arrives.
    let s = common::serve_with(Script::says("unused"), true, |o| {
        o.limits.body_bytes = 1 << 20
    })
    .await;
    let stopped = |body: Value| {
        let s = &s;
        async move {
            s.cookieless(Method::POST, "/api/stateless/stopped", &body)
                .await
        }
    };
    let r = stopped(json!({
        "turn": {"message": "Tell me *everything*", "parent": "m_0123456789abcdef", "params": {}},
        "answer": "**Paris** is the capital, and",
        "sent_at": "2026-11-26T00:00:00Z",
        "sources": ["t_00000000000000aa"],
        "context_used": {"tokens": 40, "budget": 100, "sent": [
            {"kind": "memory", "id": "t_00000000000000aa", "tokens": 12, "score": 0.5},
            {"kind": "query", "tokens": 8}
        ]}
    }))
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let kept: wire::StatelessKept = r.json().await.unwrap();
    let messages = kept.state_patch["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    let (q, a) = (&messages[0], &messages[1]);
    assert_eq!(q["id"], kept.user_message_id.as_str());
    assert_eq!(a["id"], kept.assistant_message_id.as_str());
    // The question as a turn stores it (plain text, not Markdown), where
    // it was asked, when it was sent.
    assert_eq!(q["content"], "<p>Tell me *everything*</p>");
    assert_eq!(q["parent"], "m_0123456789abcdef");
    assert_eq!(q["timestamp"], "2026-11-26T00:00:00Z");
    // The answer so far, converted as a finished answer is, marked stopped.
    assert_eq!(
        a["content"],
        "<p><strong>Paris</strong> is the capital, and</p>"
    );
    assert_eq!(a["parent"], q["id"]);
    assert_eq!(a["provider"], "fake");
    assert_eq!(a["model"], "fake-1");
    assert_eq!(a["usage"]["truncated"], json!({"reason": "stopped"}));
    assert_eq!(a["sources"], json!(["t_00000000000000aa"]));
    // The record the live `context` event carried is kept, as a finished
    // answer keeps it, so the panel reads the same after a reload.
    assert_eq!(a["context_used"]["sent"][0]["id"], "t_00000000000000aa");
    assert_eq!(a["context_used"]["tokens"], 40);
    // Applied as a turn's patch is, it makes a valid state.
    let fresh = wo_format::State::new(wo_format::Timestamp::now());
    let mut state: Value = serde_json::from_slice(&wo_format::to_canonical_vec(&fresh)).unwrap();
    wo_wire::apply_state_patch(&mut state, &kept.state_patch);
    wo_format::parse(state.to_string().as_bytes()).expect("a valid llm.json");

    // Stopped before any word, in a new conversation: the question is kept.
    let r = stopped(json!({
        "turn": {"message": "hello?", "new_conversation": true},
        "sent_at": "2026-11-26T00:00:01Z"
    }))
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let kept: wire::StatelessKept = r.json().await.unwrap();
    let messages = kept.state_patch["messages"].as_array().unwrap();
    assert_eq!(messages[0]["new_conversation"], true);
    assert_eq!(messages[1]["content"], "");
    assert_eq!(messages[1]["usage"]["truncated"]["reason"], "stopped");

    // Bad input is named by its pointer.
    for (body, pointer) in [
        (
            json!({"turn": {"message": "q"}, "sent_at": "yesterday"}),
            "/sent_at",
        ),
        (
            json!({"sent_at": "2026-11-26T00:00:00Z", "turn": {"message": "q", "parent": "not an id!"}}),
            "/turn/parent",
        ),
        (
            json!({"turn": {"message": "q"}, "sent_at": "2026-11-26T00:00:00Z", "sources": ["a b"]}),
            "/sources/0",
        ),
        (
            json!({"turn": {"message": "q"}, "sent_at": "2026-11-26T00:00:00Z", "context_used": {"tokens": "many"}}),
            "/context_used",
        ),
        (
            json!({"turn": {"message": "q"}, "sent_at": "2026-11-26T00:00:00Z", "answer": "x".repeat(200_000)}),
            "/answer",
        ),
        (
            json!({"sent_at": "2026-11-26T00:00:00Z", "turn": {"message": "q", "parent": "m_1", "new_conversation": true}}),
            "/turn/parent",
        ),
    ] {
        let r = stopped(body.clone()).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{pointer}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["pointer"], pointer, "{e}");
    }
    // A provider this server does not offer is refused.
    let r = stopped(
        json!({"sent_at": "2026-11-26T00:00:00Z", "turn": {"message": "q", "params": {"provider": "nope"}}}),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

/// The chunks a browser's own folder index retrieved (the ingestion page)
/// reach the prompt and the turn's `sources` in both modes, as the
/// server's own index chunks do; bad ones are refused with a pointer and
/// cost no model call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_index_sends_its_chunks_with_a_turn() {
    let chunk = json!({"id": "chunk:0123456789ab", "label": "notes.txt:1-3 notes", "text": "The archive moves to new storage in March."});
    for stateless in [true, false] {
        let s = serve(Script::says("In March."), stateless).await;
        let path = if stateless {
            "/api/stateless/chat"
        } else {
            "/api/chat"
        };
        let post = |body: Value| {
            s.client
                .post(s.url(path))
                .header("origin", &s.base)
                .header("cookie", s.cookie())
                .json(&body)
                .send()
        };
        let r = post(json!({"message": "When does the archive move?", "chunks": [chunk]}))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "stateless={stateless}");
        let evs = events(r).await;
        let sources = done(&evs)["sources"].as_array().unwrap().clone();
        assert!(
            sources.contains(&json!("chunk:0123456789ab")),
            "{sources:?}"
        );
        let prompt = s.upstream.bodies.lock().unwrap()[0]["messages"].to_string();
        assert!(prompt.contains("new storage in March"), "{prompt}");
        assert!(prompt.contains("notes.txt:1-3"), "{prompt}");

        // Refused, naming the field; no model call.
        let calls = s.upstream.requests.load(Ordering::SeqCst);
        for (bad, pointer) in [
            (
                json!([{"id": "m_0123456789ab", "label": "", "text": ""}]),
                "/chunks/0/id",
            ),
            (
                json!([chunk, {"id": "chunk:0123456789ab", "label": "", "text": "x".repeat(8_001)}]),
                "/chunks/1/text",
            ),
            (json!(vec![chunk.clone(); 6]), "/chunks"),
        ] {
            let r = post(json!({"message": "hi", "chunks": bad})).await.unwrap();
            assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{pointer}");
            let e: Value = r.json().await.unwrap();
            assert_eq!(e["error"]["pointer"], pointer, "{e}");
        }
        assert_eq!(s.upstream.requests.load(Ordering::SeqCst), calls);
    }
}

/// A file with an old conversation (three messages, a week before the rest),
/// then `recent` messages of one newer conversation.
fn old_and_recent(recent: usize) -> Vec<u8> {
    use wo_format::{Message, State, Timestamp};
    let t0 = 1_800_000_000;
    let mut s = State::new(Timestamp::from_unix(t0));
    let mut old = Message::new(
        "ann",
        Timestamp::from_unix(t0),
        "Raku firing",
        "<p>Raku firing: how hot is the <b>VOLCANO</b> kiln?</p>",
    );
    old.mark_new_conversation();
    let mut prev = old.clone();
    s.push_message(old.clone());
    for (i, text) in ["About 1000 °C.", "And the cooling?"].iter().enumerate() {
        let mut m = Message::new(
            "ann",
            Timestamp::from_unix(t0 + 1 + i as i64),
            *text,
            format!("<p>{text}</p>"),
        );
        m.parent = Some(prev.id.clone());
        s.push_message(m.clone());
        prev = m;
    }
    let mut root = Message::new(
        "ann",
        Timestamp::from_unix(t0 + 7 * 86_400),
        "Glazes",
        "<p>Glazes</p>",
    );
    root.mark_new_conversation();
    let mut prev = root.clone();
    s.push_message(root);
    for i in 1..recent {
        let text = format!("glaze note {i}");
        let mut m = Message::new(
            "ann",
            Timestamp::from_unix(t0 + 7 * 86_400 + i as i64),
            &text,
            format!("<p>{text}</p>"),
        );
        m.parent = Some(prev.id.clone());
        s.push_message(m.clone());
        prev = m;
    }
    wo_format::to_canonical_vec(&s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_conversation_is_listed_and_an_old_one_opens_alone() {
    let s = common::serve_with(Script::says("unused"), false, |o| {
        let path = o.state_file.clone().unwrap();
        std::fs::write(path, old_and_recent(1200)).unwrap();
    })
    .await;
    let list = |path: &'static str| {
        let r = s.program(Method::GET, path).send();
        async move {
            let r = r.await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            r.json::<wire::ConversationList>().await.unwrap()
        }
    };
    // The old conversation is older than the latest 1,000 messages, yet
    // listed: newest first, with its title, dates and size.
    let all = list("/api/conversations").await;
    assert_eq!((all.total, all.offset), (2, 0));
    let titles: Vec<&str> = all.conversations.iter().map(|c| c.title.as_str()).collect();
    assert_eq!(titles, ["Glazes", "Raku firing"]);
    let old = &all.conversations[1];
    assert_eq!(old.messages, 3);
    assert_eq!(old.created, "2027-01-15T08:00:00Z");
    assert_eq!(old.updated, "2027-01-15T08:00:02Z");
    assert_eq!(all.conversations[0].messages, 1200);
    assert!(all.conversations.iter().all(|c| c.snippet.is_none()));

    // Paging.
    let page = list("/api/conversations?offset=1&limit=1").await;
    assert_eq!((page.total, page.offset), (2, 1));
    assert_eq!(page.conversations.len(), 1);
    assert_eq!(page.conversations[0].root, old.root);
    let past = list("/api/conversations?offset=9").await;
    assert!(past.conversations.is_empty());
    assert_eq!(past.total, 2);

    // The filter: a message's text (not its markup), with a snippet;
    // a title alone needs none.
    let hit = list("/api/conversations?q=volcano%20KILN").await;
    assert_eq!(hit.total, 1);
    assert_eq!(hit.conversations[0].root, old.root);
    assert_eq!(
        hit.conversations[0].snippet.as_deref(),
        Some("Raku firing: how hot is the VOLCANO kiln?")
    );
    let by_title = list("/api/conversations?q=glazes").await;
    assert_eq!(by_title.conversations.len(), 1);
    assert_eq!(by_title.conversations[0].snippet, None);
    assert_eq!(list("/api/conversations?q=%3Cb%3E").await.total, 0);

    // Bad paging is refused, naming the parameter.
    for bad in [
        "/api/conversations?limit=0",
        "/api/conversations?limit=1001",
    ] {
        let r = s.program(Method::GET, bad).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        let body: Value = r.json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().contains("limit"),
            "{body}"
        );
    }
    let r = s
        .program(Method::GET, "/api/conversations?offset=-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // The latest page does not reach it; its own page holds all of it and
    // nothing else.
    let latest: wire::StatePage = s.program_get("/api/state?limit=1000").await;
    assert!(latest.messages.iter().all(|m| m.id != old.root));
    let url = format!("/api/state?conversation={}", old.root);
    let page: wire::StatePage = s.program_get(&url).await;
    assert_eq!(page.conversation.as_deref(), Some(old.root.as_str()));
    assert_eq!((page.total_messages, page.offset), (3, 0));
    let ids: Vec<&str> = page.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids[0], old.root);
    assert_eq!(ids[2], old.latest);
    // Any member's id finds it; paging counts within it.
    let url = format!("/api/state?conversation={}&limit=1", old.latest);
    let page: wire::StatePage = s.program_get(&url).await;
    assert_eq!((page.total_messages, page.offset), (3, 2));
    assert_eq!(page.messages[0].id, old.latest);
    // An unknown conversation is a 404 that says so; the file is unchanged.
    let before = s.state_bytes();
    let r = s
        .program(Method::GET, "/api/state?conversation=m_nothing")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no conversation"),
        "{body}"
    );
    assert_eq!(s.state_bytes(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conversation_list_needs_the_session_like_every_api_route() {
    let s = serve(Script::says("unused"), false).await;
    let r = s
        .client
        .get(s.url("/api/conversations"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Stateless servers have no file: the route is not theirs.
    let st = serve(Script::says("unused"), true).await;
    let r = st
        .client
        .get(st.url("/api/conversations"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_names_the_server_already_there_once() {
    let s = serve(Script::says("ok"), false).await;
    // The same project again (its token): the running server is named,
    // with the link to open, and the OS error is said once.
    let mut again = common::options(s.dir.path(), &s.upstream, false);
    again.addr = s.addr;
    let e = wo_server::bind(again)
        .await
        .err()
        .expect("the port is taken");
    assert!(std::error::Error::source(&e).is_none(), "said once: {e:?}");
    let text = e.to_string();
    assert!(
        text.contains("WikiOracle already serves this project there")
            && text.contains(&format!("http://{}/?token=", s.addr)),
        "{text}"
    );
    assert_eq!(text.matches("in use").count(), 1, "{text}");
    // Another project (another token): not offered as this one's.
    let other = tempfile::tempdir().unwrap();
    let mut foreign = common::options(other.path(), &s.upstream, false);
    foreign.addr = s.addr;
    foreign.token = Some("another-projects-token-0123456789".into());
    let text = wo_server::bind(foreign).await.err().unwrap().to_string();
    assert!(text.contains("for another project"), "{text}");
    assert!(!text.contains("?token="), "{text}");
    // Not WikiOracle at all: pick another port.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut elsewhere = common::options(other.path(), &s.upstream, false);
    elsewhere.addr = plain.local_addr().unwrap();
    let text = wo_server::bind(elsewhere).await.err().unwrap().to_string();
    assert!(text.contains("another program uses the port"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_archived_listed_apart_and_restored() {
    let s = serve(Script::says("Noted."), false).await;
    for (message, new) in [("kilns fire hot", true), ("glazes are glassy", true)] {
        let r = s
            .browser_json(
                Method::POST,
                "/api/chat",
                &json!({"message": message, "new_conversation": new}),
            )
            .await;
        assert_eq!(r.status(), StatusCode::OK);
        let _ = r.text().await.unwrap();
    }
    let list = |archived: bool| {
        let s = &s;
        async move {
            let path = if archived {
                "/api/conversations?archived=true"
            } else {
                "/api/conversations"
            };
            let l: wire::ConversationList = s.program_get(path).await;
            l.conversations
                .into_iter()
                .map(|c| c.title)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(false).await.len(), 2);
    let state = s.state_json();
    let kiln = state["messages"][0]["id"].as_str().unwrap().to_owned();
    let answer = state["messages"][1]["id"].as_str().unwrap().to_owned();
    let before = state["messages"].as_array().unwrap().len();
    // Any message of the conversation archives it; nothing is deleted.
    let r = s
        .browser_json(
            Method::PATCH,
            &format!("/api/messages/{answer}"),
            &json!({"archived": true}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    assert_eq!(list(false).await, ["glazes are glassy"]);
    assert_eq!(list(true).await, ["kilns fire hot"]);
    let state = s.state_json();
    assert_eq!(state["messages"].as_array().unwrap().len(), before);
    assert_eq!(state["messages"][0]["archive"]["hidden"], true);
    let r = s
        .browser_json(
            Method::PATCH,
            &format!("/api/messages/{kiln}"),
            &json!({"archived": false}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(list(false).await.len(), 2);
    // Neither a title nor archived: refused, nothing written.
    let bytes = s.state_bytes();
    let r = s
        .browser_json(Method::PATCH, &format!("/api/messages/{kiln}"), &json!({}))
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(s.state_bytes(), bytes);
}

/// A stateless turn picks the memory by the file's own `retrieval_prefs`,
/// as a local server picks it from the same file: the client sends them
/// with the turn; out of range, they are refused by their pointer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_turn_picks_memory_by_the_files_retrieval_prefs() {
    let s = serve(Script::says("Paris."), true).await;
    let entry = |i: usize, certainty: f64| {
        json!({"id": format!("t_00000000000000a{i}"), "title": format!("France fact {i}"), "timestamp": "2026-01-01T00:00:00Z", "certainty": certainty,
               "content": format!("<p>France capital Paris fact {i}.</p>")})
    };
    let truth: Vec<Value> = (0..6)
        .map(|i| entry(i, if i < 3 { 0.9 } else { 0.3 }))
        .collect();
    let sent_memory = |prefs: Option<Value>| {
        let s = &s;
        let truth = truth.clone();
        async move {
            let mut req = json!({"message": "What is the capital of France?", "truth": truth, "window": [], "params": {}});
            if let Some(p) = prefs {
                req["retrieval_prefs"] = p;
            }
            let r = s
                .cookieless(Method::POST, "/api/stateless/chat", &req)
                .await;
            let status = r.status();
            if status != StatusCode::OK {
                panic!("{status}: {}", r.text().await.unwrap());
            }
            let evs = events(r).await;
            event(&evs, "context")["context_used"]["sent"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["kind"] == "memory")
                .count()
        }
    };
    assert_eq!(
        sent_memory(None).await,
        6,
        "the defaults send every related entry"
    );
    assert_eq!(
        sent_memory(Some(json!({"max_entries": 2}))).await,
        2,
        "the file's max_entries holds"
    );
    assert_eq!(
        sent_memory(Some(json!({"min_certainty": 0.5}))).await,
        3,
        "the file's min_certainty holds"
    );
    let r = s
        .cookieless(
            Method::POST,
            "/api/stateless/chat",
            &json!({"message": "q", "truth": [], "window": [], "retrieval_prefs": {"min_certainty": 7}}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["pointer"], "/retrieval_prefs/min_certainty");
}

/// Reads `r`'s SSE body until its `done` event; returns the events so far
/// and the rest of the body, still to be read.
async fn until_done(mut r: reqwest::Response) -> (Vec<(String, Value)>, reqwest::Response) {
    let mut text = String::new();
    loop {
        let evs = common::parse_events(&text);
        if evs.iter().any(|(n, _)| n == "done") {
            return (evs, r);
        }
        match r.chunk().await.unwrap() {
            Some(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
            None => panic!("the stream ended before done: {text}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_answer_never_waits_for_the_interpreter_on_a_one_at_a_time_model() {
    // One request at a time, as the in-process model generates; the
    // interpreter's call takes 4 s.
    let mut script = Script::says("Paris.").remembering(REMEMBER_PARIS);
    script.one_at_a_time = true;
    script.memory_delay = Duration::from_secs(4);
    let s = common::serve_with(script, false, remembering).await;
    let first = s
        .program_json(
            Method::POST,
            "/api/chat",
            &json!({"message": "What is the capital of France?"}),
        )
        .await;
    let (evs, rest) = until_done(first).await;
    assert_eq!(done(&evs)["memory_follows"], true);
    // The interpreter has started on the model.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while s
        .upstream
        .requests
        .load(std::sync::atomic::Ordering::SeqCst)
        < 2
    {
        assert!(std::time::Instant::now() < until, "no interpreter call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The next question is answered at once: the interpreter gives way.
    let asked = std::time::Instant::now();
    let second = s
        .program_json(
            Method::POST,
            "/api/chat",
            &json!({"message": "And of Spain?"}),
        )
        .await;
    let (evs2, rest2) = until_done(second).await;
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(1), "the answer waited {took:?}");
    assert!(done(&evs2)["assistant_message_id"].is_string());
    // Both exchanges are remembered afterwards: the first interpreter call
    // started again once the answer was done.
    for rest in [rest, rest2] {
        let tail = common::parse_events(&rest.text().await.unwrap());
        let m = memory_event(&tail);
        assert_eq!(
            m["record"]["created"].as_array().map(Vec::len),
            Some(1),
            "{m}"
        );
    }
    let memory_calls = s
        .upstream
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b.get("response_format").is_some())
        .count();
    assert_eq!(
        memory_calls, 3,
        "one call stopped and made again, one for the second"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_holding_fewer_tokens_than_assumed_is_fitted_to_once_and_then_from_the_start() {
    // The provider's setting says 128,000 tokens; its server holds 1,024
    // and says so when refusing (llama.cpp's wording). Its answers are
    // long, so a follow-up with the turn before it no longer fits.
    let answer = "The kiln should cool slowly with the lid closed overnight. ".repeat(80);
    let s = serve(
        Script {
            holds: Some(1024),
            ..Script::says(&answer)
        },
        false,
    )
    .await;
    let requests = || s.upstream.requests.load(Ordering::SeqCst);
    let evs = chat(&s, json!({"message": "How should a kiln cool?"})).await;
    let mut parent = done(&evs)["assistant_message_id"].clone();
    assert_eq!(requests(), 1, "fits");

    // Refused with the window, fitted to it, answered: two requests.
    let evs = chat(&s, json!({"message": "And the glaze?", "parent": parent})).await;
    parent = done(&evs)["assistant_message_id"].clone();
    assert_eq!(requests(), 3);

    // The server keeps the window: the next follow-up is fitted at once.
    let evs = chat(&s, json!({"message": "And the clay?", "parent": parent})).await;
    done(&evs);
    assert_eq!(requests(), 4, "one request");
    let last = s.upstream.bodies.lock().unwrap().last().unwrap().clone();
    let sent: usize = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().len())
        .sum();
    assert!(sent / 4 + 512 <= 1024, "fitted: {sent} characters");
}

//! A refused write never poisons the long-lived store: after a truth entry
//! or a model answer too large to keep (413 / an error event, "llm.json
//! was not changed"), the next truth add and chat turn are written, and
//! the file holds exactly what was accepted.

mod common;

use common::{Script, events, serve_with};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use wo_wire::api as wire;

async fn chat(s: &common::Served, message: &str) -> Vec<(String, Value)> {
    let r = s
        .program_json(Method::POST, "/api/chat", &json!({ "message": message }))
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    events(r).await
}

fn names(evs: &[(String, Value)]) -> Vec<&str> {
    evs.iter().map(|(n, _)| n.as_str()).collect()
}

async fn add_truth(s: &common::Served, title: &str, content: String) -> reqwest::Response {
    s.browser_json(
        Method::POST,
        "/api/truth",
        &wire::NewTruth {
            title: title.into(),
            content,
            certainty: 0.5,
            kind: None,
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_truth_entry_is_refused_and_later_writes_work() {
    let s = serve_with(Script::says("Fine."), false, |o| {
        o.limits.body_bytes = 4 << 20;
    })
    .await;
    let before = s.state_bytes();
    // 1.25 MB: under the body cap, over the 1 MiB content limit.
    let r = add_truth(&s, "big", "word ".repeat(250_000)).await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = r.json().await.unwrap();
    assert!(body.to_string().contains("not"), "{body}");
    assert_eq!(s.state_bytes(), before, "the file is unchanged");

    let r = add_truth(&s, "small", "a fact".into()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let evs = chat(&s, "hello").await;
    assert_eq!(names(&evs).last(), Some(&"done"), "{evs:?}");
    let r = add_truth(&s, "another", "one more".into()).await;
    assert_eq!(r.status(), StatusCode::CREATED);

    let state = s.state_json();
    let titles: Vec<&str> = state["truth"]["trust"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(!titles.contains(&"big"));
    assert_eq!(state["messages"].as_array().unwrap().len(), 2);
}

/// A model answer inside the answer cap whose XHTML is over the content
/// limit (a list of 32 Ki empty items, 10× larger as XHTML): that turn
/// fails with nothing saved, and the next one is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_too_large_as_xhtml_is_refused_and_the_next_turn_works() {
    let script = Script {
        first_answer: Some("-\n+\n".repeat(32 * 1024)),
        ..Script::says("Fine.")
    };
    let s = serve_with(script, false, |_| {}).await;
    let before = s.state_bytes();
    let evs = chat(&s, "make a long list").await;
    assert!(!names(&evs).contains(&"done"), "{evs:?}");
    assert_eq!(names(&evs).last(), Some(&"error"), "{evs:?}");
    assert_eq!(
        s.state_bytes(),
        before,
        "nothing of the refused turn is kept"
    );

    let evs = chat(&s, "hello").await;
    assert_eq!(names(&evs).last(), Some(&"done"), "{evs:?}");
    let r = add_truth(&s, "small", "a fact".into()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let state = s.state_json();
    let messages = state["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "only the accepted turn");
    assert_eq!(messages[1]["content"], "<p>Fine.</p>");
    assert_eq!(state["truth"]["trust"].as_array().unwrap().len(), 1);
}

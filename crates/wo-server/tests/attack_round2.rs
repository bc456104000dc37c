//! The second outside round's server items, each tried from outside over
//! real HTTP (raw TCP where a client library would not send the attack):
//! records that would break the file, fields without bounds, anonymous CPU
//! and disclosure on a hosted server, slow bodies, absolute-form targets,
//! and a hostile `llm.json` served to the browser.
//!
//! No timing thresholds: where a test waits, the wait is a guard against
//! hanging forever, never a speed claim.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Script, TOKEN, serve, serve_with};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest any single step may take before the test calls it hung.
const GUARD: Duration = Duration::from_secs(30);

/// Everything the server sends until it closes the connection, or `None`
/// if it keeps it open past [`GUARD`].
async fn read_to_close(tcp: &mut TcpStream) -> Option<String> {
    let mut out = Vec::new();
    match tokio::time::timeout(GUARD, tcp.read_to_end(&mut out)).await {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => None,
    }
}

async fn raw(addr: SocketAddr, request: &[u8]) -> Option<String> {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request).await.unwrap();
    read_to_close(&mut tcp).await
}

fn status_of(response: &str) -> Option<u16> {
    response.split(' ').nth(1)?.parse().ok()
}

/// The state file opens with the rules every reader applies.
fn file_opens(s: &common::Served) -> bool {
    wo_format::parse(&s.state_bytes()).is_ok()
}

// ------------------------------------------------- records and field bounds

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_a_turn_writes_are_never_blank_nor_endless() {
    let s = serve(Script::says("fine"), false).await;
    // A blank model name is no model name: the answer is written under the
    // provider's own, and the file still opens.
    for blank in [" ", "", "\u{a0}\u{3000}"] {
        let r = s
            .browser_json(
                Method::POST,
                "/api/chat",
                &json!({"message": "hello", "params": {"model": blank}}),
            )
            .await;
        let status = r.status();
        let _ = r.text().await;
        assert!(status.is_success(), "model {blank:?}: {status}");
        assert!(file_opens(&s), "model {blank:?} made llm.json unopenable");
        let state = s.state_json();
        for m in state["messages"].as_array().unwrap() {
            let u = m["username"].as_str().unwrap();
            assert!(!u.trim().is_empty(), "a blank username was written: {m}");
        }
    }
    // An endless name is refused with its field, and nothing is written.
    let before = s.state_bytes();
    let long = "m".repeat(5_000);
    let r = s
        .browser_json(
            Method::POST,
            "/api/chat",
            &json!({"message": "hello", "params": {"model": long}}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["pointer"], "/params/model", "{body}");
    let r = s
        .browser_json(
            Method::POST,
            "/api/chat",
            &json!({"message": "hello", "username": "u".repeat(5_000)}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["pointer"], "/username", "{body}");
    // `/v1`: a model suffix is the answer's username.
    let r = s
        .program_json(
            Method::POST,
            "/v1/chat/completions",
            &json!({"model": format!("fake/{long}"), "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(
        r.status(),
        StatusCode::BAD_REQUEST,
        "a 5,000-character model"
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["param"], "model", "{body}");
    assert_eq!(s.state_bytes(), before, "a refused turn changed the file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truth_entries_are_bounded_like_every_field() {
    let s = serve(Script::says("ok"), false).await;
    let before = s.state_bytes();
    let long_title = "t".repeat(wo_format::records::MAX_TITLE_CHARS + 1);
    let r = s
        .browser_json(
            Method::POST,
            "/api/truth",
            &json!({"title": long_title, "content": "x", "certainty": 0.5}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["pointer"], "/title", "{body}");
    assert_eq!(s.state_bytes(), before, "a refused entry changed the file");
    // An edit may not make a title endless either.
    let r = s
        .browser_json(
            Method::POST,
            "/api/truth",
            &json!({"title": "fine", "content": "x", "certainty": 0.5}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let before = s.state_bytes();
    let r = s
        .browser_json(
            Method::PATCH,
            &format!("/api/truth/{id}"),
            &json!({"title": long_title}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(s.state_bytes(), before, "a refused edit changed the file");
}

// ------------------------------------------------- stateless caps, linear work

/// A truth entry as a stateless client sends it.
fn entry(i: usize, exchange: &str) -> Value {
    json!({
        "id": format!("t_{i:016x}"),
        "title": format!("entry {i}"),
        "timestamp": "2025-01-01T00:00:00Z",
        "certainty": 0.5,
        "content": "<p>x</p>",
        "provenance": {"messages": [], "by": "interpreter", "at": "2025-01-01T00:00:00Z", "exchange": exchange},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_memory_undo_takes_the_chats_caps() {
    let s = serve_with(Script::says("ok"), true, |o| {
        o.limits.body_bytes = 8 << 20;
    })
    .await;
    let cap = wo_server::app::Limits::default().truth_entries;
    let exchange = "m_00000000000000aa";
    let undo = |n: usize, records: usize| {
        let truth: Vec<Value> = (0..n).map(|i| entry(i, exchange)).collect();
        let created: Vec<String> = (0..n).map(|i| format!("t_{i:016x}")).collect();
        let mut log = vec![json!({
            "exchange": exchange,
            "by": "interpreter",
            "at": "2025-01-01T00:00:00Z",
            "messages": [],
            "ops": [],
            "created": created,
        })];
        log.extend((1..records).map(|_| json!({})));
        json!({"exchange": exchange, "memory_log": log, "truth": truth})
    };
    // Over the cap: refused, naming the field.
    let r = s
        .cookieless(
            Method::POST,
            "/api/stateless/memory/undo",
            &undo(cap + 1, 1),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{} entries", cap + 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["pointer"], "/truth", "{body}");
    let max_log = wo_server::stateless::MAX_JOURNAL_RECORDS;
    let r = s
        .cookieless(
            Method::POST,
            "/api/stateless/memory/undo",
            &undo(1, max_log + 1),
        )
        .await;
    assert_eq!(
        r.status(),
        StatusCode::BAD_REQUEST,
        "{} records",
        max_log + 1
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["pointer"], "/memory_log", "{body}");
    // At the cap: served, every entry the record made removed.
    let r = s
        .cookieless(Method::POST, "/api/stateless/memory/undo", &undo(cap, 1))
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["undone"]["removed"].as_array().unwrap().len(), cap);
    assert_eq!(body["deleted"].as_array().unwrap().len(), cap);
}

// ------------------------------------------------- disclosure to anonymous clients

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_errors_never_carry_the_upstream_address() {
    let mut script = Script::says("x");
    script.fail_status = Some(502);
    let s = serve(script, true).await;
    let upstream = s.upstream.addr.to_string();
    let r = s
        .cookieless(
            Method::POST,
            "/api/stateless/chat",
            &json!({"message": "hi"}),
        )
        .await;
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(
        text.contains("error"),
        "the failure is reported ({status}): {text}"
    );
    assert!(
        !text.contains(&upstream) && !text.contains("http://"),
        "the upstream's address reached an anonymous client ({status}): {text}"
    );
    // The context draft asks the provider too.
    let r = s
        .cookieless(
            Method::POST,
            "/api/context/draft",
            &json!({"context": "c", "messages": []}),
        )
        .await;
    let text = r.text().await.unwrap();
    assert!(
        !text.contains(&upstream) && !text.contains("http://"),
        "the draft's error carries the upstream's address: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_provider_checks_send_nothing_out() {
    // A provider whose address is a listener of ours: any check connects.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let watched = listener.local_addr().unwrap();
    let s = serve_with(Script::says("ok"), true, move |o| {
        let dir = o.config.source.clone().unwrap();
        let dir = dir.parent().unwrap();
        let text = format!(
            "[defaults]\nprovider = \"fake\"\n\n[providers.fake]\nkind = \"openai\"\nbase_url = \"http://{watched}/v1\"\nmodel = \"fake-1\"\n\n[interpreter]\nmode = \"off\"\n"
        );
        let path = dir.join("config.toml");
        std::fs::write(&path, &text).unwrap();
        o.config = wo_providers::Config::from_toml(
            &text,
            &path,
            wo_providers::config::Env::from_pairs([("HOME", dir.as_os_str().to_owned())]),
        )
        .unwrap();
    })
    .await;
    let r = s
        .client
        .get(s.url("/api/providers?check=true"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["providers"][0]["name"], "fake", "{body}");
    // The answer came back; a check would have connected before it.
    let connected = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
    assert!(
        connected.is_err(),
        "an anonymous client made the server connect to a provider"
    );
}

// ------------------------------------------------- slow bodies, absolute form

#[test]
fn the_default_body_deadline_cuts_off_a_trickle_within_half_a_minute() {
    let limits = wo_server::app::Limits::default();
    assert!(
        limits.body_timeout <= Duration::from_secs(30),
        "a body may trickle for {:?}",
        limits.body_timeout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_meets_one_deadline_not_one_per_byte() {
    let s = serve_with(Script::says("ok"), false, |o| {
        o.limits.body_timeout = Duration::from_millis(800);
    })
    .await;
    let host = format!("127.0.0.1:{}", s.addr.port());
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    tcp.write_all(
        format!(
            "POST /api/truth HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // A byte every 200 ms, always within any per-read timeout: only a
    // deadline for the whole body ends it.
    let trickle = async {
        for _ in 0..100 {
            if tcp.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), trickle).await;
    let answer = read_to_close(&mut tcp).await.expect("the connection ends");
    assert_eq!(status_of(&answer), Some(408), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_targets_must_name_this_server() {
    for stateless in [false, true] {
        let s = serve(Script::says("ok"), stateless).await;
        let host = format!("127.0.0.1:{}", s.addr.port());
        for target in [
            "http://evil.example/api/health".to_owned(),
            "http://evil.example:80/api/health".to_owned(),
            format!("http://evil.example@{host}/api/health"),
            format!("http://localhost:{}/api/health", s.addr.port() ^ 1),
        ] {
            let answer = raw(
                s.addr,
                format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .expect("answered");
            let code = status_of(&answer);
            assert!(
                matches!(code, Some(400 | 421)),
                "{target} (stateless: {stateless}) answered {answer:?}"
            );
        }
        // Its own name in absolute form is fine.
        let answer = raw(
            s.addr,
            format!(
                "GET http://{host}/api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .expect("answered");
        assert_eq!(status_of(&answer), Some(200), "{answer:?}");
    }
}

// ------------------------------------------------- a hostile llm.json

fn hostile_state(tag: &str) -> String {
    json!({
        "version": 1,
        "schema": wo_format::SCHEMA_URL,
        "date": "2025-01-01T00:00:00Z",
        "context": format!("<p onmouseover=\"steal()\">{tag} context</p><script>alert(1)</script>"),
        "messages": [{
            "title": "t",
            "username": "someone",
            "timestamp": "2025-01-01T00:00:00Z",
            "content": format!("<p>{tag}</p><img src=\"x\" onerror=\"steal()\"/><a href=\"javascript:steal()\">go</a><script>alert(2)</script>"),
        }],
        "truth": {"trust": [{
            "title": "t",
            "timestamp": "2025-01-01T00:00:00Z",
            "certainty": 0.5,
            "content": format!("<p>{tag}</p><iframe src=\"https://evil.example\"></iframe><style>*{{}}</style>"),
        }]},
    })
    .to_string()
}

fn forbidden_markup(text: &str) -> Vec<&'static str> {
    [
        "<script",
        "onmouseover",
        "onerror",
        "javascript:",
        "<iframe",
        "<style",
    ]
    .into_iter()
    .filter(|bad| text.contains(bad))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_state_file_is_served_sanitised_on_open_and_after_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = common::upstream(Script::says("ok")).await;
    let mut opts = common::options(dir.path(), &upstream, false);
    std::fs::write(dir.path().join("llm.json"), hostile_state("first")).unwrap();
    opts.limits.body_bytes = 1 << 20;
    let bound = wo_server::bind(opts).await.unwrap();
    let addr = bound.addr;
    tokio::spawn(bound.serve(std::future::pending()));
    let client = reqwest::Client::new();
    let get_state = || {
        client
            .get(format!("http://{addr}/api/state"))
            .bearer_auth(TOKEN)
            .send()
    };
    let text = get_state().await.unwrap().text().await.unwrap();
    assert!(text.contains("first"), "{text}");
    assert!(
        forbidden_markup(&text).is_empty(),
        "served on open: {:?}",
        forbidden_markup(&text)
    );
    // Changed outside the server (an editor, a sync tool): read again,
    // sanitised again.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(dir.path().join("llm.json"), hostile_state("second")).unwrap();
    let text = get_state().await.unwrap().text().await.unwrap();
    assert!(
        text.contains("second"),
        "the outside change was not read: {text}"
    );
    assert!(
        forbidden_markup(&text).is_empty(),
        "served after an outside change: {:?}",
        forbidden_markup(&text)
    );
    let text = client
        .get(format!("http://{addr}/api/export"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        forbidden_markup(&text).is_empty(),
        "exported: {:?}",
        forbidden_markup(&text)
    );
}

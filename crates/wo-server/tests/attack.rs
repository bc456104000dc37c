//! The attack suite for the server's perimeter, each tried from outside
//! over real HTTP (raw TCP where a client library would refuse to send
//! the attack). Every test prints `item N: X/Y held` (N numbers the
//! attack class) and fails unless all hold.
//!
//! No timing thresholds: where a test waits, the wait is a guard against
//! hanging forever (a defence that does not exist), never a speed claim.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Script, TOKEN, serve, serve_with, sign_in};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest any single step may take before the test calls it hung.
const GUARD: Duration = Duration::from_secs(30);

/// Counts the checks of one item that held, printing the ones that did not.
#[derive(Default)]
struct Tally {
    held: usize,
    total: usize,
}

impl Tally {
    fn check(&mut self, name: &str, ok: bool) {
        self.total += 1;
        if ok {
            self.held += 1;
        } else {
            println!("not held: {name}");
        }
    }

    fn report(&self, item: u32) {
        report(item, self.held, self.total);
    }
}

fn report(item: u32, held: usize, total: usize) {
    println!("item {item}: {held}/{total} held");
    assert_eq!(held, total, "item {item}: {held}/{total} held");
}

/// `<div>` nested `depth` deep around a word: what made the sanitiser
/// quadratic.
fn nested(depth: usize) -> String {
    format!("{}x{}", "<div>".repeat(depth), "</div>".repeat(depth))
}

/// Sends `request` on a fresh connection and reads until the server
/// closes it; `None` if it never does (within [`GUARD`]).
async fn raw(addr: SocketAddr, request: &[u8]) -> Option<String> {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request).await.unwrap();
    read_to_close(&mut tcp).await
}

/// Everything the server sends until it closes the connection, or `None`
/// if it keeps it open past [`GUARD`].
async fn read_to_close(tcp: &mut TcpStream) -> Option<String> {
    let mut out = Vec::new();
    match tokio::time::timeout(GUARD, tcp.read_to_end(&mut out)).await {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => None,
    }
}

fn status_of(response: &str) -> Option<u16> {
    response.split(' ').nth(1)?.parse().ok()
}

// ------------------------------------------------------------- item 1

/// Polls `/api/health` while `heavy` runs; true when one answer came back
/// while the server reported blocking work in progress and `heavy` had
/// not been answered yet, i.e. another client was served while the heavy
/// request was being processed.
async fn health_answers_during(
    s: &common::Served,
    heavy: tokio::task::JoinHandle<StatusCode>,
) -> (bool, StatusCode) {
    let mut seen_busy = false;
    while !heavy.is_finished() {
        let Ok(Ok(r)) =
            tokio::time::timeout(GUARD, s.client.get(s.url("/api/health")).send()).await
        else {
            break;
        };
        let body: Value = r.json().await.unwrap();
        if body["busy"].as_u64().unwrap_or(0) >= 1 && !heavy.is_finished() {
            seen_busy = true;
            break;
        }
    }
    let status = tokio::time::timeout(GUARD * 20, heavy)
        .await
        .expect("the heavy request finishes")
        .unwrap();
    (seen_busy, status)
}

/// Sends `rb` in a task that reads the whole response (a stream to its
/// end, as a browser would); the status.
fn send(rb: reqwest::RequestBuilder) -> tokio::task::JoinHandle<StatusCode> {
    tokio::spawn(async move {
        match rb.send().await {
            Ok(r) => {
                let status = r.status();
                let body = r.bytes().await.unwrap_or_default();
                if !status.is_success() {
                    println!(
                        "{status}: {}",
                        String::from_utf8_lossy(&body[..body.len().min(400)])
                    );
                }
                status
            }
            Err(_) => StatusCode::IM_A_TEAPOT,
        }
    })
}

/// One runtime thread: if CPU-heavy work ran on it, nothing else could be
/// answered until that work was done.
#[tokio::test(flavor = "current_thread")]
async fn item_1_heavy_bodies_run_off_the_async_workers() {
    let big = |o: &mut wo_server::ServeOptions| {
        o.limits.body_bytes = 2 << 20;
    };
    let depth = 40_000; // 200 KB of nesting
    let mut held = 0;
    let mut total = 0;
    let mut tally = |name: &str, (ok, status): (bool, StatusCode)| {
        total += 1;
        if ok && !status.is_server_error() {
            held += 1;
        } else {
            println!("not held: {name} (health during it: {ok}, status {status})");
        }
    };

    let local = serve_with(Script::says("ok"), false, big).await;
    let r = local
        .program_json(
            Method::POST,
            "/api/truth",
            &json!({"title": "T", "content": "c", "certainty": 0.5}),
        )
        .await;
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cases: Vec<(&str, Method, String, Value)> = vec![
        (
            "truth add",
            Method::POST,
            "/api/truth".into(),
            json!({"title": "T2", "content": nested(depth), "certainty": 0.5}),
        ),
        (
            "truth edit",
            Method::PATCH,
            format!("/api/truth/{id}"),
            json!({"content": nested(depth)}),
        ),
        (
            "context patch",
            Method::PATCH,
            "/api/state".into(),
            json!({"context": nested(depth)}),
        ),
        (
            "context apply",
            Method::POST,
            "/api/context/apply".into(),
            json!({"draft": "d", "current": nested(depth)}),
        ),
    ];
    for (name, method, path, body) in cases {
        let heavy = send(local.program(method, &path).json(&body));
        tally(name, health_answers_during(&local, heavy).await);
    }

    let hostile_answer = serve(Script::says(&nested(depth)), false).await;
    let heavy = send(
        hostile_answer
            .program(Method::POST, "/api/chat")
            .json(&json!({"message": "hi"})),
    );
    tally(
        "streamed answer (local)",
        health_answers_during(&hostile_answer, heavy).await,
    );

    let stateless = serve_with(Script::says("ok"), true, big).await;
    let msg = |content: String| json!({"role": "user", "username": "u", "timestamp": "2026-01-01T00:00:00Z", "content": content});
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "stateless context",
            "/api/stateless/chat",
            json!({"message": "hi", "context": nested(depth)}),
        ),
        (
            "stateless window",
            "/api/stateless/chat",
            json!({"message": "hi", "window": [msg(nested(depth))]}),
        ),
        (
            "stateless truth",
            "/api/stateless/chat",
            json!({"message": "hi", "truth": [{"id": "t_0123456789abcdef", "title": "t", "timestamp": "2026-01-01T00:00:00Z", "certainty": 0.5, "content": nested(depth)}]}),
        ),
        (
            "stateless draft",
            "/api/context/draft",
            json!({"context": "", "messages": [msg(nested(depth))]}),
        ),
    ];
    for (name, path, body) in cases {
        let heavy = send(stateless.client.post(stateless.url(path)).json(&body));
        tally(name, health_answers_during(&stateless, heavy).await);
    }
    let hostile_stateless = serve(Script::says(&nested(depth)), true).await;
    let rb = hostile_stateless
        .client
        .post(hostile_stateless.url("/api/stateless/chat"))
        .json(&json!({"message": "hi"}));
    let heavy = tokio::spawn(async move {
        let r = rb.send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert!(
            text.contains("event: done"),
            "{}",
            &text[..text.len().min(300)]
        );
        status
    });
    tally(
        "streamed answer (stateless)",
        health_answers_during(&hostile_stateless, heavy).await,
    );
    report(1, held, total);
}

/// The per-request bound: work that outlasts `cpu_timeout` is answered
/// 503 and saves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_1_cpu_work_is_bounded_per_request() {
    let s = serve_with(Script::says("ok"), false, |o| {
        o.limits.body_bytes = 2 << 20;
        o.limits.cpu_timeout = Duration::ZERO;
    })
    .await;
    let before = s.state_bytes();
    let r = s
        .program_json(
            Method::POST,
            "/api/truth",
            &json!({"title": "T", "content": nested(40_000), "certainty": 0.5}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["kind"], "busy");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nested")
    );
    assert_eq!(s.state_bytes(), before, "nothing saved");
    // The server goes on answering.
    let r = s.client.get(s.url("/api/health")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

// ------------------------------------------------------------- item 2

/// A browser keeps one cookie jar per host name, whatever the port.
#[derive(Default)]
struct Jar(Vec<(String, String)>);

impl Jar {
    fn set(&mut self, set_cookie: &str) {
        let pair = set_cookie.split(';').next().unwrap();
        let (name, value) = pair.split_once('=').unwrap();
        self.0.retain(|(n, _)| n != name);
        if !set_cookie.contains("Max-Age=0") {
            self.0.push((name.to_owned(), value.to_owned()));
        }
    }
    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

async fn sign_in_with(s: &common::Served, jar: &mut Jar) {
    let r = s
        .client
        .get(&s.launch_url)
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    for v in r.headers().get_all("set-cookie") {
        jar.set(v.to_str().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_2_cookies_do_not_cross_ports() {
    let a = serve(Script::says("ok"), false).await;
    let b = serve_with(Script::says("ok"), false, |o| {
        o.token = Some("other-token-0123456789-abcdefghijklmnop".into())
    })
    .await;
    let mut tally = Tally::default();
    let mut check = |name: &str, ok: bool| tally.check(name, ok);
    let (name_a, _) = sign_in(&a.client, &a.launch_url).await;
    let (name_b, _) = sign_in(&b.client, &b.launch_url).await;
    check("names differ", name_a != name_b);
    check(
        "names carry the port",
        name_a.contains(&format!("_{}_", a.addr.port()))
            && name_b.contains(&format!("_{}_", b.addr.port())),
    );
    // One jar for 127.0.0.1, as a browser keeps it: signing in to B leaves
    // A signed in.
    let mut jar = Jar::default();
    sign_in_with(&a, &mut jar).await;
    sign_in_with(&b, &mut jar).await;
    for s in [&a, &b] {
        let r = s.get_with_cookie("/api/state", &jar.header()).await;
        check("both servers stay signed in", r.status() == StatusCode::OK);
    }
    // B's cookie (B's token, B's name) opens nothing on A; nor does A's
    // token under any other name.
    let b_only = jar
        .0
        .iter()
        .find(|(n, _)| *n == name_b)
        .map(|(n, v)| format!("{n}={v}"))
        .unwrap();
    for cookie in [
        b_only,
        format!("wo_session={TOKEN}"),
        format!("wo_session_{}_ffffff={TOKEN}", b.addr.port()),
        format!("{name_b}={TOKEN}"),
    ] {
        let r = a.get_with_cookie("/api/state", &cookie).await;
        check(
            &format!("A refuses {cookie}"),
            r.status() == StatusCode::UNAUTHORIZED,
        );
    }
    // A page on B's port: the browser attaches A's cookie (same site), and
    // says where the request comes from.
    for (method, path) in [
        (Method::GET, "/api/state"),
        (Method::GET, "/api/export"),
        (Method::POST, "/api/truth"),
    ] {
        let r = a
            .client
            .request(method.clone(), a.url(path))
            .header("cookie", jar.header())
            .header("sec-fetch-site", "same-site")
            .header("origin", &b.base)
            .json(&json!({"title": "x", "content": "y", "certainty": 1}))
            .send()
            .await
            .unwrap();
        check(
            &format!("{method} {path} from another port"),
            r.status() == StatusCode::FORBIDDEN,
        );
    }
    // The preferences cookie is per port too, and the client is told.
    let info_a: Value = a.program_get("/api/info").await;
    let info_b: Value = b
        .client
        .get(b.url("/api/info"))
        .bearer_auth("other-token-0123456789-abcdefghijklmnop")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    check(
        "prefs cookie per port",
        info_a["prefs_cookie"] == format!("wo_prefs_{}", a.addr.port())
            && info_b["prefs_cookie"] == format!("wo_prefs_{}", b.addr.port()),
    );
    // Signing in expires an earlier server's session on the same port,
    // never another port's.
    let stale = format!("wo_session_{}_000000", a.addr.port());
    let mut jar = Jar::default();
    jar.0.push((stale.clone(), "old".into()));
    sign_in_with(&b, &mut jar).await;
    sign_in_with(&a, &mut jar).await;
    check(
        "stale same-port session expired, other port kept",
        !jar.0.iter().any(|(n, _)| *n == stale) && jar.0.iter().any(|(n, _)| *n == name_b),
    );
    tally.report(2);
}

// ------------------------------------------------------------- item 8

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_8_slow_clients_are_cut_off() {
    let mut held = 0;
    let mut total = 0;
    for stateless in [false, true] {
        let s = serve_with(Script::says("ok"), stateless, |o| {
            o.limits.header_timeout = Duration::from_millis(300);
            o.limits.body_timeout = Duration::from_millis(300);
            o.limits.max_connections = 16;
        })
        .await;
        let host = format!("127.0.0.1:{}", s.addr.port());
        // 48 that never finish their headers (more than the cap: the rest
        // wait and are cut off in turn)…
        let mut conns = Vec::new();
        for _ in 0..48 {
            let mut tcp = TcpStream::connect(s.addr).await.unwrap();
            tcp.write_all(
                format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nX-Slow: a").as_bytes(),
            )
            .await
            .unwrap();
            conns.push(tcp);
        }
        // …and some that never finish their body.
        let path = if stateless {
            "/api/stateless/chat"
        } else {
            "/api/truth"
        };
        let mut bodies = Vec::new();
        for _ in 0..8 {
            let mut tcp = TcpStream::connect(s.addr).await.unwrap();
            tcp.write_all(
                format!(
                    "POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"message\":"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
            bodies.push(tcp);
        }
        let results =
            futures::future::join_all(conns.iter_mut().chain(bodies.iter_mut()).map(read_to_close))
                .await;
        for (i, r) in results.iter().enumerate() {
            total += 1;
            match r {
                Some(text) if i < 48 => {
                    // Closed, with nothing answered to the half request.
                    if status_of(text).is_none_or(|c| c == 408 || c == 400) {
                        held += 1;
                    }
                }
                Some(text) => {
                    if status_of(text) == Some(408) {
                        held += 1;
                    } else {
                        println!("slow body answered {text:?}");
                    }
                }
                None => println!("connection {i} still open (stateless: {stateless})"),
            }
        }
        // Everyone else is still served.
        total += 1;
        let r = tokio::time::timeout(GUARD, s.client.get(s.url("/api/health")).send()).await;
        if matches!(r, Ok(Ok(ref r)) if r.status() == StatusCode::OK) {
            held += 1;
        }
    }
    // Stateless servers cap connections per address: extra ones are
    // closed at once, and a slot frees when one closes.
    let s = serve_with(Script::says("ok"), true, |o| {
        o.limits.max_connections_per_ip = 4;
    })
    .await;
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(TcpStream::connect(s.addr).await.unwrap());
    }
    // Make sure the server has taken all four before the fifth.
    for tcp in &mut open {
        tcp.write_all(
            format!(
                "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
                s.addr.port()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut buf = [0u8; 12];
        tcp.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 200");
    }
    total += 1;
    let mut fifth = TcpStream::connect(s.addr).await.unwrap();
    let _ = fifth
        .write_all(
            format!(
                "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
                s.addr.port()
            )
            .as_bytes(),
        )
        .await;
    match read_to_close(&mut fifth).await {
        Some(text) if status_of(&text).is_none() => held += 1,
        other => println!("a fifth connection from one address was served: {other:?}"),
    }
    drop(open.pop());
    total += 1;
    // The freed slot is taken again (retry while the server notices the close).
    let mut served = false;
    for _ in 0..100 {
        if let Some(text) = raw(
            s.addr,
            format!(
                "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
                s.addr.port()
            )
            .as_bytes(),
        )
        .await
            && status_of(&text) == Some(200)
        {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if served {
        held += 1;
    }
    report(8, held, total);
}

// ------------------------------------------------------------- item 10

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_10_anonymous_clients_cannot_use_up_the_users_rate() {
    let s = serve_with(Script::says("ok"), false, |o| o.rate_per_minute = 5).await;
    // Another local page or program: no token, from the same address.
    let mut refused = 0;
    for _ in 0..30 {
        let r = s.client.get(s.url("/api/info")).send().await.unwrap();
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            refused += 1;
        }
    }
    assert!(refused >= 20, "anonymous requests are limited: {refused}");
    // A page on another port: the browser attaches the session cookie, and
    // says the request is not from our page.
    for _ in 0..30 {
        let r = s
            .client
            .get(s.url("/api/state"))
            .header("cookie", s.cookie())
            .header("sec-fetch-site", "same-site")
            .send()
            .await
            .unwrap();
        assert!(r.status() == StatusCode::FORBIDDEN || r.status() == StatusCode::TOO_MANY_REQUESTS);
    }
    // The signed-in user still has their whole bucket.
    let mut held = 0;
    for i in 0..5 {
        let r = if i % 2 == 0 {
            s.program(Method::GET, "/api/info").send().await.unwrap()
        } else {
            s.client
                .get(s.url("/api/info"))
                .header("cookie", s.cookie())
                .header("sec-fetch-site", "same-origin")
                .send()
                .await
                .unwrap()
        };
        if r.status() == StatusCode::OK {
            held += 1;
        }
    }
    report(10, held, 5);
    // And the user's own bucket is still limited.
    let r = s.program(Method::GET, "/api/info").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
}

// ------------------------------------------------------------- item 11

/// A stateless server whose config has a second provider (`other`, on
/// another fake upstream) besides the default `fake`, and the built-ins.
async fn hosted(
    tweak: impl FnOnce(&mut wo_server::ServeOptions),
) -> (common::Served, common::Upstream) {
    let other = common::upstream(Script::says("other")).await;
    let other_addr = other.addr;
    let s = serve_with(Script::says("ok"), true, move |o| {
        let dir = o.config.source.clone().unwrap();
        let dir = dir.parent().unwrap();
        let text = format!(
            "[defaults]\nprovider = \"fake\"\n\n[providers.fake]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-1\"\n\n[providers.other]\nkind = \"openai\"\nbase_url = \"http://{other_addr}/v1\"\nmodel = \"other-1\"\n\n[providers.gguf]\nkind = \"local\"\nmodel_path = \"{}/secret-models/model.gguf\"\n\n[interpreter]\nmode = \"off\"\n",
            o.config.providers["fake"].base_url.clone().unwrap(),
            dir.display()
        );
        let path = dir.join("config.toml");
        std::fs::write(&path, &text).unwrap();
        o.config = wo_providers::Config::from_toml(
            &text,
            &path,
            wo_providers::config::Env::from_pairs([("HOME", dir.as_os_str().to_owned())]),
        )
        .unwrap();
        tweak(o);
    })
    .await;
    (s, other)
}

async fn stateless_turn(s: &common::Served, params: Value) -> (StatusCode, Value) {
    let r = s
        .client
        .post(s.url("/api/stateless/chat"))
        .json(&json!({"message": "hi", "params": params}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_11_hosted_clients_choose_only_what_the_operator_offers() {
    let (s, other) = hosted(|_| {}).await;
    let mut tally = Tally::default();
    let mut check = |name: &str, ok: bool| tally.check(name, ok);
    for (params, pointer) in [
        (json!({"provider": "other"}), "/params/provider"),
        (json!({"provider": "openai"}), "/params/provider"),
        (json!({"provider": "gguf"}), "/params/provider"),
        (json!({"model": "gpt-expensive"}), "/params/model"),
        (json!({"max_tokens": 1_000_000}), "/params/max_tokens"),
        (json!({"max_tokens": 4097}), "/params/max_tokens"),
    ] {
        let (status, body) = stateless_turn(&s, params.clone()).await;
        check(
            &format!("{params}"),
            status == StatusCode::BAD_REQUEST && body["error"]["pointer"] == pointer,
        );
    }
    let r = s
        .client
        .post(s.url("/api/context/draft"))
        .json(&json!({"messages": [{"role": "user", "username": "u", "timestamp": "2026-01-01T00:00:00Z", "content": "<p>x</p>"}], "params": {"provider": "other"}}))
        .send()
        .await
        .unwrap();
    check(
        "draft with another provider",
        r.status() == StatusCode::BAD_REQUEST,
    );
    check(
        "the other upstream was never called",
        other.requests.load(std::sync::atomic::Ordering::SeqCst) == 0,
    );
    // A turn that asks for nothing gets the cap.
    let (status, _) = stateless_turn(&s, json!({})).await;
    check(
        "no max_tokens: the cap is sent",
        status == StatusCode::OK
            && s.upstream.bodies.lock().unwrap().last().unwrap()["max_tokens"] == 4096,
    );
    // Anonymous clients see names, never URLs, paths or key sources.
    for path in ["/api/providers", "/api/providers?check=true", "/api/info"] {
        let text = s.public_text(path).await;
        let leaks: Vec<&str> = [
            "http://",
            "/v1",
            "secret-models",
            s.dir.path().to_str().unwrap(),
            "api_key",
            "OPENAI",
            "not configured",
            "other",
            "gguf",
        ]
        .into_iter()
        .filter(|l| text.contains(l))
        .collect();
        check(&format!("{path} leaks {leaks:?}"), leaks.is_empty());
    }
    let listed = s.public_json("/api/providers").await;
    check(
        "only the default is listed",
        listed["providers"].as_array().unwrap().len() == 1
            && listed["providers"][0]["name"] == "fake",
    );
    tally.report(11);

    // The operator's allow-lists open exactly what they name.
    let (s, other) = hosted(|o| {
        o.hosted.allow_providers = vec!["fake".into(), "other".into()];
        o.hosted.allow_models = vec!["big-1".into()];
        o.hosted.max_tokens = Some(100);
    })
    .await;
    assert_eq!(
        stateless_turn(&s, json!({"provider": "other"})).await.0,
        StatusCode::OK
    );
    assert_eq!(other.requests.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(other.bodies.lock().unwrap()[0]["max_tokens"], 100);
    assert_eq!(
        stateless_turn(&s, json!({"model": "big-1", "max_tokens": 100}))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        stateless_turn(&s, json!({"max_tokens": 101})).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        stateless_turn(&s, json!({"provider": "gguf"})).await.0,
        StatusCode::BAD_REQUEST
    );
    let listed = s.public_json("/api/providers").await;
    let names: Vec<&str> = listed["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fake", "other"]);
    assert_eq!(
        listed["providers"][1]["models"],
        json!(["other-1", "big-1"])
    );

    // Misconfigurations are refused at startup, naming the flag.
    let up = common::upstream(Script::says("ok")).await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = common::options(dir.path(), &up, true);
    opts.hosted.allow_providers = vec!["nope".into()];
    let err = wo_server::bind(opts)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("--allow-provider nope"), "{err}");
    let mut opts = common::options(dir.path(), &up, false);
    opts.hosted.max_tokens = Some(10);
    let err = wo_server::bind(opts)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("--stateless"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signed_in_user_still_sees_provider_details() {
    // Local mode is the user's own: every provider, and why one fails.
    let s = serve(Script::says("ok"), false).await;
    let listed: Value = s.program_get("/api/providers?check=true").await;
    let rows = listed["providers"].as_array().unwrap();
    assert!(rows.len() > 1, "{listed}");
    assert!(rows.iter().all(|r| r["detail"].is_string()), "{listed}");
}

// ------------------------------------------------------------- item 13

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_13_malformed_host_headers_are_refused() {
    let s = serve(Script::says("ok"), false).await;
    let p = s.addr.port();
    let ok = [
        "localhost".to_owned(),
        format!("localhost:{p}"),
        format!("127.0.0.1:{p}"),
        "127.0.0.1".into(),
        format!("[::1]:{p}"),
        "[::1]".into(),
        format!("LOCALHOST:{p}"),
        "127.0.0.1:65535".into(),
        "localhost:1".into(),
    ];
    let foreign = [
        "evil.example".to_owned(),
        "evil.example:80".into(),
        "localhost.".into(),
        "127.0.0.2".into(),
        "[::2]:80".into(),
        "[0:0:0:0:0:0:0:1]".into(),
        "localhost.evil.example".into(),
        "xn--80ak6aa92e.com".into(),
    ];
    let malformed = [
        "".to_owned(),
        "localhost:".into(),
        "localhost:abc".into(),
        "localhost:80a".into(),
        "localhost:-1".into(),
        "localhost:+80".into(),
        "localhost:0".into(),
        "localhost:080".into(),
        "localhost:65536".into(),
        "localhost:99999".into(),
        "localhost:123456".into(),
        "localhost:80:80".into(),
        "localhost::80".into(),
        "[::1]x".into(),
        "[::1]:".into(),
        "[::1]:abc".into(),
        "[::1]]".into(),
        "[::1]:80x".into(),
        "[::1".into(),
        "[]".into(),
        "[localhost]".into(),
        "[::1%25eth0]".into(),
        "::1".into(),
        "user@localhost".into(),
        "user:pass@localhost".into(),
        "localhost@evil.example".into(),
        "evil.example@localhost".into(),
        "local host".into(),
        "localhost :80".into(),
        "localhost: 80".into(),
        "localhost/".into(),
        "localhost/path".into(),
        "localhost?x".into(),
        "localhost#x".into(),
        "localhost\\evil".into(),
        "local%68ost".into(),
        ".localhost".into(),
        "local..host".into(),
        "localhost..".into(),
        "*".into(),
        "http://localhost".into(),
        "localhost,evil.example".into(),
        "localhost;x".into(),
        format!("{}.example", "a".repeat(64)),
    ];
    let mut held = 0;
    let mut total = 0;
    let get = |host: &str| {
        format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
            .into_bytes()
    };
    for (hosts, want) in [(&ok[..], 200), (&foreign[..], 403), (&malformed[..], 400)] {
        for host in hosts {
            total += 1;
            let got = raw(s.addr, &get(host)).await.as_deref().and_then(status_of);
            if got == Some(want) {
                held += 1;
            } else {
                println!("Host {host:?}: {got:?}, want {want}");
            }
        }
    }
    // No Host at all, and two of them.
    for request in [
        "GET /api/health HTTP/1.1\r\nConnection: close\r\n\r\n".to_owned(),
        format!(
            "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
        ),
    ] {
        total += 1;
        if raw(s.addr, request.as_bytes())
            .await
            .as_deref()
            .and_then(status_of)
            == Some(400)
        {
            held += 1;
        } else {
            println!("{request:?} not refused with 400");
        }
    }
    report(13, held, total);
}

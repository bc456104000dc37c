//! product §6's defences, each tried from outside over real HTTP: the token,
//! the Host check (DNS rebinding), cross-origin and content-type checks,
//! body and rate limits, no CORS, and the local mode's loopback-only bind.
//! Every refused request leaves llm.json byte-identical.

mod common;

use common::{Script, TOKEN, serve, serve_with};
use reqwest::{Method, StatusCode};

async fn seeded() -> common::Served {
    let s = serve(Script::says("ok"), false).await;
    // One write so the file exists and has content to protect.
    let r = s
        .program_json(
            Method::POST,
            "/api/truth",
            &serde_json::json!({"title": "T", "content": "c", "certainty": 0.5}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_needs_the_token() {
    let s = seeded().await;
    let before = s.state_bytes();
    for path in [
        "/api/state",
        "/api/info",
        "/api/export",
        "/api/search?q=x",
        "/api/providers",
    ] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(
            r.status(),
            StatusCode::UNAUTHORIZED,
            "{path} without a token"
        );
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["kind"], "unauthorized");
        let r = s
            .client
            .get(s.url(path))
            .bearer_auth("wrong-token-0123456789-abcdefghijklmno")
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            StatusCode::UNAUTHORIZED,
            "{path} with a wrong token"
        );
        let r = s
            .get_with_cookie(path, &format!("{}=nope", s.session_cookie))
            .await;
        assert_eq!(
            r.status(),
            StatusCode::UNAUTHORIZED,
            "{path} with a wrong cookie"
        );
    }
    let r = s
        .cookieless(
            Method::POST,
            "/api/chat",
            &serde_json::json!({"message": "hi"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Health and the API description are public; so is the page itself.
    for path in [
        "/api/health",
        "/api/openapi.json",
        "/",
        "/app.js",
        "/js/main.js",
        "/js/state.js",
        "/app.css",
        "/wasm/wo_wasm.js",
        "/wasm/wo_wasm_bg.wasm",
        "/ingest.html",
        "/ingest.js",
        "/ingest-lib.js",
        "/ingest.css",
        "/wasm/wo_index_wasm.js",
        "/wasm/wo_index_wasm_bg.wasm",
    ] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
    assert_eq!(s.state_bytes(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launch_url_becomes_a_strict_httponly_cookie() {
    let s = seeded().await;
    assert!(
        s.launch_url.ends_with(&format!("/?token={TOKEN}")),
        "{}",
        s.launch_url
    );
    let r = s.client.get(&s.launch_url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()["location"],
        "/",
        "the token leaves the address bar"
    );
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.starts_with(&format!("{}={TOKEN};", s.session_cookie)),
        "{cookie}"
    );
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie} lacks {attr}");
    }
    let r = s.get_with_cookie("/api/state", &s.cookie()).await;
    assert_eq!(r.status(), StatusCode::OK);
    // A wrong sign-in token sets nothing.
    let r = s.client.get(s.url("/?token=guess")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get("set-cookie").is_none());
    // A styled page saying how to sign in again, under the same CSP.
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    assert!(
        r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let page = r.text().await.unwrap();
    for needle in [
        "/app.css",
        "wo serve",
        "--new-token",
        "Nothing is lost",
        "llm.json",
    ] {
        assert!(page.contains(needle), "the sign-in page lacks {needle:?}");
    }
    assert!(!page.contains("guess"), "the rejected token is not echoed");
}

/// A local server on `addr` keeping its token under `data`, for the
/// restart tests; returns the bound server's launch URL, its session
/// cookie name (after signing in), and a sender that stops it.
async fn start_kept(
    dir: &std::path::Path,
    data: &std::path::Path,
    addr: std::net::SocketAddr,
    new_token: bool,
    upstream: &common::Upstream,
) -> (
    String,
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
) {
    let mut opts = common::options(dir, upstream, false);
    opts.token = None;
    opts.token_dir = Some(data.to_path_buf());
    opts.new_token = new_token;
    opts.addr = addr;
    let mut bound = None;
    // The port of a server just stopped may take a moment to be free.
    for _ in 0..50 {
        match wo_server::bind(opts.clone()).await {
            Ok(b) => {
                bound = Some(b);
                break;
            }
            Err(wo_server::ServeError::Bind { .. }) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let bound = bound.expect("the port came free");
    let kept = bound.kept_token.as_ref().expect("a kept token");
    assert!(
        bound
            .launch_url
            .ends_with(&format!("?token={}", kept.token))
    );
    let (url, addr) = (bound.launch_url.clone(), bound.addr);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.serve(async move {
        let _ = rx.await;
    }));
    (url, addr, tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_survives_a_restart_and_new_token_ends_it() {
    use std::os::unix::fs::PermissionsExt as _;
    let upstream = common::upstream(Script::says("ok")).await;
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    // A fresh connection per request: the restarts below close the old
    // server's keep-alive connections, and a request sent on one in that
    // instant fails with "incomplete message" (a browser would retry it).
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let get_state = |addr: std::net::SocketAddr, cookie: String| {
        let client = client.clone();
        async move {
            client
                .get(format!("http://{addr}/api/state"))
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
                .status()
        }
    };

    let (url1, addr, stop1) = start_kept(
        dir.path(),
        data.path(),
        "127.0.0.1:0".parse().unwrap(),
        false,
        &upstream,
    )
    .await;
    let (name, value) = common::sign_in(&client, &url1).await;
    assert_eq!(
        get_state(addr, format!("{name}={value}")).await,
        StatusCode::OK
    );
    // The token is kept 0600 in the data directory, never in the project.
    let tokens: Vec<_> = std::fs::read_dir(data.path().join(wo_server::signin::TOKENS_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(tokens.len(), 1);
    let meta = std::fs::metadata(&tokens[0]).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::read_to_string(&tokens[0]).unwrap(),
        format!("{value}\n")
    );
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let text = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(&value),
            "the token leaked into the project"
        );
    }
    stop1.send(()).unwrap();

    // A restart on the same port: the same link, and the browser's cookie
    // (same name, same token) still signs it in.
    let (url2, addr2, stop2) = start_kept(dir.path(), data.path(), addr, false, &upstream).await;
    assert_eq!(addr2, addr);
    assert_eq!(url2, url1, "the sign-in link survives the restart");
    assert_eq!(
        get_state(addr, format!("{name}={value}")).await,
        StatusCode::OK
    );
    let (name2, _) = common::sign_in(&client, &url2).await;
    assert_eq!(name2, name, "the cookie keeps its name across restarts");
    // The CSRF guarantees hold for the kept cookie: no Origin, no write.
    let r = client
        .post(format!("http://{addr}/api/truth"))
        .header("cookie", format!("{name}={value}"))
        .json(&serde_json::json!({"title": "x", "content": "y", "certainty": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    stop2.send(()).unwrap();

    // --new-token: the old link and the old cookie are dead.
    let (url3, _, stop3) = start_kept(dir.path(), data.path(), addr, true, &upstream).await;
    assert_ne!(url3, url1);
    assert_eq!(
        get_state(addr, format!("{name}={value}")).await,
        StatusCode::UNAUTHORIZED
    );
    let r = client.get(&url1).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get("set-cookie").is_none());
    assert!(r.text().await.unwrap().contains("wo serve"));
    let (_, value3) = common::sign_in(&client, &url3).await;
    assert_eq!(
        get_state(addr, format!("{name}={value3}")).await,
        StatusCode::OK
    );
    let meta = std::fs::metadata(&tokens[0]).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    stop3.send(()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_server_keeps_no_token() {
    let upstream = common::upstream(Script::says("ok")).await;
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut opts = common::options(dir.path(), &upstream, true);
    opts.token = None;
    opts.token_dir = Some(data.path().to_path_buf());
    let bound = wo_server::bind(opts.clone()).await.unwrap();
    assert!(bound.kept_token.is_none());
    assert!(bound.launch_url.ends_with('/'), "{}", bound.launch_url);
    drop(bound);
    assert_eq!(
        std::fs::read_dir(data.path()).unwrap().count(),
        0,
        "nothing written"
    );
    opts.new_token = true;
    let Err(e) = wo_server::bind(opts).await else {
        panic!("--new-token accepted in stateless mode")
    };
    assert!(
        e.to_string().contains("--new-token is for local mode"),
        "{e}"
    );
    // A fixed token and --new-token contradict each other.
    let mut opts = common::options(dir.path(), &upstream, false);
    opts.token_dir = Some(data.path().to_path_buf());
    opts.new_token = true;
    let Err(e) = wo_server::bind(opts).await else {
        panic!("--new-token with a fixed token accepted")
    };
    assert!(e.to_string().contains("WO_SERVE_TOKEN"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_host_names_are_refused_dns_rebinding() {
    let s = seeded().await;
    let before = s.state_bytes();
    for host in [
        "evil.example",
        "evil.example:80",
        "attacker.localhost.example",
        "192.168.1.5",
    ] {
        for path in ["/", "/api/health", "/api/state"] {
            let r = s
                .client
                .get(s.url(path))
                .header("host", host)
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "Host {host} {path}");
        }
        let r = s
            .program(Method::POST, "/api/truth")
            .header("host", host)
            .json(&serde_json::json!({"title": "x", "content": "y", "certainty": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
    for host in [
        format!("localhost:{}", s.addr.port()),
        format!("127.0.0.1:{}", s.addr.port()),
    ] {
        let r = s
            .client
            .get(s.url("/api/health"))
            .header("host", host.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{host}");
    }
    assert_eq!(s.state_bytes(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_origin_and_non_json_writes_are_refused() {
    let s = seeded().await;
    let before = s.state_bytes();
    let body = serde_json::json!({"title": "x", "content": "y", "certainty": 1});
    let with_cookie = |origin: String| {
        s.client
            .post(s.url("/api/truth"))
            .header("cookie", s.cookie())
            .header("origin", origin)
    };
    // Cross-origin, with the cookie a browser would attach.
    let r = with_cookie("http://evil.example".into())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // Another port on the same host is another origin.
    let r = with_cookie(format!("http://127.0.0.1:{}", s.addr.port() + 1))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // Two Origin headers, one of them ours.
    let r = s
        .browser(Method::POST, "/api/truth")
        .header("origin", "http://evil.example")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // The cookie without any Origin (a form post from an old browser).
    let r = s
        .client
        .post(s.url("/api/truth"))
        .header("cookie", s.cookie())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // The content types an HTML form can send.
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let r = s
            .browser(Method::POST, "/api/truth")
            .header("content-type", ct)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct}");
    }
    let r = s
        .browser(Method::DELETE, "/api/truth/t_x")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "DELETE without a JSON type"
    );
    assert_eq!(s.state_bytes(), before);
    // The same request from our own page passes.
    let r = s.browser_json(Method::POST, "/api/truth", &body).await;
    assert_eq!(r.status(), StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cors_headers_are_ever_sent() {
    let s = seeded().await;
    let r = s
        .client
        .request(Method::OPTIONS, s.url("/api/truth"))
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error(), "{}", r.status());
    for resp in [
        r,
        s.program(Method::GET, "/api/state")
            .header("origin", "http://evil.example")
            .send()
            .await
            .unwrap(),
        s.client
            .get(s.url("/api/health"))
            .header("origin", "http://evil.example")
            .send()
            .await
            .unwrap(),
    ] {
        assert!(
            resp.headers()
                .keys()
                .all(|k| !k.as_str().starts_with("access-control-")),
            "{:?}",
            resp.headers()
        );
        let csp = resp.headers()["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'self'"), "{csp}");
        // Scripts from this server only; wasm may be compiled (the web
        // client's module), JavaScript never evaluated from strings.
        assert!(
            csp.split(';')
                .any(|d| d.trim() == "script-src 'self' 'wasm-unsafe-eval'"),
            "{csp}"
        );
        assert!(
            !csp.contains("'unsafe-eval'") && !csp.contains("'unsafe-inline'"),
            "{csp}"
        );
        assert_eq!(resp.headers()["x-frame-options"], "DENY");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_refused_whole() {
    let s = seeded().await;
    let before = s.state_bytes();
    let big = "x".repeat(70 << 10);
    // With a Content-Length (refused before reading)…
    let r = s
        .program_json(
            Method::POST,
            "/api/truth",
            &serde_json::json!({"title": "t", "content": big, "certainty": 1}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // The body was never read, so the connection ends here: the client is
    // told, or its next request on the same connection fails mid-send.
    assert_eq!(r.headers()["connection"], "close");
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["kind"], "payload_too_large");
    // …and streamed without one (refused while reading).
    let chunks: Vec<Result<String, std::io::Error>> =
        (0..80).map(|_| Ok("y".repeat(1024))).collect();
    let r = s
        .program(Method::POST, "/api/chat")
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.headers()["connection"], "close");
    assert_eq!(s.state_bytes(), before);
    assert_eq!(
        s.upstream
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

/// A request refused before its body is read gets `Connection: close`, and
/// the server does end that connection; a refused request without a body
/// keeps its connection, and so does an accepted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_with_its_body_unread_ends_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = seeded().await;
    let before = s.state_bytes();
    let host = s.addr.to_string();
    // Sent whole, so the server has every byte it will ever get: what
    // follows the response is the server's choice, not a client's timeout.
    let send = |head: String| {
        let addr = s.addr;
        async move {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(head.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            // Well inside the 10 s that ends an idle kept-alive connection.
            let ended =
                tokio::time::timeout(std::time::Duration::from_secs(3), tcp.read_to_end(&mut got))
                    .await
                    .is_ok();
            (String::from_utf8_lossy(&got).into_owned(), ended)
        }
    };
    let declared = 70 << 10;
    // Over the limit (refused on its Content-Length), and without the token.
    for auth in [format!("Authorization: Bearer {TOKEN}\r\n"), String::new()] {
        let (reply, ended) = send(format!(
            "POST /api/truth HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n{{\"title\": \"t\""
        ))
        .await;
        let status = reply.lines().next().unwrap_or("");
        assert!(
            status.contains(" 413 ") || status.contains(" 401 "),
            "{status}"
        );
        assert!(
            reply
                .to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{reply}"
        );
        assert!(ended, "the server kept the connection open: {reply}");
    }
    // Refused, but with no body to leave unread: the connection stays.
    let (reply, ended) = send(format!("GET /api/info HTTP/1.1\r\nHost: {host}\r\n\r\n")).await;
    assert!(reply.starts_with("HTTP/1.1 401 "), "{reply}");
    assert!(
        !reply.to_ascii_lowercase().contains("connection: close"),
        "{reply}"
    );
    assert!(!ended, "a bodiless refusal closed its connection");
    assert_eq!(s.state_bytes(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_over_the_rate_limit_get_429() {
    let s = serve_with(Script::says("ok"), false, |o| o.rate_per_minute = 5).await;
    let mut codes = Vec::new();
    for _ in 0..8 {
        codes.push(
            s.program(Method::GET, "/api/info")
                .send()
                .await
                .unwrap()
                .status(),
        );
    }
    assert_eq!(
        codes.iter().filter(|c| **c == StatusCode::OK).count(),
        5,
        "{codes:?}"
    );
    assert_eq!(codes.last(), Some(&StatusCode::TOO_MANY_REQUESTS));
    // The page itself is not API and stays reachable.
    assert_eq!(
        s.client.get(s.url("/")).send().await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mode_binds_loopback_only() {
    let up = common::upstream(Script::says("ok")).await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = common::options(dir.path(), &up, false);
    opts.addr = "0.0.0.0:0".parse().unwrap();
    let err = wo_server::bind(opts).await.err().expect("refused");
    assert!(err.to_string().contains("loopback"), "{err}");
    assert!(
        !dir.path().join("llm.json").exists(),
        "nothing created on refusal"
    );
    let mut opts = common::options(dir.path(), &up, false);
    opts.allowed_hosts = vec!["example.org".into()];
    assert!(
        wo_server::bind(opts).await.is_err(),
        "--allow-host is stateless-only"
    );
    // Stateless mode may bind publicly.
    let mut opts = common::options(dir.path(), &up, true);
    opts.addr = "0.0.0.0:0".parse().unwrap();
    assert!(wo_server::bind(opts).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_path_is_taken_from_a_request() {
    let s = seeded().await;
    for path in [
        "/../llm.json",
        "/api/../../etc/passwd",
        "/%2e%2e/llm.json",
        "/llm.json",
        "/api/export/../../x",
    ] {
        let r = s.program(Method::GET, path).send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert!(
            status == StatusCode::NOT_FOUND || status == StatusCode::BAD_REQUEST,
            "{path}: {status}"
        );
        assert!(!text.contains("\"messages\""), "{path} leaked state");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wasm_package_is_served_as_committed_with_its_types() {
    let s = seeded().await;
    let web = concat!(env!("CARGO_MANIFEST_DIR"), "/src/web/wasm/");
    for (name, content_type) in [
        ("wo_wasm_bg.wasm", "application/wasm"),
        ("wo_wasm.js", "text/javascript; charset=utf-8"),
        ("wo_index_wasm_bg.wasm", "application/wasm"),
        ("wo_index_wasm.js", "text/javascript; charset=utf-8"),
    ] {
        let r = s
            .client
            .get(s.url(&format!("/wasm/{name}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{name}");
        // instantiateStreaming refuses any other type; nosniff keeps it.
        assert_eq!(r.headers()["content-type"], content_type, "{name}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
        let body = r.bytes().await.unwrap();
        let file = std::fs::read(format!("{web}{name}")).unwrap();
        assert!(body == file, "/wasm/{name} is not the committed file");
    }
    assert_eq!(
        s.client
            .get(s.url("/wasm/wo_wasm.wasm"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renaming_a_conversation_has_every_write_defence_and_keeps_titles_as_text() {
    let s = serve(Script::says("ok"), false).await;
    let r = s
        .program(Method::POST, "/api/chat")
        .json(&serde_json::json!({"message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let _ = r.text().await.unwrap();
    let state: serde_json::Value = s.state_json();
    let id = state["messages"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/messages/{id}");
    let body = serde_json::json!({"title": "renamed by an attacker"});
    let before = s.state_bytes();
    // No token, a wrong token, another origin with the cookie, the cookie
    // without an Origin, and the content types an HTML form can send.
    let r = s.cookieless(Method::PATCH, &path, &body).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = s
        .client
        .patch(s.url(&path))
        .bearer_auth("wrong-token-0123456789-abcdefghijklmno")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    for origin in [
        Some("http://evil.example".to_owned()),
        Some(format!("http://127.0.0.1:{}", s.addr.port() + 1)),
        None,
    ] {
        let mut rb = s.client.patch(s.url(&path)).header("cookie", s.cookie());
        if let Some(o) = &origin {
            rb = rb.header("origin", o);
        }
        let r = rb.json(&body).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "origin {origin:?}");
    }
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let r = s
            .browser(Method::PATCH, &path)
            .header("content-type", ct)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct}");
    }
    // The Markdown converter is behind the token in local mode too.
    let r = s
        .cookieless(
            Method::POST,
            "/api/markdown",
            &serde_json::json!({"markdown": "x"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // A path is an id, never a file: traversal finds no message.
    let r = s
        .browser(Method::PATCH, "/api/messages/..%2F..%2Fetc%2Fpasswd")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(s.state_bytes(), before);
    // From our own page, markup in a title is kept as text: the file holds
    // the characters, the title never becomes content.
    for payload in [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "\"><svg onload=alert(1)>",
        "javascript:alert(1)",
    ] {
        let r = s
            .browser(Method::PATCH, &path)
            .json(&serde_json::json!({"title": payload}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{payload}");
        let state = s.state_json();
        assert_eq!(state["messages"][0]["title"], payload);
        assert_eq!(state["messages"][0]["content"], before_content(&before));
    }
}

/// The first message's content in a saved state.
fn before_content(bytes: &[u8]) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    v["messages"][0]["content"].clone()
}

/// The PWA's files are public, typed, under the same
/// headers, and the CSP allows only this server's worker and manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pwa_files_are_served_typed_under_the_csp() {
    for stateless in [false, true] {
        let s = serve(Script::says("ok"), stateless).await;
        for (path, kind) in [
            ("/manifest.webmanifest", "application/manifest+json"),
            ("/sw.js", "text/javascript; charset=utf-8"),
            ("/icon.svg", "image/svg+xml"),
            ("/icon-192.png", "image/png"),
            ("/icon-512.png", "image/png"),
        ] {
            // No cookie, no token: an installed app fetches these on its own.
            let r = s.client.get(s.url(path)).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            assert_eq!(r.headers()["content-type"], kind, "{path}");
            assert_eq!(r.headers()["x-content-type-options"], "nosniff");
            let csp = r.headers()["content-security-policy"]
                .to_str()
                .unwrap()
                .to_owned();
            for directive in [
                "worker-src 'self'",
                "manifest-src 'self'",
                "script-src 'self'",
            ] {
                assert!(csp.contains(directive), "{path}: {csp}");
            }
            // 'wasm-unsafe-eval' (the page's wasm module) is the only one.
            assert!(!csp.contains("'unsafe-"), "{csp}");
            let body = r.bytes().await.unwrap();
            if path.ends_with(".png") {
                assert!(
                    body.starts_with(b"\x89PNG\r\n\x1a\n"),
                    "{path} is not a PNG"
                );
            }
        }
        let m: serde_json::Value = s
            .client
            .get(s.url("/manifest.webmanifest"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(m["start_url"], "/");
        assert_eq!(m["display"], "standalone");
        // The worker keeps only the shell: never the API or the sign-in link.
        let sw = s.public_text("/sw.js").await;
        assert!(sw.contains("url.search") && !sw.contains("'/api"), "{sw}");
        // Only GET: a worker or manifest path takes no writes.
        let r = s
            .cookieless(Method::POST, "/sw.js", &serde_json::json!({}))
            .await;
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_refused_past_its_limit_still_gets_its_413_when_the_rest_comes_late() {
    // A client that sends past the limit, pauses, then sends the rest,
    // and only then reads: the server must have read (and dropped) that
    // rest, or its close turns the 413 into a reset the client never
    // reads past.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = seeded().await;
    let before = s.state_bytes();
    let mut tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let head = format!(
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        s.addr.port(),
        TOKEN
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let chunk = |n: usize| format!("{n:x}\r\n{}\r\n", "y".repeat(n));
    tcp.write_all(chunk(70 << 10).as_bytes()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for _ in 0..16 {
        tcp.write_all(chunk(1024).as_bytes()).await.unwrap();
    }
    tcp.write_all(b"0\r\n\r\n").await.unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), tcp.read(&mut answer))
        .await
        .expect("an answer")
        .expect("the 413, not a reset");
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("payload_too_large"), "{text}");
    assert_eq!(s.state_bytes(), before);
}

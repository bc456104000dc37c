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
            .client
            .get(s.url(path))
            .header("cookie", format!("{}=nope", s.session_cookie))
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            StatusCode::UNAUTHORIZED,
            "{path} with a wrong cookie"
        );
    }
    let r = s
        .client
        .post(s.url("/api/chat"))
        .header("origin", &s.base)
        .json(&serde_json::json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Health and the API description are public; so is the page itself.
    for path in [
        "/api/health",
        "/api/openapi.json",
        "/",
        "/app.js",
        "/app.css",
        "/wasm/wo_wasm.js",
        "/wasm/wo_wasm_bg.wasm",
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
    let r = s
        .client
        .get(s.url("/api/state"))
        .header("cookie", s.cookie())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // A wrong sign-in token sets nothing.
    let r = s.client.get(s.url("/?token=guess")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get("set-cookie").is_none());
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
    assert_eq!(s.state_bytes(), before);
    assert_eq!(
        s.upstream
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
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

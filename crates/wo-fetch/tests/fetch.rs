//! End-to-end checks of the fetch rules against local servers (loopback only; no other network).
//!
//! The servers are raw TCP so each test controls exact headers, redirects and stalls. Tests that
//! need to reach a server list its exact socket address in the test-only
//! `allow_addresses_for_tests`; everything else must still be refused.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wo_fetch::{FetchError, FetchPolicy, Refusal, fetch_text};

/// What a test server does for one request path.
enum Reply {
    /// Status line, content type and body.
    Ok(&'static str, Vec<u8>),
    Redirect(String),
    /// Sends headers and part of the body, then stalls forever.
    Stall,
    Status(u16),
}

type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

async fn read_request_path(sock: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    head.split_whitespace().nth(1).map(str::to_string)
}

async fn serve_one(mut sock: TcpStream, handler: Handler) {
    let Some(path) = read_request_path(&mut sock).await else {
        return;
    };
    let resp: Vec<u8> = match handler(&path) {
        Reply::Ok(ct, body) => {
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            r.extend_from_slice(&body);
            r
        }
        Reply::Redirect(to) => format!(
            "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .into_bytes(),
        Reply::Status(code) => {
            format!("HTTP/1.1 {code} Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .into_bytes()
        }
        Reply::Stall => {
            let _ = sock
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nstart")
                .await;
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return;
        }
    };
    let _ = sock.write_all(&resp).await;
    let _ = sock.shutdown().await;
}

/// Starts a loopback server; returns its address.
async fn server(handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler: Handler = Arc::new(handler);
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve_one(sock, handler.clone()));
        }
    });
    addr
}

fn policy_for(addr: SocketAddr) -> FetchPolicy {
    FetchPolicy {
        allow_addresses_for_tests: vec![addr],
        ..FetchPolicy::default()
    }
}

const PAGE: &str = "<!doctype html><html><head><title>Test  Page</title>\
    <script>alert('x')</script><style>p{}</style></head>\
    <body><h1>Hello</h1><p>World   of\n text</p></body></html>";

#[tokio::test]
async fn allowed_local_page_becomes_text() {
    let addr = server(|path| match path {
        "/" => Reply::Ok("text/html; charset=utf-8", PAGE.as_bytes().to_vec()),
        "/plain" => Reply::Ok("text/plain", b"just  text\nline two".to_vec()),
        _ => Reply::Status(404),
    })
    .await;
    let policy = policy_for(addr);
    let f = fetch_text(&format!("http://{addr}/"), &policy)
        .await
        .unwrap();
    assert_eq!(f.url, format!("http://{addr}/"));
    assert_eq!(f.title.as_deref(), Some("Test Page"));
    assert_eq!(f.text, "Hello\nWorld of text");
    assert!(!f.truncated);

    let f = fetch_text(&format!("http://{addr}/plain"), &policy)
        .await
        .unwrap();
    assert_eq!(f.title, None);
    assert_eq!(f.text, "just text\nline two");

    let err = fetch_text(&format!("http://{addr}/missing"), &policy)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Status { status: 404, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn body_is_capped_and_marked_truncated() {
    let big = "a".repeat(100_000);
    let addr = server(move |_| Reply::Ok("text/plain", big.clone().into_bytes())).await;
    let policy = FetchPolicy {
        max_bytes: 1000,
        ..policy_for(addr)
    };
    let f = fetch_text(&format!("http://{addr}/"), &policy)
        .await
        .unwrap();
    assert!(f.truncated);
    assert_eq!(f.text.len(), 1000);

    // A body that exactly fills the cap is complete.
    let exact = FetchPolicy {
        max_bytes: 100_000,
        ..policy_for(addr)
    };
    let f = fetch_text(&format!("http://{addr}/"), &exact)
        .await
        .unwrap();
    assert!(!f.truncated);
    assert_eq!(f.text.len(), 100_000);
}

#[tokio::test]
async fn stalled_server_times_out() {
    let addr = server(|_| Reply::Stall).await;
    let policy = FetchPolicy {
        timeout: Duration::from_millis(300),
        ..policy_for(addr)
    };
    let started = std::time::Instant::now();
    let err = fetch_text(&format!("http://{addr}/"), &policy)
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn non_text_content_is_refused() {
    let addr = server(|path| match path {
        "/json" => Reply::Ok("application/json", b"{}".to_vec()),
        _ => Reply::Ok("image/png", vec![0x89, b'P', b'N', b'G']),
    })
    .await;
    let policy = policy_for(addr);
    for p in ["/json", "/png"] {
        let err = fetch_text(&format!("http://{addr}{p}"), &policy)
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::ContentType { .. }), "{err}");
    }
}

#[tokio::test]
async fn redirects_are_rechecked() {
    // A second loopback server that is NOT in the test allowance.
    let other = server(|_| Reply::Ok("text/plain", b"secret".to_vec())).await;
    let addr = server(move |path| match path {
        "/to-other" => Reply::Redirect(format!("http://{other}/")),
        "/to-metadata" => Reply::Redirect("http://169.254.169.254/latest/meta-data/".into()),
        "/to-file" => Reply::Redirect("file:///etc/passwd".into()),
        "/to-localhost" => Reply::Redirect(format!("http://localhost:{}/", other.port())),
        "/to-mapped" => Reply::Redirect(format!("http://[::ffff:127.0.0.1]:{}/", other.port())),
        "/hop" => Reply::Redirect("/final".into()),
        "/final" => Reply::Ok("text/plain", b"arrived".to_vec()),
        p if p.starts_with("/loop") => {
            let n: u32 = p[5..].parse().unwrap_or(0);
            Reply::Redirect(format!("/loop{}", n + 1))
        }
        _ => Reply::Status(404),
    })
    .await;
    let policy = policy_for(addr);

    // A same-server redirect is fine, and the final URL is reported.
    let f = fetch_text(&format!("http://{addr}/hop"), &policy)
        .await
        .unwrap();
    assert_eq!(f.text, "arrived");
    assert_eq!(f.url, format!("http://{addr}/final"));

    let err = fetch_text(&format!("http://{addr}/to-other"), &policy)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::Address { url, reason, .. })
            if url.contains(&other.to_string()) && reason.contains("loopback")),
        "{err}"
    );

    let err = fetch_text(&format!("http://{addr}/to-metadata"), &policy)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::Address { addr, .. })
            if addr.to_string() == "169.254.169.254"),
        "{err}"
    );

    let err = fetch_text(&format!("http://{addr}/to-file"), &policy)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::Scheme { scheme, .. }) if scheme == "file"),
        "{err}"
    );

    let err = fetch_text(&format!("http://{addr}/to-localhost"), &policy)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::ResolvedAddress { host, .. }) if host == "localhost"),
        "{err}"
    );

    let err = fetch_text(&format!("http://{addr}/to-mapped"), &policy)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::Address { .. })),
        "{err}"
    );

    let err = fetch_text(&format!("http://{addr}/loop0"), &policy)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::TooManyRedirects { max: 3, .. }),
        "{err}"
    );
    // Exactly `max_redirects` hops are allowed.
    let two = FetchPolicy {
        max_redirects: 2,
        ..policy.clone()
    };
    let err = fetch_text(&format!("http://{addr}/loop0"), &two)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::TooManyRedirects { url, max: 2 } if url.ends_with("/loop3")),
        "{err}"
    );
}

#[tokio::test]
async fn non_public_ip_literals_are_refused_without_connecting() {
    // Port 9 (discard) on these addresses: no connection is attempted, so nothing listens or
    // times out; the refusal must come back immediately.
    let policy = FetchPolicy {
        timeout: Duration::from_secs(30),
        ..FetchPolicy::default()
    };
    for host in [
        "127.0.0.1",
        "[::1]",
        "10.0.0.1",
        "192.168.1.1",
        "172.16.0.1",
        "169.254.169.254",
        "224.0.0.1",
        "0.0.0.0",
        "[::ffff:127.0.0.1]",
        "[fe80::1]",
        "100.64.0.1",
        "2130706433",
        "0x7f.1",
        "[fc00::1]",
        "255.255.255.255",
    ] {
        let started = std::time::Instant::now();
        let err = fetch_text(&format!("http://{host}:9/x"), &policy)
            .await
            .unwrap_err();
        assert!(
            matches!(err, FetchError::Refused(Refusal::Address { .. })),
            "{host}: {err}"
        );
        assert!(started.elapsed() < Duration::from_millis(500), "{host}");
        assert!(err.to_string().contains("refused"), "{err}");
    }
}

#[tokio::test]
async fn test_allowance_is_exact() {
    let addr = server(|_| Reply::Ok("text/plain", b"ok".to_vec())).await;
    // Right IP, wrong port: still refused.
    let wrong_port = FetchPolicy {
        allow_addresses_for_tests: vec![SocketAddr::new(addr.ip(), addr.port().wrapping_add(1))],
        ..FetchPolicy::default()
    };
    let err = fetch_text(&format!("http://{addr}/"), &wrong_port)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Refused(Refusal::Address { .. })),
        "{err}"
    );
    // The allowance never applies to names: localhost resolves to loopback and is refused.
    let err = fetch_text(
        &format!("http://localhost:{}/", addr.port()),
        &policy_for(addr),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::ResolvedAddress { host, addr, .. })
            if host == "localhost" && addr.is_loopback()),
        "{err}"
    );
}

#[tokio::test]
async fn only_http_and_https() {
    let policy = FetchPolicy::default();
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/",
        "gopher://example.com/",
        "data:text/plain,hi",
        "javascript:alert(1)",
    ] {
        let err = fetch_text(url, &policy).await.unwrap_err();
        assert!(
            matches!(err, FetchError::Refused(Refusal::Scheme { .. })),
            "{url}: {err}"
        );
    }
    let err = fetch_text("not a url", &policy).await.unwrap_err();
    assert!(matches!(err, FetchError::InvalidUrl { .. }), "{err}");
}

#[tokio::test]
async fn allow_and_block_lists() {
    let addr = server(|_| Reply::Ok("text/plain", b"ok".to_vec())).await;
    // Domain rules are checked before any DNS lookup, so these names never hit the network.
    let allow = FetchPolicy {
        allow_domains: vec!["wikipedia.org".into()],
        ..FetchPolicy::default()
    };
    let err = fetch_text("https://example.com/", &allow)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::NotAllowedDomain { host, .. }) if host == "example.com"),
        "{err}"
    );
    let err = fetch_text("https://notwikipedia.org/", &allow)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Refused(Refusal::NotAllowedDomain { .. })),
        "{err}"
    );

    let block = FetchPolicy {
        block_domains: vec!["Evil.example".into()],
        ..FetchPolicy::default()
    };
    let err = fetch_text("http://www.evil.example/page", &block)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::BlockedDomain { host, entry, .. })
            if host == "www.evil.example" && entry == "Evil.example"),
        "{err}"
    );

    // Block wins over allow.
    let both = FetchPolicy {
        allow_domains: vec!["example.org".into()],
        block_domains: vec!["bad.example.org".into()],
        ..FetchPolicy::default()
    };
    let err = fetch_text("https://bad.example.org/", &both)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Refused(Refusal::BlockedDomain { .. })),
        "{err}"
    );

    // Lists apply to IP-literal hosts too, and to redirect hops.
    let ip = addr.ip().to_string();
    let listed = FetchPolicy {
        allow_domains: vec![ip.clone()],
        ..policy_for(addr)
    };
    assert_eq!(
        fetch_text(&format!("http://{addr}/"), &listed)
            .await
            .unwrap()
            .text,
        "ok"
    );
    let unlisted = FetchPolicy {
        allow_domains: vec!["example.org".into()],
        ..policy_for(addr)
    };
    let err = fetch_text(&format!("http://{addr}/"), &unlisted)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Refused(Refusal::NotAllowedDomain { .. })),
        "{err}"
    );
    let blocked = FetchPolicy {
        block_domains: vec![ip],
        ..policy_for(addr)
    };
    let err = fetch_text(&format!("http://{addr}/"), &blocked)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Refused(Refusal::BlockedDomain { .. })),
        "{err}"
    );

    let redirector = server(|_| Reply::Redirect("https://blocked.example/".into())).await;
    let hop_blocked = FetchPolicy {
        block_domains: vec!["blocked.example".into()],
        ..policy_for(redirector)
    };
    let err = fetch_text(&format!("http://{redirector}/"), &hop_blocked)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Refused(Refusal::BlockedDomain { host, .. }) if host == "blocked.example"),
        "{err}"
    );
}

#[test]
fn links_from_truth_xhtml() {
    let x = r##"<p>Read <a href="https://en.wikipedia.org/wiki/Oracle">this</a> and
        <a href="https://en.wikipedia.org/wiki/Oracle">again</a>, <a href="#local">here</a>,
        <a href="http://example.com/">that</a>.</p>"##;
    assert_eq!(
        wo_fetch::links_in_xhtml(x),
        vec![
            "https://en.wikipedia.org/wiki/Oracle",
            "http://example.com/"
        ]
    );
}

//! Keys never leave for another origin: redirects, keys in error text and
//! the ecosystem's `OPENAI_BASE_URL` & co., against raw loopback servers that
//! record every byte they receive. Each test prints `item N: X/Y held`.
//! Proxies from the environment are in `proxy_env.rs` (they need the
//! process environment, so they get a test binary of their own).

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use wo_providers::anthropic::AnthropicProvider;
use wo_providers::config::{Config, Env};
use wo_providers::openai::OpenAiProvider;
use wo_providers::{
    ChatMessage, ChatRequest, HttpSettings, Provider, ProviderError, RemoteConfig, RetryPolicy,
    Secret, StreamEvent,
};

const KEY: &str = "sk-proj-Zq8TnW3xLk0vR7yBcD4eFg5hJ6mN9pQs1tUv2wXa3bYc4dZe5fGh6iJk7";

const OPENAI_OK: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Paris.\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
const ANTHROPIC_OK: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Paris.\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// A loopback server: records each request's bytes, answers with
/// `respond(request)`, closes.
#[derive(Clone)]
struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Server {
    fn start(
        listener: TcpListener,
        respond: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> Self {
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let req = wo_testkit::read_request(&mut stream);
                log.lock().unwrap().push(req.clone());
                let reply = respond(&String::from_utf8_lossy(&req));
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        Server { addr, seen }
    }
    fn bind(ip: &str, respond: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        Self::start(TcpListener::bind((ip, 0)).unwrap(), respond)
    }
    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    fn contacted(&self) -> bool {
        !self.seen.lock().unwrap().is_empty()
    }
    fn received(&self) -> String {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect()
    }
}

fn sse(body: &str) -> String {
    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}")
}

fn redirect(status: u16, location: &str) -> String {
    format!(
        "HTTP/1.1 {status} Moved\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

fn settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    OpenAi,
    Anthropic,
}

fn provider(kind: Kind, base: &str) -> Arc<dyn Provider> {
    let rc = RemoteConfig::new("test", format!("{base}/v1"), "m", 4096)
        .with_key(Secret::new(KEY), "env TEST_KEY")
        .with_http(settings());
    match kind {
        Kind::OpenAi => Arc::new(OpenAiProvider::new(rc).unwrap()),
        Kind::Anthropic => Arc::new(AnthropicProvider::new(rc).unwrap()),
    }
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("Capital of France?")])
}

/// The answer text, or the error.
async fn answer(p: &dyn Provider) -> Result<String, ProviderError> {
    let mut s = p.stream(request(), CancellationToken::new()).await?;
    let mut text = String::new();
    while let Some(ev) = s.next().await {
        if let StreamEvent::Delta(d) = ev? {
            text.push_str(&d);
        }
    }
    Ok(text)
}

/// Two listeners on the same port number, on 127.0.0.1 and 127.0.0.2.
fn same_port_pair() -> (TcpListener, TcpListener) {
    for _ in 0..50 {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = a.local_addr().unwrap().port();
        if let Ok(b) = TcpListener::bind(("127.0.0.2", port)) {
            return (a, b);
        }
    }
    panic!("no free port on both 127.0.0.1 and 127.0.0.2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_do_not_follow_redirects_to_another_origin() {
    // (kind, status, where the redirect points)
    #[derive(Clone, Copy)]
    enum Target {
        OtherPort,
        OtherHostSamePort,
        LocalhostName,
        HttpsSameHostPort,
    }
    let cases = [
        (Kind::OpenAi, 307, Target::OtherPort),
        (Kind::OpenAi, 308, Target::OtherHostSamePort),
        (Kind::OpenAi, 301, Target::LocalhostName),
        (Kind::OpenAi, 302, Target::HttpsSameHostPort),
        (Kind::Anthropic, 303, Target::OtherPort),
        (Kind::Anthropic, 307, Target::OtherHostSamePort),
        (Kind::Anthropic, 308, Target::LocalhostName),
        (Kind::Anthropic, 307, Target::HttpsSameHostPort),
    ];
    let mut held = 0;
    let mut report = Vec::new();
    for (i, (kind, status, target)) in cases.into_iter().enumerate() {
        let ok = match kind {
            Kind::OpenAi => OPENAI_OK,
            Kind::Anthropic => ANTHROPIC_OK,
        };
        let (la, lb) = same_port_pair();
        let port = la.local_addr().unwrap().port();
        // The attacker's server: whatever the redirect points at.
        let evil = match target {
            Target::OtherPort | Target::LocalhostName => {
                Server::bind("127.0.0.1", move |_| sse(ok))
            }
            Target::OtherHostSamePort => Server::start(lb, move |_| sse(ok)),
            Target::HttpsSameHostPort => Server::bind("127.0.0.1", move |_| sse(ok)),
        };
        let location = match target {
            Target::OtherPort => format!("{}/v1/steal", evil.url()),
            Target::OtherHostSamePort => format!("http://127.0.0.2:{port}/v1/steal"),
            Target::LocalhostName => format!("http://localhost:{}/v1/steal", evil.addr.port()),
            Target::HttpsSameHostPort => format!("https://127.0.0.1:{}/v1/steal", evil.addr.port()),
        };
        let origin = Server::start(la, move |_| redirect(status, &location));
        let p = provider(kind, &origin.url());
        let result = answer(p.as_ref()).await;
        let ok_case = !evil.contacted()
            && matches!(&result, Err(e) if e.to_string().contains("redirected to"));
        if ok_case {
            held += 1;
        } else {
            report.push(format!(
                "case {i} {kind:?} {status}: target contacted: {}, key sent: {}, result: {result:?}",
                evil.contacted(),
                evil.received().contains(KEY)
            ));
        }
    }
    println!("item 1 (redirects): {held}/{} held", cases.len());
    assert!(report.is_empty(), "{}", report.join("\n"));

    // A redirect within the origin is still followed, key and all.
    let same = Server::bind("127.0.0.1", |req: &str| {
        if req.starts_with("POST /moved/") {
            sse(OPENAI_OK)
        } else {
            redirect(307, "/moved/v1/chat/completions")
        }
    });
    let p = provider(Kind::OpenAi, &same.url());
    assert_eq!(answer(p.as_ref()).await.unwrap(), "Paris.");
    assert!(same.received().contains(&format!("Bearer {KEY}")));
    // The refusal says where to and what to do.
    let evil = Server::bind("127.0.0.1", |_| sse(OPENAI_OK));
    let loc = format!("{}/v1/x", evil.url());
    let origin = Server::bind("127.0.0.1", move |_| redirect(307, &loc));
    let e = answer(provider(Kind::OpenAi, &origin.url()).as_ref())
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&evil.url()) && msg.contains("base_url"),
        "{msg}"
    );
    assert!(!evil.contacted());
}

/// The key hidden in an error body in one more way; `visible` is what the
/// key looks like there, whitespace aside.
fn encodings() -> Vec<(&'static str, String)> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let pct_all: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    let pct_lower: String = KEY.bytes().map(|b| format!("%{b:02x}")).collect();
    let json_u: String = KEY
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let split_nl: String = KEY
        .as_bytes()
        .chunks(10)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let split_sp: String = KEY
        .as_bytes()
        .chunks(7)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(" ");
    let split_escaped_nl = KEY[..20].to_owned() + "\\n" + &KEY[20..];
    vec![
        ("plain", KEY.to_owned()),
        ("URL-encoded (upper)", pct_all),
        ("URL-encoded (lower)", pct_lower),
        ("base64 (Basic auth)", b64.encode(format!("user:{KEY}"))),
        ("base64 (url-safe)", b64url.encode(KEY)),
        ("base64 (offset 2)", b64.encode(format!("ab{KEY}"))),
        ("JSON \\u escapes", json_u),
        ("split by newlines", split_nl),
        ("split by spaces", split_sp),
        ("split by an escaped newline", split_escaped_nl),
    ]
}

/// Whether 8 or more consecutive characters of `needle` (whitespace
/// ignored on both sides) appear in `hay`.
fn leaks(hay: &str, needle: &str) -> bool {
    let hay: String = hay.chars().filter(|c| !c.is_whitespace()).collect();
    let needle: Vec<char> = needle.chars().filter(|c| !c.is_whitespace()).collect();
    needle
        .windows(8)
        .any(|w| hay.contains(&w.iter().collect::<String>()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_echoed_by_the_server_never_reach_the_error_text() {
    let mut held = 0;
    let mut total = 0;
    let mut report = Vec::new();
    for (name, encoded) in encodings() {
        // Before the key, enough text that a 300-character cut falls
        // inside it; and the same at the very start.
        for pad in [270usize, 0] {
            total += 1;
            let text = format!("{}{encoded} was rejected", "x ".repeat(pad / 2));
            let body = serde_json::json!({"error": {"message": text}}).to_string();
            let reply = format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let server = Server::bind("127.0.0.1", move |_| reply.clone());
            let e = answer(provider(Kind::OpenAi, &server.url()).as_ref())
                .await
                .unwrap_err();
            let msg = e.to_string();
            if leaks(&msg, &encoded) || leaks(&msg, KEY) {
                report.push(format!("{name} (pad {pad}): {msg}"));
            } else {
                held += 1;
            }
        }
    }
    // The same inside a stream (an error frame), and in a body that is not
    // JSON at all (the raw text is shown).
    for (name, frame_kind) in [("stream error frame", 0), ("non-JSON body", 1)] {
        total += 1;
        let echoed = format!("{}{KEY}", "y".repeat(280));
        let reply = if frame_kind == 0 {
            sse(&format!(
                "data: {}\n\n",
                serde_json::json!({"error": {"message": echoed}})
            ))
        } else {
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{echoed}",
                echoed.len()
            )
        };
        let server = Server::bind("127.0.0.1", move |_| reply.clone());
        let e = answer(provider(Kind::OpenAi, &server.url()).as_ref())
            .await
            .unwrap_err();
        let msg = e.to_string();
        if leaks(&msg, KEY) {
            report.push(format!("{name}: {msg}"));
        } else {
            held += 1;
        }
    }
    println!("item 2: {held}/{total} held");
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn scrubbing_keeps_the_rest_of_the_text() {
    let s = Secret::new(KEY);
    assert_eq!(
        s.scrub(&format!("bad key {KEY}, try again")),
        "bad key ***, try again"
    );
    let split = format!("key:\n{}\n{} end", &KEY[..30], &KEY[30..]);
    assert_eq!(s.scrub(&split), "key:\n*** end");
    // A key cut off by a size cap at the very end.
    assert_eq!(s.scrub(&format!("echo {}", &KEY[..20])), "echo ***");
    // Ordinary text is untouched, and short keys scrub nothing.
    assert_eq!(
        s.scrub("nothing 100% here \\u00"),
        "nothing 100% here \\u00"
    );
    assert_eq!(Secret::new("abc").scrub("abc abc"), "abc abc");
}

/// A config with these variables and `toml`, built by name.
fn built(toml: &str, vars: &[(&str, String)], name: &str) -> Arc<dyn Provider> {
    let env = Env::from_pairs(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let cfg = Config::from_toml(toml, std::path::Path::new("/c.toml"), env).unwrap();
    wo_providers::build(name, &cfg).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_urls_and_keys_from_the_environment_below_the_config() {
    let mut held = 0;
    let mut report: Vec<String> = Vec::new();
    let mut check = |name: &str, ok: bool, detail: String| {
        if ok {
            held += 1;
        } else {
            report.push(format!("{name}: {detail}"));
        }
    };
    let env_srv = Server::bind("127.0.0.1", |_| sse(OPENAI_OK));
    let cfg_srv = Server::bind("127.0.0.1", |_| sse(OPENAI_OK));
    let ant_srv = Server::bind("127.0.0.1", |_| sse(ANTHROPIC_OK));
    let env_url = format!("{}/v1", env_srv.url());

    // 1. OPENAI_BASE_URL + OPENAI_API_KEY drive the built-in `openai`.
    let p = built(
        "",
        &[
            ("OPENAI_BASE_URL", env_url.clone()),
            ("OPENAI_API_KEY", "sk-env-key-0123456789".into()),
        ],
        "openai",
    );
    let r = answer(p.as_ref()).await;
    check(
        "OPENAI_BASE_URL honoured",
        r.is_ok() && env_srv.received().contains("Bearer sk-env-key-0123456789"),
        format!("{r:?}"),
    );
    // 2. base_url in the file wins over OPENAI_BASE_URL.
    let toml = format!(
        "[providers.openai]\nkind = \"openai\"\nbase_url = \"{}/v1\"\n",
        cfg_srv.url()
    );
    let p = built(
        &toml,
        &[
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1".into()),
            ("OPENAI_API_KEY", "sk-env-key-0123456789".into()),
        ],
        "openai",
    );
    let r = answer(p.as_ref()).await;
    check(
        "config base_url wins",
        r.is_ok() && cfg_srv.contacted(),
        format!("{r:?}"),
    );
    // 3. api_key in the file wins over OPENAI_API_KEY.
    let toml = "[providers.openai]\nkind = \"openai\"\napi_key = \"sk-file-key-0123456789\"\n";
    let p = built(
        toml,
        &[
            ("OPENAI_BASE_URL", env_url.clone()),
            ("OPENAI_API_KEY", "sk-env-key-0123456789".into()),
        ],
        "openai",
    );
    let r = answer(p.as_ref()).await;
    check(
        "config api_key wins",
        r.is_ok() && env_srv.received().contains("Bearer sk-file-key-0123456789"),
        format!("{r:?}"),
    );
    // 4. ANTHROPIC_BASE_URL (given, as Anthropic's SDKs take it, without
    //    /v1) and ANTHROPIC_API_KEY drive the built-in `anthropic`.
    let p = built(
        "",
        &[
            ("ANTHROPIC_BASE_URL", ant_srv.url()),
            ("ANTHROPIC_API_KEY", "ak-env-key-0123456789".into()),
        ],
        "anthropic",
    );
    let r = answer(p.as_ref()).await;
    let seen = ant_srv.received();
    check(
        "ANTHROPIC_BASE_URL honoured",
        r.is_ok()
            && seen.starts_with("POST /v1/messages")
            && seen.contains("ak-env-key-0123456789"),
        format!("{r:?} {seen}"),
    );
    // 5. `wo providers` shows where requests will go.
    let env = Env::from_pairs([("OPENAI_BASE_URL", env_url.clone())]);
    let cfg = Config::from_toml("", std::path::Path::new("/c.toml"), env).unwrap();
    let row = wo_providers::list(&cfg)
        .into_iter()
        .find(|r| r.name == "openai")
        .unwrap();
    check(
        "listing shows OPENAI_BASE_URL",
        row.base_url.as_deref() == Some(env_url.as_str()),
        format!("{:?}", row.base_url),
    );
    // 6. An entry with its own base_url (a local server) is not sent
    //    OPENAI_API_KEY, nor redirected by OPENAI_BASE_URL.
    let local = Server::bind("127.0.0.1", |_| sse(OPENAI_OK));
    let toml = format!(
        "[providers.llama]\nkind = \"openai\"\nbase_url = \"{}/v1\"\n",
        local.url()
    );
    let p = built(
        &toml,
        &[
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1".into()),
            ("OPENAI_API_KEY", "sk-env-key-0123456789".into()),
        ],
        "llama",
    );
    let r = answer(p.as_ref()).await;
    check(
        "own base_url keeps its key to itself",
        r.is_ok() && !local.received().contains("sk-env-key"),
        format!("{r:?}"),
    );
    // 7. A bad OPENAI_BASE_URL is named.
    let env = Env::from_pairs([("OPENAI_BASE_URL", "ftp://x/v1")]);
    let cfg = Config::from_toml("", std::path::Path::new("/c.toml"), env).unwrap();
    let e = wo_providers::build("openai", &cfg)
        .err()
        .map(|e| e.to_string());
    check(
        "bad OPENAI_BASE_URL named",
        e.as_deref().is_some_and(|e| e.contains("$OPENAI_BASE_URL")),
        format!("{e:?}"),
    );
    println!("item 3: {held}/7 held");
    assert!(report.is_empty(), "{}", report.join("\n"));
}

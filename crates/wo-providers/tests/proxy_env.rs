//! Proxies: `HTTP_PROXY`/`ALL_PROXY` in the environment must not
//! receive provider requests (and their keys) unless the user opted in; and
//! an opted-in proxy never gets a key in clear. This file holds one test
//! because it sets process environment variables, which no other test in
//! the same binary may race with.

use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use wo_providers::config::{Config, Env};
use wo_providers::{ChatMessage, ChatRequest, Provider, ProviderError, StreamEvent};

const KEY: &str = "sk-proj-PrOxYtEsT0123456789abcdefghijklmnop";
const OPENAI_OK: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Paris.\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

/// A loopback listener that records what reaches it and answers as an
/// OpenAI-compatible server would (refusing `CONNECT`).
struct Recorder {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let req =
                    String::from_utf8_lossy(&wo_testkit::read_request(&mut stream)).into_owned();
                let reply = if req.starts_with("CONNECT ") {
                    "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n".to_owned()
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{OPENAI_OK}"
                    )
                };
                log.lock().unwrap().push(req);
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        Recorder { port, seen }
    }
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    fn received(&self) -> String {
        self.seen.lock().unwrap().concat()
    }
    fn contacted(&self) -> bool {
        !self.seen.lock().unwrap().is_empty()
    }
}

async fn answer(p: &dyn Provider) -> Result<String, ProviderError> {
    let req = ChatRequest::new(vec![ChatMessage::user("Capital of France?")]);
    let mut s = p.stream(req, CancellationToken::new()).await?;
    let mut text = String::new();
    while let Some(ev) = s.next().await {
        if let StreamEvent::Delta(d) = ev? {
            text.push_str(&d);
        }
    }
    Ok(text)
}

fn config(toml: &str, env: Env) -> Config {
    Config::from_toml(toml, std::path::Path::new("/c.toml"), env).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_only_when_opted_in_and_never_a_key_in_clear() {
    let upstream = Recorder::start();
    // The provider talks to an upstream by name (a proxy would resolve it)
    // and, in a second round, on loopback.
    let toml = format!(
        "[providers.named]\nkind = \"openai\"\nbase_url = \"http://wo-upstream.invalid:{}/v1\"\napi_key = \"{KEY}\"\ntimeout_secs = 3\n\
         [providers.loop]\nkind = \"openai\"\nbase_url = \"{}/v1\"\napi_key = \"{KEY}\"\ntimeout_secs = 3\n",
        upstream.port,
        upstream.url()
    );
    let mut held = 0;
    let mut report = Vec::new();
    let vars = ["HTTP_PROXY", "ALL_PROXY", "http_proxy"];
    for var in vars {
        for name in ["named", "loop"] {
            let proxy = Recorder::start();
            // SAFETY: this binary's only test; no other thread reads the
            // environment concurrently except the code under test.
            unsafe { std::env::set_var(var, proxy.url()) };
            let cfg = config(&toml, Env::process());
            let p = wo_providers::build(name, &cfg).unwrap();
            let r = answer(p.as_ref()).await;
            unsafe { std::env::remove_var(var) };
            if name == "loop" {
                // Direct connections still work.
                assert_eq!(r.as_deref().ok(), Some("Paris."), "{var} {name}: {r:?}");
            }
            if proxy.contacted() {
                report.push(format!(
                    "{var} ({name}): the proxy was contacted; key sent: {}",
                    proxy.received().contains(KEY)
                ));
            } else if name == "named" {
                held += 1;
            }
        }
    }
    println!("item 1 (proxies): {held}/{} held", vars.len());
    assert!(report.is_empty(), "{}", report.join("\n"));

    // Opted in: the environment's proxy carries requests without a key…
    let proxy = Recorder::start();
    let no_key = "[providers.up]\nkind = \"openai\"\nbase_url = \"http://wo-upstream.invalid/v1\"\ntimeout_secs = 3\n";
    let env = Env::from_pairs([
        ("WO_USE_ENV_PROXY", "1".to_owned()),
        ("HTTP_PROXY", proxy.url()),
    ]);
    let p = wo_providers::build("up", &config(no_key, env)).unwrap();
    assert_eq!(answer(p.as_ref()).await.unwrap(), "Paris.");
    assert!(
        proxy
            .received()
            .starts_with("POST http://wo-upstream.invalid/v1/chat/completions"),
        "{}",
        proxy.received()
    );
    // …but a key for an http:// service is never handed to it in clear.
    let proxy = Recorder::start();
    let env = Env::from_pairs([
        ("WO_USE_ENV_PROXY", "1".to_owned()),
        ("ALL_PROXY", proxy.url()),
    ]);
    let e = wo_providers::build("named", &config(&toml, env))
        .err()
        .unwrap();
    assert!(e.to_string().contains("in clear"), "{e}");
    assert!(!proxy.contacted());
    // Opted in, loopback services are still reached directly.
    let env = Env::from_pairs([
        ("WO_USE_ENV_PROXY", "1".to_owned()),
        ("HTTP_PROXY", proxy.url()),
    ]);
    let p = wo_providers::build("loop", &config(&toml, env)).unwrap();
    assert_eq!(answer(p.as_ref()).await.unwrap(), "Paris.");
    assert!(!proxy.contacted());
    // A proxy in config.toml is used for an https:// service through
    // CONNECT: the proxy learns the host name, never the key.
    let proxy = Recorder::start();
    let https = format!(
        "[providers.tls]\nkind = \"openai\"\nbase_url = \"https://wo-upstream.invalid/v1\"\napi_key = \"{KEY}\"\nproxy = \"{}\"\ntimeout_secs = 3\n",
        proxy.url()
    );
    let p = wo_providers::build("tls", &config(&https, Env::from_pairs([("X", "1")]))).unwrap();
    assert!(answer(p.as_ref()).await.is_err());
    let seen = proxy.received();
    assert!(
        seen.starts_with("CONNECT wo-upstream.invalid:443"),
        "{seen}"
    );
    assert!(!seen.contains(KEY), "{seen}");
    // The same proxy for an http:// service with a key is refused in the file.
    let clear = format!(
        "[providers.clear]\nkind = \"openai\"\nbase_url = \"http://wo-upstream.invalid/v1\"\napi_key = \"{KEY}\"\nproxy = \"{}\"\n",
        proxy.url()
    );
    let e = Config::from_toml(
        &clear,
        std::path::Path::new("/c.toml"),
        Env::from_pairs([("X", "1")]),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("/c.toml:1:") && e.to_string().contains("in clear"),
        "{e}"
    );
}

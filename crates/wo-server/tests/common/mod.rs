//! Test harness: a fake OpenAI-compatible upstream that streams canned
//! tokens in the documented wire format, and a `wo serve` running
//! in-process against it on a loopback port.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use wo_server::ServeOptions;
use wo_server::app::Limits;

/// How the fake upstream answers.
#[derive(Clone)]
pub struct Script {
    pub tokens: Vec<String>,
    /// Between two frames.
    pub delay: Duration,
    /// Before the first frame (a model slow to start).
    pub first_delay: Duration,
    /// Answer this HTTP status instead of a stream.
    pub fail_status: Option<u16>,
    /// What the memory interpreter's calls (those asking for structured
    /// output, `response_format`) are answered instead of `tokens`.
    pub memory_reply: Option<String>,
    /// How long the memory interpreter's calls wait before answering.
    pub memory_delay: Duration,
    /// What the first chat call is answered instead of `tokens` (later
    /// calls get `tokens`).
    pub first_answer: Option<String>,
    /// One request at a time, as one in-process model generates: a request
    /// waits until the one before has ended or its client went away (the
    /// interpreter's wait is then sent as SSE comments, so a client gone
    /// is seen within 50 ms).
    pub one_at_a_time: bool,
    /// The window the upstream holds, in tokens (4 characters each): a
    /// request asking more is refused as llama.cpp's server refuses it.
    pub holds: Option<usize>,
}

impl Script {
    pub fn says(text: &str) -> Self {
        Script {
            tokens: text.split_inclusive(' ').map(str::to_owned).collect(),
            delay: Duration::ZERO,
            first_delay: Duration::ZERO,
            fail_status: None,
            memory_reply: None,
            memory_delay: Duration::ZERO,
            first_answer: None,
            one_at_a_time: false,
            holds: None,
        }
    }

    /// Also answers the memory interpreter's calls with `reply`.
    pub fn remembering(mut self, reply: &str) -> Self {
        self.memory_reply = Some(reply.to_owned());
        self
    }
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicUsize>,
    /// Bodies of the requests received, as JSON.
    pub bodies: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

/// Starts the fake upstream: `POST /v1/chat/completions` answers SSE
/// `chat.completion.chunk` frames, a final chunk with `finish_reason` and
/// `usage`, then `data: [DONE]`.
pub async fn upstream(script: Script) -> Upstream {
    let requests = Arc::new(AtomicUsize::new(0));
    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (r, b) = (requests.clone(), bodies.clone());
    let model = Arc::new(tokio::sync::Mutex::new(()));
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |body: axum::body::Bytes| {
            let mut script = script.clone();
            if let Some(first) = script.first_answer.take()
                && r.load(Ordering::SeqCst) == 0
            {
                script.tokens = vec![first];
            }
            r.fetch_add(1, Ordering::SeqCst);
            let mut wait = Duration::ZERO;
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) {
                if let (Some(reply), Some(_)) = (&script.memory_reply, v.get("response_format")) {
                    script.tokens = vec![reply.clone()];
                    wait = script.memory_delay;
                }
                b.lock().unwrap().push(v);
            }
            let model = model.clone();
            async move {
                let turn = if script.one_at_a_time {
                    Some(model.lock_owned().await)
                } else {
                    tokio::time::sleep(wait).await;
                    None
                };
                let pings = if turn.is_some() {
                    (wait.as_millis() / 50) as usize
                } else {
                    0
                };
                if let Some(holds) = script.holds {
                    let asked = asked_tokens(&body);
                    if asked > holds {
                        return Response::builder()
                            .status(400)
                            .header("content-type", "application/json")
                            .body(Body::from(serde_json::json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": asked, "n_ctx": holds}}).to_string()))
                            .unwrap();
                    }
                }
                if let Some(status) = script.fail_status {
                    return Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(Body::from(r#"{"error":{"message":"upstream says no","type":"server_error"}}"#))
                        .unwrap();
                }
                let n = script.tokens.len();
                let pinged = futures::stream::unfold(0usize, move |i| async move {
                    if i >= pings {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Some((Ok::<_, std::io::Error>(": wait\n\n".to_owned()), i + 1))
                });
                let stream = futures::stream::unfold(0usize, move |i| {
                    let script = script.clone();
                    async move {
                        if i > n + 1 {
                            return None;
                        }
                        if i > 0 && !script.delay.is_zero() {
                            tokio::time::sleep(script.delay).await;
                        }
                        if i == 0 && !script.first_delay.is_zero() {
                            tokio::time::sleep(script.first_delay).await;
                        }
                        let frame = if i < n {
                            format!(
                                "data: {}\n\n",
                                serde_json::json!({"id":"c1","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{"content":script.tokens[i]},"finish_reason":null}]})
                            )
                        } else if i == n {
                            format!(
                                "data: {}\n\n",
                                serde_json::json!({"id":"c1","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":n}})
                            )
                        } else {
                            "data: [DONE]\n\n".to_owned()
                        };
                        Some((Ok::<_, std::io::Error>(frame), i + 1))
                    }
                });
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(futures::StreamExt::map(
                        futures::StreamExt::chain(pinged, stream),
                        // The model is held until the body ends or is dropped.
                        move |frame| {
                            let _held = &turn;
                            frame
                        },
                    )))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Upstream {
        addr,
        requests,
        bodies,
    }
}

/// What a request asks of a window: its messages at 4 characters a token,
/// and the answer's `max_tokens` (512 when it names none).
fn asked_tokens(body: &[u8]) -> usize {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let prompt: usize = v["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["content"].as_str().unwrap_or("").len() / 4 + 8)
                .sum()
        })
        .unwrap_or(0);
    prompt + v["max_tokens"].as_u64().unwrap_or(512) as usize
}

/// A config whose default provider `fake` is the upstream.
pub fn config_for(upstream: SocketAddr, dir: &std::path::Path) -> wo_providers::Config {
    let text = format!(
        "[defaults]\nprovider = \"fake\"\n\n[providers.fake]\nkind = \"openai\"\nbase_url = \"http://{upstream}/v1\"\nmodel = \"fake-1\"\n\n[interpreter]\nmode = \"off\"\n"
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, &text).unwrap();
    wo_providers::Config::from_toml(
        &text,
        &path,
        wo_providers::config::Env::from_pairs([("HOME", dir.as_os_str().to_owned())]),
    )
    .unwrap()
}

pub const TOKEN: &str = "test-token-0123456789-abcdefghijklmnop";

pub struct Served {
    pub dir: tempfile::TempDir,
    pub base: String,
    pub addr: SocketAddr,
    pub state: PathBuf,
    pub upstream: Upstream,
    pub client: reqwest::Client,
    pub launch_url: String,
    /// The session cookie's name (local mode; empty when stateless), as
    /// the sign-in set it.
    pub session_cookie: String,
}

pub fn options(dir: &std::path::Path, upstream: &Upstream, stateless: bool) -> ServeOptions {
    ServeOptions {
        limits: Limits {
            body_bytes: 64 << 10,
            upload_bytes: 1 << 20,
            ..Limits::default()
        },
        username: "tester".into(),
        token: Some(TOKEN.into()),
        ..ServeOptions::new(
            (!stateless).then(|| dir.join("llm.json")),
            config_for(upstream.addr, dir),
        )
    }
}

/// Serves in local (or stateless) mode against an upstream saying `script`.
pub async fn serve(script: Script, stateless: bool) -> Served {
    serve_with(script, stateless, |_| {}).await
}

pub async fn serve_with(
    script: Script,
    stateless: bool,
    tweak: impl FnOnce(&mut ServeOptions),
) -> Served {
    // SAFETY-free: the access log is noise in test output.
    let upstream = upstream(script).await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(dir.path(), &upstream, stateless);
    tweak(&mut opts);
    let bound = wo_server::bind(opts).await.unwrap();
    let addr = bound.addr;
    let launch_url = bound.launch_url.clone();
    tokio::spawn(bound.serve(std::future::pending()));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let session_cookie = if stateless {
        String::new()
    } else {
        sign_in(&client, &launch_url).await.0
    };
    Served {
        state: dir.path().join("llm.json"),
        dir,
        base: format!("http://{addr}"),
        addr,
        upstream,
        client,
        launch_url,
        session_cookie,
    }
}

/// Opens the launch URL as a browser does; the session cookie it sets
/// (name, value).
pub async fn sign_in(client: &reqwest::Client, launch_url: &str) -> (String, String) {
    let r = client.get(launch_url).send().await.unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::SEE_OTHER);
    let set = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| !c.contains("Max-Age=0"))
        .expect("a session cookie");
    let pair = set.split(';').next().unwrap();
    let (name, value) = pair.split_once('=').unwrap();
    (name.to_owned(), value.to_owned())
}

impl Served {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request as the signed-in web page makes it: cookie + same Origin.
    pub fn browser(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(path))
            .header("cookie", self.cookie())
            .header("origin", &self.base)
    }

    /// The web page sends `body` as JSON; the response.
    pub async fn browser_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &impl serde::Serialize,
    ) -> reqwest::Response {
        self.browser(method, path).json(body).send().await.unwrap()
    }

    /// A program sends `body` as JSON with the bearer token; the response.
    pub async fn program_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &impl serde::Serialize,
    ) -> reqwest::Response {
        self.program(method, path).json(body).send().await.unwrap()
    }

    /// A program's `GET path` with the bearer token; its JSON body (typed
    /// as the caller asks).
    pub async fn program_get<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let r = self
            .program(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }

    /// A same-origin JSON request (`POST`, `PATCH`…) with no credentials:
    /// a page that is not signed in, or any stateless client.
    pub async fn cookieless(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &serde_json::Value,
    ) -> reqwest::Response {
        let r = self
            .client
            .request(method, self.url(path))
            .header("origin", &self.base);
        r.json(body).send().await.unwrap()
    }

    /// `GET path` carrying `cookie` (whatever a browser jar would send).
    pub async fn get_with_cookie(&self, path: &str, cookie: &str) -> reqwest::Response {
        let r = self.client.get(self.url(path)).header("cookie", cookie);
        r.send().await.unwrap()
    }

    /// `GET path` as anyone (no credentials), its body as text.
    pub async fn public_text(&self, path: &str) -> String {
        let r = self.client.get(self.url(path)).send().await.unwrap();
        r.text().await.unwrap()
    }

    /// `GET path` as anyone (no credentials), its JSON body.
    pub async fn public_json(&self, path: &str) -> serde_json::Value {
        let r = self.client.get(self.url(path)).send().await.unwrap();
        r.json().await.unwrap()
    }

    /// The `Cookie` header of the signed-in browser.
    pub fn cookie(&self) -> String {
        format!("{}={TOKEN}", self.session_cookie)
    }

    /// A request as a program makes it: bearer token, no Origin.
    pub fn program(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(TOKEN)
    }

    pub fn state_bytes(&self) -> Vec<u8> {
        std::fs::read(&self.state).unwrap_or_default()
    }

    pub fn state_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.state_bytes()).unwrap()
    }
}

/// The SSE events of a response body: (event name, data JSON).
pub async fn events(resp: reqwest::Response) -> Vec<(String, serde_json::Value)> {
    let text = resp.text().await.unwrap();
    parse_events(&text)
}

pub fn parse_events(text: &str) -> Vec<(String, serde_json::Value)> {
    text.split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .map(|frame| {
            let mut name = String::new();
            let mut data = String::new();
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            (
                name,
                serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
            )
        })
        .collect()
}

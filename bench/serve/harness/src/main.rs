//! `wo-serve-bench`: the pieces of bench/serve/run.sh that must not be the bottleneck.
//!
//! * `upstream`: a fast OpenAI Chat Completions streaming server (`POST /v1/chat/completions`,
//!   `stream: true`): `max_tokens` tokens `"tok "`, one SSE chunk each, then a final chunk with
//!   `finish_reason:"stop"` and `usage`, then `data: [DONE]`. The inter-token delay comes from
//!   the model name: `bench@1000` = 1000 µs between tokens (the first token is sent at once);
//!   plain `bench` = `--delay-us`.
//! * `latency`: one request at a time, interleaved over several targets (direct upstream,
//!   `wo serve` local, `wo serve --stateless`): first-token latency percentiles, stream
//!   throughput, and the ratios against the first target.
//! * `concurrent`: N clients at once against local mode, each sending K turns; errors, wall
//!   time, and the ids of every turn for `verify`.
//! * `continuity`: through a load balancer in front of several `wo serve --stateless`: a
//!   client's second turn, served by another instance than its first, continues the
//!   conversation (the client carries its state); the guard's Host/Origin checks still hold
//!   through the proxy. Fails (exit 1) on any violation.
//! * `verify`: every recorded turn is in llm.json: the user message (with its text) and an
//!   assistant reply whose parent is it; 2 messages per turn.
//! * `rps`: closed-loop load for a fixed time, alternating targets in rounds: req/s, errors,
//!   latency, CPU seconds of watched processes.
//! * `fsync-floor`: write + fsync + rename + fsync(dir) of a file of a given size: the disk's
//!   floor for one durable save.
//! * `summary`: reads the JSON results of the runs above and prints the summary with the goals.
//!
//! Targets are `NAME=KIND:URL_FILE`: KIND is `openai`, `wo-local` or `wo-stateless`; URL_FILE
//! holds the base URL (`wo serve --print-url-file`, with `?token=` in local mode; `upstream
//! --url-file`). Every client uses one keep-alive HTTP/1.1 connection with TCP_NODELAY.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

type Res<T> = Result<T, String>;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!(
            "usage: wo-serve-bench upstream|latency|concurrent|continuity|verify|rps|fsync-floor|summary [--flag value]…"
        );
        std::process::exit(2);
    }
    let cmd = args.remove(0);
    let opts = Opts::parse(args);
    let result = match cmd.as_str() {
        "upstream" => upstream(&opts),
        "latency" => latency(&opts),
        "concurrent" => concurrent(&opts),
        "continuity" => continuity(&opts),
        "verify" => verify(&opts),
        "rps" => rps(&opts),
        "fsync-floor" => fsync_floor(&opts),
        "summary" => summary(&opts),
        other => Err(format!("unknown command {other}")),
    };
    if let Err(e) = result {
        eprintln!("wo-serve-bench {cmd}: {e}");
        std::process::exit(1);
    }
}

// ---- options -------------------------------------------------------------------------------

struct Opts(HashMap<String, Vec<String>>);

impl Opts {
    fn parse(args: Vec<String>) -> Opts {
        let mut m: HashMap<String, Vec<String>> = HashMap::new();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let Some(k) = a.strip_prefix("--") else {
                eprintln!("unexpected argument {a}");
                std::process::exit(2);
            };
            let v = it.next().unwrap_or_default();
            m.entry(k.to_owned()).or_default().push(v);
        }
        Opts(m)
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).and_then(|v| v.last()).map(String::as_str)
    }
    fn all(&self, k: &str) -> Vec<String> {
        self.0.get(k).cloned().unwrap_or_default()
    }
    fn need(&self, k: &str) -> Res<&str> {
        self.get(k).ok_or_else(|| format!("--{k} is required"))
    }
    fn num<T: std::str::FromStr>(&self, k: &str, default: T) -> Res<T> {
        match self.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{k} {v}: not a number")),
        }
    }
}

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .expect("runtime")
    }
}

fn write_json(opts: &Opts, v: &Value) -> Res<()> {
    if let Some(path) = opts.get("json") {
        let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

// ---- the fake upstream -------------------------------------------------------------------

/// A streamed Chat Completions answer, built from pre-rendered frames.
struct TokenBody {
    head: Option<Bytes>,
    tok: Bytes,
    remaining: u32,
    sent: u32,
    tail: Option<Bytes>,
    delay: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl http_body::Body for TokenBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if let Some(h) = this.head.take() {
            return Poll::Ready(Some(Ok(Frame::data(h))));
        }
        if this.remaining > 0 {
            if this.sent > 0 && !this.delay.is_zero() {
                let delay = this.delay;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.sleep = None;
            }
            this.remaining -= 1;
            this.sent += 1;
            return Poll::Ready(Some(Ok(Frame::data(this.tok.clone()))));
        }
        match this.tail.take() {
            Some(t) => Poll::Ready(Some(Ok(Frame::data(t)))),
            None => Poll::Ready(None),
        }
    }
}

fn plain(status: StatusCode, body: &str) -> Response<TokenBody> {
    let mut r = Response::new(TokenBody {
        head: None,
        tok: Bytes::new(),
        remaining: 0,
        sent: 0,
        tail: Some(Bytes::from(body.to_owned())),
        delay: Duration::ZERO,
        sleep: None,
    });
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

async fn upstream_handle(
    req: Request<Incoming>,
    default_delay: Duration,
) -> Result<Response<TokenBody>, Infallible> {
    let path = req.uri().path().to_owned();
    if req.method() == hyper::Method::GET && path.ends_with("/models") {
        return Ok(plain(
            StatusCode::OK,
            r#"{"object":"list","data":[{"id":"bench","object":"model"}]}"#,
        ));
    }
    if req.method() != hyper::Method::POST || !path.ends_with("/chat/completions") {
        return Ok(plain(
            StatusCode::NOT_FOUND,
            r#"{"error":{"message":"not found"}}"#,
        ));
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(plain(
                StatusCode::BAD_REQUEST,
                r#"{"error":{"message":"body"}}"#,
            ));
        }
    };
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => {
            return Ok(plain(
                StatusCode::BAD_REQUEST,
                r#"{"error":{"message":"json"}}"#,
            ));
        }
    };
    let model = v["model"].as_str().unwrap_or("bench").to_owned();
    let n = v["max_tokens"].as_u64().unwrap_or(16).min(1_000_000) as u32;
    let delay = model
        .split_once('@')
        .and_then(|(_, us)| us.parse::<u64>().ok())
        .map(Duration::from_micros)
        .unwrap_or(default_delay);
    let prompt_chars: usize = v["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| m["content"].as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    let m = serde_json::to_string(&model).unwrap_or_else(|_| "\"bench\"".into());
    let id = r#""id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000"#;
    // Model `echo…`: the first chunk says what the prompt held (every message's role and
    // content), so a check can see which earlier turns a server sent (`continuity`).
    let first = if model.starts_with("echo") {
        let seen: Vec<String> = v["messages"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|m| {
                        format!(
                            "{}: {}",
                            m["role"].as_str().unwrap_or("?"),
                            m["content"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        format!("echo [{}] ", seen.join(" | "))
    } else {
        String::new()
    };
    let first = serde_json::to_string(&first).unwrap_or_else(|_| "\"\"".into());
    let head = format!(
        "data: {{{id},\"model\":{m},\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":{first}}},\"finish_reason\":null}}]}}\n\n"
    );
    let tok = format!(
        "data: {{{id},\"model\":{m},\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok \"}},\"finish_reason\":null}}]}}\n\n"
    );
    let prompt_tokens = prompt_chars / 4;
    let tail = format!(
        "data: {{{id},\"model\":{m},\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":{prompt_tokens},\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
        prompt_tokens + n as usize
    );
    let mut r = Response::new(TokenBody {
        head: Some(Bytes::from(head)),
        tok: Bytes::from(tok),
        remaining: n,
        sent: 0,
        tail: Some(Bytes::from(tail)),
        delay,
        sleep: None,
    });
    let h = r.headers_mut();
    h.insert("content-type", "text/event-stream".parse().unwrap());
    h.insert("cache-control", "no-cache".parse().unwrap());
    Ok(r)
}

fn upstream(opts: &Opts) -> Res<()> {
    let threads: usize = opts.num("threads", 1)?;
    let port: u16 = opts.num("port", 0)?;
    let delay = Duration::from_micros(opts.num("delay-us", 0u64)?);
    let url_file = opts.need("url-file")?.to_owned();
    runtime(threads).block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let tmp = format!("{url_file}.tmp");
        std::fs::write(&tmp, format!("http://{addr}/v1\n")).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, &url_file).map_err(|e| e.to_string())?;
        eprintln!("upstream at http://{addr}/v1 ({threads} thread(s))");
        loop {
            let (s, _) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| upstream_handle(req, delay));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    })
}

// ---- targets and one streamed request ------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    OpenAi,
    WoLocal,
    WoStateless,
}

#[derive(Clone, Debug)]
struct Target {
    name: String,
    kind: Kind,
    addr: SocketAddr,
    host: String,
    path: String,
    token: Option<String>,
}

fn read_url_file(path: &str) -> Res<String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| format!("{path}: {e}"))
}

/// `NAME=KIND:URL_FILE`.
fn parse_target(spec: &str) -> Res<Target> {
    let (name, rest) = spec.split_once('=').ok_or("target: NAME=KIND:URL_FILE")?;
    let (kind, file) = rest.split_once(':').ok_or("target: NAME=KIND:URL_FILE")?;
    let kind = match kind {
        "openai" => Kind::OpenAi,
        "wo-local" => Kind::WoLocal,
        "wo-stateless" => Kind::WoStateless,
        k => return Err(format!("unknown target kind {k}")),
    };
    let url = read_url_file(file)?;
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: not http://"))?;
    let (host, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let token = tail
        .split_once("token=")
        .map(|(_, t)| t.split('&').next().unwrap_or("").to_owned());
    let base = tail.split('?').next().unwrap_or("").trim_end_matches('/');
    let path = match kind {
        Kind::OpenAi => format!("/{base}/chat/completions").replace("//", "/"),
        Kind::WoLocal => "/api/chat".to_owned(),
        Kind::WoStateless => "/api/stateless/chat".to_owned(),
    };
    if kind == Kind::WoLocal && token.is_none() {
        return Err(format!("{file}: no ?token= in {url}"));
    }
    let addr: SocketAddr = host.parse().map_err(|e| format!("{host}: {e}"))?;
    Ok(Target {
        name: name.to_owned(),
        kind,
        addr,
        host: host.to_owned(),
        path,
        token,
    })
}

fn request_body(t: &Target, message: &str, tokens: u32, model: &str) -> Bytes {
    request_body_with_parent(t, message, tokens, model, None)
}

/// `parent` (local mode): the message this turn follows (a client continuing its own thread).
fn request_body_with_parent(
    t: &Target,
    message: &str,
    tokens: u32,
    model: &str,
    parent: Option<&str>,
) -> Bytes {
    let v = match t.kind {
        Kind::OpenAi => json!({
            "model": model,
            "messages": [
                {"role": "system", "content": "You are a benchmark."},
                {"role": "user", "content": message}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": tokens,
        }),
        Kind::WoLocal | Kind::WoStateless => {
            let mut v = json!({
                "message": message,
                "params": {"max_tokens": tokens, "model": model},
            });
            if let Some(p) = parent {
                v["parent"] = json!(p);
            }
            v
        }
    };
    Bytes::from(serde_json::to_vec(&v).expect("json"))
}

struct Client {
    target: Target,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// How long to wait for the end of a response after its final event.
    grace: Duration,
}

/// What one streamed request did, times relative to sending it.
#[derive(Default, Clone, Debug)]
struct Outcome {
    ok: bool,
    error: Option<String>,
    headers: f64,
    first: Option<f64>,
    last: Option<f64>,
    end: f64,
    deltas: u64,
    text_bytes: u64,
    wire_bytes: u64,
    /// Bytes received before the first delta (headers excluded): the `context` event.
    before_first: u64,
    ids: Option<(String, String)>,
    /// The response body had not ended `grace` after its final event (`done`/`[DONE]`/`error`):
    /// the connection is then dropped, since it cannot carry another request.
    unterminated: bool,
}

impl Client {
    fn new(target: Target) -> Client {
        Client {
            target,
            sender: None,
            grace: Duration::ZERO,
        }
    }

    async fn connect(&mut self) -> Res<()> {
        let s = TcpStream::connect(self.target.addr)
            .await
            .map_err(|e| format!("connect {}: {e}", self.target.addr))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        self.sender = Some(sender);
        Ok(())
    }

    /// One request on the keep-alive connection (reconnecting if it was closed).
    async fn send(&mut self, body: Bytes) -> Outcome {
        match self.try_send(body).await {
            Ok(o) => o,
            Err(e) => {
                self.sender = None;
                Outcome {
                    error: Some(e),
                    ..Outcome::default()
                }
            }
        }
    }

    async fn try_send(&mut self, body: Bytes) -> Res<Outcome> {
        let usable = match &mut self.sender {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            self.connect().await?;
        }
        let t = &self.target;
        let mut b = Request::post(t.path.as_str())
            .header("host", t.host.as_str())
            .header("content-type", "application/json")
            .header("accept", "text/event-stream");
        if let Some(tok) = &t.token {
            b = b.header("authorization", format!("Bearer {tok}"));
        }
        let req = b.body(Full::new(body)).map_err(|e| e.to_string())?;
        let sender = self.sender.as_mut().expect("connected");
        let t0 = Instant::now();
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let mut out = Outcome {
            headers: t0.elapsed().as_secs_f64(),
            ..Outcome::default()
        };
        let status = resp.status();
        let mut body = resp.into_body();
        let mut parser = SseParser::default();
        let mut raw = Vec::new();
        loop {
            let next = if parser.done || out.error.is_some() {
                // A timeout of zero still polls once: an end already received is seen.
                match tokio::time::timeout(self.grace, body.frame()).await {
                    Ok(f) => f,
                    Err(_) => {
                        out.unterminated = true;
                        break;
                    }
                }
            } else {
                body.frame().await
            };
            let Some(frame) = next else { break };
            let frame = frame.map_err(|e| format!("body: {e}"))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let now = t0.elapsed().as_secs_f64();
            out.wire_bytes += data.len() as u64;
            if !status.is_success() {
                raw.extend_from_slice(&data);
                continue;
            }
            parser.feed(&data, self.target.kind, now, &mut out);
        }
        if !status.is_success() {
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&raw[..raw.len().min(300)])
            ));
        }
        if out.error.is_some() {
            out.ok = false;
        } else if !parser.done {
            out.error = Some("stream ended without its final event".into());
        } else {
            out.ok = true;
        }
        if out.end == 0.0 {
            out.end = t0.elapsed().as_secs_f64();
        }
        if out.unterminated {
            drop(body);
            self.sender = None;
        }
        Ok(out)
    }
}

#[derive(Default)]
struct SseParser {
    buf: Vec<u8>,
    scanned: usize,
    done: bool,
    /// Bytes of the events already handled (SSE text, without HTTP chunk framing).
    consumed: u64,
}

fn between<'a>(s: &'a str, start: &str, end: char) -> Option<&'a str> {
    let i = s.find(start)? + start.len();
    let j = s[i..].find(end)?;
    Some(&s[i..i + j])
}

impl SseParser {
    fn feed(&mut self, data: &[u8], kind: Kind, now: f64, out: &mut Outcome) {
        self.buf.extend_from_slice(data);
        let mut start = 0;
        loop {
            let from = self.scanned.max(start);
            let Some(rel) = self.buf[from..].windows(2).position(|w| w == b"\n\n") else {
                self.scanned = self.buf.len().saturating_sub(1);
                break;
            };
            let end = from + rel;
            let block = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
            if out.first.is_none() {
                out.before_first = self.consumed;
            }
            self.event(&block, kind, now, out);
            self.consumed += (end + 2 - start) as u64;
            start = end + 2;
            self.scanned = start;
        }
        self.buf.drain(..start);
        self.scanned -= start.min(self.scanned);
    }

    fn event(&mut self, block: &str, kind: Kind, now: f64, out: &mut Outcome) {
        let mut name = "message";
        let mut data = "";
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                name = v.trim();
            } else if let Some(v) = line.strip_prefix("data:") {
                data = v.trim_start();
            }
        }
        let delta = |text: &str, out: &mut Outcome| {
            if text.is_empty() {
                return;
            }
            out.deltas += 1;
            out.text_bytes += text.len() as u64;
            if out.first.is_none() {
                out.first = Some(now);
            }
            out.last = Some(now);
        };
        match kind {
            Kind::OpenAi => {
                if data == "[DONE]" {
                    self.done = true;
                    out.end = now;
                } else if let Some(text) = between(data, "\"content\":\"", '"') {
                    delta(text, out);
                } else if data.contains("\"error\"") {
                    out.error = Some(data.chars().take(300).collect());
                }
            }
            Kind::WoLocal | Kind::WoStateless => match name {
                "delta" => {
                    if let Some(text) = between(data, "\"text\":\"", '"') {
                        delta(text, out);
                    }
                }
                "done" => {
                    self.done = true;
                    out.end = now;
                    if let Ok(v) = serde_json::from_str::<Value>(data)
                        && let (Some(u), Some(a)) = (
                            v["user_message_id"].as_str(),
                            v["assistant_message_id"].as_str(),
                        )
                    {
                        out.ids = Some((u.to_owned(), a.to_owned()));
                    }
                }
                "error" => out.error = Some(data.chars().take(300).collect()),
                _ => {}
            },
        }
    }
}

// ---- statistics ---------------------------------------------------------------------------

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

fn ms(x: f64) -> f64 {
    (x * 1e5).round() / 1e2
}

// ---- latency / throughput (one request at a time, interleaved) ----------------------------

fn latency(opts: &Opts) -> Res<()> {
    let targets: Vec<Target> = opts
        .all("target")
        .iter()
        .map(|s| parse_target(s))
        .collect::<Res<_>>()?;
    if targets.is_empty() {
        return Err("no --target".into());
    }
    let iters: usize = opts.num("iters", 200)?;
    let warmup: usize = opts.num("warmup", 20)?;
    let tokens: u32 = opts.num("tokens", 64)?;
    let model = opts.get("model").unwrap_or("bench").to_owned();
    let label = opts.get("label").unwrap_or("latency").to_owned();
    let grace = Duration::from_millis(opts.num("eof-grace-ms", 20u64)?);
    let rt = runtime(1);
    let per_target: Vec<Vec<Outcome>> = rt.block_on(async {
        let mut clients: Vec<Client> = targets.iter().cloned().map(Client::new).collect();
        for c in &mut clients {
            c.grace = grace;
        }
        let mut results: Vec<Vec<Outcome>> = vec![Vec::new(); targets.len()];
        for i in 0..warmup + iters {
            // Rotate the order so that no target always goes first.
            for k in 0..clients.len() {
                let j = (i + k) % clients.len();
                let msg = format!("benchmark question {i} for {}", clients[j].target.name);
                let body = request_body(&clients[j].target, &msg, tokens, &model);
                let o = clients[j].send(body).await;
                if i >= warmup {
                    results[j].push(o);
                }
            }
        }
        results
    });

    let mut rows = Vec::new();
    println!(
        "\n{label}: {iters} requests per target (after {warmup} warm-up), interleaved; {tokens} tokens, model {model}"
    );
    println!(
        "{:<10} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11} {:>12} {:>10} {:>9}",
        "target",
        "errors",
        "ttft p50",
        "p90",
        "p99",
        "headers",
        "last p50",
        "done-last",
        "tok/s",
        "MB/s wire",
        "pre-1st"
    );
    for (t, outs) in targets.iter().zip(&per_target) {
        let good: Vec<&Outcome> = outs.iter().filter(|o| o.ok).collect();
        let errors = outs.len() - good.len();
        let first = sorted(good.iter().filter_map(|o| o.first).collect());
        let last = sorted(good.iter().filter_map(|o| o.last).collect());
        let headers = sorted(good.iter().map(|o| o.headers).collect());
        let save = sorted(
            good.iter()
                .filter_map(|o| o.last.map(|l| o.end - l))
                .collect(),
        );
        let total = sorted(good.iter().map(|o| o.end).collect());
        // Throughput of the streamed answer: tokens over request → last delta (the whole answer
        // as the user receives it), and over first → last delta (the streaming rate alone).
        let tps = sorted(
            good.iter()
                .filter_map(|o| o.last.map(|l| o.deltas as f64 / l))
                .collect(),
        );
        let stream_tps = sorted(
            good.iter()
                .filter_map(|o| match (o.first, o.last) {
                    (Some(f), Some(l)) if l > f => Some((o.deltas - 1) as f64 / (l - f)),
                    _ => None,
                })
                .collect(),
        );
        let bps = sorted(
            good.iter()
                .filter_map(|o| o.last.map(|l| o.text_bytes as f64 / l))
                .collect(),
        );
        let wire = sorted(good.iter().map(|o| o.wire_bytes as f64 / o.end).collect());
        let pre = sorted(good.iter().map(|o| o.before_first as f64).collect());
        // First-token p50 over the first and the last fifth of the run: a local-mode state grows
        // by one turn per request, so this shows how the added latency moves with its size.
        let fifth = (outs.len() / 5).max(1);
        let early = sorted(
            outs[..fifth]
                .iter()
                .filter(|o| o.ok)
                .filter_map(|o| o.first)
                .collect(),
        );
        let late = sorted(
            outs[outs.len() - fifth..]
                .iter()
                .filter(|o| o.ok)
                .filter_map(|o| o.first)
                .collect(),
        );
        let short = good.iter().filter(|o| o.deltas != tokens as u64).count();
        let unterminated = outs.iter().filter(|o| o.unterminated).count();
        let err_samples: Vec<String> = outs
            .iter()
            .filter_map(|o| o.error.clone())
            .take(3)
            .collect();
        println!(
            "{:<10} {:>6} {:>8.2}ms {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>8.2}ms {:>9.2}ms {:>12.0} {:>10.1} {:>7.1}KB",
            t.name,
            errors,
            pct(&first, 50.0) * 1e3,
            pct(&first, 90.0) * 1e3,
            pct(&first, 99.0) * 1e3,
            pct(&headers, 50.0) * 1e3,
            pct(&last, 50.0) * 1e3,
            pct(&save, 50.0) * 1e3,
            pct(&tps, 50.0),
            pct(&wire, 50.0) / 1e6,
            pct(&pre, 50.0) / 1e3,
        );
        for e in &err_samples {
            println!("           error: {e}");
        }
        println!(
            "           first-token p50 over the first fifth {:.2} ms, over the last fifth {:.2} ms",
            pct(&early, 50.0) * 1e3,
            pct(&late, 50.0) * 1e3
        );
        if short > 0 {
            println!("           {short} answers did not have {tokens} deltas");
        }
        if unterminated > 0 {
            println!(
                "           {unterminated} responses had not ended {} ms after their final event (connection dropped, next request reconnects)",
                grace.as_millis()
            );
        }
        rows.push(json!({
            "name": t.name,
            "kind": format!("{:?}", t.kind),
            "requests": outs.len(),
            "errors": errors,
            "error_samples": err_samples,
            "short_answers": short,
            "unterminated": unterminated,
            "ttft_ms": {"p50": ms(pct(&first, 50.0)), "p90": ms(pct(&first, 90.0)), "p99": ms(pct(&first, 99.0)), "min": ms(pct(&first, 0.0)), "max": ms(pct(&first, 100.0))},
            "ttft_p50_first_fifth_ms": ms(pct(&early, 50.0)),
            "ttft_p50_last_fifth_ms": ms(pct(&late, 50.0)),
            "headers_ms_p50": ms(pct(&headers, 50.0)),
            "bytes_before_first_delta_p50": pct(&pre, 50.0),
            "last_delta_ms_p50": ms(pct(&last, 50.0)),
            "done_after_last_ms": {"p50": ms(pct(&save, 50.0)), "p90": ms(pct(&save, 90.0)), "p99": ms(pct(&save, 99.0))},
            "total_ms_p50": ms(pct(&total, 50.0)),
            "tokens_per_s_p50": pct(&tps, 50.0).round(),
            "stream_tokens_per_s_p50": pct(&stream_tps, 50.0).round(),
            "text_bytes_per_s_p50": pct(&bps, 50.0).round(),
            "tokens_per_s_to_done_p50": sorted(good.iter().map(|o| o.deltas as f64 / o.end).collect()).get(good.len() / 2).copied().unwrap_or(f64::NAN).round(),
        }));
    }
    // Ratios against the first target, plus the median of the per-iteration paired difference
    // (each wo request next to the direct request of the same round).
    let base = &per_target[0];
    let mut ratios = Vec::new();
    for (j, t) in targets.iter().enumerate().skip(1) {
        let diffs = sorted(
            base.iter()
                .zip(&per_target[j])
                .filter_map(|(a, b)| Some(b.first? - a.first?))
                .collect(),
        );
        let b = &rows[0];
        let r = &rows[j];
        let added = r["ttft_ms"]["p50"].as_f64().unwrap() - b["ttft_ms"]["p50"].as_f64().unwrap();
        let tput =
            r["tokens_per_s_p50"].as_f64().unwrap() / b["tokens_per_s_p50"].as_f64().unwrap();
        let stream = r["stream_tokens_per_s_p50"].as_f64().unwrap()
            / b["stream_tokens_per_s_p50"].as_f64().unwrap();
        let done = r["tokens_per_s_to_done_p50"].as_f64().unwrap()
            / b["tokens_per_s_to_done_p50"].as_f64().unwrap();
        println!(
            "{} vs {}: first token +{:.2} ms at p50 (paired median +{:.2} ms, p90 +{:.2} ms); throughput {:.3}x (request→last delta), {:.3}x (first→last delta), {:.3}x (request→done)",
            t.name,
            targets[0].name,
            added,
            pct(&diffs, 50.0) * 1e3,
            pct(&diffs, 90.0) * 1e3,
            tput,
            stream,
            done
        );
        ratios.push(json!({
            "name": t.name, "vs": targets[0].name,
            "added_ttft_p50_ms": (added * 100.0).round() / 100.0,
            "paired_added_ttft_ms": {"p50": ms(pct(&diffs, 50.0)), "p90": ms(pct(&diffs, 90.0))},
            "throughput_ratio": (tput * 1000.0).round() / 1000.0,
            "stream_rate_ratio": (stream * 1000.0).round() / 1000.0,
            "to_done_ratio": (done * 1000.0).round() / 1000.0,
        }));
    }
    write_json(
        opts,
        &json!({"label": label, "iters": iters, "warmup": warmup, "tokens": tokens, "model": model, "targets": rows, "ratios": ratios}),
    )
}

// ---- 100 concurrent chats ------------------------------------------------------------------

/// One concurrent load: `clients` clients start together, each sending `turns` turns. Returns
/// each turn's (message, parent, outcome) and the wall time.
#[allow(clippy::too_many_arguments)]
fn concurrent_load(
    target: &Target,
    clients: usize,
    turns: usize,
    tokens: u32,
    threads: usize,
    model: &str,
    run_id: &str,
    grace: Duration,
    own_threads: bool,
) -> (Vec<(String, Option<String>, Outcome)>, f64) {
    let rt = runtime(threads);
    rt.block_on(async {
        let barrier = Arc::new(tokio::sync::Barrier::new(clients + 1));
        let mut handles = Vec::new();
        for c in 0..clients {
            let target = target.clone();
            let barrier = barrier.clone();
            let model = model.to_owned();
            let run_id = run_id.to_owned();
            handles.push(tokio::spawn(async move {
                let mut client = Client::new(target);
                client.grace = grace;
                let connected = client.connect().await;
                barrier.wait().await;
                let mut outs = Vec::new();
                if let Err(e) = connected {
                    outs.push((
                        String::new(),
                        None,
                        Outcome {
                            error: Some(e),
                            ..Outcome::default()
                        },
                    ));
                    return outs;
                }
                let mut parent: Option<String> = None;
                for k in 0..turns {
                    let msg = format!("concurrent {run_id} client {c} turn {k}");
                    let p = if own_threads { parent.clone() } else { None };
                    let body = request_body_with_parent(
                        &client.target,
                        &msg,
                        tokens,
                        &model,
                        p.as_deref(),
                    );
                    let o = client.send(body).await;
                    parent = o.ids.as_ref().map(|(_, a)| a.clone());
                    outs.push((msg, p, o));
                }
                outs
            }));
        }
        barrier.wait().await;
        let t0 = Instant::now();
        let mut outs = Vec::new();
        for h in handles {
            outs.extend(h.await.unwrap_or_default());
        }
        (outs, t0.elapsed().as_secs_f64())
    })
}

fn concurrent(opts: &Opts) -> Res<()> {
    let target = parse_target(opts.need("target")?)?;
    let clients: usize = opts.num("clients", 100)?;
    let turns: usize = opts.num("turns", 1)?;
    let tokens: u32 = opts.num("tokens", 32)?;
    let threads: usize = opts.num("threads", 1)?;
    let model = opts.get("model").unwrap_or("bench").to_owned();
    let run_id = opts.get("run-id").unwrap_or("run").to_owned();
    let grace = Duration::from_millis(opts.num("eof-grace-ms", 0u64)?);
    // --threads-per-client 1 (default): each client's later turns follow its own previous answer
    // (`parent`), i.e. 100 separate conversations in one llm.json; 0: every turn goes on the
    // latest message (one shared conversation).
    let own_threads = opts.num("threads-per-client", 1u32)? == 1;
    // --reference NAME=openai:URL_FILE: the same load against the upstream called directly,
    // first, for the throughput and first-token ratios of this run.
    let reference = match opts.get("reference") {
        Some(spec) => {
            let r = parse_target(spec)?;
            let (outs, wall) = concurrent_load(
                &r, clients, turns, tokens, threads, &model, &run_id, grace, false,
            );
            let ok: Vec<&Outcome> = outs.iter().map(|(_, _, o)| o).filter(|o| o.ok).collect();
            let first = sorted(ok.iter().filter_map(|o| o.first).collect());
            let errors = outs.len() - ok.len();
            println!(
                "\nconcurrent reference {}: {} turns, {errors} errors, wall {wall:.3} s ({:.1} turns/s); first token p50 {:.2} ms p99 {:.2} ms",
                r.name,
                outs.len(),
                outs.len() as f64 / wall,
                pct(&first, 50.0) * 1e3,
                pct(&first, 99.0) * 1e3
            );
            Some(json!({
                "name": r.name, "turns": outs.len(), "errors": errors,
                "wall_s": (wall * 1000.0).round() / 1000.0,
                "turns_per_s": (outs.len() as f64 / wall * 10.0).round() / 10.0,
                "ttft_ms": {"p50": ms(pct(&first, 50.0)), "p99": ms(pct(&first, 99.0))},
            }))
        }
        None => None,
    };
    // --watch NAME=PID: processes whose CPU seconds (user+system) over the target's load are
    // reported, with the CPU per turn (the measure that a loaded machine's wall clock blurs).
    let watch: Vec<(String, String)> = opts
        .all("watch")
        .iter()
        .filter_map(|w| w.split_once('=').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect();
    let cpu0: Vec<Option<f64>> = watch.iter().map(|(_, p)| cpu_seconds(p)).collect();
    let (outs, wall) = concurrent_load(
        &target,
        clients,
        turns,
        tokens,
        threads,
        &model,
        &run_id,
        grace,
        own_threads,
    );
    let errors: Vec<&String> = outs
        .iter()
        .filter_map(|(_, _, o)| o.error.as_ref())
        .collect();
    let unterminated = outs.iter().filter(|(_, _, o)| o.unterminated).count();
    let ok: Vec<&Outcome> = outs.iter().map(|(_, _, o)| o).filter(|o| o.ok).collect();
    let first = sorted(ok.iter().filter_map(|o| o.first).collect());
    let total = sorted(ok.iter().map(|o| o.end).collect());
    let save = sorted(
        ok.iter()
            .filter_map(|o| o.last.map(|l| o.end - l))
            .collect(),
    );
    println!(
        "\nconcurrent: {clients} clients × {turns} turn(s), {tokens} tokens each, model {model}: {} turns, {} errors, wall {:.3} s ({:.1} turns/s)",
        outs.len(),
        errors.len(),
        wall,
        outs.len() as f64 / wall
    );
    println!(
        "  per turn: first token p50 {:.1} ms p99 {:.1} ms; done p50 {:.1} ms p99 {:.1} ms; done−last delta (save) p50 {:.1} ms p99 {:.1} ms",
        pct(&first, 50.0) * 1e3,
        pct(&first, 99.0) * 1e3,
        pct(&total, 50.0) * 1e3,
        pct(&total, 99.0) * 1e3,
        pct(&save, 50.0) * 1e3,
        pct(&save, 99.0) * 1e3
    );
    for e in errors.iter().take(5) {
        println!("  error: {e}");
    }
    let cpu: Vec<Value> = watch
        .iter()
        .zip(&cpu0)
        .filter_map(|((n, p), c0)| {
            let s = cpu_seconds(p)? - (*c0)?;
            Some(json!({"name": n, "cpu_s": (s * 100.0).round() / 100.0,
                        "cpu_ms_per_turn": (s * 1e3 / outs.len().max(1) as f64 * 100.0).round() / 100.0}))
        })
        .collect();
    for c in &cpu {
        println!(
            "  CPU of {}: {:.2} s (user+system), {:.2} ms per turn",
            c["name"].as_str().unwrap_or("?"),
            c["cpu_s"].as_f64().unwrap_or(f64::NAN),
            c["cpu_ms_per_turn"].as_f64().unwrap_or(f64::NAN)
        );
    }
    let turns_per_s = outs.len() as f64 / wall;
    if let Some(r) = &reference {
        println!(
            "  vs {} at the same load: throughput {:.3}× (turns/s), first token p50 {:.2} ms vs {:.2} ms",
            r["name"].as_str().unwrap_or("reference"),
            turns_per_s / r["turns_per_s"].as_f64().unwrap_or(f64::NAN),
            pct(&first, 50.0) * 1e3,
            r["ttft_ms"]["p50"].as_f64().unwrap_or(f64::NAN)
        );
    }
    let recorded: Vec<Value> = outs
        .iter()
        .filter(|(_, _, o)| o.ok)
        .map(|(msg, p, o)| {
            let (u, a) = o.ids.clone().unwrap_or_default();
            json!({"message": msg, "parent": p, "user": u, "assistant": a})
        })
        .collect();
    if let Some(p) = opts.get("ids-out") {
        std::fs::write(p, serde_json::to_vec(&recorded).unwrap()).map_err(|e| e.to_string())?;
    }
    write_json(
        opts,
        &json!({
            "clients": clients, "turns_per_client": turns, "tokens": tokens, "model": model,
            "own_threads": own_threads,
            "turns": outs.len(), "ok": ok.len(), "errors": errors.len(), "unterminated": unterminated,
            "error_samples": errors.iter().take(5).collect::<Vec<_>>(),
            "wall_s": (wall * 1000.0).round() / 1000.0,
            "turns_per_s": (outs.len() as f64 / wall * 10.0).round() / 10.0,
            "ttft_ms": {"p50": ms(pct(&first, 50.0)), "p99": ms(pct(&first, 99.0))},
            "turn_ms": {"p50": ms(pct(&total, 50.0)), "p99": ms(pct(&total, 99.0)), "max": ms(pct(&total, 100.0))},
            "save_ms": {"p50": ms(pct(&save, 50.0)), "p99": ms(pct(&save, 99.0))},
            "reference": reference,
            "cpu": cpu,
            "throughput_ratio": reference.as_ref().map(|r| ((turns_per_s / r["turns_per_s"].as_f64().unwrap_or(f64::NAN)) * 1000.0).round() / 1000.0),
        }),
    )
}

// ---- continuity across stateless instances ------------------------------------------------

/// One request with the whole response read (a stateless answer ends after `done`): status,
/// the headers asked for, body.
async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Option<Value>,
    want: &[&str],
) -> Res<(u16, Vec<Option<String>>, String)> {
    let s = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut b = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        b = b.header(*k, v.as_str());
    }
    let bytes = body.map_or_else(Bytes::new, |v| Bytes::from(v.to_string()));
    let req = b.body(Full::new(bytes)).map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout(Duration::from_secs(30), sender.send_request(req))
        .await
        .map_err(|_| "no answer in 30 s".to_owned())?
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status().as_u16();
    let got = want
        .iter()
        .map(|h| {
            resp.headers()
                .get(*h)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .collect();
    let body = tokio::time::timeout(Duration::from_secs(30), resp.into_body().collect())
        .await
        .map_err(|_| "body not finished in 30 s".to_owned())?
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok((status, got, String::from_utf8_lossy(&body).into_owned()))
}

/// The `done` event's data of an SSE body.
fn done_event(body: &str) -> Res<Value> {
    for block in body.split("\n\n") {
        let mut name = "";
        let mut data = "";
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                name = v.trim();
            } else if let Some(v) = line.strip_prefix("data:") {
                data = v.trim_start();
            }
        }
        if name == "done" {
            return serde_json::from_str(data).map_err(|e| format!("done event: {e}"));
        }
        if name == "error" {
            return Err(format!("error event: {data}"));
        }
    }
    Err(format!(
        "no done event in: {}",
        body.chars().take(400).collect::<String>()
    ))
}

/// A message of the `state_patch` by id.
fn patch_message(done: &Value, id: &str) -> Res<Value> {
    done["state_patch"]["messages"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["id"] == id))
        .cloned()
        .ok_or_else(|| format!("message {id} not in the state_patch: {done}"))
}

fn continuity(opts: &Opts) -> Res<()> {
    let url = read_url_file(opts.need("url-file")?)?;
    let hostport = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: not http://"))?
        .trim_end_matches('/');
    let addr: SocketAddr = hostport.parse().map_err(|e| format!("{hostport}: {e}"))?;
    // The public name the instances were told to accept (`--allow-host`), as a browser on
    // that site would send it, and the Origin that goes with it.
    let host = opts.get("host").unwrap_or(hostport).to_owned();
    let served_by = opts
        .get("served-by-header")
        .unwrap_or("x-served-by")
        .to_owned();
    let instances: usize = opts.num("instances", 2)?;
    let nonce = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let rt = runtime(1);
    let report = rt.block_on(async move {
        let browser = |origin: &str| {
            vec![
                ("host", host.clone()),
                ("origin", origin.to_owned()),
                ("content-type", "application/json".to_owned()),
                ("accept", "text/event-stream".to_owned()),
            ]
        };
        let origin = format!("http://{host}");
        let turn = |message: String, window: Vec<Value>| {
            json!({
                "message": message,
                "window": window,
                "params": {"model": "echo", "max_tokens": 2},
            })
        };
        let mut checks = Vec::new();
        // Health through the proxy.
        let (st, _, body) = exchange(addr, "GET", "/api/health", &[("host", host.clone())], None, &[]).await?;
        if st != 200 {
            return Err(format!("GET /api/health through the proxy: HTTP {st}: {body}"));
        }
        checks.push("health through the proxy: 200".to_owned());
        // Turn 1.
        let q1 = format!("first question {nonce}");
        let (st, got, body) = exchange(addr, "POST", "/api/stateless/chat", &browser(&origin), Some(turn(q1.clone(), vec![])), &[&served_by]).await?;
        if st != 200 {
            return Err(format!("turn 1: HTTP {st}: {body}"));
        }
        let first_server = got[0].clone().ok_or_else(|| format!("turn 1: no {served_by} header"))?;
        let d1 = done_event(&body)?;
        let u1 = d1["user_message_id"].as_str().ok_or("turn 1: no user_message_id")?.to_owned();
        let a1 = d1["assistant_message_id"].as_str().ok_or("turn 1: no assistant_message_id")?.to_owned();
        // The client's state after turn 1: its two messages, from the patch.
        let window = vec![patch_message(&d1, &u1)?, patch_message(&d1, &a1)?];
        let a1_text = window[1]["content"].as_str().unwrap_or("").to_owned();
        checks.push(format!("turn 1 served by {first_server}"));
        // Turn 2, carrying that state, until another instance serves it.
        let q2 = format!("second question {nonce}");
        let mut second = None;
        let mut servers = vec![first_server.clone()];
        for _ in 0..(4 * instances.max(2)) {
            let (st, got, body) = exchange(addr, "POST", "/api/stateless/chat", &browser(&origin), Some(turn(q2.clone(), window.clone())), &[&served_by]).await?;
            if st != 200 {
                return Err(format!("turn 2: HTTP {st}: {body}"));
            }
            let server = got[0].clone().ok_or_else(|| format!("turn 2: no {served_by} header"))?;
            if !servers.contains(&server) {
                servers.push(server.clone());
            }
            if server != first_server {
                second = Some((server, done_event(&body)?));
                break;
            }
        }
        let (second_server, d2) = second.ok_or_else(|| format!("every turn 2 was served by {first_server}: is the balancer spreading requests?"))?;
        let u2 = d2["user_message_id"].as_str().ok_or("turn 2: no user_message_id")?.to_owned();
        let a2 = d2["assistant_message_id"].as_str().ok_or("turn 2: no assistant_message_id")?.to_owned();
        let m2 = patch_message(&d2, &u2)?;
        if m2["parent"] != json!(a1) {
            return Err(format!("turn 2's question does not follow turn 1's answer {a1}: parent {}", m2["parent"]));
        }
        // What the second instance sent the model: turn 1's question and answer, then turn 2's.
        let answer2 = patch_message(&d2, &a2)?["content"].as_str().unwrap_or("").to_owned();
        for (what, text) in [("turn 1's question", q1.as_str()), ("turn 2's question", q2.as_str())] {
            if !answer2.contains(text) {
                return Err(format!("{second_server} did not send {what} ({text:?}) to the model; it saw: {answer2}"));
            }
        }
        // Turn 1's answer echoed turn 1's question; sent back as the assistant's turn, it
        // puts that question in the prompt a second time.
        if !a1_text.contains(&q1) || !answer2.contains("assistant: echo [") || answer2.matches(&q1).count() < 2 {
            return Err(format!("{second_server} did not send turn 1's answer to the model; it saw: {answer2}"));
        }
        checks.push(format!("turn 2 served by {second_server}: follows turn 1's answer (parent {a1}); the model got turn 1's question and answer"));
        // The guard still works behind the proxy: a foreign Origin and an unknown Host are refused.
        let (st, _, _) = exchange(addr, "POST", "/api/stateless/chat", &browser("http://evil.example"), Some(turn("x".into(), vec![])), &[]).await?;
        if st != 403 {
            return Err(format!("a foreign Origin through the proxy got HTTP {st}, not 403"));
        }
        checks.push("foreign Origin through the proxy: 403".to_owned());
        let mut wrong = browser("http://evil.example");
        wrong[0].1 = "evil.example".to_owned();
        let (st, _, _) = exchange(addr, "POST", "/api/stateless/chat", &wrong, Some(turn("x".into(), vec![])), &[]).await?;
        if st != 403 {
            return Err(format!("an unknown Host through the proxy got HTTP {st}, not 403"));
        }
        checks.push("unknown Host through the proxy: 403".to_owned());
        Ok::<_, String>((checks, servers))
    });
    let (checks, servers) = report?;
    println!(
        "continuity: ok ({} instances seen: {})",
        servers.len(),
        servers.join(", ")
    );
    for c in &checks {
        println!("  {c}");
    }
    write_json(
        opts,
        &json!({"ok": true, "checks": checks, "servers": servers}),
    )
}

// ---- verify llm.json ---------------------------------------------------------------------

fn verify(opts: &Opts) -> Res<()> {
    let state_path = opts.need("state")?;
    let ids_path = opts.need("ids")?;
    let expect_turns: usize = opts.num("expect-turns", 0)?;
    // Messages the file held before the load (a seeded file).
    let seeded: usize = opts.num("seeded-messages", 0)?;
    let state: Value = serde_json::from_slice(
        &std::fs::read(state_path).map_err(|e| format!("{state_path}: {e}"))?,
    )
    .map_err(|e| format!("{state_path}: {e}"))?;
    let recorded: Vec<Value> =
        serde_json::from_slice(&std::fs::read(ids_path).map_err(|e| format!("{ids_path}: {e}"))?)
            .map_err(|e| e.to_string())?;
    let messages = state["messages"].as_array().cloned().unwrap_or_default();
    let by_id: HashMap<&str, &Value> = messages
        .iter()
        .filter_map(|m| Some((m["id"].as_str()?, m)))
        .collect();
    let mut problems = Vec::new();
    if by_id.len() != messages.len() {
        problems.push(format!(
            "{} messages but {} distinct ids",
            messages.len(),
            by_id.len()
        ));
    }
    let mut seen = HashSet::new();
    for r in &recorded {
        let msg = r["message"].as_str().unwrap_or("");
        let (u, a) = (
            r["user"].as_str().unwrap_or(""),
            r["assistant"].as_str().unwrap_or(""),
        );
        if !seen.insert(msg) {
            problems.push(format!("turn {msg:?} recorded twice"));
        }
        match by_id.get(u) {
            None => problems.push(format!("user message {u} ({msg:?}) missing")),
            Some(m) => {
                if !m["content"].as_str().unwrap_or("").contains(msg) {
                    problems.push(format!("user message {u} does not hold {msg:?}"));
                }
                if m["role"].as_str().is_some_and(|r| r != "user") {
                    problems.push(format!("{u} has role {}", m["role"]));
                }
                if let Some(p) = r["parent"].as_str()
                    && m["parent"].as_str() != Some(p)
                {
                    problems.push(format!(
                        "user message {u} follows {} instead of {p}",
                        m["parent"]
                    ));
                }
            }
        }
        match by_id.get(a) {
            None => problems.push(format!("assistant message {a} ({msg:?}) missing")),
            Some(m) => {
                if m["parent"].as_str() != Some(u) {
                    problems.push(format!(
                        "assistant {a} answers {} instead of {u}",
                        m["parent"]
                    ));
                }
                if m["role"].as_str() != Some("assistant") {
                    problems.push(format!("{a} has role {}", m["role"]));
                }
                if !m["content"].as_str().unwrap_or("").contains("tok") {
                    problems.push(format!("assistant {a} holds no answer"));
                }
            }
        }
    }
    // Every user message in the file has its reply (a reply whose parent is it).
    let replied: HashSet<&str> = messages
        .iter()
        .filter(|m| m["role"].as_str() == Some("assistant"))
        .filter_map(|m| m["parent"].as_str())
        .collect();
    let unanswered = messages
        .iter()
        .filter(|m| m["role"].as_str() == Some("user"))
        .filter(|m| !replied.contains(m["id"].as_str().unwrap_or("")))
        .count();
    if unanswered > 0 {
        problems.push(format!("{unanswered} user messages without a reply"));
    }
    if expect_turns > 0 {
        if recorded.len() != expect_turns {
            problems.push(format!(
                "{} turns recorded by clients, {expect_turns} expected",
                recorded.len()
            ));
        }
        if messages.len() != seeded + 2 * expect_turns {
            problems.push(format!(
                "llm.json holds {} messages, {} expected ({seeded} seeded + 2 per turn)",
                messages.len(),
                seeded + 2 * expect_turns
            ));
        }
    }
    println!(
        "verify {state_path}: {} messages, {} turns recorded, {} problems",
        messages.len(),
        recorded.len(),
        problems.len()
    );
    for p in problems.iter().take(10) {
        println!("  problem: {p}");
    }
    write_json(
        opts,
        &json!({"messages": messages.len(), "seeded": seeded, "turns": recorded.len(), "unanswered": unanswered,
                "problems": problems.len(), "problem_samples": problems.iter().take(10).collect::<Vec<_>>(),
                "bytes": std::fs::metadata(state_path).map(|m| m.len()).unwrap_or(0)}),
    )
}

// ---- requests per second -------------------------------------------------------------------

/// utime + stime of a process, in seconds (Linux, USER_HZ = 100).
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn rps(opts: &Opts) -> Res<()> {
    let targets: Vec<Target> = opts
        .all("target")
        .iter()
        .map(|s| parse_target(s))
        .collect::<Res<_>>()?;
    let clients: usize = opts.num("clients", 48)?;
    let duration = Duration::from_secs_f64(opts.num("duration", 10.0)?);
    let rounds: usize = opts.num("rounds", 2)?;
    let tokens: u32 = opts.num("tokens", 8)?;
    let threads: usize = opts.num("threads", 1)?;
    let model = opts.get("model").unwrap_or("bench").to_owned();
    // --watch NAME=PID: processes whose CPU time is reported per phase ("self" = this client).
    let mut watch: Vec<(String, String)> = opts
        .all("watch")
        .iter()
        .filter_map(|w| w.split_once('=').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect();
    watch.push(("client".into(), std::process::id().to_string()));
    let rt = runtime(threads);
    let mut phases: Vec<Value> = Vec::new();
    println!(
        "\nrps: {clients} clients, {:.0} s per phase, {rounds} round(s), {tokens} tokens, model {model}, client threads {threads}",
        duration.as_secs_f64()
    );
    for round in 0..rounds {
        for t in &targets {
            // Warm-up: open the connections and make one request each.
            let cpu0: Vec<Option<f64>> = watch.iter().map(|(_, p)| cpu_seconds(p)).collect();
            let (done, errors, samples, lats, elapsed) = rt.block_on(async {
                let stop = Arc::new(AtomicBool::new(false));
                let mut handles = Vec::new();
                let t0 = Instant::now();
                for c in 0..clients {
                    let t = t.clone();
                    let stop = stop.clone();
                    let model = model.clone();
                    handles.push(tokio::spawn(async move {
                        let mut client = Client::new(t);
                        let (mut ok, mut err, mut samples, mut lats) =
                            (0u64, 0u64, Vec::new(), Vec::new());
                        let mut i = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            let msg = format!("rps client {c} request {i}");
                            i += 1;
                            let body = request_body(&client.target, &msg, tokens, &model);
                            let o = client.send(body).await;
                            if o.ok && o.deltas == tokens as u64 {
                                ok += 1;
                                lats.push(o.end);
                            } else {
                                err += 1;
                                if samples.len() < 3 {
                                    samples.push(o.error.unwrap_or_else(|| {
                                        format!("{} deltas of {tokens}", o.deltas)
                                    }));
                                }
                            }
                        }
                        (ok, err, samples, lats)
                    }));
                }
                tokio::time::sleep(duration).await;
                stop.store(true, Ordering::Relaxed);
                let (mut ok, mut err, mut samples, mut lats) = (0, 0, Vec::new(), Vec::new());
                for h in handles {
                    if let Ok((o, e, s, l)) = h.await {
                        ok += o;
                        err += e;
                        samples.extend(s);
                        lats.extend(l);
                    }
                }
                (ok, err, samples, lats, t0.elapsed().as_secs_f64())
            });
            let cpu: Vec<Value> = watch
                .iter()
                .zip(&cpu0)
                .filter_map(|((n, p), c0)| {
                    Some(json!({"name": n, "cpu_s": ((cpu_seconds(p)? - (*c0)?) * 100.0).round() / 100.0}))
                })
                .collect();
            let lats = sorted(lats);
            let rate = done as f64 / elapsed;
            println!(
                "round {round} {:<10} {:>8.0} req/s  ({done} ok, {errors} errors in {elapsed:.2} s)  latency p50 {:.2} ms p99 {:.2} ms  cpu {}",
                t.name,
                rate,
                pct(&lats, 50.0) * 1e3,
                pct(&lats, 99.0) * 1e3,
                cpu.iter()
                    .map(|c| format!(
                        "{}={:.1}s",
                        c["name"].as_str().unwrap(),
                        c["cpu_s"].as_f64().unwrap()
                    ))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            for s in samples.iter().take(3) {
                println!("      error: {s}");
            }
            phases.push(json!({
                "round": round, "name": t.name, "ok": done, "errors": errors,
                "error_samples": samples.iter().take(3).collect::<Vec<_>>(),
                "seconds": (elapsed * 1000.0).round() / 1000.0, "req_per_s": rate.round(),
                "latency_ms": {"p50": ms(pct(&lats, 50.0)), "p99": ms(pct(&lats, 99.0))},
                "cpu": cpu,
            }));
        }
    }
    // Per target: the median over rounds; ratio against the first target.
    let mut summary = Vec::new();
    for t in &targets {
        let rates = sorted(
            phases
                .iter()
                .filter(|p| p["name"] == t.name.as_str())
                .map(|p| p["req_per_s"].as_f64().unwrap())
                .collect(),
        );
        let errors: u64 = phases
            .iter()
            .filter(|p| p["name"] == t.name.as_str())
            .map(|p| p["errors"].as_u64().unwrap())
            .sum();
        let median = if rates.is_empty() {
            f64::NAN
        } else if rates.len() % 2 == 1 {
            rates[rates.len() / 2]
        } else {
            (rates[rates.len() / 2 - 1] + rates[rates.len() / 2]) / 2.0
        };
        // CPU per request of each watched process, over this target's phases.
        let ok: f64 = phases
            .iter()
            .filter(|p| p["name"] == t.name.as_str())
            .map(|p| p["ok"].as_f64().unwrap())
            .sum();
        let mut cpu = serde_json::Map::new();
        for p in phases.iter().filter(|p| p["name"] == t.name.as_str()) {
            for c in p["cpu"].as_array().into_iter().flatten() {
                let name = c["name"].as_str().unwrap_or("").to_owned();
                let prev = cpu.get(&name).and_then(Value::as_f64).unwrap_or(0.0);
                cpu.insert(name, json!(prev + c["cpu_s"].as_f64().unwrap_or(0.0)));
            }
        }
        let cpu_us: serde_json::Map<String, Value> = cpu
            .into_iter()
            .map(|(k, v)| (k, json!((v.as_f64().unwrap_or(0.0) / ok * 1e6).round())))
            .collect();
        summary.push(
            json!({"name": t.name, "req_per_s_median": median.round(), "errors": errors,
                            "rates": rates, "cpu_us_per_request": cpu_us}),
        );
    }
    // Ratio of each target to the first one within the same round.
    for (i, t) in targets.iter().enumerate().skip(1) {
        let ratios: Vec<f64> = (0..rounds)
            .filter_map(|r| {
                let rate = |name: &str| {
                    phases
                        .iter()
                        .find(|p| p["round"] == r && p["name"] == name)
                        .and_then(|p| p["req_per_s"].as_f64())
                };
                Some(rate(&t.name)? / rate(&targets[0].name)?)
            })
            .collect();
        summary[i]["round_ratios"] = json!(
            ratios
                .iter()
                .map(|x| (x * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        );
    }
    let base = summary[0]["req_per_s_median"].as_f64().unwrap();
    for s in &summary[1..] {
        println!(
            "{}: {:.0} req/s = {:.3}x of {} ({:.0} req/s) (median of rounds; per-round ratios {}), {} errors",
            s["name"].as_str().unwrap(),
            s["req_per_s_median"].as_f64().unwrap(),
            s["req_per_s_median"].as_f64().unwrap() / base,
            targets[0].name,
            base,
            s["round_ratios"],
            s["errors"]
        );
    }
    write_json(
        opts,
        &json!({"clients": clients, "duration_s": duration.as_secs_f64(), "rounds": rounds, "tokens": tokens,
                "model": model, "client_threads": threads, "phases": phases, "summary": summary}),
    )
}

// ---- fsync floor ------------------------------------------------------------------------

fn fsync_floor(opts: &Opts) -> Res<()> {
    use std::io::Write;
    let dir = std::path::PathBuf::from(opts.need("dir")?);
    let bytes: usize = opts.num("bytes", 4096)?;
    let iters: usize = opts.num("iters", 50)?;
    let data = vec![b'x'; bytes];
    let target = dir.join("floor.json");
    let tmp = dir.join("floor.json.tmp");
    let mut times = Vec::new();
    for _ in 0..iters {
        let t0 = Instant::now();
        let mut f = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
        f.write_all(&data).map_err(|e| e.to_string())?;
        f.sync_all().map_err(|e| e.to_string())?;
        drop(f);
        std::fs::rename(&tmp, &target).map_err(|e| e.to_string())?;
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| e.to_string())?;
        times.push(t0.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_file(&target);
    let times = sorted(times);
    println!(
        "\nfsync floor ({bytes} bytes: write, fsync, rename, fsync dir): p50 {:.2} ms, p90 {:.2} ms",
        pct(&times, 50.0) * 1e3,
        pct(&times, 90.0) * 1e3
    );
    write_json(
        opts,
        &json!({"bytes": bytes, "iters": iters, "p50_ms": ms(pct(&times, 50.0)), "p90_ms": ms(pct(&times, 90.0))}),
    )
}

// ---- summary ---------------------------------------------------------------------------

fn load(dir: &str, name: &str) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(format!("{dir}/{name}")).ok()?).ok()
}

fn ratio_of<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["ratios"].as_array()?.iter().find(|r| r["name"] == name)
}

fn target_of<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["targets"].as_array()?.iter().find(|r| r["name"] == name)
}

fn yes(b: bool) -> &'static str {
    if b { "met" } else { "NOT met" }
}

fn summary(opts: &Opts) -> Res<()> {
    let dir = opts.need("dir")?;
    println!("\n================ wo serve benchmark summary ================");
    if let Some(lat) = load(dir, "latency.json") {
        println!(
            "1a. first-token latency ({} requests per path, {} tokens, model {}):",
            lat["iters"], lat["tokens"], lat["model"]
        );
        for t in lat["targets"].as_array().into_iter().flatten() {
            println!(
                "    {:<11} p50 {:>6.2} ms  p90 {:>6.2} ms  p99 {:>6.2} ms (p50 first/last fifth {:.2}/{:.2})  errors {}  done−last delta p50 {:.2} ms  {:.1} KB before the first delta",
                t["name"].as_str().unwrap_or(""),
                t["ttft_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
                t["ttft_ms"]["p90"].as_f64().unwrap_or(f64::NAN),
                t["ttft_ms"]["p99"].as_f64().unwrap_or(f64::NAN),
                t["ttft_p50_first_fifth_ms"].as_f64().unwrap_or(f64::NAN),
                t["ttft_p50_last_fifth_ms"].as_f64().unwrap_or(f64::NAN),
                t["errors"],
                t["done_after_last_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
                t["bytes_before_first_delta_p50"]
                    .as_f64()
                    .unwrap_or(f64::NAN)
                    / 1e3,
            );
        }
        for r in lat["ratios"].as_array().into_iter().flatten() {
            let added = r["added_ttft_p50_ms"].as_f64().unwrap_or(f64::NAN);
            println!(
                "    {}: +{added:.2} ms at p50 (paired +{:.2} ms) — goal < 2 ms: {}; streaming rate at this pace {:.3}x",
                r["name"].as_str().unwrap_or(""),
                r["paired_added_ttft_ms"]["p50"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
                yes(added < 2.0),
                r["stream_rate_ratio"].as_f64().unwrap_or(f64::NAN),
            );
        }
    }
    if let Some(tp) = load(dir, "throughput.json") {
        println!(
            "1b. throughput ({} requests per path, {} tokens, no delay):",
            tp["iters"], tp["tokens"]
        );
        for t in tp["targets"].as_array().into_iter().flatten() {
            println!(
                "    {:<10} {:>9.0} tokens/s ({:.1} MB/s of answer text) request→last delta; {:>9.0} tokens/s first→last; done−last delta p50 {:.2} ms",
                t["name"].as_str().unwrap_or(""),
                t["tokens_per_s_p50"].as_f64().unwrap_or(f64::NAN),
                t["text_bytes_per_s_p50"].as_f64().unwrap_or(f64::NAN) / 1e6,
                t["stream_tokens_per_s_p50"].as_f64().unwrap_or(f64::NAN),
                t["done_after_last_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
            );
        }
        for name in ["local", "stateless"] {
            if let Some(r) = ratio_of(&tp, name) {
                let x = r["throughput_ratio"].as_f64().unwrap_or(f64::NAN);
                let stream = r["stream_rate_ratio"].as_f64().unwrap_or(f64::NAN);
                println!(
                    "    {name}: {stream:.3}x streaming rate (first→last delta) — goal ≥ 0.95x: {}; {x:.3}x request→last delta, {:.3}x request→done",
                    yes(stream >= 0.95),
                    r["to_done_ratio"].as_f64().unwrap_or(f64::NAN),
                );
            }
        }
    }
    if let Some(lat) = load(dir, "latency.json")
        && let (Some(l), Some(s)) = (target_of(&lat, "local"), target_of(&lat, "stateless"))
    {
        println!(
            "    local-mode save per turn (1a: done − last delta, local minus stateless): p50 {:.2} ms",
            l["done_after_last_ms"]["p50"].as_f64().unwrap_or(f64::NAN)
                - s["done_after_last_ms"]["p50"].as_f64().unwrap_or(f64::NAN)
        );
    }
    if let Some(f) = load(dir, "fsync_floor.json") {
        println!(
            "    disk floor for one durable save of {} bytes (that llm.json's final size): p50 {} ms",
            f["bytes"], f["p50_ms"]
        );
    }
    if let Some(c) = load(dir, "concurrent.json") {
        let v = load(dir, "verify.json").unwrap_or(Value::Null);
        println!(
            "2.  {} concurrent clients × {} turn(s): {} turns, {} errors, wall {} s ({} turns/s); per turn: first token p50 {} ms, p99 {} ms; whole turn p50 {} ms, p99 {} ms; done − last delta p50 {} ms",
            c["clients"],
            c["turns_per_client"],
            c["turns"],
            c["errors"],
            c["wall_s"],
            c["turns_per_s"],
            c["ttft_ms"]["p50"],
            c["ttft_ms"]["p99"],
            c["turn_ms"]["p50"],
            c["turn_ms"]["p99"],
            c["save_ms"]["p50"]
        );
        if !c["reference"].is_null() {
            println!(
                "    same load on the upstream directly: {} turns/s, first token p50 {} ms — throughput ratio {}× (goal ≥ 0.8×: {}); first token p50 goal ≤ 20 ms: {}",
                c["reference"]["turns_per_s"],
                c["reference"]["ttft_ms"]["p50"],
                c["throughput_ratio"],
                yes(c["throughput_ratio"].as_f64().is_some_and(|r| r >= 0.8)),
                yes(c["ttft_ms"]["p50"].as_f64().is_some_and(|t| t <= 20.0))
            );
        }
        println!(
            "    llm.json: {} messages ({} bytes) for {} turns, {} problems — errors 0 and every turn saved: {}",
            v["messages"],
            v["bytes"],
            c["turns"],
            v["problems"],
            yes(c["errors"] == 0
                && v["problems"] == 0
                && v["messages"].as_u64()
                    == c["turns"]
                        .as_u64()
                        .map(|t| v["seeded"].as_u64().unwrap_or(0) + 2 * t))
        );
    }
    if let Some(r) = load(dir, "rps.json") {
        println!(
            "3.  stateless req/s ({} clients, {} s × {} rounds, {} tokens):",
            r["clients"], r["duration_s"], r["rounds"], r["tokens"]
        );
        let s = r["summary"].as_array().cloned().unwrap_or_default();
        if let Some(base) = s.first() {
            let b = base["req_per_s_median"].as_f64().unwrap_or(f64::NAN);
            for t in &s {
                println!(
                    "    {:<10} {:>8.0} req/s (rounds {})  errors {}  ({:.3}x of {}; per round {})  CPU µs/request {}",
                    t["name"].as_str().unwrap_or(""),
                    t["req_per_s_median"].as_f64().unwrap_or(f64::NAN),
                    t["rates"],
                    t["errors"],
                    t["req_per_s_median"].as_f64().unwrap_or(f64::NAN) / b,
                    base["name"].as_str().unwrap_or(""),
                    t.get("round_ratios").unwrap_or(&json!("-")),
                    t["cpu_us_per_request"]
                );
            }
        }
    }
    Ok(())
}

//! A scripted HTTP/1.1 server on 127.0.0.1:0 that writes exactly the bytes
//! a test gives it (status line, headers, chunked body, frame by frame), so
//! wire formats are reproduced byte for byte and failures — a dropped
//! connection, a server that goes silent — can be staged precisely.

#![allow(dead_code)] // each test binary uses a different subset

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use wo_providers::{ChatMessage, ChatRequest, Provider, ProviderError, StreamEvent};

/// What the tests ask real models: one short factual answer, greedy.
pub fn capital_question() -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("You are a helpful assistant. Answer in one short sentence."),
        ChatMessage::user("What is the capital of France?"),
    ])
    .with_temperature(0.0)
    .with_max_tokens(40)
}

/// Every event of `p`'s answer to `req`, never cancelled.
pub async fn all_events(
    p: &dyn Provider,
    req: ChatRequest,
) -> Vec<Result<StreamEvent, ProviderError>> {
    p.stream(req, CancellationToken::new())
        .await
        .unwrap()
        .collect()
        .await
}

/// The health reply of a NanoChat server ready to answer.
pub const NANO_READY: &str = r#"{"status":"ok","ready":true,"num_gpus":1,"available_workers":1}"#;

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

/// A piece of a streamed body.
#[derive(Debug, Clone)]
pub enum Part {
    /// Written as one HTTP chunk.
    Bytes(Vec<u8>),
    /// Pause before the next part.
    Sleep(Duration),
}

/// How a streamed body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The terminating zero-length chunk.
    Clean,
    /// Close the socket with no terminator (connection dropped).
    Drop,
    /// Keep the connection open and send nothing more.
    Hang,
}

/// What to answer one request with.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete response with `Content-Length`.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// A chunked response written part by part.
    Stream {
        status: u16,
        headers: Vec<(String, String)>,
        parts: Vec<Part>,
        end: End,
    },
    /// Read the request and never answer.
    Silent,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Self {
        Reply::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
        }
    }
    pub fn json_with(status: u16, extra: &[(&str, &str)], body: &str) -> Self {
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Reply::Full {
            status,
            headers,
            body: body.as_bytes().to_vec(),
        }
    }
    /// A `text/event-stream` body, one HTTP chunk per frame.
    pub fn sse(frames: &[&str]) -> Self {
        Self::sse_with(frames, End::Clean)
    }
    pub fn sse_with(frames: &[&str], end: End) -> Self {
        Reply::Stream {
            status: 200,
            headers: vec![
                (
                    "content-type".into(),
                    "text/event-stream; charset=utf-8".into(),
                ),
                ("cache-control".into(), "no-cache".into()),
            ],
            parts: frames
                .iter()
                .map(|f| Part::Bytes(f.as_bytes().to_vec()))
                .collect(),
            end,
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// The server. Replies are used in order; the last one repeats.
pub struct FakeServer {
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    closed_by_client: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeServer {
    pub async fn start(script: Vec<Reply>) -> Self {
        assert!(!script.is_empty());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(AtomicUsize::new(0));
        let (reqs, cl) = (requests.clone(), closed.clone());
        let task = tokio::spawn(async move {
            let mut n = 0usize;
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let reply = script[n.min(script.len() - 1)].clone();
                n += 1;
                let (reqs, cl) = (reqs.clone(), cl.clone());
                tokio::spawn(async move {
                    let _ = serve(sock, reply, reqs, cl).await;
                });
            }
        });
        Self {
            url,
            requests,
            closed_by_client: closed,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Connections the client closed while the server was still streaming
    /// or silent (proof that a cancelled request was aborted).
    pub fn closed_by_client(&self) -> usize {
        self.closed_by_client.load(Ordering::SeqCst)
    }
}

async fn read_request(sock: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut it = first.split(' ');
    let method = it.next().unwrap_or_default().to_string();
    let path = it.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body,
        at: Instant::now(),
    }))
}

async fn wait_for_client_close(sock: &mut TcpStream, closed: &AtomicUsize) {
    let mut tmp = [0u8; 64];
    loop {
        match sock.read(&mut tmp).await {
            Ok(0) | Err(_) => {
                closed.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Ok(_) => {}
        }
    }
}

async fn serve(
    mut sock: TcpStream,
    reply: Reply,
    reqs: Arc<Mutex<Vec<Recorded>>>,
    closed: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    let Some(req) = read_request(&mut sock).await? else {
        return Ok(());
    };
    reqs.lock().unwrap().push(req);
    match reply {
        Reply::Silent => {
            wait_for_client_close(&mut sock, &closed).await;
        }
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (k, v) in &headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str(&format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            ));
            sock.write_all(out.as_bytes()).await?;
            sock.write_all(&body).await?;
            sock.flush().await?;
        }
        Reply::Stream {
            status,
            headers,
            parts,
            end,
        } => {
            let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (k, v) in &headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
            sock.write_all(out.as_bytes()).await?;
            sock.flush().await?;
            for part in parts {
                match part {
                    Part::Bytes(b) => {
                        let mut chunk = format!("{:x}\r\n", b.len()).into_bytes();
                        chunk.extend_from_slice(&b);
                        chunk.extend_from_slice(b"\r\n");
                        if sock.write_all(&chunk).await.is_err() {
                            closed.fetch_add(1, Ordering::SeqCst);
                            return Ok(());
                        }
                        sock.flush().await?;
                    }
                    Part::Sleep(d) => {
                        // Notice a client that goes away while we pause.
                        tokio::select! {
                            _ = tokio::time::sleep(d) => {}
                            _ = wait_for_client_close(&mut sock, &closed) => return Ok(()),
                        }
                    }
                }
            }
            match end {
                End::Clean => {
                    sock.write_all(b"0\r\n\r\n").await?;
                    sock.flush().await?;
                    // Let the client read the end before we close.
                    let _ = tokio::time::timeout(Duration::from_secs(2), async {
                        let mut tmp = [0u8; 64];
                        let _ = sock.read(&mut tmp).await;
                    })
                    .await;
                }
                End::Drop => {
                    // Close without the terminating chunk.
                    let _ = sock.shutdown().await;
                }
                End::Hang => wait_for_client_close(&mut sock, &closed).await,
            }
        }
    }
    Ok(())
}

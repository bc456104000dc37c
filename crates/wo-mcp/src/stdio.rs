//! The stdio transport of `wo mcp`: newline-delimited JSON-RPC, with the
//! lines rmcp cannot take answered here so the server lives on.
//!
//! rmcp's own stdio transport ends the session at the first line it cannot
//! decode — garbage, a JSON-RPC batch, a line nested past serde_json's
//! recursion limit, a request for a method MCP does not have — and `wo mcp`
//! exits. Here every line is read with a length cap and judged first: what
//! rmcp would take is handed on; anything else gets the JSON-RPC error a
//! client expects (-32700 parse error, -32600 invalid request, -32601 method
//! not found, -32602 invalid params) and the next line is read.
//! Notifications and responses that cannot be taken are dropped (JSON-RPC
//! never answers a notification). Before a session has begun, only
//! requests are handed on (rmcp answers `ping`, `server/discover` and a
//! request whose `_meta` is incomplete, and begins the session at
//! `initialize` or at the first self-contained 2026-07-28 request); a
//! notification or response then would end the session in rmcp and is
//! dropped here.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, GetMeta, JsonRpcMessage, ProtocolVersion};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

/// The longest line read (a `log_exchange` of the largest messages fits
/// many times over); a longer one is answered -32600 and skipped without
/// being held.
pub const MAX_LINE_BYTES: usize = 32 << 20;

/// JSON-RPC's error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// The request methods MCP clients send (what rmcp's `ClientRequest` holds):
/// a request for one of these that rmcp cannot decode has bad parameters;
/// any other method is not found.
const CLIENT_METHODS: &[&str] = &[
    "ping",
    "initialize",
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
    "resources/directory/read",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
];

/// Whether rmcp has begun the session (before, it ends it on any message
/// but a request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for `initialize` or a self-contained request.
    Initialize,
    /// Begun: every message rmcp can decode is handed on.
    Running,
}

/// Whether rmcp begins the session at this request (it answers the others
/// and waits on): `initialize`, or a request other than `ping` and
/// `server/discover` whose `_meta` carries everything its protocol version
/// requires, for a version the server supports (2026-07-28's stateless
/// requests).
fn begins_session(request: &ClientRequest) -> bool {
    match request {
        ClientRequest::InitializeRequest(_) => true,
        ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
        other => {
            let meta = other.get_meta();
            meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
                .is_empty()
                && meta
                    .protocol_version()
                    .is_some_and(|v| ProtocolVersion::KNOWN_VERSIONS.contains(&v))
        }
    }
}

/// What to do with one line.
#[derive(Debug)]
enum Verdict {
    /// Hand it to rmcp.
    Pass(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answer it with this error response and read on.
    Reply(Value),
    /// Drop it (a notification or a response rmcp cannot take, a blank line).
    Ignore,
}

/// A JSON-RPC error response.
fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// The id of a request, when it is one JSON-RPC allows (string or number).
fn id_of(obj: &serde_json::Map<String, Value>) -> Value {
    match obj.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    }
}

/// Judges one line (without its newline) in `phase`.
fn judge(line: &[u8], phase: Phase) -> Verdict {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Verdict::Ignore;
    }
    let message = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => message,
        Err(typed) => return judge_undecodable(line, &typed),
    };
    // A request for a method MCP has whose parameters do not fit it is
    // decoded as a custom request, which rmcp would leave unanswered.
    if let JsonRpcMessage::Request(r) = &message
        && let ClientRequest::CustomRequest(custom) = &r.request
        && CLIENT_METHODS.contains(&custom.method.as_str())
    {
        return Verdict::Reply(error(
            serde_json::to_value(&r.id).unwrap_or(Value::Null),
            INVALID_PARAMS,
            format!("invalid params for {}", custom.method),
        ));
    }
    match (&message, phase) {
        (_, Phase::Running) | (JsonRpcMessage::Request(_), Phase::Initialize) => {
            Verdict::Pass(Box::new(message))
        }
        _ => Verdict::Ignore,
    }
}

/// The answer to a line rmcp cannot decode (`typed` says why).
fn judge_undecodable(line: &[u8], typed: &serde_json::Error) -> Verdict {
    // serde_json stops at its recursion limit (128), so a line nested
    // 200,000 deep is a parse error here, never a stack overflow.
    let value = match serde_json::from_slice::<Value>(line) {
        Ok(v) => v,
        Err(e) => {
            return Verdict::Reply(error(Value::Null, PARSE_ERROR, format!("parse error: {e}")));
        }
    };
    let obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            return Verdict::Reply(error(
                Value::Null,
                INVALID_REQUEST,
                "batches are not supported (MCP has none since 2025-06-18): send one request per line",
            ));
        }
        _ => {
            return Verdict::Reply(error(
                Value::Null,
                INVALID_REQUEST,
                "invalid request: a JSON-RPC message is an object",
            ));
        }
    };
    let id = id_of(&obj);
    let method = obj.get("method").and_then(Value::as_str);
    let is_request = obj.get("id").is_some_and(|id| !id.is_null());
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return if is_request || method.is_none() {
            Verdict::Reply(error(
                id,
                INVALID_REQUEST,
                "invalid request: `jsonrpc` must be \"2.0\"",
            ))
        } else {
            Verdict::Ignore
        };
    }
    match (method, is_request) {
        (Some(m), true) if CLIENT_METHODS.contains(&m) => Verdict::Reply(error(
            id,
            INVALID_PARAMS,
            format!("invalid params for {m}: {typed}"),
        )),
        (Some(m), true) => Verdict::Reply(error(
            id,
            METHOD_NOT_FOUND,
            format!("method not found: {m}"),
        )),
        // A notification or a response: never answered.
        (Some(_), false) => Verdict::Ignore,
        (None, _) if obj.contains_key("result") || obj.contains_key("error") => Verdict::Ignore,
        (None, _) => Verdict::Reply(error(id, INVALID_REQUEST, "invalid request: no `method`")),
    }
}

/// One line read: its bytes, or that it ran past [`MAX_LINE_BYTES`].
enum Line {
    Bytes(Vec<u8>),
    TooLong,
}

/// Reads the next line, holding at most `max` bytes of it; `None` at the
/// end of input.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if !any {
                return Ok(None);
            }
            return Ok(Some(if too_long {
                Line::TooLong
            } else {
                Line::Bytes(line)
            }));
        }
        any = true;
        let (part, used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        if !too_long {
            if line.len() + part.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(part);
            }
        }
        reader.consume(used);
        if done {
            return Ok(Some(if too_long {
                Line::TooLong
            } else {
                Line::Bytes(line)
            }));
        }
    }
}

/// The stdio transport (see the module docs), over any reader and writer
/// (stdin and stdout for `wo mcp`; pipes in tests).
///
/// Lines are read, judged and answered by a task of their own, and what
/// rmcp takes reaches it through a channel: rmcp drops a pending
/// `receive` whenever another event wins its select, and a `receive` that
/// read or answered a line itself lost that line (or its answer) then.
pub struct LineTransport<R, W> {
    /// Until the first `receive` starts the reading task.
    reader: Option<BufReader<R>>,
    writer: Arc<Mutex<W>>,
    max_line: usize,
    incoming: Option<mpsc::Receiver<RxJsonRpcMessage<RoleServer>>>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> LineTransport<R, W> {
    /// A transport reading requests from `reader` and writing to `writer`.
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            reader: Some(BufReader::new(reader)),
            writer: Arc::new(Mutex::new(writer)),
            max_line: MAX_LINE_BYTES,
            incoming: None,
        }
    }
}

/// The reading task: every line judged in order; what rmcp takes is sent
/// on `to_rmcp`, the rest answered here. Ends at the end of input, when
/// the client is gone, or when rmcp no longer listens.
async fn read_lines<R, W>(
    mut reader: BufReader<R>,
    writer: Arc<Mutex<W>>,
    max_line: usize,
    to_rmcp: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut phase = Phase::Initialize;
    loop {
        let verdict = match read_line(&mut reader, max_line).await {
            Ok(None) | Err(_) => return,
            Ok(Some(Line::TooLong)) => Verdict::Reply(error(
                Value::Null,
                INVALID_REQUEST,
                format!("invalid request: the line is longer than {max_line} bytes"),
            )),
            Ok(Some(Line::Bytes(line))) => judge(&line, phase),
        };
        match verdict {
            Verdict::Pass(message) => {
                if let JsonRpcMessage::Request(r) = &*message
                    && begins_session(&r.request)
                {
                    phase = Phase::Running;
                }
                if to_rmcp.send(*message).await.is_err() {
                    return;
                }
            }
            Verdict::Reply(answer) => {
                let bytes = serde_json::to_vec(&answer).unwrap_or_default();
                // The client is gone when its answer cannot be written.
                if write_line(&writer, bytes).await.is_err() {
                    return;
                }
            }
            Verdict::Ignore => {}
        }
    }
}

/// Writes one message and its newline, flushed.
async fn write_line<W: AsyncWrite + Unpin>(
    writer: &Mutex<W>,
    mut bytes: Vec<u8>,
) -> std::io::Result<()> {
    bytes.push(b'\n');
    let mut w = writer.lock().await;
    w.write_all(&bytes).await?;
    w.flush().await
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        async move {
            let bytes = serde_json::to_vec(&item)?;
            write_line(&writer, bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        if self.incoming.is_none() {
            let reader = self.reader.take()?;
            let (tx, rx) = mpsc::channel(16);
            tokio::spawn(read_lines(reader, self.writer.clone(), self.max_line, tx));
            self.incoming = Some(rx);
        }
        // Cancel-safe: a message not yet taken stays in the channel.
        self.incoming.as_mut()?.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn reply_code(v: &Verdict) -> Option<i64> {
        match v {
            Verdict::Reply(r) => r["error"]["code"].as_i64(),
            _ => None,
        }
    }

    #[test]
    fn malformed_lines_are_answered_with_their_error() {
        let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        for (line, code) in [
            ("not json", PARSE_ERROR),
            (deep.as_str(), PARSE_ERROR),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                INVALID_REQUEST,
            ),
            ("[]", INVALID_REQUEST),
            ("42", INVALID_REQUEST),
            (r#"{"id":1,"method":"ping"}"#, INVALID_REQUEST),
            (r#"{"jsonrpc":"2.0","id":1}"#, INVALID_REQUEST),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":42}"#,
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":"nonsense"}"#,
                INVALID_PARAMS,
            ),
        ] {
            let v = judge(line.as_bytes(), Phase::Running);
            assert_eq!(
                reply_code(&v),
                Some(code),
                "{}: {v:?}",
                &line[..line.len().min(60)]
            );
        }
        // A method rmcp does not know decodes as a custom request: rmcp
        // answers it (-32601), as tests/stdio.rs checks.
        let v = judge(
            br#"{"jsonrpc":"2.0","id":"x","method":"no/such"}"#,
            Phase::Running,
        );
        assert!(matches!(v, Verdict::Pass(_)), "{v:?}");
        let v = judge(
            br#"{"jsonrpc":"2.0","id":"x","method":"no/such","params":42}"#,
            Phase::Running,
        );
        let Verdict::Reply(r) = v else {
            panic!("{v:?}")
        };
        assert_eq!(r["id"], "x");
        // Notifications and responses are never answered (a response rmcp
        // can decode is handed on: it drops one it did not ask for).
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/nonsense"}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"weird":true}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":42}"#,
            "   ",
        ] {
            let v = judge(line.as_bytes(), Phase::Running);
            assert!(!matches!(v, Verdict::Reply(_)), "{line}: {v:?}");
        }
    }

    #[test]
    fn before_the_session_only_requests_are_handed_on() {
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert!(matches!(judge(list, Phase::Initialize), Verdict::Pass(_)));
        assert!(matches!(judge(list, Phase::Running), Verdict::Pass(_)));
        let done = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(matches!(judge(done, Phase::Initialize), Verdict::Ignore));
        assert!(matches!(judge(done, Phase::Running), Verdict::Pass(_)));
        let response = br#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        assert!(matches!(
            judge(response, Phase::Initialize),
            Verdict::Ignore
        ));
    }

    fn request(line: &str) -> ClientRequest {
        match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(line).unwrap() {
            JsonRpcMessage::Request(r) => r.request,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_session_begins_at_initialize_or_a_self_contained_request() {
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-03-26","capabilities":{},
            "clientInfo":{"name":"c","version":"1"}}}"#;
        assert!(begins_session(&request(init)));
        for waits in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{
                "io.modelcontextprotocol/protocolVersion":"2026-07-28",
                "io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},
                "io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{
                "io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        ] {
            assert!(!begins_session(&request(waits)), "{waits}");
        }
        let stateless = r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{
            "io.modelcontextprotocol/protocolVersion":"2026-07-28",
            "io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},
            "io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        assert!(begins_session(&request(stateless)));
    }

    /// rmcp drops a pending `receive` whenever another event wins its
    /// select: a line half read at that moment must not be lost.
    #[tokio::test]
    async fn a_dropped_receive_loses_no_line() {
        use tokio::io::AsyncWriteExt as _;
        let (mut client, server_read) = tokio::io::duplex(1 << 16);
        let (server_write, _client_read) = tokio::io::duplex(1 << 16);
        let mut t = LineTransport::new(server_read, server_write);
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let (first, rest) = line.split_at(20);
        client.write_all(first.as_bytes()).await.unwrap();
        let pending = tokio::time::timeout(Duration::from_millis(50), t.receive()).await;
        assert!(pending.is_err(), "no whole line yet");
        client.write_all(rest.as_bytes()).await.unwrap();
        client.write_all(b"\n").await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), t.receive())
            .await
            .expect("the line arrives")
            .expect("a message");
        match got {
            JsonRpcMessage::Request(r) => {
                assert!(matches!(r.request, ClientRequest::PingRequest(_)))
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn long_lines_are_skipped_whole() {
        let input = format!("{}\nnext\n", "x".repeat(100));
        let mut reader = BufReader::with_capacity(16, input.as_bytes());
        assert!(matches!(
            read_line(&mut reader, 50).await.unwrap(),
            Some(Line::TooLong)
        ));
        match read_line(&mut reader, 50).await.unwrap() {
            Some(Line::Bytes(b)) => assert_eq!(b, b"next"),
            _ => panic!("the next line"),
        }
        assert!(read_line(&mut reader, 50).await.unwrap().is_none());
    }
}

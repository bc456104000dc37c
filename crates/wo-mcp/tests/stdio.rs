//! The stdio transport with the real server behind it, over a pipe: raw
//! lines a client should never send — garbage, a batch, a line nested
//! 200,000 deep, an unknown method, bad parameters — are each answered with
//! their JSON-RPC error, and the session lives on to answer a valid request.
//! (rmcp's own stdio transport ended the session at the first of them.)

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use wo_mcp::stdio::LineTransport;
use wo_mcp::{McpOptions, WikiOracleMcp};
use wo_store::OpenOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_lines_are_answered_and_the_session_lives_on() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("llm.json");
    let s = wo_format::State::new(wo_format::Timestamp::from_unix(1_800_000_000));
    std::fs::write(&state, wo_format::to_canonical_vec(&s)).unwrap();
    let server = WikiOracleMcp::open(McpOptions {
        state,
        open: OpenOptions::default(),
        allow_write: false,
        index: None,
    })
    .unwrap();
    let (client, server_end) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_end);
    let serving = tokio::spawn(async move {
        use rmcp::ServiceExt;
        let running = server
            .serve(LineTransport::new(server_read, server_write))
            .await
            .map_err(|e| e.to_string())?;
        running.waiting().await.map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    });
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    let mut send = async |line: String| {
        client_write.write_all(line.as_bytes()).await.unwrap();
        client_write.write_all(b"\n").await.unwrap();
        client_write.flush().await.unwrap();
    };
    async fn answer(
        lines: &mut tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    ) -> Value {
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("an answer in time")
            .unwrap()
            .expect("the server is still there");
        serde_json::from_str(&line).unwrap()
    }

    send("garbage before the handshake".into()).await;
    assert_eq!(answer(&mut lines).await["error"]["code"], -32700);
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string(),
    )
    .await;
    let init = answer(&mut lines).await;
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into()).await;

    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    for (line, code, id) in [
        ("{not json".to_owned(), -32700, Value::Null),
        (deep, -32700, Value::Null),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_owned(),
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"no/such"}"#.to_owned(),
            -32601,
            json!(2),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"p","method":"resources/read","params":[]}"#.to_owned(),
            -32602,
            json!("p"),
        ),
    ] {
        send(line.clone()).await;
        let a = answer(&mut lines).await;
        assert_eq!(
            (&a["error"]["code"], &a["id"]),
            (&json!(code), &id),
            "{}: {a}",
            &line[..line.len().min(60)]
        );
    }
    send(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#.into()).await;
    let pong = answer(&mut lines).await;
    assert_eq!(
        (&pong["id"], pong["result"].is_object()),
        (&json!(9), true),
        "{pong}"
    );
    assert!(!serving.is_finished(), "the session ended");
    serving.abort();
}

//! Both generations of MCP on one server, over the stdio transport with raw
//! JSON-RPC lines: the `initialize` handshake at 2025-03-26, 2025-06-18 and
//! 2025-11-25 (each negotiated as asked), and 2026-07-28's
//! `server/discover` with self-contained requests (`resultType`, cache
//! hints). Every tool's `inputSchema` and `outputSchema` is valid JSON
//! Schema 2020-12 (no OpenAPI `nullable`, bounds as the descriptions say),
//! and structured results validate against their `outputSchema`.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use wo_mcp::stdio::LineTransport;
use wo_mcp::{McpOptions, WikiOracleMcp};
use wo_store::OpenOptions;

/// A state file with one memory entry, and a server on it.
fn server(dir: &std::path::Path, allow_write: bool) -> WikiOracleMcp {
    let state = dir.join("llm.json");
    if !state.exists() {
        let t = wo_format::Timestamp::from_unix(1_800_000_000);
        let mut s = wo_format::State::new(t.clone());
        s.add_truth(wo_format::TruthEntry::new(
            "Kangaroo habitat",
            t,
            0.9,
            "<p>Kangaroos live in grassland.</p>",
        ));
        std::fs::write(&state, wo_format::to_canonical_vec(&s)).unwrap();
    }
    WikiOracleMcp::open(McpOptions {
        state,
        open: OpenOptions::default(),
        allow_write,
        index: None,
    })
    .unwrap()
}

/// A raw client on a pipe to `server`.
struct Raw {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    serving: tokio::task::JoinHandle<()>,
}

impl Raw {
    fn start(server: WikiOracleMcp) -> Raw {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_end);
        let serving = tokio::spawn(async move {
            use rmcp::ServiceExt;
            if let Ok(running) = server
                .serve(LineTransport::new(server_read, server_write))
                .await
            {
                let _ = running.waiting().await;
            }
        });
        let (read, write) = tokio::io::split(client);
        Raw {
            lines: BufReader::new(read).lines(),
            write,
            serving,
        }
    }

    /// Sends `message` and returns the answer to it.
    async fn ask(&mut self, message: Value) -> Value {
        self.write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        self.write.flush().await.unwrap();
        loop {
            let line =
                tokio::time::timeout(std::time::Duration::from_secs(20), self.lines.next_line())
                    .await
                    .expect("an answer in time")
                    .unwrap()
                    .expect("the server is still there");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == message.get("id") {
                return v;
            }
        }
    }

    async fn notify(&mut self, message: Value) {
        self.write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        self.write.flush().await.unwrap();
    }
}

/// 2026-07-28's per-request `_meta`.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

fn call(id: u64, name: &str, args: Value, modern: bool) -> Value {
    let mut params = json!({"name": name, "arguments": args});
    if modern {
        params["_meta"] = meta();
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// `result`'s structured content validates against `tool`'s outputSchema.
fn assert_valid_output(tools: &Value, tool: &str, result: &Value) {
    let schema = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("{tool} is listed"))["outputSchema"]
        .clone();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let structured = &result["structuredContent"];
    assert!(structured.is_object(), "{tool}: {result}");
    if let Err(e) = validator.validate(structured) {
        panic!("{tool}: {e}: {structured}");
    }
    // The text content is the same JSON, for clients that predate
    // structured output.
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, structured, "{tool}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_clients_get_the_version_they_ask_for() {
    let dir = tempfile::tempdir().unwrap();
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut c = Raw::start(server(dir.path(), false));
        let init = c
            .ask(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        assert_eq!(init["result"]["serverInfo"]["name"], "wikioracle");
        c.notify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        let list = c
            .ask(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .await;
        let tools = &list["result"]["tools"];
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["context", "read", "recent", "search"],
            "{version}: a read-only server lists only read tools, in name order"
        );
        for shape in ["resultType", "ttlMs", "cacheScope"] {
            assert!(
                list["result"].get(shape).is_none(),
                "{version} has no {shape}: {list}"
            );
        }
        let r = c
            .ask(call(2, "search", json!({"query": "kangaroo"}), false))
            .await;
        assert_eq!(r["result"]["isError"], false, "{r}");
        assert_valid_output(tools, "search", &r["result"]);
        let links: Vec<&Value> = r["result"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["type"] == "resource_link")
            .collect();
        // Resource links came with 2025-06-18: an older client gets none.
        assert_eq!(links.len(), usize::from(version != "2025-03-26"), "{r}");
        c.serving.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_clients_discover_then_send_self_contained_requests() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Raw::start(server(dir.path(), true));
    let d = c
        .ask(
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
            "params": {"_meta": meta()}}),
        )
        .await;
    let versions = &d["result"]["supportedVersions"];
    for v in ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] {
        assert!(versions.as_array().unwrap().contains(&json!(v)), "{d}");
    }
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "wikioracle"
    );
    let list = c
        .ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
            "params": {"_meta": meta()}}))
        .await;
    let r = &list["result"];
    assert_eq!(r["resultType"], "complete", "{list}");
    assert_eq!(r["cacheScope"], "private", "{list}");
    assert!(r["ttlMs"].is_u64(), "{list}");
    let tools = r["tools"].clone();
    assert_eq!(tools.as_array().unwrap().len(), 7, "{list}");

    let r = c
        .ask(call(
            3,
            "remember",
            json!({"content": "We deploy on Fridays."}),
            true,
        ))
        .await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_valid_output(&tools, "remember", &r["result"]);
    assert_eq!(
        r["result"]["structuredContent"]["title"], "We deploy on Fridays",
        "the title is the first sentence, as every wo title"
    );
    for (id, (tool, args)) in [
        ("context", json!({"query": "kangaroo"})),
        ("search", json!({"query": "deploy"})),
        ("recent", json!({"limit": 2})),
        ("read", json!({"id": "t_"})),
    ]
    .into_iter()
    .enumerate()
    {
        let r = c.ask(call(10 + id as u64, tool, args, true)).await;
        if tool == "read" {
            // Two entries start with t_: an error naming the id.
            assert_eq!(r["result"]["isError"], true, "{r}");
            continue;
        }
        assert_eq!(r["result"]["isError"], false, "{tool}: {r}");
        assert_valid_output(&tools, tool, &r["result"]);
    }
    // A request without the metadata is refused, and the session goes on.
    let bare = c
        .ask(json!({"jsonrpc": "2.0", "id": 30, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}))
        .await;
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    c.serving.abort();
}

/// Every `(pointer, object)` of `schema` that has `key`.
fn find_key<'a>(v: &'a Value, key: &str, at: String, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(o) => {
            if o.contains_key(key) {
                out.push((at.clone(), v));
            }
            for (k, child) in o {
                find_key(child, key, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                find_key(child, key, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The `a..=b` range a description states, if any.
fn stated_range(description: &str) -> Option<(f64, f64)> {
    let (before, after) = description.split_once("..=")?;
    let low = before
        .rsplit(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()?;
    let high: String = after
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    Some((low.parse().ok()?, high.trim_end_matches('.').parse().ok()?))
}

#[test]
fn every_schema_is_json_schema_2020_12_with_the_bounds_it_describes() {
    let dir = tempfile::tempdir().unwrap();
    let tools = server(dir.path(), true).listed_tools();
    assert_eq!(tools.len(), 7);
    for tool in &tools {
        for (which, schema) in [
            ("inputSchema", Some(&tool.input_schema)),
            ("outputSchema", tool.output_schema.as_ref()),
        ] {
            let schema = Value::Object(
                schema
                    .unwrap_or_else(|| panic!("{} has no {which}", tool.name))
                    .as_ref()
                    .clone(),
            );
            let at = format!("{} {which}", tool.name);
            if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
                panic!("{at}: not JSON Schema 2020-12: {e}");
            }
            jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{at}: {e}"));
            let mut nullable = Vec::new();
            find_key(&schema, "nullable", String::new(), &mut nullable);
            assert!(
                nullable.is_empty(),
                "{at}: OpenAPI's `nullable` is not JSON Schema: {:?}",
                nullable.iter().map(|(p, _)| p).collect::<Vec<_>>()
            );
            let mut formats = Vec::new();
            find_key(&schema, "format", String::new(), &mut formats);
            for (pointer, node) in formats {
                if let Some(f) = node["format"].as_str() {
                    assert!(
                        ["date-time", "uri"].contains(&f),
                        "{at}{pointer}: format {f:?} is not one JSON Schema defines"
                    );
                }
            }
            let mut described = Vec::new();
            find_key(&schema, "description", String::new(), &mut described);
            for (pointer, node) in described {
                let Some(d) = node["description"].as_str() else {
                    continue;
                };
                if let Some((low, high)) = stated_range(d) {
                    assert_eq!(
                        (node["minimum"].as_f64(), node["maximum"].as_f64()),
                        (Some(low), Some(high)),
                        "{at}{pointer}: {d:?}"
                    );
                }
            }
        }
        let a = tool
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{}", tool.name));
        assert!(
            a.read_only_hint.is_some()
                && a.destructive_hint.is_some()
                && a.idempotent_hint.is_some()
                && a.open_world_hint.is_some(),
            "{}: {a:?}",
            tool.name
        );
    }
}
